"""torch.compile of a small model, in a child: `python -m smoke.compile_probe DEVICE RESULT_FILE DEADLINE_S`.

A child because inductor compiles with outside tools (a C++ compiler, triton) in processes of its own,
keeps caches and global state, and can hang: the parent bounds it and kills its process group. It
writes JSON to RESULT_FILE: the compiler found, the compile time, the difference from eager, or the
error raised (the parent reads a missing toolchain piece from it: smoke.toolchain.missing_piece).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from smoke.children import clip_middle
from smoke.toolchain import find_compiler, inductor_cxx_candidates, triton_cc_candidates

ROWS, FEATURES, HIDDEN, OUTPUTS = 8, 16, 32, 4
RTOL, ATOL = 1e-4, 1e-5  # fused float32 kernels against eager: a few ulps apart
ERROR_CHARS = 3000


def find_toolchain(device: str) -> str | None:
    """The compiler inductor will use for `device`, found the way torch and triton find it. On the CPU
    torch's own lookup raises when there is none; on CUDA a missing triton raises here, and a missing C
    compiler is left to triton's own error when it builds (a newer triton may need none)."""
    if device == "cpu":
        try:
            from torch._inductor.cpp_builder import get_cpp_compiler
        except ImportError:  # before torch 2.5 the lookup is the same over torch._inductor.config.cpp.cxx
            found = find_compiler(inductor_cxx_candidates(os.environ))
            if found is None:
                raise RuntimeError("No working C++ compiler found in torch._inductor.config.cpp.cxx") from None
            return found
        return str(get_cpp_compiler())
    from torch.utils._triton import has_triton

    if not has_triton():
        raise RuntimeError("Cannot find a working triton installation (torch.utils._triton.has_triton() is False)")
    return find_compiler(triton_cc_candidates(os.environ))


def probe(device: str, report: dict[str, Any]) -> None:
    import torch
    from torch import nn

    torch.set_num_threads(1)
    report["stage"] = "toolchain"
    try:
        from torch._dynamo.eval_frame import check_if_dynamo_supported
    except ImportError:
        pass
    else:
        check_if_dynamo_supported()  # raises "Python 3.x+ not yet supported for torch.compile"
    report["compiler"] = find_toolchain(device)

    report["stage"] = "compile"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUTPUTS)).to(device).eval()
    inputs = torch.randn(ROWS, FEATURES, generator=torch.Generator().manual_seed(1)).to(device)
    from torch._inductor import metrics

    with torch.no_grad():
        eager = model(inputs)
        compiled = torch.compile(model, backend="inductor", fullgraph=True, dynamic=False)
        started = time.perf_counter()
        result = compiled(inputs)
        if device == "cuda":
            torch.cuda.synchronize()
    report.update(
        compile_seconds=round(time.perf_counter() - started, 2),
        kernels=int(metrics.generated_kernel_count),
        max_diff=float((result.float() - eager.float()).abs().max()),
        matches=bool(torch.allclose(result, eager, rtol=RTOL, atol=ATOL)),
        stage="done",
    )


def main(argv: list[str]) -> int:
    device, result_file, deadline = argv[0], Path(argv[1]), float(argv[2])
    signal.alarm(int(deadline) + 5)  # ends even when the parent was killed outright
    report: dict[str, Any] = {"device": device, "stage": "start"}
    status = 0
    try:
        probe(device, report)
    except Exception as exc:  # reported to the parent, which names a missing toolchain piece  # noqa: BLE001
        report["error"] = clip_middle(f"{type(exc).__name__}: {exc}", ERROR_CHARS)
        status = 1
    result_file.write_text(json.dumps(report), encoding="utf-8")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""torch.compile (PyTorch's release smoke test compiles a function and a model, on CUDA when there is
one): a small MLP through inductor, against eager.

It runs in a child (smoke/compile_probe.py) with fresh inductor and triton caches, so the compiler is
really run rather than a cached kernel loaded. Without a compiler (or triton on CUDA) the check is a
named skip, or a failure when compile support was required (--require-compile).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from smoke.children import child_environment, python_module, run_children
from smoke.registry import Context, Outcome, check, failed, passed, skipped
from smoke.toolchain import NO_CXX, compile_requirement, find_compiler, inductor_cxx_candidates, missing_piece

DEADLINE_S = 110.0  # cold compile here: 3-4 s of compiling in 8 s of child; triton's first kernels take longer
MIN_DEADLINE_S = 10.0
# Inductor's defaults cost a cold container ~15 s more on two cores: a pool of compile workers, a
# precompiled header, and one compile per CPU vector ISA to pick one. The probe compiles scalar C++
# with one worker: the same compiler, flags and loading path, a fraction of the time.
PROBE_ENV = {
    "TORCHINDUCTOR_COMPILE_THREADS": "1",
    "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS": "0",
    "TORCHINDUCTOR_VEC_ISA_OK": "0",
    "OMP_NUM_THREADS": "1",
}


@check("compile.inductor",
       stands_for="upstream smoke_test.py smoke_test_compile (torch.compile against eager, on cuda when available)")
def inductor_matches_eager(ctx: Context) -> Outcome:
    """torch.compile (inductor) of a small MLP runs and matches eager: C++ kernels on the CPU, Triton on cuda:0."""
    device = "cuda" if ctx.gpu_count else "cpu"
    required = ctx.settings.require_compile
    if device == "cpu" and not required and not os.environ.get("TORCH_INDUCTOR_INSTALL_GXX"):
        # Saves the child's 3 s in images without a compiler; when compile is required, the child
        # runs anyway, so the failure carries torch's own words.
        candidates = inductor_cxx_candidates(os.environ)
        if find_compiler(candidates) is None:
            return skipped(compile_requirement(NO_CXX, required)[1], missing=NO_CXX.key, searched=candidates)
    deadline = max(MIN_DEADLINE_S, min(DEADLINE_S, ctx.settings.timeout_per_check - 2))
    with tempfile.TemporaryDirectory(prefix="smoke-compile-", ignore_cleanup_errors=True) as folder:
        workdir = Path(folder)
        result = workdir / "result.json"
        env = child_environment({**PROBE_ENV, "TORCHINDUCTOR_CACHE_DIR": str(workdir / "inductor"),
                                 "TRITON_CACHE_DIR": str(workdir / "triton"), "TMPDIR": str(workdir)})
        (run,) = run_children([(python_module("smoke.compile_probe", device, str(result), str(deadline)), env)],
                              deadline, workdir)
        try:
            report: dict[str, Any] = dict(json.loads(result.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            ended = f"was killed after {deadline:g} s" if run.timed_out else f"exited {run.returncode} without a report"
            report = {"device": device, "stage": "unknown", "error": f"the compile child {ended}: {run.tail()}"}
    details = {**report, "required": required, "child_seconds": round(run.seconds, 2)}
    error = report.get("error")
    if error:
        missing = missing_piece(str(error))
        if missing is not None:
            status, reason = compile_requirement(missing, required)
            return (failed if status == "failed" else skipped)(reason, missing=missing.key, **details)
        flat = " ".join(str(error).split())
        return failed(f"torch.compile on {device} failed at {report.get('stage')}: {flat[:400]}", **details)
    if not report.get("matches"):
        return failed(f"torch.compile on {device}: compiled output differs from eager by {report.get('max_diff')}",
                      **details)
    if not report.get("kernels"):
        return failed(f"torch.compile on {device} generated no kernel: the compiler was never exercised", **details)
    what = "Triton kernel(s)" if device == "cuda" else "C++ kernel(s) (scalar)"
    compiler = f" built with {report['compiler']}" if report.get("compiler") else ""
    return passed(f"torch.compile (inductor) on {device} matches eager (max difference {report['max_diff']:.1e}): "
                  f"{report['kernels']} {what}{compiler}, compile {report.get('compile_seconds')} s, "
                  f"child {run.seconds:.1f} s", **details)

"""An outside check of an image: the operations PyTorch's release smoke test runs on every CPU binary it ships
(its list of operations, our own code), independent of envbuild's smoke suite.

Run inside an image as `python outside_check.py`; prints one JSON object {operation: {"ok": bool, "detail": str}}
and exits 1 when any operation failed. Only torch, numpy, torchvision and the standard library.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable


def conv2d() -> str:
    import torch

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, kernel_size=3, padding=1)
    images = torch.randn(2, 3, 16, 16)
    out = conv(images)
    # the same convolution by unfold + matmul: conv2d's kernels must agree with plain linear algebra
    columns = torch.nn.functional.unfold(images, kernel_size=3, padding=1)
    by_matmul = (conv.weight.reshape(8, -1) @ columns + conv.bias[:, None]).reshape(2, 8, 16, 16)
    assert out.shape == (2, 8, 16, 16), out.shape
    assert torch.allclose(out, by_matmul, atol=1e-5), float((out - by_matmul).abs().max())
    return "Conv2d(3, 8, 3) agrees with unfold @ weight"


def linalg_svd() -> str:
    import torch

    torch.manual_seed(0)
    matrix = torch.randn(6, 4, dtype=torch.float64)
    u, s, vh = torch.linalg.svd(matrix, full_matrices=False)
    assert torch.allclose(u @ torch.diag(s) @ vh, matrix, atol=1e-10)
    assert bool((s[:-1] >= s[1:]).all()), s
    return f"6x4 float64 reconstructed from its SVD, singular values {[round(float(v), 3) for v in s]}"


def numpy_interop() -> str:
    import numpy as np
    import torch

    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    shared = torch.from_numpy(array)
    shared[0, 0] = 42.0  # from_numpy shares memory: the write shows in the array
    assert array[0, 0] == 42.0
    back = (torch.ones(2, 3, dtype=torch.float64) * 2).numpy()
    assert back.dtype == np.float64 and float(back.sum()) == 12.0
    return f"from_numpy shares memory, .numpy() gives {back.dtype} (numpy {np.__version__})"


def _compiled_matches_eager(dtype_name: str) -> str:
    import torch

    dtype = getattr(torch, dtype_name)
    torch._dynamo.reset()

    def function(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * torch.cos(y) + x * y

    x = torch.linspace(-2, 2, 64).to(dtype)
    y = torch.linspace(0, 3, 64).to(dtype)
    compiled = torch.compile(function, backend="inductor", fullgraph=True)
    tolerance = {torch.float16: 1e-2, torch.float32: 1e-5, torch.float64: 1e-12}[dtype]
    got, want = compiled(x, y), function(x, y)
    assert got.dtype == dtype, got.dtype
    assert torch.allclose(got, want, atol=tolerance, rtol=tolerance), float((got - want).abs().max())
    return f"inductor in {dtype_name} matches eager within {tolerance}"


def vectorised_isa() -> str:
    import torch
    from torch._inductor import cpu_vec_isa

    isa = cpu_vec_isa.pick_vec_isa()  # compiles and runs a probe with the image's C++ compiler
    capability = torch.backends.cpu.get_cpu_capability()
    assert str(isa) not in ("", "INVALID_VEC_ISA"), f"no vectorised ISA (the probe did not build): {isa!r}"
    return f"inductor's vector ISA {isa}, ATen's CPU capability {capability}"


def max_autotune_cnn() -> str:
    import torch

    torch.manual_seed(0)
    torch._dynamo.reset()
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(4, 2),
    ).eval()
    images = torch.randn(2, 3, 8, 8)
    compiled = torch.compile(model, mode="max-autotune")
    with torch.no_grad():
        got, want = compiled(images), model(images)
    assert torch.allclose(got, want, atol=1e-4), float((got - want).abs().max())
    return "a small CNN under mode='max-autotune' matches eager"


def torchvision_nms() -> str:
    import torch
    import torchvision
    from torchvision.ops import nms

    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [20.0, 20.0, 30.0, 30.0]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    kept = nms(boxes, scores, iou_threshold=0.5).tolist()
    assert kept == [0, 2], kept  # the second box overlaps the first (IoU 0.68) and goes
    return f"torchvision {torchvision.__version__} nms kept {kept}"


OPERATIONS: dict[str, Callable[[], str]] = {
    "conv2d": conv2d,
    "linalg.svd": linalg_svd,
    "numpy": numpy_interop,
    "compile.float16": lambda: _compiled_matches_eager("float16"),
    "compile.float32": lambda: _compiled_matches_eager("float32"),
    "compile.float64": lambda: _compiled_matches_eager("float64"),
    "vectorised_isa": vectorised_isa,
    "max_autotune": max_autotune_cnn,
    "torchvision.nms": torchvision_nms,
}


def main() -> int:
    results: dict[str, dict[str, object]] = {}
    for name, operation in OPERATIONS.items():
        try:
            results[name] = {"ok": True, "detail": operation()}
        except Exception as exc:  # every failure is a finding, reported by operation  # noqa: BLE001
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            results[name] = {"ok": False, "detail": " ".join(last.split())[:400]}
    print(json.dumps(results, indent=1))
    return 0 if all(result["ok"] for result in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

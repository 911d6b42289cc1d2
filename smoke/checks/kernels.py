"""Kernels: a small matmul on every visible GPU, checked against the same product on the CPU.

`env.arch_list` proves an elementwise kernel loads; a matmul also goes through cuBLAS, which carries
its own kernels per architecture, so a device can pass the first and fail this one.
"""

from __future__ import annotations

import time

import torch

from smoke.registry import Context, Outcome, check, verdict

SIZE = 64
# float32 on the GPU (TF32 when a user enabled it) against float64 on the CPU: values are sums of 64
# products of numbers in [0, 1), about 16, so TF32's 10-bit mantissa stays well inside 5e-2.
TOLERANCE = 5e-2


@check("gpu.matmul_per_device", gpus=1,
       stands_for="seed 000 (every GPU listed by device_count/get_device_name must compute); upstream test_linalg "
                  "and smoke_test_conv2d on cuda")
def matmul_on_every_device(ctx: Context) -> Outcome:
    """A 64x64 matmul on each cuda:i equals the CPU's result; one line per device."""
    generator = torch.Generator().manual_seed(0)
    left = torch.rand(SIZE, SIZE, generator=generator)
    right = torch.rand(SIZE, SIZE, generator=generator)
    reference = left.double() @ right.double()
    devices: list[dict[str, object]] = []
    problems: list[str] = []
    for index in range(ctx.gpu_count):
        name = torch.cuda.get_device_name(index)
        major, minor = torch.cuda.get_device_capability(index)
        entry: dict[str, object] = {"index": index, "name": name, "capability": f"{major}.{minor}",
                                    "sm": f"sm_{major}{minor}"}
        started = time.monotonic()
        try:
            product = (left.to(f"cuda:{index}") @ right.to(f"cuda:{index}")).cpu().double()
            torch.cuda.synchronize(index)
        except RuntimeError as exc:
            problems.append(f"cuda:{index} ({name}, sm_{major}{minor}): {' '.join(str(exc).split())[:300]}")
            entry["error"] = " ".join(str(exc).split())[:300]
            devices.append(entry)
            continue
        error = float((product - reference).abs().max())
        entry.update(max_abs_error=error, seconds=round(time.monotonic() - started, 4))
        if error > TOLERANCE:
            problems.append(f"cuda:{index} ({name}): matmul differs from the CPU by {error:.3g} (> {TOLERANCE})")
        devices.append(entry)
    summary = ", ".join(f"cuda:{d['index']} {d['name']} {d['sm']}" for d in devices)
    return verdict(problems, f"a {SIZE}x{SIZE} matmul matches the CPU on {summary}", devices=devices)

"""Environment: torch and CUDA builds as expected, a driver new enough, kernels for every GPU."""

from __future__ import annotations

import torch

from smoke.checks.cuda_probe import probe_cuda
from smoke.compat import (
    FAIL,
    WARN,
    arch_coverage,
    compare_arch_lists,
    cudnn_text,
    driver_verdict,
    load_compat_data,
    parse_major_minor,
    target_expectations,
    version_matches_prefix,
)
from smoke.driver import read_driver
from smoke.registry import Context, Outcome, check, failed, needs_gpus, passed, skipped, verdict


@check("env.torch_version")
def torch_version(ctx: Context) -> Outcome:
    """torch.__version__ (local suffix ignored) starts with --expect-torch."""
    installed = str(torch.__version__)
    expected = ctx.settings.expect_torch
    if not expected:
        return skipped(f"no --expect-torch or ENVBUILD_EXPECT_TORCH given; torch is {installed}", torch=installed)
    if version_matches_prefix(installed, expected):
        return passed(f"torch {installed} matches expected {expected}", torch=installed, expected=expected)
    return failed(f"torch {installed} is installed but {expected} was expected", torch=installed, expected=expected)


@check("env.cuda_build")
def cuda_build(ctx: Context) -> Outcome:
    """torch.version.cuda matches --expect-cuda (major.minor, or 'cpu' for a CPU build)."""
    built_for = torch.version.cuda
    shown = "a CPU build" if built_for is None else f"built for CUDA {built_for}"
    expectation = ctx.settings.expect_cuda
    if expectation is None:
        return skipped(f"no --expect-cuda or ENVBUILD_EXPECT_CUDA given; torch is {shown}", torch_cuda=built_for)
    details = {"torch_cuda": built_for, "expected": expectation.describe()}
    if expectation.matches(built_for):
        return passed(f"torch is {shown}, as expected ({expectation.describe()})", **details)
    return failed(f"torch is {shown} but {expectation.describe()} was expected", **details)


@check("env.cudnn")
def cudnn_version(ctx: Context) -> Outcome:
    """The cuDNN torch loads (no GPU needed) is the one the compatibility data lists for this target."""
    if torch.version.cuda is None:
        return skipped("CPU build of torch: no cuDNN")
    if not torch.backends.cudnn.is_available():
        return failed(f"torch is built for CUDA {torch.version.cuda} but without cuDNN")
    try:
        loaded = cudnn_text(int(torch.backends.cudnn.version()))
    except (RuntimeError, OSError) as exc:  # libcudnn missing or the wrong one: torch raises while loading it
        return failed(f"cuDNN does not load: {' '.join(str(exc).split())[:300]}")
    expected = target_expectations(load_compat_data()).get("cudnn")
    details = {"cudnn": loaded, "expected": expected}
    if not expected:
        return passed(f"cuDNN {loaded} loads (no expected version shipped with the suite)", **details)
    if expected.split(".")[:3] == loaded.split("."):
        return passed(f"cuDNN {loaded} loads, as the compatibility data lists ({expected})", **details)
    return failed(f"cuDNN {loaded} loads but the compatibility data lists {expected}", **details)


@check("env.cuda_available")
def cuda_available(ctx: Context) -> Outcome:
    """torch.cuda.is_available(), with the warnings it raised (e.g. 'driver too old') kept."""
    probe = probe_cuda()
    details = {"torch_cuda": probe.built_for, "device_count": probe.device_count, "cuda_warnings": probe.warnings}
    if probe.available:
        note = f" (warnings: {'; '.join(probe.warnings)})" if probe.warnings else ""
        return passed(f"CUDA available with {probe.device_count} device(s){note}", **details)
    if probe.built_for is None:
        return needs_gpus(1, "CPU build of torch (torch.version.cuda is None): CUDA cannot be used", **details)
    why = probe.describe_unavailable() or "no warning given (no GPU passed to the container?)"
    return needs_gpus(
        1, f"torch is built for CUDA {probe.built_for} but torch.cuda.is_available() is False: {why}", **details
    )


@check("env.driver")
def driver_supports_runtime(ctx: Context) -> Outcome:
    """The driver's CUDA version (NVML, else nvidia-smi) can run torch's CUDA runtime."""
    runtime = torch.version.cuda
    if runtime is None:
        return skipped("CPU build of torch: no CUDA runtime to compare with a driver")
    reading = read_driver()
    details = {
        "source": reading.source,
        "driver_version": reading.driver_version,
        "driver_cuda": reading.cuda_text,
        "runtime_cuda": runtime,
        "notes": reading.notes,
    }
    if reading.cuda is None:
        return needs_gpus(1, f"no NVIDIA driver answered ({'; '.join(reading.notes)})", **details)
    judged = driver_verdict(reading.cuda, parse_major_minor(runtime))
    details["verdict"] = judged.level
    if judged.level == FAIL:
        return failed(judged.message, **details)
    if judged.level == WARN:
        return passed(judged.message, **details)
    return passed(f"{judged.message} (driver {reading.driver_version}, via {reading.source})", **details)


@check("env.arch_flags")
def arch_flags_match_the_data(ctx: Context) -> Outcome:
    """torch's compiled arch list equals the one envbuild's data gave this build (no GPU needed)."""
    if torch.version.cuda is None:
        return skipped("CPU build of torch: no GPU architectures compiled in")
    flags = getattr(torch._C, "_cuda_getArchFlags", None)
    built = str(flags() or "").split() if flags is not None else []
    expected = ctx.settings.expect_archs
    if expected is None:
        return skipped(f"no --expect-archs or ENVBUILD_EXPECT_ARCHS given; torch has {' '.join(built) or 'none'}",
                       arch_flags=built)
    diff = compare_arch_lists(expected, built)
    details = {"arch_flags": built, "expected": list(expected), "missing": diff.missing, "extra": diff.extra}
    if diff.same:
        return passed(f"torch is built for {' '.join(built)}, as envbuild's data says", **details)
    parts = ([f"missing {' '.join(diff.missing)}"] if diff.missing else []) + \
        ([f"extra {' '.join(diff.extra)}"] if diff.extra else [])
    return failed(f"torch's arch list ({' '.join(built) or 'empty'}) is not the one envbuild's data gives this "
                  f"build ({'; '.join(parts)}): fix builder/data/compat.yaml or the build", **details)


@check("env.arch_list", gpus=1)
def arch_list_covers_gpus(ctx: Context) -> Outcome:
    """Every GPU's compute capability is in torch.cuda.get_arch_list(), and a kernel really runs."""
    arch_list = list(torch.cuda.get_arch_list())
    problems: list[str] = []
    devices = []
    for index in range(ctx.gpu_count):
        capability = tuple(torch.cuda.get_device_capability(index))
        coverage = arch_coverage(arch_list, (int(capability[0]), int(capability[1])))
        entry = {"index": index, "name": torch.cuda.get_device_name(index), "coverage": coverage.how,
                 "arch": coverage.entry, "message": coverage.message}
        if not coverage.covered:
            problems.append(f"cuda:{index}: {coverage.message}")
        kernel_error = _run_a_kernel(index)
        entry["kernel"] = kernel_error or "ran"
        if kernel_error:
            problems.append(f"cuda:{index}: a kernel failed: {kernel_error}")
        devices.append(entry)
    summary = ", ".join(f"cuda:{d['index']} {d['coverage']} ({d['arch']})" for d in devices)
    return verdict(problems, f"kernels for every GPU: {summary}", arch_list=arch_list, devices=devices)


def _run_a_kernel(index: int) -> str | None:
    """The arch list can lie about what loads; an elementwise kernel shows 'no kernel image' at once."""
    try:
        value = (torch.arange(4, device=f"cuda:{index}") * 2).sum().item()
    except RuntimeError as exc:
        return " ".join(str(exc).split())[:300]
    return None if value == 12 else f"arange(4)*2 summed to {value}, not 12"

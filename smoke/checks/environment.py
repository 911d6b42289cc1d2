"""Environment: torch and CUDA builds as expected, a driver new enough, kernels for every GPU."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import torch

from smoke.checks.cuda_probe import probe_cuda
from smoke.compat import (
    FAIL,
    OK,
    WARN,
    compare_arch_lists,
    cudnn_runtime_verdict,
    cudnn_text,
    driver_verdict,
    load_compat_data,
    package_matches_runtime,
    parse_major_minor,
    target_expectations,
    version_matches_prefix,
    version_text,
    what_covers,
)
from smoke.driver import read_driver
from smoke.gpu_compat import arch_coverage
from smoke.packages import InstalledPackage, conda_versions, wheel_versions
from smoke.registry import Context, Outcome, check, failed, needs_gpus, passed, skipped, verdict


@check("env.torch_version",
       stands_for="upstream smoke_test.py check_version (torch.__version__ against the release)")
def torch_version(ctx: Context) -> Outcome:
    """torch.__version__ (local suffix ignored) starts with --expect-torch."""
    installed = str(torch.__version__)
    expected = ctx.settings.expect_torch
    if not expected:
        return skipped(f"no --expect-torch or ENVBUILD_EXPECT_TORCH given; torch is {installed}", torch=installed)
    if version_matches_prefix(installed, expected):
        return passed(f"torch {installed} matches expected {expected}", torch=installed, expected=expected)
    return failed(f"torch {installed} is installed but {expected} was expected", torch=installed, expected=expected)


@check("env.cuda_build",
       stands_for="upstream smoke_test.py smoke_test_cuda ('Wrong CUDA version': torch.version.cuda against the "
                  "build's)")
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


@check("env.cudnn",
       stands_for="seed 000's image 'with cuDNN and NCCL integrated': the cuDNN envbuild's data lists for the "
                  "target")
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


@check("env.cudnn_consistency",
       stands_for="upstream smoke_test.py smoke_test_cuda: cuDNN runtime vs compile version, and the nvidia-cudnn "
                  "wheel against it")
def cudnn_consistency(ctx: Context) -> Outcome:
    """The cuDNN loaded is the one torch was built with (major.minor), and the one the env's cuDNN package holds."""
    if torch.version.cuda is None:
        return skipped("CPU build of torch: no cuDNN")
    cudnn = getattr(torch._C, "_cudnn", None)
    if cudnn is None or not torch.backends.cudnn.is_available():
        return failed(f"torch is built for CUDA {torch.version.cuda} but without cuDNN")
    try:
        runtime = _three(cudnn.getRuntimeVersion())
        compiled = _three(cudnn.getCompileVersion())
    except (RuntimeError, OSError) as exc:  # libcudnn missing or unloadable
        return failed(f"cuDNN does not load: {' '.join(str(exc).split())[:300]}")
    judged = cudnn_runtime_verdict(runtime, compiled)
    packages = wheel_versions(r"nvidia-cudnn-cu\d+") + conda_versions("cudnn")
    problems = [judged.message] if judged.level == FAIL else []
    problems += _package_mismatches("cuDNN", "libcudnn", packages, runtime)
    details = {"runtime": version_text(runtime), "compiled": version_text(compiled),
               "packages": [p.describe() for p in packages], "verdict": judged.level}
    shown = f"; {', '.join(p.describe() for p in packages)} agrees" if packages else "; no cuDNN package found"
    return verdict(problems, judged.message + (shown if judged.level == OK else ""), **details)


@check("env.nccl_version",
       stands_for="upstream smoke_test.py smoke_test_cuda: torch.cuda.nccl.version() against the nvidia-nccl wheel")
def nccl_version(ctx: Context) -> Outcome:
    """torch.cuda.nccl.version() is the NCCL of the env's nvidia-nccl wheel or conda nccl package."""
    if torch.version.cuda is None:
        return skipped("CPU build of torch: no NCCL")
    if not sys.platform.startswith("linux"):
        return skipped(f"NCCL exists for Linux only; this is {sys.platform}")
    if not hasattr(torch._C, "_nccl_version"):
        return failed(f"torch is built for CUDA {torch.version.cuda} without NCCL: DistributedDataParallel on GPUs "
                      "has no backend")
    try:
        reported = tuple(torch.cuda.nccl.version())
    except (RuntimeError, OSError) as exc:
        return failed(f"NCCL does not load: {' '.join(str(exc).split())[:300]}")
    runtime = _three(reported[:3])
    shown = version_text(runtime) + (f" ({reported[3]})" if len(reported) > 3 else "")
    packages = wheel_versions(r"nvidia-nccl-cu\d+") + conda_versions("nccl")
    details = {"nccl": shown, "packages": [p.describe() for p in packages]}
    problems = _package_mismatches("NCCL", "libnccl", packages, runtime)
    if not packages:
        return passed(f"NCCL {shown} (no nvidia-nccl wheel or conda nccl package: the NCCL built into torch)",
                      **details)
    return verdict(problems, f"NCCL {shown} is the one {', '.join(p.describe() for p in packages)} holds", **details)


def _three(version: Sequence[Any]) -> tuple[int, int, int]:
    """(major, minor, patch) of a version tuple torch reports, which may carry a suffix after them."""
    return int(version[0]), int(version[1]), int(version[2])


def _package_mismatches(library: str, soname: str, packages: list[InstalledPackage],
                        runtime: tuple[int, int, int]) -> list[str]:
    """A package whose version is not the library torch loaded: another copy comes first on the path."""
    path = os.environ.get("LD_LIBRARY_PATH")
    return [f"{package.describe()} is installed but {library} {version_text(runtime)} is loaded: another {soname} "
            f"comes first on the library path (LD_LIBRARY_PATH={path or 'unset'}, a system package)"
            for package in packages if not package_matches_runtime(package.version, runtime)]


@check("env.cuda_available",
       stands_for="seed 000 (torch.device('cuda' if torch.cuda.is_available() else 'cpu') silently runs on the "
                  "CPU); upstream smoke_test_cuda ('CUDA is not loaded')")
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


@check("env.driver",
       stands_for="seed 001 (the driver supports CUDA 12.2, pytorch-cuda 12.4 cannot run)")
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


@check("env.arch_flags",
       stands_for="envbuild's data: the arch list each target promises, read from the build without a GPU")
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


@check("gpu.arch_in_build", gpus=1, aliases=("env.arch_list",),
       stands_for="'no kernel image is available' (the GPU's arch missing from the build; envbuild's own pitfall "
                  "list) and upstream smoke_test.py's CUDA kernels on every device")
def arch_in_build(ctx: Context) -> Outcome:
    """Every GPU's capability is in torch.cuda.get_arch_list() (or reachable by PTX), and a kernel really runs."""
    arch_list = list(torch.cuda.get_arch_list())
    spec_targets = (load_compat_data() or {}).get("spec_targets")
    problems: list[str] = []
    devices = []
    for index in range(ctx.gpu_count):
        major, minor = (int(part) for part in torch.cuda.get_device_capability(index))
        coverage = arch_coverage(arch_list, (major, minor))
        entry = {"index": index, "name": torch.cuda.get_device_name(index), "capability": f"{major}.{minor}",
                 "coverage": coverage.how, "arch": coverage.entry, "message": coverage.message}
        if not coverage.covered:
            entry["needs"] = what_covers((major, minor), spec_targets)
            problems.append(f"cuda:{index} ({entry['name']}): {coverage.message}; it needs {entry['needs']}")
        kernel_error = _run_a_kernel(index)
        entry["kernel"] = kernel_error or "ran"
        if kernel_error:
            problems.append(f"cuda:{index}: a kernel failed: {kernel_error}")
        devices.append(entry)
    summary = ", ".join(f"cuda:{d['index']} {d['capability']} {d['coverage']} ({d['arch']})" for d in devices)
    return verdict(problems, f"kernels for every GPU: {summary}", arch_list=arch_list, devices=devices)


def _run_a_kernel(index: int) -> str | None:
    """The arch list can lie about what loads; an elementwise kernel shows 'no kernel image' at once."""
    try:
        value = (torch.arange(4, device=f"cuda:{index}") * 2).sum().item()
    except RuntimeError as exc:
        return " ".join(str(exc).split())[:300]
    return None if value == 12 else f"arange(4)*2 summed to {value}, not 12"


@check("env.expected_packages",
       stands_for="upstream smoke_test.py imports torchvision and torchaudio and checks their versions")
def expected_packages(ctx: Context) -> Outcome:
    """Every package the spec pins with torch is installed, imports, and has the pinned version.

    The pins come from --expect-packages (ENVBUILD_EXPECT_PACKAGES, baked in by envbuild: torchvision,
    torchaudio and the like, the spec's `expect:`); a local suffix such as +cu130 is ignored. A package
    is found by its Python metadata, or in conda-meta (a conda package without Python modules, such as
    libtorch, is found there and has nothing to import)."""
    expected = ctx.settings.expect_packages
    if not expected:
        return skipped("no --expect-packages or ENVBUILD_EXPECT_PACKAGES given")
    problems: list[str] = []
    found: dict[str, str] = {}
    for name, version in expected:
        pinned = f"{name} {version}" if version else name
        installed = _installed_version(name)
        if installed is None:
            problems.append(f"{pinned} is pinned but not installed")
            continue
        found[name] = installed
        if version and not version_matches_prefix(installed, version):
            problems.append(f"{name} {installed} is installed but {version} is pinned")
            continue
        problems.extend(_import_problems(name))
    details = {"expected": dict(expected), "installed": found}
    if problems:
        return failed("; ".join(problems), **details)
    return passed(", ".join(f"{name} {found[name]}" for name, _ in expected) + " installed and importable", **details)


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed_version(name: str) -> str | None:
    """The installed version of distribution `name`: its Python metadata, else its conda-meta record."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        conda = conda_versions(name)
        return conda[0].version if conda else None


def _import_names(name: str) -> list[str]:
    """The top-level modules distribution `name` installs (pillow -> PIL, scikit-learn -> sklearn); its
    own name (dashes as underscores) when its metadata lists none but such a module exists."""
    modules = sorted(module for module, dists in importlib.metadata.packages_distributions().items()
                     if not module.startswith("_") and any(_normalised(dist) == name for dist in dists))
    own = name.replace("-", "_")
    if own in modules or (not modules and importlib.util.find_spec(own) is not None):
        return [own]
    return modules


def _import_problems(name: str) -> list[str]:
    problems = []
    for module in _import_names(name):
        try:
            importlib.import_module(module)
        except Exception as exc:  # any import error is the finding: compiled ops, missing libraries  # noqa: BLE001
            message = " ".join(str(exc).split())[:300]
            problems.append(f"import {module} ({name}) failed: {type(exc).__name__}: {message}")
    return problems

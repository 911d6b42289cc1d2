"""The build a fix recommends: the spec's target, else a released torch build, that the log's machine
runs (its driver) with kernels for its GPUs."""

from __future__ import annotations

from dataclasses import dataclass

from builder.explain.context import ExplainContext
from builder.explain.facts import cuda_from_text
from builder.explain.machine import driver_runs, gpus_covered
from builder.specs.compat import CompatData, parse_version, release_line
from builder.specs.cuda import CudaVersion
from builder.specs.target import Target, default_pip_index
from smoke.gpu_compat import arch_coverage

# nvcc's first release that knows each compute_XY (CUDA toolkit release notes).
NVCC_FIRST = {"35": "5.0", "37": "6.5", "50": "6.0", "52": "6.5", "53": "7.0", "60": "8.0", "61": "8.0", "62": "8.0",
              "70": "9.0", "72": "9.2", "75": "10.0", "80": "11.0", "86": "11.1", "87": "11.4", "89": "11.8",
              "90": "11.8", "100": "12.8", "101": "12.8", "103": "12.9", "110": "13.0", "120": "12.8", "121": "12.9"}


@dataclass(frozen=True)
class Build:
    line: str
    torch: str
    cuda: CudaVersion
    how: str  # "runs" or "minor"

    def words(self) -> str:
        minor = " (minor-version compatibility: no PTX JIT)" if self.how == "minor" else ""
        return f"torch {self.torch} with CUDA {self.cuda}{minor}"


def released_builds(compat: CompatData) -> list[tuple[str, str, CudaVersion, list[str]]]:
    """(release line, latest version, CUDA, arch list) of every released (not projected) torch build."""
    return [(release.line, release.latest, cuda, archs) for release in compat.releases()
            if release.confidence != "projected" for cuda, archs in release.archs.items()]


def runnable_builds(context: ExplainContext, capability: tuple[int, int] | None = None) -> list[Build]:
    """Released builds the machine runs (driver) with kernels for its GPUs (and `capability`), newest
    torch first and, within one torch, the oldest CUDA (the widest driver range)."""
    machine = context.machine
    builds = []
    for line, latest, cuda, archs in released_builds(context.compat):
        how = driver_runs(machine, cuda, context.compat)
        if how is None or not gpus_covered(machine, archs):
            continue
        if capability is not None and not arch_coverage(archs, capability).covered:
            continue
        builds.append(Build(line, latest, cuda, how))
    return sorted(builds, key=lambda b: (tuple(-p for p in parse_version(b.line).release), b.cuda))


def runnable_targets(context: ExplainContext, capability: tuple[int, int] | None = None) -> list[tuple[Target, str]]:
    """The spec's targets the machine runs, with 'runs' or 'minor'."""
    chosen = []
    for target in context.targets:
        if not target.cuda:
            continue
        how = driver_runs(context.machine, target.cuda, context.compat)
        if how is None:
            continue
        if target.archs and not gpus_covered(context.machine, target.archs):
            continue
        if capability is not None and (not target.archs or not arch_coverage(target.archs, capability).covered):
            continue
        chosen.append((target, how))
    return chosen


def best_build_words(context: ExplainContext, capability: tuple[int, int] | None = None) -> str | None:
    """The spec's target, else the released build, to recommend; words for a fix, or None."""
    targets = runnable_targets(context, capability)
    if targets:
        fully = [target for target, how in targets if how == "runs"]
        return f"target {(fully or [targets[0][0]])[0].key}"
    builds = runnable_builds(context, capability)
    if not builds:
        return None
    full = [build for build in builds if build.how == "runs" and build.line == builds[0].line]
    return (full[0] if full else builds[0]).words()


def pip_words(build: Build) -> str:
    """The pip command that installs a build: PyTorch's wheel index for its CUDA."""
    return f"`pip install torch=={build.torch} --index-url {default_pip_index().format(tag=build.cuda.tag)}`"


def kernel_build(context: ExplainContext, capability: tuple[int, int], sm: str,
                 name: str = "") -> tuple[Build, str] | None:
    """The released build to install for a GPU the log's torch has no kernels for, and the words of the fix.

    With a known driver: the newest build with its kernels that driver runs. Without one, the log still proves
    a CUDA the driver runs: the CUDA of the torch that ran (it got as far as the GPU) or the first CUDA with
    this architecture (no older driver drives the GPU); a build for that CUDA or older needs nothing more, the
    log's own torch release first. Else the newest build, with the driver it needs, and the newest of those
    that need the oldest driver."""
    builds = runnable_builds(context, capability)
    if not builds:
        return None
    same_line = [b for b in builds if b.line == builds[0].line]
    build = next((b for b in same_line if b.how == "runs"), same_line[0])
    newest = f"use {build.words()}, the newest released build with {sm} kernels" + (f" for {name}" if name else "")
    if context.machine.knows_driver:
        return build, f"{newest} this driver runs ({pip_words(build)})"
    proven = _proven_fix(context, builds, capability, f"{sm} kernels" + (f" for {name}" if name else ""))
    if proven is not None:
        return proven
    fix = f"{newest} (it needs driver >= {context.compat.min_driver(build.cuda)}; {pip_words(build)})"
    wider = _oldest_driver_build(context, builds)
    if wider.cuda.major != build.cuda.major:
        fix += (f"; for an older driver (>= {context.compat.min_driver(wider.cuda)}), {wider.words()} has them too "
                f"({pip_words(wider)})")
    return build, fix


def _proven_fix(context: ExplainContext, builds: list[Build], capability: tuple[int, int],
                what: str) -> tuple[Build, str] | None:
    """The build for a CUDA the log proves its driver runs (the log's torch release first), and the fix."""
    proven = _proven_cuda(context, capability)
    fitting = [b for b in builds if proven is not None and b.cuda <= proven]
    if proven is None or not fitting:
        return None
    mine = release_line(context.facts.get("torch") or "")
    chosen = next((b for b in fitting if b.line == mine), fitting[0])
    if chosen.line == mine:
        return chosen, (f"use {chosen.words()}: the log's torch release built with {what}, for a CUDA not newer "
                        f"than the {proven} that ran ({pip_words(chosen)})")
    return chosen, (f"use {chosen.words()}: the newest released build with {what} for CUDA {proven} or older "
                    f"({_proven_words(context, proven)}) ({pip_words(chosen)})")


def _proven_cuda(context: ExplainContext, capability: tuple[int, int]) -> CudaVersion | None:
    """The newest CUDA the log proves its driver runs: the log's torch CUDA, or the first CUDA with the GPU's
    architecture (a driver that drives the GPU came with it or later)."""
    first = NVCC_FIRST.get(f"{capability[0]}{capability[1]}")
    proven = [cuda for cuda in (context.facts.cuda("torch_cuda"), cuda_from_text(first) if first else None) if cuda]
    return max(proven) if proven else None


def _proven_words(context: ExplainContext, proven: CudaVersion) -> str:
    if context.facts.cuda("torch_cuda") == proven:
        return f"CUDA {proven} ran here"
    return f"{proven} is the first CUDA with this architecture: whatever runs this GPU runs it"


def _oldest_driver_build(context: ExplainContext, builds: list[Build]) -> Build:
    """Of `builds` (newest torch first), the first whose CUDA needs the oldest driver."""
    def floor(build: Build) -> tuple[int, ...]:
        return parse_version(context.compat.min_driver(build.cuda) or "0").release
    lowest = min(floor(build) for build in builds)
    return next(build for build in builds if floor(build) == lowest)

"""The build a fix recommends: the spec's target, else a released torch build, that the log's machine
runs (its driver) with kernels for its GPUs."""

from __future__ import annotations

from dataclasses import dataclass

from builder.explain.context import ExplainContext
from builder.explain.machine import driver_runs, gpus_covered
from builder.specs.compat import CompatData, parse_version
from builder.specs.cuda import CudaVersion
from builder.specs.target import Target
from smoke.gpu_compat import arch_coverage


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

"""Whether a target's build has kernels for this host's GPUs: a known capability is judged; a GPU known only
by its architecture is judged on every capability it may have (one outcome for all: decided; else unknown);
a GPU whose capability nothing told is unknown, with the command that would tell. A GPU no current build
supports is told so, with the last torch and CUDA that did."""

from __future__ import annotations

from builder.host.capability import WHAT_WOULD_TELL
from builder.host.checks import FAIL, INFO, MINOR_COMPAT, NEEDS_NEWER_DRIVER, OK, RUNS, UNDECIDED, WARNING, HostCheck
from builder.host.gpuinfo import GpuInfo
from builder.specs.compat import CompatData, parse_version
from builder.specs.cuda import CudaVersion
from builder.specs.gpus import sm_name, support_ended
from builder.specs.target import Target
from smoke.driver import DriverReading
from smoke.gpu_compat import arch_coverage

Capability = tuple[int, int]


def full_driver(target: Target) -> str:
    return target.toolkit.full_compat_driver if target.toolkit else "?"


def at_least(version: str, wanted: str) -> bool:
    return parse_version(version) >= parse_version(wanted)


def indices(gpus: list[GpuInfo]) -> str:
    return ",".join(str(gpu.index) for gpu in sorted(gpus, key=lambda g: g.index))


def arch_findings(gpus: tuple[GpuInfo, ...], target: Target, targets: list[Target],
                  drivers: dict[str, tuple[str, HostCheck]], driver_word: str, compat: CompatData,
                  driver: DriverReading | None = None) -> list[HostCheck]:
    if not gpus:
        return []
    if not target.archs:
        return [HostCheck(INFO, "archs",
                          f"no arch list for this build in envbuild's data (route {target.route.value}): "
                          "the image's smoke check gpu.arch_in_build checks it")]
    findings = []
    for (name, possible), group in same_gpus(gpus).items():
        which = f"GPU {indices(group)} ({name}, {_capability_words(group[0])})"
        if not possible:
            findings.append(HostCheck(
                UNDECIDED, "archs", f"{which}: compute capability unknown, so whether torch {target.torch}'s CUDA "
                f"{target.cuda} build has kernels for it is unknown", f"{WHAT_WOULD_TELL} tells"))
        elif len(possible) > 1:
            findings.append(_several(which, possible, target))
        else:
            findings.append(_one(which, possible[0], target, targets, drivers, driver_word, compat, driver))
    return findings


def _capability_words(gpu: GpuInfo) -> str:
    if gpu.capability is not None:
        how = "" if gpu.capability_source in (None, "driver") else f" from its {gpu.capability_source}"
        return f"{sm_name(gpu.capability)}{how}"
    if gpu.candidates:
        return f"{gpu.capability_source}: " + " or ".join(sm_name(c) for c in gpu.candidates)
    return "capability unknown"


def _one(which: str, capability: Capability, target: Target, targets: list[Target],
         drivers: dict[str, tuple[str, HostCheck]], driver_word: str, compat: CompatData,
         driver: DriverReading | None) -> HostCheck:
    coverage = arch_coverage(target.archs, capability)
    if not coverage.covered:
        return HostCheck(FAIL, "archs",
                         f"{which} is not in torch {target.torch}'s CUDA {target.cuda} build "
                         f"({' '.join(target.archs)}): 'no kernel image is available for execution on the device'",
                         arch_fix(capability, target, targets, drivers, compat, driver))
    if coverage.how == "ptx-jit" and driver_word == MINOR_COMPAT:
        return HostCheck(FAIL, "archs", f"{which} has only {coverage.entry} PTX in this build, and PTX JIT does not "
                                        "work under minor-version compatibility",
                         f"update the NVIDIA driver to >= {full_driver(target)}")
    return HostCheck(INFO if coverage.how == "ptx-jit" else OK, "archs", f"{which}: {coverage.message}")


def _several(which: str, possible: tuple[Capability, ...], target: Target) -> HostCheck:
    covered = [capability for capability in possible if arch_coverage(target.archs, capability).covered]
    if len(covered) == len(possible):
        return HostCheck(OK, "archs", f"{which}: the build has kernels for each of them")
    if not covered:
        return HostCheck(FAIL, "archs", f"{which}: the CUDA {target.cuda} build ({' '.join(target.archs)}) has "
                                        "kernels for none of them",
                         "use a target whose build has kernels for this architecture")
    lacking = " or ".join(sm_name(c) for c in possible if c not in covered)
    return HostCheck(UNDECIDED, "archs", f"{which}: the build has {' and '.join(sm_name(c) for c in covered)} "
                                         f"kernels but not {lacking}; which one this GPU is decides",
                     f"{WHAT_WOULD_TELL} tells")


def driver_runs(driver: DriverReading | None, cuda: CudaVersion, compat: CompatData) -> bool:
    if driver is None or (driver.cuda is None and driver.driver_version is None):
        return True  # nothing known about the driver: no reason to rule the build out
    if driver.cuda is not None:
        return cuda <= CudaVersion(*driver.cuda)
    toolkit = compat.toolkit(cuda)
    return toolkit is None or at_least(driver.driver_version or "0", toolkit.full_compat_driver)


def same_gpus(gpus: tuple[GpuInfo, ...]) -> dict[tuple[str, tuple[Capability, ...]], list[GpuInfo]]:
    groups: dict[tuple[str, tuple[Capability, ...]], list[GpuInfo]] = {}
    for gpu in sorted(gpus, key=lambda g: g.index):
        groups.setdefault((gpu.name, gpu.possible), []).append(gpu)
    return groups


def arch_fix(capability: Capability, target: Target, targets: list[Target],
             drivers: dict[str, tuple[str, HostCheck]], compat: CompatData,
             driver: DriverReading | None = None) -> str:
    """Another target of the spec with kernels for this GPU, else the build in the data that has them, else
    what no current build supports and the last torch and CUDA that did."""
    sm = sm_name(capability)
    covering = [t.key for t in targets if t.cuda and t.key != target.key and t.archs
                and arch_coverage(t.archs, capability).covered
                and drivers.get(t.key, (RUNS, None))[0] != NEEDS_NEWER_DRIVER]
    if covering:
        return f"use target {covering[0]} (its build has {sm} kernels)"
    # Only released torch (not a projection) and a CUDA this host's driver runs.
    builds = [(release.line, cuda) for release in compat.releases() if release.confidence != "projected"
              for cuda in sorted(release.archs)
              if arch_coverage(release.archs[cuda], capability).covered and driver_runs(driver, cuda, compat)]
    if not builds:
        if not current_builds_cover(capability, compat):
            return unsupported_words(capability, compat)
        return f"no torch build in envbuild's data with {sm} kernels runs on this driver"
    same_line = [build for build in builds if build[0] == target.release.line]
    line, cuda = (same_line or builds)[-1]
    gone = "" if current_builds_cover(capability, compat) else "; no current torch build has them"
    return f"add a target with torch {line} and CUDA {cuda} (official wheels with {sm} kernels){gone}"


def current_builds_cover(capability: Capability, compat: CompatData) -> bool:
    """Whether the newest released torch in the data has kernels (or PTX) for `capability` in any CUDA build."""
    released = [release for release in compat.releases() if release.confidence != "projected"]
    if not released:
        return True
    newest = max(released, key=lambda release: parse_version(release.line))
    return any(arch_coverage(archs, capability).covered for archs in newest.archs.values())


def unsupported_words(capability: Capability, compat: CompatData) -> str:
    """No current build supports this GPU: the last torch and CUDA in the data that did, and where support ended."""
    sm = sm_name(capability)
    last = [(release.line, release.latest or release.line, cuda) for release in compat.releases()
            if release.confidence != "projected"
            for cuda, archs in release.archs.items() if arch_coverage(archs, capability).covered]
    said = f"no current torch build has {sm} kernels"
    if last:
        _, latest, cuda = max(last, key=lambda build: (parse_version(build[0]), build[2]))
        said += f"; the last in envbuild's data is torch {latest} with CUDA {cuda} (use it, or the CPU build)"
    else:
        said += "; no torch build in envbuild's data has them (build an old torch from source, or use the CPU build)"
    ended = support_ended(capability)
    if ended is not None:
        said += (f"; {ended.architecture}: the last CUDA toolkit for it is {ended.last_cuda}, the last driver "
                 f"branch {ended.last_driver_branch}, so a newer driver is no fix")
    return said


def unsupported_gpu_findings(gpus: tuple[GpuInfo, ...], compat: CompatData) -> list[HostCheck]:
    """A host finding for each model of GPU that no current torch build supports."""
    findings = []
    for (name, possible), group in same_gpus(gpus).items():
        if possible and not any(current_builds_cover(capability, compat) for capability in possible):
            capability = max(possible)
            findings.append(HostCheck(WARNING, "GPUs", f"GPU {indices(group)} ({name}, {sm_name(capability)}) is "
                                                       "too old for every current torch build",
                                      unsupported_words(capability, compat)))
    return findings

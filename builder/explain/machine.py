"""The machine a log ran on (its driver, the driver's CUDA, its GPUs) and what that driver runs: a CUDA
build fully, under minor-version compatibility, or not at all, by the compatibility data."""

from __future__ import annotations

from dataclasses import dataclass

from builder.specs.compat import CompatData, parse_version
from builder.specs.cuda import CudaVersion
from smoke.gpu_compat import arch_coverage


@dataclass(frozen=True)
class Machine:
    """The driver and GPUs a verdict is about, and where each came from ("log" or "this host")."""

    driver_version: str | None = None
    driver_cuda: CudaVersion | None = None
    driver_from: str | None = None
    capabilities: tuple[tuple[str, str, tuple[int, int]], ...] = ()  # (name, sm, capability)
    gpus_from: str | None = None

    @property
    def knows_driver(self) -> bool:
        return self.driver_version is not None or self.driver_cuda is not None

    def driver_words(self) -> str:
        """`the log's driver 450.119.03 (CUDA 11.0)`, `this host's driver (CUDA 12.2)`."""
        whose = "the log's driver" if self.driver_from == "from the log" else "this host's driver"
        cuda = f"CUDA {self.driver_cuda}" if self.driver_cuda else None
        if self.driver_version:
            return f"{whose} {self.driver_version}" + (f" ({cuda})" if cuda else "")
        return f"{whose} ({cuda})"


def driver_runs(machine: Machine, cuda: CudaVersion, compat: CompatData) -> str | None:
    """'runs', 'minor' (minor-version compatibility) or None: can this machine's driver run a CUDA build?

    The driver's version decides when the log states it (a forward-compatibility package makes
    nvidia-smi report a newer CUDA than the driver itself runs); else the CUDA the driver reports.
    The same rules as doctor's driver verdict: at or above the toolkit's driver, fully; at or above the
    oldest driver of that CUDA major, under minor-version compatibility; else not at all.
    """
    if machine.driver_version:
        verdict = _by_driver_version(machine, machine.driver_version, cuda, compat)
        if verdict != _UNDECIDED:
            return verdict
    return _by_driver_cuda(machine.driver_cuda, cuda)


# The compatibility data knows no driver for that CUDA: the driver's version cannot decide.
_UNDECIDED = "undecided"


def _by_driver_version(machine: Machine, driver_version: str, cuda: CudaVersion, compat: CompatData) -> str | None:
    toolkit = compat.toolkit(cuda)
    full = toolkit.full_compat_driver if toolkit else None
    minimum = compat.min_driver(cuda)
    version = parse_version(driver_version)
    if full and version >= parse_version(full):
        return "runs"
    trusted = trusted_driver_cuda(machine, compat)
    if trusted is not None and trusted >= cuda and (minimum is None or version >= parse_version(minimum)):
        return "runs"
    if minimum and version >= parse_version(minimum):
        return "minor"
    if minimum or full:
        return None
    return _UNDECIDED


def _by_driver_cuda(driver_cuda: CudaVersion | None, cuda: CudaVersion) -> str | None:
    if driver_cuda is None:
        return "runs"  # nothing known about the driver: no reason to rule a build out
    if cuda <= driver_cuda:
        return "runs"
    if cuda.major == driver_cuda.major:
        return "minor"
    return None


def trusted_driver_cuda(machine: Machine, compat: CompatData) -> CudaVersion | None:
    """The driver's CUDA, unless its version says it cannot be the driver's own: a forward-compatibility
    package (cuda-compat) makes nvidia-smi report the package's CUDA, newer than any CUDA whose toolkit
    needs a newer driver than this one."""
    if machine.driver_cuda is None or not machine.driver_version:
        return machine.driver_cuda
    version = parse_version(machine.driver_version)
    needs_newer = [cuda for cuda, toolkit in compat.cuda.items()
                   if version < parse_version(toolkit.full_compat_driver)]
    if needs_newer and machine.driver_cuda >= min(needs_newer):
        return None
    return machine.driver_cuda


def gpus_covered(machine: Machine, archs: list[str]) -> bool:
    return all(arch_coverage(archs, capability).covered for _, _, capability in machine.capabilities)

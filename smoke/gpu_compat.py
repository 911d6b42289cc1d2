"""What the in-image suite and `envbuild doctor` judge a host's GPUs by, in one place both read: how a
build's arch list covers a GPU, how NVML encodes the driver's CUDA version, and the data of
gpu_compat.json beside this file (nvidia-smi's failure lines and what they mean, the marks its output
leaves of the host). envbuild imports the suite only here and in its driver readers (driver, nvml,
nvsmi), never smoke.compat: editing the suite's own checks cannot move doctor's verdicts.

Standard library only: this also runs inside images.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DATA_FILE = Path(__file__).with_name("gpu_compat.json")


@dataclass(frozen=True)
class DriverFailure:
    """A line nvidia-smi or NVML prints instead of GPUs, by the failure it means."""

    key: str
    pattern: re.Pattern[str]
    meaning: str
    only_on: str | None  # "unix" where only a UNIX kernel module gives it; None: any system


@dataclass(frozen=True)
class HostSign:
    """A mark in nvidia-smi's output of the system it runs on (smoke.nvsmi.host_signs)."""

    sign: str
    host: str  # unix, wsl, windows, windows-driver, vgpu, vm, container
    meaning: str


@lru_cache(maxsize=1)
def _data() -> dict:
    return json.loads(DATA_FILE.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def driver_failures() -> tuple[DriverFailure, ...]:
    """Every failure, in the order they are tried (the first whose pattern matches names the failure)."""
    failures = []
    for entry in _data()["failures"]:
        flags = re.I | (re.M if entry.get("multiline") else 0)
        failures.append(DriverFailure(entry["key"], re.compile("|".join(entry["patterns"]), flags),
                                      entry["meaning"], entry.get("only_on")))
    return tuple(failures)


def failure_meaning(key: str | None) -> str:
    """What a failure key means; empty for None or a key the data does not have."""
    return next((failure.meaning for failure in driver_failures() if failure.key == key), "")


@lru_cache(maxsize=1)
def host_signs() -> tuple[HostSign, ...]:
    return tuple(HostSign(entry["sign"], entry["host"], entry["meaning"]) for entry in _data()["host_signs"])


def signs_of(host: str) -> tuple[str, ...]:
    """The signs that point to `host` (unix, wsl, ...)."""
    return tuple(sign.sign for sign in host_signs() if sign.host == host)


def failures_only_on(system: str) -> tuple[str, ...]:
    """The failure keys only `system` gives (unix: a kernel module and libraries of two releases)."""
    return tuple(failure.key for failure in driver_failures() if failure.only_on == system)


def driver_cuda_from_nvml(encoded: int) -> tuple[int, int]:
    """nvmlSystemGetCudaDriverVersion() returns 1000*major + 10*minor (12020 -> 12.2)."""
    return encoded // 1000, (encoded % 1000) // 10


@dataclass(frozen=True)
class ArchEntry:
    """One entry of torch.cuda.get_arch_list(): 'sm_86' (machine code) or 'compute_90' (PTX)."""

    kind: str  # "sm" or "compute"
    major: int
    minor: int
    suffix: str  # "", "a" (arch-specific) or "f" (family)

    @classmethod
    def parse(cls, entry: str) -> ArchEntry:
        match = re.fullmatch(r"(sm|compute)_(\d+)(\d)([af]?)", entry.strip())
        if match is None:
            raise ValueError(f"{entry!r} is not an arch entry like sm_86 or compute_90")
        return cls(match.group(1), int(match.group(2)), int(match.group(3)), match.group(4))

    def runs_on(self, capability: tuple[int, int]) -> bool:
        major, minor = capability
        if self.suffix == "a":  # sm_90a / compute_90a: that exact GPU generation only
            return (major, minor) == (self.major, self.minor)
        if self.kind == "compute":  # PTX is JIT-compiled for any newer GPU
            return (major, minor) >= (self.major, self.minor)
        # Machine code runs on the same major with an equal or higher minor (sm_86 runs on 8.9).
        return major == self.major and minor >= self.minor


@dataclass(frozen=True)
class Coverage:
    covered: bool
    how: str  # "exact", "binary-compatible", "ptx-jit" or "none"
    entry: str | None
    message: str


def arch_coverage(arch_list: list[str], capability: tuple[int, int]) -> Coverage:
    """Does a torch built for `arch_list` carry kernels for a GPU of `capability`?

    Prefers an exact sm_XY, then a same-major machine-code entry, then PTX (JIT on first use).
    """
    cap_text = f"{capability[0]}.{capability[1]}"
    entries = []
    for text in arch_list:
        try:
            entries.append((text, ArchEntry.parse(text)))
        except ValueError:
            continue  # not a CUDA arch (e.g. a ROCm gfx target): covers nothing here
    exact = [t for t, e in entries if e.kind == "sm" and (e.major, e.minor) == capability]
    if exact:
        return Coverage(True, "exact", exact[0], f"capability {cap_text} has {exact[0]} kernels")
    binary = [t for t, e in entries if e.kind == "sm" and e.runs_on(capability)]
    if binary:
        best = binary[-1]
        return Coverage(True, "binary-compatible", best, f"capability {cap_text} runs {best} kernels")
    ptx = [t for t, e in entries if e.kind == "compute" and e.runs_on(capability)]
    if ptx:
        best = ptx[-1]
        return Coverage(
            True, "ptx-jit", best, f"capability {cap_text} only via {best} PTX, JIT-compiled on first use (slow start)"
        )
    listed = " ".join(arch_list) or "nothing"
    return Coverage(
        False,
        "none",
        None,
        f"capability {cap_text} is not covered by this torch's arch list ({listed}): kernels fail with "
        "'no kernel image is available for execution on the device'",
    )

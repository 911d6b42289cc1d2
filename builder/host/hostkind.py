"""Which kind of host doctor runs on (Linux, Windows, WSL2, a container, a vGPU guest, FreeBSD) and its traits
(aarch64, MIG, the open kernel module), each with the source that told it.

`probe_host()` reads what the system itself says (the OS, container and WSL markers, /proc/driver/nvidia/version,
/dev/nvidia*); `read_host_kind()` is a pure function of that probe and of what nvidia-smi/NVML printed
(`DriverReading.smi_signs`), so recorded hosts test it on any machine. A fact no source gave stays unknown.
What each kind changes comes from builder/data/host_kinds.yaml.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from builder.specs.gpus import vgpu_board
from builder.yamlio import data_text
from smoke.driver import DriverReading
from smoke.gpu_compat import failures_only_on, signs_of

PROC_DRIVER_VERSION = Path("/proc/driver/nvidia/version")
# Files a container runtime leaves in the container's root (Docker, Podman), and cgroup paths of containers.
CONTAINER_FILES = (Path("/.dockerenv"), Path("/run/.containerenv"))
CGROUP_OF_CONTAINER = re.compile(r"/(?:docker|kubepods|containerd|libpod|lxc)[/-]")
WSL_FILES = (Path("/usr/lib/wsl/lib"), Path("/dev/dxg"))
ARM = ("aarch64", "arm64")
# Boards that come only on arm64 hosts (Grace CPUs, Jetson modules, DGX Spark).
ARM_BOARDS = re.compile(r"\b(?:GH200|GB200|GB300|GB10|Jetson|Thor)\b", re.I)
_NVRM = re.compile(r"NVRM version: NVIDIA UNIX (?P<open>Open )?(?:Kernel Module )?(?:for )?(?P<arch>\w+)?"
                   r"(?: Kernel Module)?\s+(?P<version>\d+\.\d+(?:\.\d+)?)", re.I)
# nvidia-smi signs that only a UNIX driver shows (Linux or FreeBSD), never nvidia-smi.exe or WSL2, those of WSL2,
# and the failures only a UNIX kernel module gives: the suite's data (smoke/gpu_compat.json), read the same way there.
UNIX_SIGNS = signs_of("unix")
WSL_SIGNS = signs_of("wsl")
CONTAINER_SIGNS = signs_of("container")
UNIX_FAILURES = failures_only_on("unix")


@dataclass(frozen=True)
class HostProbe:
    """What this system says of itself; None: not read (a recorded host that did not show it)."""

    system: str | None = None  # platform.system(): Linux, Windows, FreeBSD
    machine: str | None = None  # x86_64, aarch64
    kernel_release: str | None = None  # WSL2's says "microsoft"
    container: str | None = None  # the marker that tells it: /.dockerenv, /run/.containerenv, a cgroup path
    wsl: str | None = None  # the marker: /usr/lib/wsl/lib, /dev/dxg, the kernel release
    proc_driver_version: str | None = None  # /proc/driver/nvidia/version's text
    device_nodes: tuple[str, ...] | None = None  # /dev/nvidia* present
    # Whether the container markers were looked for, so that `container` None means none (the live probe always
    # looks; a recorded session only where it shows what only a host does). Not looked for, a Linux answer is
    # "linux host or container: not told": the OS and nvidia-smi read the same inside a container as on its host.
    container_checked: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"system": self.system, "machine": self.machine, "kernel_release": self.kernel_release,
                "container": self.container, "wsl": self.wsl, "proc_driver_version": self.proc_driver_version,
                "device_nodes": None if self.device_nodes is None else list(self.device_nodes),
                "container_checked": self.container_checked}


@dataclass(frozen=True)
class Trait:
    name: str
    source: str
    means: str


@dataclass(frozen=True)
class HostKind:
    name: str  # linux, windows, wsl, container, vgpu, freebsd, unknown
    source: str  # what told it
    means: str
    fix: str | None = None
    traits: tuple[Trait, ...] = ()
    also: tuple[str, ...] = ()  # other kinds the sources name too (a container on WSL2)
    kernel_module: str | None = None  # the loaded module's version, from /proc/driver/nvidia/version
    # Said where no source tells the kind apart from another it could be: "linux host or container: not told"
    # when only nvidia-smi's UNIX marks name it (its output reads the same on a host and in a container there).
    not_told: str | None = None

    @property
    def answer(self) -> str:
        """What doctor tells of the kind: its name, or which kinds it could be and that nothing told which."""
        return self.not_told or self.name

    def has(self, trait: str) -> bool:
        return any(t.name == trait for t in self.traits)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "answer": self.answer, "not_told": self.not_told, "source": self.source,
                "means": self.means, "fix": self.fix, "also": list(self.also), "kernel_module": self.kernel_module,
                "traits": [{"name": t.name, "source": t.source, "means": t.means} for t in self.traits]}


def probe_host() -> HostProbe:
    release = platform.release()
    return HostProbe(system=platform.system() or None, machine=platform.machine() or None, kernel_release=release,
                     container=_container_marker(), wsl=_wsl_marker(release),
                     proc_driver_version=_read(PROC_DRIVER_VERSION),
                     device_nodes=tuple(sorted(p.name for p in Path("/dev").glob("nvidia*"))), container_checked=True)


def _container_marker() -> str | None:
    for marker in CONTAINER_FILES:
        if marker.exists():
            return str(marker)
    # systemd's convention, lower case: podman and systemd-nspawn set it.
    named = os.environ.get("container")  # noqa: SIM112
    if named:
        return f"container={named}"
    cgroup = _read(Path("/proc/1/cgroup")) or ""
    found = CGROUP_OF_CONTAINER.search(cgroup)
    return f"/proc/1/cgroup: {found.group(0)}" if found else None


def _wsl_marker(release: str) -> str | None:
    if "microsoft" in release.lower():
        return f"kernel {release}"
    return next((str(path) for path in WSL_FILES if path.exists()), None)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


@lru_cache(maxsize=1)
def _kinds_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(data_text("host_kinds.yaml"))
    return data


def read_host_kind(probe: HostProbe, driver: DriverReading, board_names: tuple[str, ...] = (),
                   mig_on: bool = False) -> HostKind:
    """The host's kind from the strongest source that names one: the OS's own word, then its markers, then what
    nvidia-smi printed. Every kind the sources name is kept (`also`), the first of them is the kind."""
    named = _named_kinds(probe, driver, board_names)
    kind, source = _strongest(named)
    not_told = _not_told(kind, probe)
    entry = _kinds_data()["not_told" if not_told else "kinds"][kind]
    return HostKind(name=kind, source=source, means=entry["means"], fix=entry.get("fix"),
                    traits=_traits(probe, board_names, mig_on), also=tuple(dict.fromkeys(
                        k for k, _ in named if k not in (kind, "linux"))),
                    kernel_module=_module_version(probe.proc_driver_version), not_told=not_told)


def _not_told(kind: str, probe: HostProbe) -> str | None:
    """Which kinds the host could be when no source told them apart (builder/data/host_kinds.yaml's `not_told`):
    nothing named a kind; or Linux was named (by the OS or nvidia-smi's UNIX marks) while no one looked for the
    container markers (/proc/driver/nvidia/version, the OS and nvidia-smi read the same inside a container)."""
    if kind == "unknown" or (kind == "linux" and not probe.container_checked):
        answer: str = _kinds_data()["not_told"][kind]["answer"]
        return answer
    return None


def _named_kinds(probe: HostProbe, driver: DriverReading, board_names: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """Every (kind, source) the sources name, strongest first."""
    signs = set(driver.smi_signs)
    named: list[tuple[str, str]] = []
    if probe.system == "Windows":
        named.append(("windows", "the OS (platform.system)"))
    if probe.container:
        named.append(("container", probe.container))
    named += [("container", f"nvidia-smi: {sign}") for sign in sorted(signs & set(CONTAINER_SIGNS))]
    if probe.wsl:
        named.append(("wsl", probe.wsl))
    if "wddm" in signs and probe.system == "Linux":
        named.append(("wsl", "nvidia-smi: a Windows driver model on Linux"))
    named += [("wsl", f"nvidia-smi: {sign}") for sign in sorted(signs & set(WSL_SIGNS))]
    if "wddm" in signs and probe.system is None:
        named.append(("windows", "nvidia-smi: the Windows driver model (WDDM/TCC)"))
    return named + _vgpu_named(signs, board_names) + _later_kinds(probe, driver, signs)


def _vgpu_named(signs: set[str], board_names: tuple[str, ...]) -> list[tuple[str, str]]:
    """A vGPU guest: -q's vGPU block, or a GPU named by its vGPU type (GRID A100D-20C, T4-16Q)."""
    if "vgpu" in signs:
        return [("vgpu", "nvidia-smi -q: vGPU")]
    typed = next((name for name in board_names if vgpu_board(name)), None)
    return [("vgpu", f"GPU {typed}: a vGPU type's name")] if typed else []


def _later_kinds(probe: HostProbe, driver: DriverReading, signs: set[str]) -> list[tuple[str, str]]:
    """The kinds named after Windows, containers, WSL and a vGPU guest: FreeBSD, Linux."""
    named: list[tuple[str, str]] = []
    if probe.system == "FreeBSD":
        named.append(("freebsd", "the OS (platform.system)"))
    if probe.system == "Linux":
        named.append(("linux", "the OS (platform.system)"))
    unix = sorted(signs & set(UNIX_SIGNS))
    if probe.proc_driver_version:
        unix.insert(0, "/proc/driver/nvidia/version")
    if driver.smi_failure in UNIX_FAILURES:
        unix.append(f"nvidia-smi: {driver.smi_failure}")
    if unix and "wddm" not in signs:
        named.append(("linux", ", ".join(unix)))
    return named


def _strongest(named: list[tuple[str, str]]) -> tuple[str, str]:
    """The first kind named, except that a vGPU guest is named before the plain Linux it also is."""
    if not named:
        return "unknown", "no source named one"
    first = named[0]
    vgpu = next((entry for entry in named if entry[0] == "vgpu"), None)
    if vgpu and first[0] == "linux":
        return vgpu
    return first


def _traits(probe: HostProbe, board_names: tuple[str, ...], mig_on: bool) -> tuple[Trait, ...]:
    data = _kinds_data()["traits"]
    found = []
    nvrm = _NVRM.search(probe.proc_driver_version or "")
    arm_board = next((name for name in board_names if ARM_BOARDS.search(name)), None)
    if probe.machine in ARM:
        found.append(("aarch64", f"the OS (platform.machine: {probe.machine})"))
    elif nvrm and (nvrm.group("arch") or "").lower() in ARM:
        found.append(("aarch64", "/proc/driver/nvidia/version"))
    elif arm_board:
        found.append(("aarch64", f"board {arm_board} (comes with an arm64 CPU)"))
    if mig_on:
        found.append(("mig", "MIG mode of the GPUs"))
    if nvrm and nvrm.group("open"):
        found.append(("open-kernel-module", "/proc/driver/nvidia/version"))
    return tuple(Trait(name, source, data[name]["means"]) for name, source in found)


def _module_version(text: str | None) -> str | None:
    nvrm = _NVRM.search(text or "")
    return nvrm.group("version") if nvrm else None

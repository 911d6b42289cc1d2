"""This host's GPUs as NVML (nvidia-ml-py) or nvidia-smi's table show them; empty without a driver.

Reading and interpreting are split: `nvml_snapshot()` only calls NVML and keeps what it returned,
`gpus_from_nvml()` turns such a snapshot into `GpuInfo` values, so recorded snapshots of GPU hosts
test the interpretation on machines without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from builder.host.capability import read_capability
from builder.specs.gpus import architecture_name
from smoke.driver import DriverReading, read_driver
from smoke.nvml import nvml_session
from smoke.nvsmi import SmiGpu, SmiProcess

MIB = 1024 * 1024


@dataclass(frozen=True)
class GpuInfo:
    index: int  # NVML / nvidia-smi order (PCI bus order), not CUDA's default fastest-first order
    name: str
    uuid: str | None = None
    bus_id: str | None = None
    capability: tuple[int, int] | None = None  # compute capability; nvidia-smi's table does not show it
    memory_free: int | None = None  # bytes
    memory_total: int | None = None  # bytes
    utilization: int | None = None  # percent of time a kernel ran over the last sample period
    # Where the capability came from (driver, model name, architecture NAME; None: unknown), and every
    # capability the GPU may have when only its architecture is known (Ampere: 8.0, 8.6 or 8.7).
    capability_source: str | None = None
    candidates: tuple[tuple[int, int], ...] = ()
    architecture: str | None = None
    mig_mode: str | None = None  # "Enabled" / "Disabled"; None: not said (or the GPU has no MIG)
    mig_instances: int | None = None  # MIG devices NVML lists on this GPU; None: not asked (nvidia-smi, no MIG)

    @property
    def sm(self) -> str | None:
        return None if self.capability is None else f"sm_{self.capability[0]}{self.capability[1]}"

    @property
    def possible(self) -> tuple[tuple[int, int], ...]:
        """Every capability this GPU may have: the known one, an architecture's several, or none (unknown)."""
        return (self.capability,) if self.capability is not None else self.candidates

    @property
    def mig_enabled(self) -> bool:
        return self.mig_mode == "Enabled"

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index, "name": self.name, "uuid": self.uuid, "bus_id": self.bus_id,
            "capability": None if self.capability is None else f"{self.capability[0]}.{self.capability[1]}",
            "memory_free": self.memory_free, "memory_total": self.memory_total,
            "utilization": self.utilization, "capability_source": self.capability_source,
            "capability_candidates": [f"{major}.{minor}" for major, minor in self.candidates],
            "architecture": self.architecture, "mig_mode": self.mig_mode, "mig_instances": self.mig_instances,
        }


def nvml_snapshot() -> list[dict[str, Any]] | None:
    """Every GPU's raw NVML answers (bytes or str as nvidia-ml-py gives them); None when NVML cannot start.

    A query a GPU does not support (utilisation on a MIG device, say) is kept as None.
    """
    with nvml_session() as pynvml:
        if pynvml is None:  # no nvidia-ml-py, NVMLError_LibraryNotFound without a driver, a broken driver
            return None
        try:
            return [_device_snapshot(pynvml, index) for index in range(pynvml.nvmlDeviceGetCount())]
        except pynvml.NVMLError:
            return None


def _device_snapshot(pynvml: Any, index: int) -> dict[str, Any]:
    def answer(query: Callable[..., Any], *args: Any) -> Any:
        try:
            return query(*args)
        except pynvml.NVMLError:  # NVMLError_NotSupported and friends: that fact is unknown, the rest still counts
            return None

    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    memory = answer(pynvml.nvmlDeviceGetMemoryInfo, handle)
    pci = answer(pynvml.nvmlDeviceGetPciInfo, handle)
    utilization = answer(pynvml.nvmlDeviceGetUtilizationRates, handle)
    # Older nvidia-ml-py lacks these calls: their facts are then unknown.
    architecture = answer(getattr(pynvml, "nvmlDeviceGetArchitecture", _absent), handle)
    mig = answer(getattr(pynvml, "nvmlDeviceGetMigMode", _absent), handle)
    return {
        "index": index,
        "name": pynvml.nvmlDeviceGetName(handle),
        "uuid": answer(pynvml.nvmlDeviceGetUUID, handle),
        "pci_bus_id": None if pci is None else pci.busId,
        "cuda_compute_capability": answer(pynvml.nvmlDeviceGetCudaComputeCapability, handle),
        "memory": None if memory is None else {"free": memory.free, "total": memory.total},
        "utilization_gpu": None if utilization is None else utilization.gpu,
        "architecture": architecture,
        "mig_mode": None if mig is None else ("Enabled" if mig[0] == 1 else "Disabled"),
        "mig_devices": _mig_devices(pynvml, handle, answer) if mig is not None and mig[0] == 1 else None,
        "processes": [{"pid": process.pid, "used_memory": process.usedGpuMemory,
                       "name": answer(pynvml.nvmlSystemGetProcessName, process.pid)}
                      for process in answer(pynvml.nvmlDeviceGetComputeRunningProcesses, handle) or []],
    }


def _mig_devices(pynvml: Any, handle: Any, answer: Callable[..., Any]) -> int | None:
    """How many MIG devices (GPU instances with a compute instance) this GPU has now."""
    most = answer(getattr(pynvml, "nvmlDeviceGetMaxMigDeviceCount", _absent), handle)
    if most is None:
        return None
    by_index = getattr(pynvml, "nvmlDeviceGetMigDeviceHandleByIndex", _absent)
    return sum(1 for index in range(int(most)) if answer(by_index, handle, index) is not None)


def _absent(*_: Any) -> None:
    return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def gpus_from_nvml(snapshot: Iterable[dict[str, Any]]) -> list[GpuInfo]:
    gpus = []
    for device in snapshot:
        memory = device.get("memory") or {}
        capability = device.get("cuda_compute_capability")
        utilization = device.get("utilization_gpu")
        name = _text(device["name"]) or ""
        architecture = None if device.get("architecture") is None else architecture_name(device["architecture"])
        known = read_capability((int(capability[0]), int(capability[1])) if capability else None, name, architecture)
        gpus.append(GpuInfo(
            index=int(device["index"]),
            name=name,
            uuid=_text(device.get("uuid")),
            bus_id=_text(device.get("pci_bus_id")),
            capability=known.capability, capability_source=known.source, candidates=known.candidates,
            architecture=architecture, mig_mode=device.get("mig_mode"),
            mig_instances=None if device.get("mig_devices") is None else int(device["mig_devices"]),
            memory_free=None if memory.get("free") is None else int(memory["free"]),
            memory_total=None if memory.get("total") is None else int(memory["total"]),
            utilization=None if utilization is None else int(utilization),
        ))
    return gpus


def gpus_from_smi(rows: Iterable[SmiGpu]) -> list[GpuInfo]:
    """GPUs from nvidia-smi (its query, else its table: no UUID nor compute capability there), memory in MiB."""
    gpus = []
    for row in rows:
        total, used = row.memory_total_mib, row.memory_used_mib
        known = read_capability(row.compute_capability, row.name, row.architecture)
        gpus.append(GpuInfo(
            index=row.index,
            name=row.name,
            uuid=row.uuid,
            bus_id=row.bus_id,
            capability=known.capability, capability_source=known.source, candidates=known.candidates,
            architecture=row.architecture, mig_mode=row.mig_mode,
            memory_free=(total - used) * MIB if total is not None and used is not None else None,
            memory_total=row.memory_total_mib * MIB if row.memory_total_mib is not None else None,
            utilization=row.utilization_percent,
        ))
    return gpus


def rank_by_free_memory(gpus: Iterable[GpuInfo]) -> list[GpuInfo]:
    """Most free memory first (the seeds' way to pick the idle cards); unknown memory last, ties by index."""
    return sorted(gpus, key=lambda g: (g.memory_free is None, -(g.memory_free or 0), g.index))


def processes_from_nvml(snapshot: Iterable[dict[str, Any]]) -> list[SmiProcess]:
    """Compute processes NVML lists per GPU (none inside most containers: another PID namespace)."""
    processes = []
    for device in snapshot:
        for process in device.get("processes") or []:
            memory = process.get("used_memory")
            processes.append(SmiProcess(pid=int(process["pid"]), name=_text(process.get("name")) or "",
                                        gpu=int(device["index"]), gpu_uuid=_text(device.get("uuid")),
                                        memory_mib=None if memory is None else int(memory) // MIB, type="C"))
    return processes


class HostGpus(NamedTuple):
    driver: DriverReading
    gpus: list[GpuInfo]  # most free memory first
    processes: list[SmiProcess]


def read_host_gpus() -> HostGpus:
    """This host's driver, GPUs and GPU processes: NVML, else nvidia-smi (its query, else its table)."""
    driver = read_driver()
    snapshot = nvml_snapshot()
    if snapshot is not None:
        return HostGpus(driver, rank_by_free_memory(gpus_from_nvml(snapshot)), processes_from_nvml(snapshot))
    return HostGpus(driver, rank_by_free_memory(gpus_from_smi(driver.smi_gpus)), list(driver.smi_processes))


def gpus_by_free_memory() -> list[GpuInfo]:
    """This host's GPUs through NVML, most free memory first; empty when NVML does not answer."""
    return rank_by_free_memory(gpus_from_nvml(nvml_snapshot() or []))

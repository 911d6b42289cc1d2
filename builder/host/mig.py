"""MIG mode per GPU, and what it means for the smoke suite: each MIG instance is a CUDA device of its own, a
process uses one, and nothing spans instances."""

from __future__ import annotations

from collections.abc import Sequence

from builder.errors import UsageError
from builder.host.checks import INFO, HostCheck
from builder.host.gpuinfo import GpuInfo, read_host_gpus

MIG_MEANS = ("each MIG instance is one CUDA device, and a process uses only one; DataParallel and NCCL across MIG "
             "instances do not work, so the suite's multi-GPU checks cannot pass there")
MIG_FIX = ("give a container one instance: `--gpus device=MIG-<uuid>` (`nvidia-smi -L` lists each instance's "
           "MIG-<uuid>); `--require-gpus` counts instances, not boards")


def mig_findings(gpus: tuple[GpuInfo, ...], instances: int = 0) -> list[HostCheck]:
    enabled = sorted((gpu for gpu in gpus if gpu.mig_enabled), key=lambda gpu: gpu.index)
    if not enabled:
        return []
    which = ", ".join(f"{gpu.index} ({gpu.name})" for gpu in enabled)
    counted = f"; {instances} MIG instance(s) listed" if instances else ""
    return [HostCheck(INFO, "MIG", f"MIG mode is on for GPU {which}{counted}: {MIG_MEANS}", MIG_FIX)]


def mig_gpu_limit(gpus: Sequence[GpuInfo], instances: int) -> int | None:
    """How many GPUs the smoke suite may require here: with MIG on, the MIG instances listed (a board in MIG mode
    is no CUDA device of its own); else the GPUs listed; None when nothing was listed."""
    if instances or any(gpu.mig_enabled for gpu in gpus):
        return instances
    return len(gpus) or None


def host_mig_limit() -> int | None:
    """This host's limit when MIG is on (None: MIG is off or nothing was read), from NVML or nvidia-smi."""
    driver, gpus, _ = read_host_gpus()
    instances = sum(gpu.mig_instances or 0 for gpu in gpus) or driver.smi_mig_devices
    if not instances and not any(gpu.mig_enabled for gpu in gpus):
        return None
    return instances


def check_mig_limit(require_gpus: int, limit: int | None) -> None:
    """`--require-gpus N` past the MIG instances this host lists cannot pass: refuse it before any container."""
    if limit is not None and require_gpus > limit:
        raise UsageError(f"--require-gpus {require_gpus}: MIG is on and this host lists {limit} MIG instance(s); "
                         f"require at most {limit} (each instance is one CUDA device, and multi-GPU checks do not "
                         "span instances)")


def mig_words(gpu: GpuInfo) -> str:
    """The MIG column of the GPU table."""
    return {"Enabled": "on", "Disabled": "off"}.get(gpu.mig_mode or "", "-")

"""MIG mode per GPU, and what it means for the smoke suite: each MIG instance is a CUDA device of its own, a
process uses one, and nothing spans instances."""

from __future__ import annotations

from builder.host.checks import INFO, HostCheck
from builder.host.gpuinfo import GpuInfo

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


def mig_words(gpu: GpuInfo) -> str:
    """The MIG column of the GPU table."""
    return {"Enabled": "on", "Disabled": "off"}.get(gpu.mig_mode or "", "-")

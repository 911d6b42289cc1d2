"""The container's own pitfalls, judged: /dev/shm against what a DataLoader holds there, and the
memlock limit RDMA needs. No torch here: the checks (smoke/checks/container.py) feed in readings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from smoke.compat import FAIL, OK, WARN, Verdict

SHM_PATH = "/dev/shm"
DOCKER_DEFAULT_SHM = 64 * 1024 * 1024  # what `docker run` gives a container without --shm-size / --ipc=host
SHM_FIX = ("give the container shared memory: `docker run --ipc=host` or `--shm-size=1g` (envbuild smoke "
           "--shm-size); on Kubernetes mount an emptyDir with `medium: Memory` at /dev/shm")
MEMLOCK_FIX = ("raise the locked-memory limit: `docker run --ulimit memlock=-1` (envbuild smoke --ulimit "
               "memlock=-1); on Kubernetes the container runtime's default applies (containerd/CRI-O "
               "LimitMEMLOCK=infinity)")
# A training loader for comparison: 8 workers, 2 batches each, 64 RGB images of 224x224 in float32.
TRAINING_EXAMPLE = {"workers": 8, "prefetch_factor": 2, "batch": 64, "row_bytes": 3 * 224 * 224 * 4}


def round_up(value: int, step: int) -> int:
    return -(-value // step) * step


def loader_shm_bytes(workers: int, prefetch_factor: int, batch: int, row_bytes: int, page_size: int) -> int:
    """Shared memory a DataLoader holds at its peak: each of `workers` keeps `prefetch_factor` batches
    in flight, and a worker collates each batch straight into a shared-memory segment of its own (one
    per tensor of the batch; here one), which takes whole pages."""
    if min(workers, prefetch_factor, batch, row_bytes, page_size) <= 0:
        raise ValueError("workers, prefetch_factor, batch, row_bytes and page_size must all be positive")
    return workers * prefetch_factor * round_up(batch * row_bytes, page_size)


@dataclass(frozen=True)
class ShmReading:
    path: str
    exists: bool
    writable: bool
    total_bytes: int = 0
    free_bytes: int = 0


def read_shm(path: str = SHM_PATH) -> ShmReading:
    """statvfs of the shared-memory mount: its size and what is free now."""
    try:
        stats = os.statvfs(path)
    except OSError:
        return ShmReading(path, exists=False, writable=False)
    return ShmReading(path, exists=True, writable=os.access(path, os.W_OK),
                      total_bytes=stats.f_blocks * stats.f_frsize, free_bytes=stats.f_bavail * stats.f_frsize)


def size_text(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{size} B"


def shm_verdict(reading: ShmReading, need_bytes: int, *, gpus: int, page_size: int) -> Verdict:
    """/dev/shm against this suite's DataLoader peak (a failure when it does not fit), and against
    Docker's 64 MiB default (a warning: enough here, rarely enough for training)."""
    if not reading.exists or not reading.writable:
        state = "does not exist" if not reading.exists else "is not writable"
        return Verdict(FAIL, f"{reading.path} {state}: DataLoader workers fail with 'unable to open shared memory "
                             f"object' and NCCL cannot create its segments; fix: {SHM_FIX}")
    have = f"{reading.path} is {size_text(reading.total_bytes)} ({size_text(reading.free_bytes)} free)"
    if reading.free_bytes < need_bytes:
        return Verdict(FAIL, f"{have} but this suite's DataLoader needs {size_text(need_bytes)}: its workers die with "
                             "'Unexpected bus error encountered in worker. This might be caused by insufficient "
                             f"shared memory (shm)'; fix: {SHM_FIX}")
    if reading.total_bytes <= DOCKER_DEFAULT_SHM:
        example = loader_shm_bytes(page_size=page_size, **TRAINING_EXAMPLE)
        nccl = "; NCCL between GPUs of this container needs it too" if gpus >= 2 else ""
        return Verdict(WARN, f"warning: {have}, Docker's default: this suite's DataLoader fits "
                             f"({size_text(need_bytes)}) but a training loader of 8 workers x 2 prefetched batches of "
                             f"64 224x224 RGB float32 images holds {size_text(example)}{nccl}; fix: {SHM_FIX}")
    return Verdict(OK, f"{have}; this suite's DataLoader needs {size_text(need_bytes)} at its peak")


def memlock_verdict(soft: int, hard: int, rdma_devices: list[str]) -> Verdict:
    """RLIMIT_MEMLOCK (-1: unlimited). RDMA (NCCL's InfiniBand/RoCE transport, GPUDirect) registers memory
    with ibv_reg_mr, which this limit caps: with RDMA devices in the container it must be unlimited."""
    shown = "unlimited" if soft < 0 else size_text(soft)
    if soft < 0:
        return Verdict(OK, "locked memory (RLIMIT_MEMLOCK) is unlimited")
    if rdma_devices:
        hard_shown = "unlimited" if hard < 0 else size_text(hard)
        return Verdict(FAIL, f"RDMA devices are here ({', '.join(rdma_devices)}) but locked memory is capped at "
                             f"{shown} (hard {hard_shown}): NCCL's InfiniBand transport fails to register its buffers; "
                             f"fix: {MEMLOCK_FIX}")
    return Verdict(OK, f"locked memory (RLIMIT_MEMLOCK) is {shown}: no RDMA device here, so nothing needs more "
                       f"(NCCL over InfiniBand would; fix then: {MEMLOCK_FIX})")

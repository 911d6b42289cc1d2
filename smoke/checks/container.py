"""The container's own pitfalls: /dev/shm (Docker gives 64 MiB unless told otherwise; DataLoader
workers and NCCL live in it: seed 000's hanging loaders), and the limits pinned memory and RDMA meet."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

from smoke.checks.dataloader import BATCH, FEATURES, PREFETCH_FACTOR, WORKERS
from smoke.compat import FAIL
from smoke.registry import Context, Outcome, check, failed, passed, skipped, verdict
from smoke.resources import loader_shm_bytes, memlock_verdict, read_shm, shm_verdict, size_text

PINNED_BYTES = 64 * 1024 * 1024  # a DataLoader's worth of pinned batches, small enough for any host


@check("container.shm",
       stands_for="seed 000: DataLoader workers hang or die (num_workers x prefetch_factor batches live in /dev/shm); "
                  "NCCL's shared-memory segments")
def shared_memory(ctx: Context) -> Outcome:
    """/dev/shm holds what this suite's DataLoader keeps in flight (workers x prefetch x batch); 64 MiB warns."""
    if not sys.platform.startswith("linux"):
        return skipped(f"no /dev/shm to judge on {sys.platform}")
    page_size = os.sysconf("SC_PAGE_SIZE")
    row_bytes = FEATURES * (torch.finfo(torch.float32).bits // 8)
    need = loader_shm_bytes(WORKERS, PREFETCH_FACTOR, BATCH, row_bytes, page_size)
    reading = read_shm()
    judged = shm_verdict(reading, need, gpus=ctx.gpu_count, page_size=page_size)
    details = {"path": reading.path, "total_bytes": reading.total_bytes, "free_bytes": reading.free_bytes,
               "need_bytes": need, "need": f"{WORKERS} workers x {PREFETCH_FACTOR} batches x {BATCH} rows x "
                                          f"{row_bytes} B, whole {size_text(page_size)} pages", "verdict": judged.level}
    return (failed if judged.level == FAIL else passed)(judged.message, **details)


@check("container.limits",
       stands_for="seed 000: pin_memory=True for fast host-to-GPU copies; NCCL over RDMA needs unlimited memlock")
def resource_limits(ctx: Context) -> Outcome:
    """RLIMIT_MEMLOCK (unlimited where RDMA devices are), and on CUDA a pinned buffer's round trip through cuda:0."""
    try:
        import resource
    except ImportError:
        return skipped(f"no POSIX resource limits on {sys.platform}")
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    rdma = sorted(p.name for p in Path("/dev/infiniband").glob("uverbs*"))
    judged = memlock_verdict(int(soft), int(hard), rdma)
    details: dict[str, object] = {"memlock_soft": soft, "memlock_hard": hard, "nofile": list(nofile),
                                  "rdma_devices": rdma}
    problems = [judged.message] if judged.level == FAIL else []
    notes = [judged.message]
    if ctx.gpu_count:
        pinned = _pinned_round_trip()
        details["pinned"] = pinned
        if pinned.get("error"):
            problems.append(f"pinned memory: {pinned['error']}")
        else:
            notes.append(f"{size_text(PINNED_BYTES)} of pinned memory went to cuda:0 and back intact")
    else:
        notes.append("the pinned-memory path needs CUDA (not checked)")
    return verdict(problems, "; ".join(notes), **details)


def _pinned_round_trip() -> dict[str, object]:
    """A pinned host buffer, copied to cuda:0 and back without blocking, arrives intact."""
    try:
        host = torch.empty(PINNED_BYTES, dtype=torch.uint8, pin_memory=True)
        if not host.is_pinned():
            return {"error": "torch.empty(..., pin_memory=True) returned unpinned memory"}
        host.copy_(torch.arange(256, dtype=torch.uint8).repeat(PINNED_BYTES // 256))
        device = host.to("cuda:0", non_blocking=True)
        back = torch.empty(PINNED_BYTES, dtype=torch.uint8, pin_memory=True)
        back.copy_(device, non_blocking=True)
        torch.cuda.synchronize(0)
    except RuntimeError as exc:  # cudaHostAlloc refused, or the copy failed
        return {"error": " ".join(str(exc).split())[:300]}
    if not torch.equal(host, back):
        return {"error": "the bytes that came back from cuda:0 differ from the pinned buffer sent"}
    return {"bytes": PINNED_BYTES, "intact": True}

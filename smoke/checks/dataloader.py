"""DataLoader workers (seed 000): two workers deliver every batch, under fork and under spawn,
pinned when CUDA is there, and never hang (the loader's own timeout turns a hang into an error)."""

from __future__ import annotations

import multiprocessing

import torch
from torch.utils.data import DataLoader, TensorDataset

from smoke.registry import Context, Outcome, check, skipped, verdict

ROWS = 64
FEATURES = 1  # float32 values per row
BATCH = 8
WORKERS = 2
PREFETCH_FACTOR = 2  # DataLoader's default, spelled out: container.shm sizes /dev/shm by it
# Per batch. spawn's first batch waits for the workers to re-import torch: 7-9 s measured, far more
# on a loaded machine or a cold disk, hence the margin.
BATCH_TIMEOUT_S = {"fork": 60, "spawn": 120}


def load_all_batches(start_method: str, pin_memory: bool) -> dict[str, object]:
    """Iterate a 2-worker loader once; what arrived, in order, and whether batches were pinned."""
    dataset = TensorDataset(torch.arange(ROWS * FEATURES, dtype=torch.float32).reshape(ROWS, FEATURES))
    loader = DataLoader(
        dataset,
        batch_size=BATCH,
        num_workers=WORKERS,
        prefetch_factor=PREFETCH_FACTOR,
        pin_memory=pin_memory,
        multiprocessing_context=multiprocessing.get_context(start_method),
        timeout=BATCH_TIMEOUT_S[start_method],
    )
    rows: list[int] = []
    pinned: list[bool] = []
    for (batch,) in loader:
        rows.extend(int(v) for v in batch.flatten().tolist())
        pinned.append(bool(batch.is_pinned()))
    return {"rows": rows, "batches": len(pinned), "pinned": pinned}


def judge_delivery(result: dict[str, object], pin_memory: bool) -> list[str]:
    problems = []
    if result["rows"] != list(range(ROWS)):
        problems.append(f"rows arrived as {result['rows']!r}, not 0..{ROWS - 1} in order")
    if result["batches"] != ROWS // BATCH:
        problems.append(f"{result['batches']} batches arrived, not {ROWS // BATCH}")
    if pin_memory and not all(result["pinned"]):  # type: ignore[arg-type]
        problems.append("pin_memory=True returned unpinned batches")
    return problems


def _delivery_check(start_method: str, ctx: Context) -> Outcome:
    if start_method not in multiprocessing.get_all_start_methods():
        return skipped(f"the {start_method!r} start method does not exist on this platform")
    pin = ctx.gpu_count > 0
    result = load_all_batches(start_method, pin_memory=pin)
    pin_note = "batches pinned" if pin else "pin_memory not checked: no CUDA device (it would warn and not pin)"
    return verdict(
        judge_delivery(result, pin),
        f"{WORKERS} {start_method} workers delivered {result['batches']}/{ROWS // BATCH} batches; {pin_note}",
        batches=result["batches"], pinned=result["pinned"], pin_memory=pin,
    )


@check("dataloader.fork",
       stands_for="seed 000: num_workers and pin_memory for a busy GPU; loaders whose workers hang")
def fork_workers(ctx: Context) -> Outcome:
    """Two fork workers deliver every batch in order (pinned on CUDA)."""
    return _delivery_check("fork", ctx)


@check("dataloader.spawn",
       stands_for="seed 000: the spawn start method as the cure for hanging workers (each re-imports torch)")
def spawn_workers(ctx: Context) -> Outcome:
    """Two spawn workers (each re-imports torch) deliver every batch in order (pinned on CUDA)."""
    return _delivery_check("spawn", ctx)

"""How DataParallel should split a batch, derived from first principles, and a checker for records.

DataParallel scatters the input with chunk semantics: every chunk holds ceil(batch / n_gpus) rows
except the last, which holds the rest, and no empty chunks are made. So a small batch can use fewer
devices than it was given (6 rows on 4 GPUs -> 2+2+2, three devices used).
This module deliberately does not call torch.chunk: the expectation must be independent of the code
under test, or a broken split would agree with itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def expected_split(batch: int, n_gpus: int) -> list[int]:
    """Rows each device should receive, in device_ids order, unused devices omitted."""
    if batch < 1 or n_gpus < 1:
        raise ValueError(f"batch ({batch}) and n_gpus ({n_gpus}) must both be at least 1")
    chunk = -(-batch // n_gpus)  # ceiling division
    sizes: list[int] = []
    remaining = batch
    while remaining > 0:
        take = min(chunk, remaining)
        sizes.append(take)
        remaining -= take
    return sizes


@dataclass(frozen=True)
class SplitVerdict:
    ok: bool
    batch: int
    n_gpus: int
    expected: list[int]
    recorded: list[int]
    message: str


def check_split(recorded_rows_per_device: Sequence[int], batch: int, n_gpus: int) -> SplitVerdict:
    """Compare what each device saw (device_ids order; missing trailing devices saw 0 rows).

    Fails when a device got a different share, when rows went missing or were duplicated, or when
    more devices reported than were given.
    """
    expected = expected_split(batch, n_gpus)
    recorded = list(recorded_rows_per_device)
    padded_expected = expected + [0] * (n_gpus - len(expected))
    padded_recorded = recorded + [0] * (n_gpus - len(recorded))
    if len(recorded) > n_gpus:
        message = f"{len(recorded)} devices reported rows but only {n_gpus} were given"
        ok = False
    elif padded_recorded != padded_expected:
        message = (
            f"batch {batch} on {n_gpus} GPUs: expected rows per device {padded_expected}, "
            f"recorded {padded_recorded}"
        )
        if sum(padded_recorded) != batch:
            message += f" ({sum(padded_recorded)} rows seen in total, not {batch})"
        ok = False
    else:
        message = f"batch {batch} on {n_gpus} GPUs split as {expected}"
        ok = True
    return SplitVerdict(ok, batch, n_gpus, padded_expected, padded_recorded, message)


def rows_per_device(records: Iterable[tuple[int | None, int]], device_ids: Sequence[int]) -> list[int]:
    """Sum rows recorded as (device index, rows) into device_ids order.

    Rows seen on a device outside device_ids are appended at the end so the checker rejects them.
    """
    totals = {device: 0 for device in device_ids}
    strays: dict[int | None, int] = {}
    for device, rows in records:
        if device in totals:
            totals[device] += rows
        else:
            strays[device] = strays.get(device, 0) + rows
    return [totals[d] for d in device_ids] + list(strays.values())

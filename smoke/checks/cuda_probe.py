"""One careful look at CUDA, shared by every check.

`torch.cuda.is_available()` warns only on its first call (e.g. "The NVIDIA driver on your system is
too old"), so it is called once, here, with warnings recorded, and everyone reads the result.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class CudaProbe:
    built_for: str | None  # torch.version.cuda; None on CPU builds
    available: bool
    device_count: int
    warnings: list[str] = field(default_factory=list)
    error: str | None = None

    def describe_unavailable(self) -> str:
        notes = list(self.warnings)
        if self.error:
            notes.append(self.error)
        return "; ".join(notes)


@functools.lru_cache(maxsize=1)
def probe_cuda() -> CudaProbe:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        error = None
        try:
            available = bool(torch.cuda.is_available())
            count = int(torch.cuda.device_count()) if available else 0
        except Exception as exc:  # a broken driver can raise instead of returning False  # noqa: BLE001
            available, count, error = False, 0, f"{type(exc).__name__}: {exc}"
    messages = []
    for item in caught:
        text = " ".join(str(item.message).split())
        if text not in messages:
            messages.append(text)
    return CudaProbe(torch.version.cuda, available, count, messages, error)

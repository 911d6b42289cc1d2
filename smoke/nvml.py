"""One NVML session helper for every caller (doctor's GPU list, the driver reading, the smoke suite).

nvidia-ml-py (module `pynvml`) is optional: images need not carry it, and without a driver
`nvmlInit()` raises `NVMLError_LibraryNotFound`. `nvml_session()` starts NVML for a block and always
shuts it down, so callers only handle "no NVML" (None) and their own queries.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType


@contextmanager
def nvml_session(notes: list[str] | None = None) -> Iterator[ModuleType | None]:
    """`pynvml`, initialised for the block; None (and the reason appended to `notes`) when NVML cannot start."""
    try:
        import pynvml
    except ImportError:
        if notes is not None:
            notes.append("NVML: nvidia-ml-py is not installed")
        yield None
        return
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:  # NVMLError_LibraryNotFound without a driver, others when it is broken
        if notes is not None:
            notes.append(f"NVML: {type(exc).__name__}: {exc}")
        yield None
        return
    try:
        yield pynvml
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass  # shutting down a half-initialised NVML is not worth a failure


def nvml_answers() -> bool:
    """Whether NVML starts on this machine (a driver and nvidia-ml-py are both there)."""
    with nvml_session() as nvml:
        return nvml is not None

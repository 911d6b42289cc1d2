"""envbuild's own ENVBUILD_* settings from the environment, each checked where it is read, and all of
them at once when a command starts: junk in one is one line naming the variable, never a silent
fall-back to the default (a timeout of `30s` would otherwise be 30 minutes of someone's wait, or none).

The solver's halves and the smoke suite (builder/lock/solver_client.py, smoke/driver.py) read some of
these in processes of their own, where an error has no good place to go: the check at start covers
them before they run.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from builder.errors import UsageError
from builder.safe_io.text import has_unsafe_characters

CHANNEL_TIMEOUT = "ENVBUILD_CHANNEL_TIMEOUT"  # seconds a channel has to answer a first request (lock)
SOLVE_TIMEOUT = "ENVBUILD_SOLVE_TIMEOUT"  # seconds one solve may take (the lock's solver)
NVIDIA_SMI_TIMEOUT = "ENVBUILD_NVIDIA_SMI_TIMEOUT"  # seconds nvidia-smi may take (doctor, onboard, smoke)
ENVS_DIR = "ENVBUILD_ENVS_DIR"  # where `onboard --name` puts environments
RATTLER_CACHE = "ENVBUILD_RATTLER_CACHE"  # the solver's repodata cache

SECONDS = (CHANNEL_TIMEOUT, SOLVE_TIMEOUT, NVIDIA_SMI_TIMEOUT)
FOLDERS = (ENVS_DIR, RATTLER_CACHE)


def seconds(name: str, default: float) -> float:
    """A positive number of seconds from `name`, `default` when it is unset or empty."""
    raw = os.environ.get(name, "")
    if not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{name}={raw!r}: not a number of seconds above 0; unset it for the default, "
                         f"or give e.g. {name}=30")
    return value


def folder(name: str) -> Path | None:
    """A folder named by `name` (`~` expanded), None when it is unset or empty."""
    raw = os.environ.get(name, "")
    if not raw:
        return None
    expanded = os.path.expanduser(raw)
    if expanded.startswith("~"):
        raise UsageError(f"{name}={raw!r}: names the home folder of a user this system does not know; "
                         "give a path")
    if has_unsafe_characters(raw):
        raise UsageError(f"{name}={raw!r}: control characters in a folder name; give a plain path")
    return Path(expanded)


def check_environment() -> None:
    """Every ENVBUILD_* setting envbuild reads, checked before a command starts its work."""
    for name in SECONDS:
        seconds(name, 1.0)
    for name in FOLDERS:
        folder(name)

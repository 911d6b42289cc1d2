"""What `envbuild-micromamba`'s two halves and the lock run agree on: the console script
(builder/lock/solver_client.py), which must start in about 20 ms, the shim with its solver service
(builder/lock/solver_shim.py), and the run that starts the service (builder/lock/run.py).
No imports beyond `builder` itself: the client imports this on every call conda-lock makes."""

from __future__ import annotations

from builder import __version__

# conda-lock reads the last word of the first line and compares it with micromamba releases; 2.0.7
# is the first whose `list` knows `--no-pip`, which conda-lock tries first.
MICROMAMBA_COMPAT_VERSION = "2.0.8"
# Where the lock run's solver service listens (a unix socket); the run sets it for its conda-lock children.
SERVICE_ENV = "ENVBUILD_SOLVER_SERVICE"
# What a solve reads from its environment: the platform, virtual packages, the solve timeout.
FORWARDED_ENV = ("CONDA_", "ENVBUILD_SOLVE")
# How long a solve may take; the client's wait for a forwarded reply adds a minute to it.
SOLVE_TIMEOUT_ENV = "ENVBUILD_SOLVE_TIMEOUT"
DEFAULT_SOLVE_TIMEOUT_S = 120.0
# Where the solver (the service, or a shim call) keeps its repodata cache; the lock run names a folder
# in its scratch space, so ending the service with SIGKILL leaves nothing behind.
CACHE_ENV = "ENVBUILD_RATTLER_CACHE"


def version_text() -> str:
    """The answer to `--version`, asked before every lock."""
    return f"{MICROMAMBA_COMPAT_VERSION}\nenvbuild-micromamba {__version__}: conda-lock's solver calls only\n"

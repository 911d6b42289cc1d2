"""`envbuild-micromamba`'s entry point. During `envbuild lock`, conda-lock's dry-run solves go to
the run's solver service (builder/lock/solver_shim.py, `serve`) from a process that loads only the
standard library's socket, json and ctypes: a process of about 20 ms instead of the 60 ms the
shim's imports take, six calls for a lock of three targets on two platforms; `--version`, asked before
every lock, is answered here too. Every other call, and every call when no service answers, is the
shim's (`solver_shim.main`)."""

from __future__ import annotations

import json
import os
import sys

from builder.lock.solver_protocol import (
    DEFAULT_SOLVE_TIMEOUT_S,
    FORWARDED_ENV,
    SERVICE_ENV,
    SOLVE_TIMEOUT_ENV,
    version_text,
)

PR_SET_PDEATHSIG = 1
SIGKILL = 9


def main() -> None:
    """Console script `envbuild-micromamba`."""
    args = sys.argv[1:]
    if args in (["--version"], ["-V"]):  # asked before every lock
        sys.stdout.write(version_text())
        return
    _die_with_parent()  # a solve must not go on after conda-lock (and envbuild) died
    forwarded = forward_to_service(args)
    if forwarded is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(forwarded)
    # Not at the top: the shim's imports are what a forwarded call saves (no import cycle here).
    from builder.lock.solver_shim import main as shim_main

    shim_main(args)


def forward_to_service(args: list[str]) -> int | None:
    """Forward a dry-run solve to the service of the running `envbuild lock`; None when there is
    none (or it does not answer): the call is then answered by the shim in this process."""
    path = os.environ.get(SERVICE_ENV)
    if not path or not args or args[0] not in ("create", "update") or "--dry-run" not in args:
        return None
    import socket

    request = {"args": args, "env": {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV)}}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(_solve_timeout() + 60)
            client.connect(path)
            client.sendall(json.dumps(request).encode())
            client.shutdown(socket.SHUT_WR)
            reply = json.loads(b"".join(iter(lambda: client.recv(1 << 20), b"")).decode())
    except (OSError, ValueError):
        return None
    sys.stdout.write(reply["stdout"])
    sys.stderr.write(reply["stderr"])
    return int(reply["code"])


def _solve_timeout() -> float:
    try:
        return max(1.0, float(os.environ.get(SOLVE_TIMEOUT_ENV, DEFAULT_SOLVE_TIMEOUT_S)))
    except ValueError:
        return DEFAULT_SOLVE_TIMEOUT_S


def _die_with_parent() -> None:
    # builder.proc has the same call, but importing it (subprocess, threading, dataclasses) costs
    # more than this whole forwarded call.
    if sys.platform == "linux":
        import ctypes

        try:
            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass

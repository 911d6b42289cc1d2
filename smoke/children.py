"""Child processes a check starts and must never leave behind. No torch here.

Each child runs in a session (and process group) of its own, so one `killpg` also takes what it
forked (DataLoader workers, inductor's compile pool). Output goes to files, not pipes: a child that
prints a lot (NCCL_DEBUG=INFO) can never block on a full pipe while the parent waits for it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.05
TAIL_CHARS = 4000


@dataclass(frozen=True)
class ChildRun:
    """How one child ended: its exit status (None when it was killed at the deadline) and its output."""

    returncode: int | None
    timed_out: bool
    stdout: str
    stderr: str
    seconds: float

    def tail(self, chars: int = 600) -> str:
        """The last of stderr (else stdout), on one line: enough to name a failure."""
        text = self.stderr.strip() or self.stdout.strip()
        flat = " ".join(text.split())
        return flat[-chars:]


def package_root() -> str:
    """The folder holding the `smoke` package: a child gets it on PYTHONPATH to import the suite."""
    return str(Path(__file__).resolve().parents[1])


def child_environment(extra: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment with `extra` on top and the suite importable."""
    env = dict(os.environ if base is None else base)
    env.update(extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root(), env.get("PYTHONPATH")]))
    return env


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def run_children(commands: Sequence[tuple[Sequence[str], Mapping[str, str]]], timeout_s: float,
                 workdir: Path) -> list[ChildRun]:
    """Start every (argv, env) at once, wait for all of them for at most `timeout_s` in total, and
    kill what is left, with everything it forked. Returns one ChildRun per command, in order."""
    started = time.monotonic()
    deadline = started + timeout_s
    processes: list[subprocess.Popen[bytes]] = []
    outputs: list[tuple[Path, Path]] = []
    try:
        for index, (argv, env) in enumerate(commands):
            out, err = workdir / f"child{index}.out", workdir / f"child{index}.err"
            with out.open("wb") as stdout, err.open("wb") as stderr:
                processes.append(subprocess.Popen(list(argv), stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                                  env=dict(env), start_new_session=True))
            outputs.append((out, err))
        ended: dict[int, float] = {}
        while len(ended) < len(processes) and time.monotonic() < deadline:
            for index, process in enumerate(processes):
                if index not in ended and process.poll() is not None:
                    ended[index] = time.monotonic() - started
            if len(ended) < len(processes):
                time.sleep(POLL_S)
    finally:
        # Whatever happened above (the deadline, an exception here), no child outlives this call.
        for process in processes:
            kill_group(process)
    runs = []
    for index, process in enumerate(processes):
        out, err = outputs[index]
        timed_out = index not in ended
        runs.append(ChildRun(
            returncode=None if timed_out else process.returncode,
            timed_out=timed_out,
            stdout=_read_tail(out),
            stderr=_read_tail(err),
            seconds=ended.get(index, time.monotonic() - started),
        ))
    return runs


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's process group (it leads one: start_new_session) and reap the child.

    Also after the child exited by itself: what it forked may still be running in its group."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # nothing left in the group
    process.wait()


def free_loopback_port() -> int:
    """A TCP port nobody listens on at 127.0.0.1 right now, as torchrun picks one (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _read_tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-TAIL_CHARS:].decode("utf-8", errors="replace")


def clip_middle(text: str, limit: int) -> str:
    """At most `limit` characters, keeping both ends: an error's head names it, its tail often says why
    (a compiler's output after the command line)."""
    if len(text) <= limit:
        return text
    half = (limit - 5) // 2
    return f"{text[:half]} ... {text[-half:]}"

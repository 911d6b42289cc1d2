"""Child processes that never outlive envbuild, and how envbuild itself leaves.

Every child runs in a process group of its own, so a timeout, Ctrl-C or SIGTERM stops what it
started too (a solver conda-lock ran, the process nvidia-smi forked). On Linux the kernel also
kills a child when envbuild dies (kill -9 included: PR_SET_PDEATHSIG); a forked child that starts
grandchildren watches its parent and takes its whole group with it.

Standard library only: the in-image installer ships this module beside install.py.
"""

from __future__ import annotations

import ctypes
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_POLL_S = 0.2
# What `run` keeps of each stream: a broken tool can print hundreds of MB (the rest is read and dropped,
# but for its last lines, which say why it failed).
MAX_OUTPUT_BYTES = 16 << 20
TAIL_BYTES = 64 << 10
_READ_CHUNK = 1 << 16


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (CI cancelling a job, a closed terminal): unwinds like Ctrl-C, so every
    `finally` and `except KeyboardInterrupt` that removes a container or a folder runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class ProcessTimeout(Exception):
    """A child ran past its time; it and everything it started were killed."""

    def __init__(self, what: str, timeout: float) -> None:
        super().__init__(f"{what} ran past {timeout:.0f} s and was stopped")
        self.what = what
        self.timeout = timeout


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: str
    stderr: str

    def last_lines(self, count: int = 5) -> list[str]:
        lines = [line.strip() for line in (self.stderr or self.stdout).splitlines() if line.strip()]
        return lines[-count:]


_libc: ctypes.CDLL | None = None


def _load_libc() -> ctypes.CDLL | None:
    """Loaded before any fork: a child between fork and exec should not load libraries."""
    global _libc
    if _libc is None and sys.platform == "linux":
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            _libc = None
    return _libc


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """Ask the kernel to send `signum` to this process when its parent dies (Linux only)."""
    libc = _load_libc()
    if libc is not None:
        libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)


def _own_group_dying_with(parent: int):
    def setup() -> None:
        os.setsid()
        die_with_parent()
        if os.getppid() != parent:  # the parent died before the request was in place
            os._exit(137)

    return setup


def popen(command: Sequence[str], **kwargs) -> subprocess.Popen:
    """subprocess.Popen in its own session, killed with envbuild."""
    _load_libc()
    return subprocess.Popen(list(command), preexec_fn=_own_group_dying_with(os.getpid()), **kwargs)


def run(command: Sequence[str], *, timeout: float, what: str, env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None, input: bytes | None = None,
        stderr_line: Callable[[str], None] | None = None) -> Completed:
    """Run to completion and capture its output as text (undecodable bytes replaced, never an error),
    at most MAX_OUTPUT_BYTES of each stream and its last TAIL_BYTES; `stderr_line` hears each line of its
    stderr as it comes (a child's progress).

    A timeout kills the child's whole group and raises ProcessTimeout; Ctrl-C or SIGTERM kill the
    group too before they go on. A grandchild left holding the pipes ends with the group."""
    process = popen(command, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    env=dict(env) if env is not None else None, cwd=cwd)
    try:
        if input is not None:
            threading.Thread(target=_feed, args=(process.stdin, input), daemon=True).start()
        stdout, stderr = _read_capped(process, time.monotonic() + timeout, stderr_line)
    except subprocess.TimeoutExpired:
        _end(process)
        raise ProcessTimeout(what, timeout) from None
    except BaseException:
        _end(process)
        raise
    _end(process)  # anything it left running in its group
    return Completed(process.returncode, _text(stdout), _text(stderr))


def _feed(pipe: IO[bytes] | None, data: bytes) -> None:
    try:
        if pipe is not None:
            with pipe:
                pipe.write(data)
    except (BrokenPipeError, ValueError):  # the child stopped reading, or was ended
        pass


class _Capped:
    """One stream's output: its first MAX_OUTPUT_BYTES, then only its last TAIL_BYTES."""

    def __init__(self) -> None:
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0

    def add(self, data: bytes) -> None:
        room = MAX_OUTPUT_BYTES - len(self.head)
        self.head += data[:max(0, room)]
        self.tail += data[max(0, room):]
        if len(self.tail) > TAIL_BYTES:
            self.dropped += len(self.tail) - TAIL_BYTES
            del self.tail[:-TAIL_BYTES]

    def value(self) -> bytes:
        gap = f"\n[envbuild: {self.dropped} bytes of this output left out]\n".encode() if self.dropped else b""
        return bytes(self.head) + gap + bytes(self.tail)


class _Lines(_Capped):
    """A stream kept as _Capped does, each whole line also handed to `hear` as it arrives."""

    def __init__(self, hear: Callable[[str], None]) -> None:
        super().__init__()
        self.hear, self.partial = hear, b""

    def add(self, data: bytes) -> None:
        super().add(data)
        *lines, partial = (self.partial + data).split(b"\n")
        self.partial = partial[-_READ_CHUNK:]  # a line without end is not heard, and not kept whole either
        for line in lines:
            self.hear(_text(line))


def _read_capped(process: subprocess.Popen, deadline: float,
                 stderr_line: Callable[[str], None] | None = None) -> tuple[bytes, bytes]:
    """Both pipes until they close and the child exits, by `deadline` (else TimeoutExpired)."""
    assert process.stdout is not None and process.stderr is not None
    streams = {process.stdout.fileno(): _Capped(), process.stderr.fileno(): _Capped()}
    if stderr_line is not None:
        streams[process.stderr.fileno()] = _Lines(stderr_line)
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(process.args, 0)
            for key, _ in selector.select(left):
                data = os.read(key.fd, _READ_CHUNK)
                if data:
                    streams[key.fd].add(data)
                else:
                    selector.unregister(key.fd)
    process.wait(max(0.0, deadline - time.monotonic()))
    return streams[process.stdout.fileno()].value(), streams[process.stderr.fileno()].value()


def _end(process: subprocess.Popen) -> None:
    """Kill what is left of the child's group, close its pipes and reap it."""
    kill_group(process.pid)
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass
    process.wait()


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


def kill_group(pid: int, signum: int = signal.SIGKILL) -> None:
    """Signal a child's whole process group (it leads one of its own)."""
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def lead_own_group_dying_with_parent() -> None:
    """In a forked child that runs other programs: lead a process group, and when the parent dies
    (kill -9 included) kill the whole group, grandchildren too. The kernel's death signal reaches
    this process only; the watch thread covers the grandchildren and systems without prctl."""
    parent = os.getppid()
    os.setpgrp()

    def end_group(signum: int = 0, frame: object = None) -> None:
        os.killpg(0, signal.SIGKILL)

    signal.signal(signal.SIGTERM, end_group)
    die_with_parent(signal.SIGTERM)
    if os.getppid() != parent:
        end_group()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        end_group()

    threading.Thread(target=watch, name="envbuild-parent-watch", daemon=True).start()


@contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP raise Terminated (a KeyboardInterrupt) in the main thread while inside."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise Terminated(signum)

    previous = {signum: signal.signal(signum, interrupt) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def exit_now(code: int) -> None:
    """Leave without interpreter teardown: py-rattler crashes at exit (SIGSEGV/SIGABRT) in some short
    runs after the work is done, which would turn a success into a crash."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


# --- folders named after the process that owns them -----------------------------------------------

OWNER_PID = re.compile(r"-pid(\d+)-")


def owned_name(prefix: str) -> str:
    """A folder-name prefix that carries this process's id, so a later run can tell stale from busy."""
    return f"{prefix}-pid{os.getpid()}-"


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_folders(parent: Path, prefix: str) -> list[Path]:
    """Folders (or files) under `parent` named by owned_name(prefix) whose owner no longer runs."""
    found = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.startswith(prefix + "-pid"):
            continue
        owner = OWNER_PID.search(entry.name[len(prefix):])
        if owner and int(owner.group(1)) != os.getpid() and not process_alive(int(owner.group(1))):
            found.append(entry)
    return found


def remove_stale_folders(parent: Path, prefix: str) -> list[Path]:
    """What killed runs left behind (they cannot clean up after kill -9): removed on the next run."""
    removed = []
    for folder in stale_folders(parent, prefix):
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)
        else:
            try:
                folder.unlink()
            except OSError:
                continue
        if not folder.exists():
            removed.append(folder)
    return removed

"""An exclusive lock between envbuild processes: filelock's file lock, with a word while it waits, a timeout,
and a holder that was stopped (Ctrl-Z, SIGSTOP) named by its PID instead of waited for.

A lock without a folder of its own (an engine's tags) takes its file in the temporary folder (`lock_file`);
`envbuild lock` keeps its guard in the env folder it writes, which every writer of that folder meets. The last
holder removes its file before it lets go, so nothing stays behind. That is safe with filelock >= 3.32: a waiter
that opened the removed file and then gets its lock sees it has no name any more (st_nlink 0) and tries the
new one. The holder's PID goes into a file beside the lock (filelock empties the lock file itself), written
once the lock is held and removed before it is let go.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from builder.errors import EnvbuildError

# A holder stopped this long (Ctrl-Z, SIGSTOP) is reported instead of waited for: it would hold the
# lock until someone resumes it, and every waiter would sit out its whole timeout.
STOPPED_GRACE_S = 1.0
# How long one try waits inside filelock before the holder is looked at again.
TRY_S = 0.25


def lock_file(kind: str, key: str) -> Path:
    """The lock file of `kind` (`lock`, `tags`) for `key` (a folder, an engine and env): one per key, in the
    temporary folder."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"envbuild-{kind}-{digest}.lock"


@contextmanager
def exclusive_lock(path: Path, timeout: float, waiting: Callable[[], None],
                   timed_out: Callable[[], Exception]) -> Iterator[None]:
    """The lock on `path` while inside (see acquire_lock)."""
    held = acquire_lock(path, timeout, waiting, timed_out)
    try:
        yield
    finally:
        release_lock(path, held)


def acquire_lock(path: Path, timeout: float, waiting: Callable[[], None],
                 timed_out: Callable[[], Exception]) -> Any:
    """The lock on `path` (a filelock.FileLock, held); `waiting` is called once when another process holds
    it, `timed_out()` is raised after `timeout` seconds, an EnvbuildError naming the holder once it has
    stayed stopped for STOPPED_GRACE_S."""
    from filelock import FileLock, Timeout

    lock = FileLock(path)
    wait = _Wait(path, time.monotonic() + timeout, waiting, timed_out)
    while True:
        try:
            lock.acquire(timeout=max(0.0, min(TRY_S, wait.deadline - time.monotonic())))
        except Timeout:
            wait.another_turn(_holder_pid(path))
            continue
        _write_holder(path, lock)
        return lock


def release_lock(path: Path, held: Any) -> None:
    """Let the lock go: its PID file first (a waiter never reads this process as the holder after), then
    the lock file, while it is still held."""
    for leftover in (_holder_file(path), path):
        try:
            leftover.unlink(missing_ok=True)
        except OSError:
            pass  # a read-only folder, or Windows, where an open file cannot go: the lock still ends below
    held.release()


class _Wait:
    """A waiter's state between tries: said once that it waits, since when the holder is stopped, the deadline."""

    def __init__(self, path: Path, deadline: float, waiting: Callable[[], None],
                 timed_out: Callable[[], Exception]) -> None:
        self.path, self.deadline, self.waiting, self.timed_out = path, deadline, waiting, timed_out
        self.said = False
        self.stopped_since: float | None = None

    def another_turn(self, holder: int | None) -> None:
        """Go on waiting, or raise: the holder stayed stopped, or the time is up."""
        if not self.said:
            self.waiting()
            self.said = True
        if holder is not None and _is_stopped(holder):
            self.stopped_since = self.stopped_since if self.stopped_since is not None else time.monotonic()
            if time.monotonic() - self.stopped_since >= STOPPED_GRACE_S:
                raise EnvbuildError(f"{self.path}: the process holding this lock (PID {holder}) is stopped (Ctrl-Z?); "
                                    f"resume it (`kill -CONT {holder}`) or end it, then try again") from None
        else:
            self.stopped_since = None
        if time.monotonic() >= self.deadline:
            raise self.timed_out() from None


def _holder_file(path: Path) -> Path:
    return path.with_name(path.name + ".pid")


def _write_holder(path: Path, lock: Any) -> None:
    """The holder's PID, for a waiter's message. On a full disk writing it fails: the lock is let go
    and nothing of it stays."""
    try:
        _holder_file(path).write_text(f"{os.getpid()}\n", encoding="ascii")
    except OSError:
        release_lock(path, lock)
        raise


def _holder_pid(path: Path) -> int | None:
    try:
        text = _holder_file(path).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and len(text) < 10 else None


def _is_stopped(pid: int) -> bool:
    """Whether `pid` is stopped by a signal (state T) or a tracer (t); False where /proc cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] in (["T"], ["t"])

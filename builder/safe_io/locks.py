"""An exclusive lock between envbuild processes (a file lock with a timeout and a word while it waits)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from builder.errors import EnvbuildError

# A holder stopped this long (Ctrl-Z, SIGSTOP) is reported instead of waited for: it would hold the
# lock until someone resumes it, and every waiter would sit out its whole timeout.
STOPPED_GRACE_S = 1.0


@contextmanager
def exclusive_lock(path: Path, timeout: float, waiting: Callable[[], None],
                   timed_out: Callable[[], Exception]) -> Iterator[None]:
    """An exclusive flock on `path` while inside (see acquire_lock)."""
    handle = acquire_lock(path, timeout, waiting, timed_out)
    try:
        yield
    finally:
        release_lock(path, handle)


def acquire_lock(path: Path, timeout: float, waiting: Callable[[], None],
                 timed_out: Callable[[], Exception]) -> int:
    """An exclusive flock on the file that is at `path` now; `waiting` is called once when another
    process holds it, `timed_out()` is raised after `timeout` seconds. Its last holder removes the
    file (release_lock), and one who waited on the removed file tries again on the new one, so no
    lock file stays behind."""
    import fcntl  # POSIX only: imported where the lock is taken, so importing this module works on Windows

    wait = _Wait(path, time.monotonic() + timeout, waiting, timed_out)
    while True:
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder_pid(handle)
            os.close(handle)
            wait.another_turn(holder)
            continue
        except BaseException:
            os.close(handle)
            raise
        try:
            if os.stat(path).st_ino == os.fstat(handle).st_ino:
                _write_holder(path, handle)
                return handle
        except FileNotFoundError:
            pass
        os.close(handle)


class _Wait:
    """A waiter's state between tries: said once that it waits, since when the holder is stopped, the deadline."""

    def __init__(self, path: Path, deadline: float, waiting: Callable[[], None],
                 timed_out: Callable[[], Exception]) -> None:
        self.path, self.deadline, self.waiting, self.timed_out = path, deadline, waiting, timed_out
        self.said = False
        self.stopped_since: float | None = None

    def another_turn(self, holder: int | None) -> None:
        """Sleep before the next try, or raise: the holder stayed stopped, or the time is up."""
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
        if time.monotonic() > self.deadline:
            raise self.timed_out() from None
        time.sleep(0.1)


def _write_holder(path: Path, handle: int) -> None:
    """The holder's PID, for a waiter's message. Writing it is the first write of a run into the folder: on a
    full disk it fails, and the file made for the lock goes again before the error is raised."""
    try:
        os.ftruncate(handle, 0)
        os.pwrite(handle, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        release_lock(path, handle)
        raise


def _holder_pid(handle: int) -> int | None:
    text = os.pread(handle, 32, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() and len(text) < 10 else None


def _is_stopped(pid: int) -> bool:
    """Whether `pid` is stopped by a signal (state T) or a tracer (t); False where /proc cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] in (["T"], ["t"])


def release_lock(path: Path, handle: int) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only folder after all: the file stays, the lock still ends with the close
    os.close(handle)

"""An exclusive lock between envbuild processes (a file lock with a timeout and a word while it waits)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


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

    deadline = time.monotonic() + timeout
    said = False
    while True:
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            if not said:
                waiting()
                said = True
            if time.monotonic() > deadline:
                raise timed_out() from None
            time.sleep(0.1)
            continue
        except BaseException:
            os.close(handle)
            raise
        try:
            if os.stat(path).st_ino == os.fstat(handle).st_ino:
                return handle
        except FileNotFoundError:
            pass
        os.close(handle)


def release_lock(path: Path, handle: int) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only folder after all: the file stays, the lock still ends with the close
    os.close(handle)

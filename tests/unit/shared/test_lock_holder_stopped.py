"""A lock whose holder was stopped (Ctrl-Z) is one line naming the holder's PID, not a wait of the whole timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builder.errors import EnvbuildError
from builder.safe_io.locks import acquire_lock, release_lock

pytestmark = pytest.mark.unit

HOLDER = """
import sys, time
from pathlib import Path
from builder.safe_io.locks import acquire_lock
held = acquire_lock(Path(sys.argv[1]), 5, lambda: None, lambda: RuntimeError("timeout"))  # held while referenced
print("held", flush=True)
time.sleep(120)
"""


def _holder(path: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def test_a_stopped_holder_is_named_by_pid_instead_of_waited_for(tmp_path: Path) -> None:
    path = tmp_path / ".lock"
    child = _holder(path)
    try:
        os.kill(child.pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(EnvbuildError, match=f"PID {child.pid}\\) is stopped"):
            acquire_lock(path, 60, lambda: None, lambda: RuntimeError("waited the whole timeout"))
        assert time.monotonic() - started < 30
    finally:
        os.kill(child.pid, signal.SIGCONT)
        child.kill()
        child.wait()


def test_a_running_holder_is_waited_for_until_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / ".lock"
    child = _holder(path)
    try:
        with pytest.raises(RuntimeError, match="timed out"):
            acquire_lock(path, 1.5, lambda: None, lambda: RuntimeError("timed out"))
    finally:
        child.kill()
        child.wait()
    handle = acquire_lock(path, 5, lambda: None, lambda: RuntimeError("still held"))  # the lock ends with its holder
    release_lock(path, handle)


FULL_DISK_TAKER = """
import resource, signal, sys
from pathlib import Path
from builder.safe_io.locks import acquire_lock
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as ENOSPC on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
try:
    acquire_lock(Path(sys.argv[1]), 5, lambda: None, lambda: RuntimeError("timeout"))
except OSError as exc:
    print("refused", exc.errno, flush=True)
"""


def test_a_lock_that_cannot_write_its_holder_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "guard.lock"
    done = subprocess.run([sys.executable, "-c", FULL_DISK_TAKER, str(path)], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.stdout.startswith("refused"), done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_stopped_holder_is_named_within_a_couple_of_seconds_not_after_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / ".lock"
    child = _holder(path)
    said: list[str] = []
    try:
        os.kill(child.pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(EnvbuildError) as raised:
            acquire_lock(path, 600, lambda: said.append("waiting"), lambda: RuntimeError("waited the whole 600 s"))
        took = time.monotonic() - started
    finally:
        os.kill(child.pid, signal.SIGCONT)
        child.kill()
        child.wait()
    assert took < 3, f"{took:.1f} s before the stopped holder was named"
    assert said == ["waiting"] and str(raised.value).count("\n") == 0
    assert f"PID {child.pid}" in str(raised.value) and f"kill -CONT {child.pid}" in str(raised.value)

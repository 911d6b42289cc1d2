"""Long work as people meet it (builder/cli/live.py): live lines redrawn in place in a real terminal (a pty),
plain lines with no escape in a pipe and under CI=true, colour gone under NO_COLOR."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builder.cli.live import PlainLines
from builder.events import Event

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
# A lock of two targets as the library reports it: a start, a slow step's news, one done, one failed; then
# a download with byte counts.
DRIVER = """
import time
from builder.cli.live import live_progress
from builder.events import Event
with live_progress(transient=False) as progress:
    progress(Event("cu130", "start", "solving linux-64 with conda-lock"))
    progress(Event("cpu", "start", "solving linux-64 with conda-lock"))
    time.sleep(0.3)
    progress(Event("cu130", "update", "still solving (30 s of at most 600 s)"))
    progress(Event("cpu", "done", "locked in 0.4 s"))
    for got in range(0, 5_000_001, 1_000_000):
        progress(Event("download", "update", "12 packages", got, 5_000_000, "bytes"))
        time.sleep(0.05)
    progress(Event("download", "done", "12 packages", 5_000_000, 5_000_000, "bytes"))
    progress(Event("cu130", "failed", "nothing provides pytorch 2.13.0 needed by torchvision"))
"""
ESCAPE = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR", "FORCE_COLOR", "TERM")}
    return {**env, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "COLUMNS": "100", **extra}


def _in_pty(env: dict[str, str]) -> bytes:
    pid, fd = pty.fork()
    if pid == 0:  # the child: the driver, with the pty as its terminal
        os.execve(sys.executable, [sys.executable, "-c", DRIVER], env)
    out, deadline = b"", time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        out += data
    os.waitpid(pid, 0)
    os.close(fd)
    return out


def _in_pipe(env: dict[str, str]) -> bytes:
    return subprocess.run([sys.executable, "-c", DRIVER], env=env, capture_output=True, timeout=60, check=True).stderr


def test_a_terminal_gets_live_lines_redrawn_in_place_with_colour() -> None:
    out = _in_pty(_env())
    text = ESCAPE.sub(b"", out).decode()
    assert b"\x1b[?25l" in out, "the live display hides the cursor while it redraws"
    assert re.search(rb"\x1b\[2K|\x1b\[1A", out), "lines are redrawn in place"
    assert b"\x1b[32m" in out or b"\x1b[38;5;2m" in out or b"\x1b[92m" in out, "done is green"
    assert b"\x1b[1;31m" in out or b"\x1b[31;1m" in out, "failed is bold red"
    assert "✓ locked in 0.4 s" in text and "✗ nothing provides pytorch" in text
    assert "5.0 MB" in text and "MB/s" in text, "a transfer shows its bytes and rate"


def test_no_color_keeps_the_live_lines_without_colour() -> None:
    out = _in_pty(_env(NO_COLOR="1"))
    colours = re.findall(rb"\x1b\[([0-9;]*)m", out)
    assert b"\x1b[?25l" in out
    assert not [c for c in colours if re.search(rb"(^|;)(3[0-7]|9[0-7]|38)(;|$)", c)], colours


@pytest.mark.parametrize("where", ["pipe", "ci"])
def test_a_pipe_and_ci_get_plain_lines_without_any_escape(where: str) -> None:
    out = _in_pipe(_env()) if where == "pipe" else _in_pty(_env(CI="true"))
    assert b"\x1b" not in out
    lines = out.decode().replace("\r\n", "\n").splitlines()
    assert lines == [
        "cu130: solving linux-64 with conda-lock",
        "cpu: solving linux-64 with conda-lock",
        "cu130: still solving (30 s of at most 600 s)",
        "cpu: locked in 0.4 s",
        "download: 12 packages (5.0 MB)",
        "cu130: failed: nothing provides pytorch 2.13.0 needed by torchvision",
    ]


def test_plain_lines_leave_out_byte_counts_and_repeated_news(capsys: pytest.CaptureFixture[str]) -> None:
    shown = PlainLines()
    shown(Event("download", "start", "3 packages"))
    for got in (10, 20, 30):
        shown(Event("download", "update", "3 packages", got, 30, "bytes"))
    shown(Event("cu130", "update", "still solving"))
    shown(Event("cu130", "update", "still solving"))
    assert capsys.readouterr().err.splitlines() == ["download: 3 packages", "cu130: still solving"]


def test_the_suite_and_the_installer_write_the_line_envbuild_reads() -> None:
    from builder.events import LINE_PREFIX
    from builder.image import smoke_run
    from builder.lock import install
    from smoke import cli as suite

    assert suite.EVENT_PREFIX == install._EVENT_PREFIX == LINE_PREFIX
    assert suite.PROGRESS_ENV == smoke_run.PROGRESS_ENV


def test_a_childs_stderr_lines_are_heard_as_they_come() -> None:
    from builder import proc

    heard: list[tuple[float, str]] = []
    started = time.monotonic()
    script = "import sys, time\nfor word in ('one', 'two'):\n    print(word, file=sys.stderr, flush=True); time.sleep(0.5)"
    done = proc.run([sys.executable, "-c", script], timeout=30, what="a child",
                    stderr_line=lambda line: heard.append((time.monotonic() - started, line)))
    assert [line for _, line in heard] == ["one", "two"] and done.stderr == "one\ntwo\n"
    assert heard[0][0] < heard[1][0] - 0.3, "the first line was heard before the child went on"

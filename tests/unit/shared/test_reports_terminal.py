"""Tables as a person meets them: COLUMNS honoured in a pipe, no word cut inside, verdicts coloured on a
terminal only (NO_COLOR respected)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from builder.reports import cell_style, column_widths
from tests.paths import REPO

pytestmark = pytest.mark.unit

FLEET = ["doctor", "envs/pytorch.yaml", "--fleet", "tests/fixtures/hosts"]


def _envbuild(args: list[str], **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR", "CI")}
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False, env={**clean, "PYTHONPATH": str(REPO), **env}).stdout


@pytest.mark.parametrize("columns", [100, 250])
def test_a_pipe_takes_its_width_from_columns(columns: int) -> None:
    lines = _envbuild(["targets", "envs/pytorch.yaml"], COLUMNS=str(columns)).splitlines()
    assert max(len(line) for line in lines) == min(columns, max(len(line) for line in lines))
    assert max(len(line) for line in lines) > 160 or columns == 100


def test_the_fleet_grid_at_100_columns_cuts_no_verdict_inside_a_word() -> None:
    shown = _envbuild(FLEET, COLUMNS="100")
    assert max(len(line) for line in shown.splitlines()) <= 100
    grid = shown.split("what does not run")[0]
    assert "(minor-version)" in grid and "(minor-ve" not in grid.replace("(minor-version)", "")
    assert "blackwell-rtx5090" in grid


def test_column_widths_give_every_column_its_longest_word_and_share_the_rest() -> None:
    cells = [["blackwell-rtx5090", "needs newer driver", "runs (minor-version)"]]
    widths = column_widths(["host", "cuda13.0", "cuda12.9"], cells, 50)
    assert widths[0] == len("blackwell-rtx5090") and widths[2] is not None and widths[2] >= len("(minor-version)")
    assert sum(w or 0 for w in widths) + 3 * 3 + 1 <= 50
    assert column_widths(["a"], [["short"]], 80) == [None]  # fits as it is: rich's own layout


def test_verdicts_and_severities_have_a_style_and_other_cells_none() -> None:
    assert cell_style("runs") == "green" and cell_style("runs (minor-version)") == "yellow"
    assert cell_style("no kernels") == "red" and cell_style("error") == "bold red"
    assert cell_style("runsafe") == "" and cell_style("cuda12.6") == ""


@pytest.mark.skipif(not shutil.which("script"), reason="needs script(1) for a pty")
@pytest.mark.parametrize(("no_color", "coloured"), [(None, True), ("1", False)])
def test_a_terminal_gets_colour_unless_no_color(no_color: str | None, coloured: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CI")}
    env.update(PYTHONPATH=str(REPO), COLUMNS="120", **({"NO_COLOR": no_color} if no_color else {}))
    command = " ".join([sys.executable, "-m", "builder", *FLEET])
    shown = subprocess.run(["script", "-qc", command, "/dev/null"], cwd=REPO, capture_output=True, text=True,
                           timeout=120, check=False, env=env).stdout
    assert "ada-l4" in shown
    assert ("\x1b[32mruns" in shown) is coloured


def _in_pty(args: list[str], env: dict[str, str]) -> str:
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: envbuild with the pty as its terminal
        os.chdir(REPO)
        os.execve(sys.executable, [sys.executable, "-m", "builder", *args], env)
    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 60)
        try:
            data = os.read(fd, 65536) if ready else b""
        except OSError:  # the child closed the terminal
            data = b""
        if not data:
            break
        out += data
    os.waitpid(pid, 0)
    os.close(fd)
    return out.decode(errors="replace")


@pytest.mark.parametrize(("extra", "coloured"), [({}, True), ({"NO_COLOR": "1"}, False), ({"CI": "true"}, False)])
def test_a_findings_severity_is_coloured_on_a_terminal_only(extra: dict[str, str], coloured: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CI", "FORCE_COLOR")}
    env.update(PYTHONPATH=str(REPO), TERM="xterm-256color", **extra)
    shown = _in_pty(["lint", "envs/pytorch.yaml"], env)
    assert "lint.images.unpinned" in shown
    assert ("\x1b[36minfo\x1b[0m: lint.images.unpinned" in shown) is coloured
    assert ("\x1b[" in shown) is coloured
    piped = _envbuild(["lint", "envs/pytorch.yaml"])
    assert "envs/pytorch.yaml: info: lint.images.unpinned" in piped and "\x1b" not in piped

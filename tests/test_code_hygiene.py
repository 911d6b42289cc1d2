"""The code base itself passes its gates: ruff with the rule set in pyproject.toml (pyflakes, pycodestyle,
import order, bugbear, blind except, too many arguments, ...) everywhere, and mypy over the product
(builder/ and smoke/), so a stale import, a typo in a rarely taken branch or a None where a value is
needed fails CI, not a user."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "--no-cache", "builder", "smoke", "tests", "bench")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_no_pyflakes_errors() -> None:
    # The floor that must hold whatever the configured rule set says.
    done = _run("ruff", "check", "--no-cache", "--isolated", "--select", "F,E9", "builder", "smoke", "tests", "bench")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy_finds_nothing() -> None:
    # Configured in pyproject.toml ([tool.mypy]: files, missing stubs); mypy is in the test extras.
    done = _run("mypy")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]

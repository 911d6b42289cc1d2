"""The code base itself: no undefined names, unused imports or syntax errors anywhere (ruff's F and
E9 rules), so a stale import or a typo in a rarely taken branch fails CI, not a user."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent


def test_no_pyflakes_errors() -> None:
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "F,E9",
                           "builder", "smoke", "tests", "bench"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]

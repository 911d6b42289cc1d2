"""bench/lock runs end to end on a small synthetic channel and ends with its one summary line.

The figures themselves are not asserted (timings on shared cores are not a test); what is checked
is that the benchmark still measures what it says: every target locked by plain conda-lock and by
envbuild, the same lockfile bytes from both, and an unchanged second run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

# Not a unit test (a minute of conda-lock runs); it builds its own channel, so it needs no engine.
pytestmark = pytest.mark.world



def test_the_lock_benchmark_runs_and_ends_with_its_summary_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "bench.lock", "--names", "120", "--runs", "1",
                           "--keep", str(tmp_path / "bench")],
                          cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert re.fullmatch(r"lock: cold=\d+\.\d\d noop=\d+\.\d\d ratio=\d+\.\d\d targets=3", lines[-1]), lines[-1]
    assert "lockfiles byte-identical to plain conda-lock's: yes" in lines
    assert "3 targets (cuda13.0, cuda12.9, cpu) x 2 platforms" in lines[0]
    for target in ("cuda13.0", "cuda12.9", "cpu"):
        assert (tmp_path / "bench" / "locks" / target / "conda-lock.yml").is_file()

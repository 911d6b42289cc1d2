"""nvidia-smi's output is read with a cap and a deadline that a grandchild holding the pipe cannot stretch."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from smoke import driver

pytestmark = pytest.mark.unit


def test_a_flood_of_output_is_read_up_to_the_cap(monkeypatch) -> None:
    monkeypatch.setattr(driver, "MAX_SMI_OUTPUT_BYTES", 1 << 20)
    flood = "import sys\nwhile True: sys.stdout.write('x' * 65536)\n"
    returncode, stdout, _ = driver._run_alone([sys.executable, "-c", flood], 30)
    assert len(stdout) == 1 << 20


def test_a_grandchild_holding_the_pipe_does_not_outlast_the_timeout() -> None:
    holder = ("import subprocess, sys\n"
              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
              "print('GPU 0: forked a child that keeps stdout', flush=True)\n")
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        driver._run_alone([sys.executable, "-c", holder], 2)
    assert time.monotonic() - started < 15

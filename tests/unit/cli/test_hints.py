"""Hints point at something real: the flag that fixes the cause, text that was printed, the other input."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import docker
from builder.engine import unreachable_reason
from builder.lock.targets import failure_line
from tests.paths import REPO

pytestmark = pytest.mark.unit


def test_an_unreachable_pip_index_points_at_pip_index_not_at_channels() -> None:
    line = failure_line("linux-64: uv found no pip packages that fit: Failed to fetch: connection refused\nmore")
    assert line.endswith("(--pip-index URL gives another)")
    assert "--mirror" not in line


def test_an_unreachable_channel_still_points_at_channel_and_mirror() -> None:
    assert "--channel/--mirror" in failure_line("CondaHTTPError\nthe channel did not answer in time")


def test_the_explanation_is_pointed_at_only_when_it_was_printed_above() -> None:
    message = "Could not lock the environment\nsomething odd"
    assert failure_line(message, shown_above=True).endswith("see conda-lock's explanation above")
    assert "above" not in failure_line(message)
    assert "envbuild lock" in failure_line(message)


def test_a_missing_engine_socket_is_said_in_words() -> None:
    try:
        docker.DockerClient(base_url="unix:///nonexistent/envbuild.sock").ping()
    except docker.errors.DockerException as exc:
        assert unreachable_reason(exc) == "no engine socket there"
    else:  # pragma: no cover - nothing listens there
        pytest.fail("a ping to a missing socket answered")


def test_smoke_with_both_image_and_local_says_both_were_given() -> None:
    done = subprocess.run([sys.executable, "-m", "builder", "smoke", "--local", "team/img:cuda12.6"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2
    assert done.stderr.strip() == ("Error: --local tests this Python, IMAGE (team/img:cuda12.6) an image: "
                                   "give one of them")

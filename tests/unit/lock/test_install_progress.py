"""The installer's steps as the host hears them (`python -m builder.lock.install --progress`): each step's start
and end as event lines on stderr, the download's bytes counted, and a failed step told as failed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from builder.events import LINE_PREFIX, Event, read_event_line
from builder.lock.install import export_platform_plan
from tests.paths import REPO
from tests.unit.lock.install_helpers import PLATFORM, sample_channel, sample_lockfile

pytestmark = pytest.mark.unit


def _install(tmp_path: Path, plan: dict) -> tuple[int, list[Event]]:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    done = subprocess.run(
        [sys.executable, "-m", "builder.lock.install", "--plan", str(plan_file), "--prefix", str(tmp_path / "env"),
         "--cache-dir", str(tmp_path / "cache"), "--no-pip", "--progress"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    events = [read_event_line(line) for line in done.stderr.splitlines()]
    return done.returncode, [event for event in events if event is not None]


def test_each_step_starts_and_ends_and_the_download_counts_its_bytes(tmp_path: Path) -> None:
    channel = sample_channel(tmp_path / "channel")
    plan = export_platform_plan(sample_lockfile(tmp_path, channel), PLATFORM)
    code, events = _install(tmp_path, plan)
    assert code == 0, events
    steps = [(event.subject, event.state) for event in events if event.state != "update"]
    assert steps == [("download", "start"), ("download", "done"), ("link", "start"), ("link", "done")]
    size = sum(path.stat().st_size for path in channel[1].values())
    download = next(event for event in events if event.subject == "download" and event.state == "done")
    assert (download.completed, download.unit) == (size, "bytes")
    assert download.text.startswith(f"{len(plan['conda'])} conda packages: done in ")


def test_a_failed_download_is_told_as_failed_with_its_reason(tmp_path: Path) -> None:
    channel = sample_channel(tmp_path / "channel")
    plan = export_platform_plan(sample_lockfile(tmp_path, channel), PLATFORM)
    plan["conda"][0]["url"] = plan["conda"][0]["url"].replace(".conda", "-gone.conda").replace(".tar.bz2", "-gone.tar.bz2")
    code, events = _install(tmp_path, plan)
    assert code == 1
    assert events[-1].subject == "download" and events[-1].state == "failed"
    assert "cannot download" in events[-1].text


@pytest.mark.parametrize("line", [
    "envbuild-event not json", LINE_PREFIX + '{"subject": "x", "state": "exploded"}', LINE_PREFIX + "[1, 2]",
    LINE_PREFIX + '{"state": "done"}', "download: 3 packages",
])
def test_a_line_that_is_no_event_is_not_one(line: str) -> None:
    assert read_event_line(line) is None


def test_an_event_line_reads_back_with_its_numbers() -> None:
    line = LINE_PREFIX + json.dumps({"subject": "download", "state": "update", "text": "3 packages",
                                     "completed": 1000, "unit": "bytes", "total": "many"})
    assert read_event_line(line) == Event("download", "update", "3 packages", 1000, None, "bytes")

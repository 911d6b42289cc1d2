"""`envbuild smoke --local` hears each check as it runs: the suite, told by ENVBUILD_PROGRESS, says each check's
start and end on stderr while its table goes on as before, and the report is the same."""

from __future__ import annotations

import pytest

from builder.events import Event
from builder.image.smoke_run import run_local

pytestmark = [pytest.mark.unit, pytest.mark.torch]


def test_each_check_is_heard_starting_and_ending_in_the_order_it_runs() -> None:
    heard: list[Event] = []
    run = run_local(only="env", timeout=300, progress=heard.append)
    checks = [check["name"] for check in run.checks]
    started = [event.subject for event in heard if event.state == "start" and event.subject != "collect_env"]
    ended = [event.subject for event in heard if event.state in ("done", "failed") and event.subject != "collect_env"]
    assert started == ended == checks
    first = next(event for event in heard if event.subject == checks[1] and event.state == "start")
    assert first.text == f"running (1 of {len(checks) - 1})"
    statuses = {event.subject: event.text.split(" in ", 1)[0] for event in heard if event.state in ("done", "failed")}
    assert all(statuses[check["name"]] == check["status"] for check in run.checks)


"""What long work reports while it runs: one `Event` per step that starts, moves on or ends.

The library hands events to a callback its caller passes (`progress=`); it never draws anything itself.
The CLI shows them (builder/cli/live.py): a live display on a terminal, plain lines in a pipe or CI.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

State = Literal["start", "update", "done", "failed"]
STATES = ("start", "update", "done", "failed")
# How a child process that cannot import envbuild (the in-image installer, the smoke suite) reports its
# events: one line on its stderr, this prefix and a JSON object of Event's fields.
LINE_PREFIX = "envbuild-event "


@dataclass(frozen=True)
class Event:
    """`subject` names the step (a lock target, `download`, a smoke check); `text` says what it does now,
    or why it failed; `completed`/`total` count what it moved (bytes with `unit="bytes"`, else items)."""

    subject: str
    state: State
    text: str = ""
    completed: int | None = None
    total: int | None = None
    unit: str = ""


Progress = Callable[[Event], None]


def ignore(event: Event) -> None:
    """The default `progress`: nobody is shown anything."""


def plain_line(event: Event) -> str:
    """An event as one line of text, as a log keeps it."""
    word = "failed: " if event.state == "failed" else ""
    return f"{event.subject}: {word}{event.text}"


def to_stderr(event: Event) -> None:
    """The `progress` of a caller that passed none: plain lines on stderr, byte counts left out."""
    if event.state == "update" and event.unit == "bytes":
        return
    print(plain_line(event), file=sys.stderr, flush=True)


def read_event_line(line: str) -> Event | None:
    """The event a child's stderr line carries (LINE_PREFIX), None for any other line or a malformed one."""
    if not line.startswith(LINE_PREFIX):
        return None
    try:
        data = json.loads(line[len(LINE_PREFIX):])
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("state") not in STATES or not isinstance(data.get("subject"), str):
        return None
    numbers = {key: data[key] for key in ("completed", "total") if isinstance(data.get(key), int)}
    return Event(data["subject"][:100], data["state"], str(data.get("text", ""))[:300], unit=str(data.get("unit", "")),
                 **numbers)

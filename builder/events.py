"""What long work reports while it runs: one `Event` per step that starts, moves on or ends.

The library hands events to a callback its caller passes (`progress=`); it never draws anything itself.
The CLI shows them (builder/cli/live.py): a live display on a terminal, plain lines in a pipe or CI.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

State = Literal["start", "update", "done", "failed"]


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

"""How long work looks while it runs (the library's `Event`s, builder/events.py): on a terminal a live
line per step (spinner, what it does, bytes and rate for a transfer, time), redrawn in place; in a pipe or
under CI=true plain lines, one per step that starts, ends or says something new, with no escapes."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from builder.events import Event, Progress, plain_line

if TYPE_CHECKING:  # rich takes a tenth of a second to import: a piped run never needs it
    from rich.progress import Progress as RichProgress
    from rich.progress import Task
    from rich.text import Text

STATE_STYLES = {"done": "green", "failed": "bold red"}
STATE_MARKS = {"done": "✓", "failed": "✗"}
NAME_WIDTH, AMOUNT_WIDTH = 28, 26  # a smoke check's name; "1.2 GB/3.4 GB 56.7 MB/s"


def plain_output() -> bool:
    """Plain lines: CI logs and pipes keep every line, and a redrawn display would only garble them."""
    return os.environ.get("CI") == "true" or not sys.stderr.isatty()


class PlainLines:
    """Events as lines on stderr: each step's start and end, and a new text in between (byte counts alone
    are not news: a pipe would get a line per chunk)."""

    def __init__(self) -> None:
        self._said: dict[str, str] = {}

    def __call__(self, event: Event) -> None:
        if event.state == "update" and (event.unit == "bytes" or self._said.get(event.subject) == event.text):
            return
        self._said[event.subject] = event.text
        moved = ""
        if event.unit == "bytes" and event.state == "done" and event.completed is not None:
            from rich.filesize import decimal

            moved = f" ({decimal(event.completed)})"
        sys.stderr.write(f"{plain_line(event)}{moved}\n")
        sys.stderr.flush()


class LiveLines:
    """Events as rich progress lines, one task per subject, redrawn in place."""

    def __init__(self, progress: RichProgress) -> None:
        self.progress = progress
        self._tasks: dict[str, Any] = {}

    def __call__(self, event: Event) -> None:
        task = self._tasks.get(event.subject)
        fields: dict[str, Any] = {"status": event.text, "state": event.state, "unit": event.unit}
        if task is None:
            task = self._tasks[event.subject] = self.progress.add_task(event.subject, total=event.total,
                                                                       counted=event.total is not None, **fields)
        update: dict[str, Any] = {"total": event.total} if event.total is not None else {}
        if event.total is not None:
            fields["counted"] = True
        if event.completed is not None:
            update["completed"] = event.completed
        if event.state in ("done", "failed") and self.progress.tasks[task].total is None:
            moved = event.completed if event.completed is not None else self.progress.tasks[task].completed
            update.update(total=moved or 1, completed=moved or 1)  # finished: the spinner stops
        self.progress.update(task, **update, **fields)
        if event.state in ("done", "failed"):
            self.progress.stop_task(task)


def _amount(task: Task) -> Text:
    """What a step moved: bytes with their rate for a transfer, N/M for counted items, nothing else."""
    from rich.filesize import decimal
    from rich.text import Text

    unit = task.fields.get("unit", "")
    if unit == "bytes":
        total = f"/{decimal(int(task.total))}" if task.total else ""
        speed = f" {decimal(int(task.speed))}/s" if task.speed and task.fields.get("state") != "done" else ""
        return Text(f"{decimal(int(task.completed))}{total}{speed}", style="cyan")
    if task.total and task.fields.get("counted"):
        return Text(f"{int(task.completed)}/{int(task.total)}", style="cyan")
    return Text("")


def _status(task: Task) -> Text:
    from rich.text import Text

    state = task.fields.get("state", "")
    mark = STATE_MARKS.get(state, "")
    return Text(f"{mark} {task.fields.get('status', '')}".strip(), style=STATE_STYLES.get(state, ""))


@contextmanager
def live_progress(transient: bool = True) -> Iterator[Progress]:
    """A `progress` callback for the library, shown as plain lines or as a live display on stderr. A
    transient display goes once the work is done (a table follows that says it all); one that is not
    stays as the record of each step."""
    if plain_output():
        yield PlainLines()
        return
    from rich.console import Console
    from rich.progress import Progress as RichProgress
    from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.table import Column

    class Amount(TextColumn):
        def render(self, task: Task) -> Text:
            return _amount(task)

    class Status(TextColumn):
        def render(self, task: Task) -> Text:
            return _status(task)

    console = Console(stderr=True, highlight=False)
    # The step's name and its numbers stay whole; what it says gives way (cut with an ellipsis) on a narrow terminal.
    room = max(20, console.width - 44)  # beside a short name, an amount and the time
    columns = (SpinnerColumn(finished_text=" "),
               TextColumn("[bold]{task.description}", table_column=Column(no_wrap=True, max_width=NAME_WIDTH)),
               Status("", table_column=Column(no_wrap=True, overflow="ellipsis", max_width=room)),
               Amount("", table_column=Column(no_wrap=True, max_width=AMOUNT_WIDTH)), TimeElapsedColumn())
    # stdout stays the command's (a --json report redirected to a file); stderr lines print above the display
    with RichProgress(*columns, console=console, transient=transient, refresh_per_second=8,
                      redirect_stdout=False) as shown:
        yield LiveLines(shown)

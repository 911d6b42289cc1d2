"""How a running image build looks: a live bar over the Dockerfile's steps on a terminal, plain log
lines in CI and pipes (where a redrawn display would only garble the log)."""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from builder.image.build import STEP

LIVE_LINES = 6


def plain_output() -> bool:
    return os.environ.get("CI") == "true" or not sys.stderr.isatty()


def _plain(line: str) -> None:
    sys.stderr.write(f"  {line}\n")
    sys.stderr.flush()


@contextmanager
def build_progress(title: str) -> Iterator[Callable[[str], None]]:
    """A line consumer for build_image's `echo`, shown as plain lines or as a live display."""
    if plain_output():
        _plain(f"building {title} ...")
        yield _plain
        return
    console = Console(stderr=True)
    bar = Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                   MofNCompleteColumn(), TimeElapsedColumn(), console=console)
    task = bar.add_task(title, total=None)
    recent: deque[str] = deque(maxlen=LIVE_LINES)
    tail = Text(style="dim")
    with Live(Group(bar, tail), console=console, refresh_per_second=8, transient=True):
        def consume(line: str) -> None:
            step = STEP.match(line)
            if step:
                number, total, instruction = step.groups()
                bar.update(task, completed=int(number) - 1, total=int(total),
                           description=f"{title}: {instruction[:60]}")
            recent.append(line[: console.width - 4])
            tail.plain = "\n".join(recent)

        yield consume
        bar.update(task, completed=bar.tasks[0].total or 0)

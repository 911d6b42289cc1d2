"""A pasted log as its program printed it, before any matcher or fact pattern reads it: terminal colour
codes, line-start timestamps, a test runner's or launcher's prefixes (pytest's `E   `, torchrun's
`[rankN]:`, BuildKit's `#N 0.123`), tabs, CR line ends, and lines a terminal wrapped at its width, all
undone. Each line of the result remembers the line of the pasted log it came from, so a finding quotes
the user's own line numbers."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

# CSI sequences (colours, cursor moves), OSC sequences (titles, links) and stray two-byte escapes.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# Timestamps a logger or a CI runner puts first: ISO dates with a time, bracketed or not, syslog's
# `Dec  7 06:18:50`, and a bare clock (`12:00:01.123`); a logger's own level word stays.
_TIMESTAMP = re.compile(
    r"^\[?(?:\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d\d:\d\d:\d\d[.,]\d+)\]?(?:\s+|$)")
# Prefixes a runner or a launcher writes before each line of the program's output, repeatable
# (`[rank0]:[W socket.cpp]` keeps the bracketed origin, only the rank goes).
_PREFIXES = re.compile(
    r"^(?:E(?: {2,}|\s*$)"  # pytest's failure lines
    r"|\[(?:rank|default)(?P<rank>\d+)\]: ?"  # torchrun/elastic's per-rank tee (--tee, log_line_prefix)
    r"|#\d+ \d+\.\d+ )")  # BuildKit's step output (`#8 12.34 ...`); its `#8 [2/5] RUN` header stays
# Widths terminals and CI consoles wrap at; a log wraps at one when several of its lines are exactly that long.
WRAP_WIDTHS = (79, 80, 100, 120, 132, 160, 200)


@dataclass(frozen=True)
class NormalisedLog:
    text: str
    origin: tuple[int, ...]  # origin[i]: the pasted log's line (1-based) that line i+1 of `text` starts on
    ranks: tuple[int | None, ...] = ()  # ranks[i]: the torchrun rank whose prefix line i+1 had, else None


def normalise_log(text: str) -> NormalisedLog:
    """`text` as its program printed it, with each line's origin in the pasted log."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    raw = text.split("\n")
    cleaned_and_ranks = [_clean_line(line) for line in raw]
    cleaned = [line for line, _ in cleaned_and_ranks]
    # A terminal wraps what it shows: the width counts the characters left once the colour codes are gone.
    shown = [_ANSI.sub("", line) if "\x1b" in line else line for line in raw]
    width = _wrap_width(shown)
    lines: list[str] = []
    origin: list[int] = []
    ranks: list[int | None] = []
    for number, (pasted, line) in enumerate(zip(shown, cleaned, strict=True), start=1):
        if lines and width and _continues(shown[number - 2], pasted, width):
            lines[-1] += line
            continue
        lines.append(line)
        origin.append(number)
        ranks.append(cleaned_and_ranks[number - 1][1])
    return NormalisedLog("\n".join(line.rstrip() for line in lines), tuple(origin), tuple(ranks))


def _clean_line(line: str) -> tuple[str, int | None]:
    """The line without colour codes, tabs and prefixes, and the torchrun rank its prefix named."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if "\t" in line:
        line = line.replace("\t", "    ")
    rank = None
    for _ in range(4):  # `2024-.. [rank0]: E   ...`: prefixes nest, a few deep at most
        prefix = _TIMESTAMP.match(line) or _PREFIXES.match(line)
        if prefix is None or not prefix.end():
            break
        if prefix.re is _PREFIXES and prefix.group("rank") is not None and rank is None:
            rank = int(prefix.group("rank"))
        line = line[prefix.end():]
    return line, rank  # trailing blanks go once wrapped lines are joined: a wrap may fall on a blank


def _wrap_width(lines: list[str]) -> int | None:
    """The width a terminal wrapped this log at: a common width that at least two lines fill exactly and
    that no line exceeds (a log with longer lines was not wrapped there)."""
    lengths = Counter(len(line) for line in lines)
    longest = max(lengths, default=0)
    for width in WRAP_WIDTHS:
        if lengths.get(width, 0) >= 2 and longest == width:
            return width
    return None


def _continues(previous: str, line: str, width: int) -> bool:
    """`line` is the rest of `previous`, cut by a terminal: the previous filled the width exactly, and this
    one goes on without the indentation (two blanks or more) a new line of a traceback or a report would
    have, and neither is the row of a table."""
    return (len(previous) == width and bool(line) and not line.startswith(("  ", "\t"))
            # a table (nvidia-smi's is 79 wide) fills the width on purpose, and its rows start and end with borders
            and not (previous[-1] in _TABLE_BORDERS and line[0] in _TABLE_BORDERS))


_TABLE_BORDERS = "|+=-"

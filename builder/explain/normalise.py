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
_TIMESTAMP = (r"\[?(?:\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
              r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d\d:\d\d:\d\d[.,]\d+)\]?(?:[ \t]+|$)")
# Prefixes a runner or a launcher writes before each line of the program's output (`[rank0]:[W socket.cpp]`
# keeps the bracketed origin, only the rank goes).
_RANK = r"\[(?:rank|default)(\d+)\]: ?"  # torchrun/elastic's per-rank tee (--tee, log_line_prefix)
_PREFIX = (r"E(?: {2,}|[^\S\n]*$)"  # pytest's failure lines
           r"|" + _RANK +
           r"|#\d+ \d+\.\d+ ")  # BuildKit's step output (`#8 12.34 ...`); its `#8 [2/5] RUN` header stays
# Prefixes nest (`2024-.. [rank0]: E   ...`): one pass takes them all, in C, over the whole text.
_LINE_PREFIXES = re.compile(rf"^(?:{_TIMESTAMP}|{_PREFIX})+", re.MULTILINE)
_RANK_OF_LINE = re.compile(rf"^(?:{_TIMESTAMP})*{_RANK}")
_TRAILING_BLANKS = re.compile(r"[^\S\n]+$", re.MULTILINE)
# Widths terminals and CI consoles wrap at; a log wraps at one when several of its lines are exactly that long.
WRAP_WIDTHS = (79, 80, 100, 120, 132, 160, 200)


@dataclass(frozen=True)
class NormalisedLog:
    text: str
    origin: tuple[int, ...]  # origin[i]: the pasted log's line that line i+1 of `text` starts on; () when the same
    ranks: tuple[int | None, ...] = ()  # ranks[i]: the torchrun rank whose prefix line i+1 had, else None


def normalise_log(text: str) -> NormalisedLog:
    """`text` as its program printed it, with each line's origin in the pasted log. Whole-text passes (a 20 MB
    training log costs a few of them); only a wrapped log is walked line by line."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    # A terminal wraps what it shows: the width counts the characters left once the colour codes are gone.
    shown = text.split("\n")
    width = _wrap_width(shown)
    ranks: tuple[int | None, ...] = ()
    if "[rank" in text or "[default" in text:
        ranks = tuple(int(found.group(1)) if (found := _RANK_OF_LINE.match(line)) else None for line in shown)
    if "\t" in text:
        text = text.replace("\t", "    ")
    text = _LINE_PREFIXES.sub("", text)
    if width is None:
        return NormalisedLog(_TRAILING_BLANKS.sub("", text), (), ranks)
    return _joined(shown, text.split("\n"), width, ranks)


def _joined(shown: list[str], cleaned: list[str], width: int, ranks: tuple[int | None, ...]) -> NormalisedLog:
    """The lines a terminal cut at `width` joined again (trailing blanks go after the join: a cut may fall on
    a blank), with each line's origin."""
    lines: list[str] = []
    origin: list[int] = []
    kept_ranks: list[int | None] = []
    for number, (pasted, line) in enumerate(zip(shown, cleaned, strict=True), start=1):
        if lines and _continues(shown[number - 2], pasted, width):
            lines[-1] += line
            continue
        lines.append(line)
        origin.append(number)
        if ranks:
            kept_ranks.append(ranks[number - 1])
    return NormalisedLog(_TRAILING_BLANKS.sub("", "\n".join(lines)), tuple(origin), tuple(kept_ranks))


def _wrap_width(lines: list[str]) -> int | None:
    """The width a terminal wrapped this log at: a common width that at least two lines fill exactly and
    that no line exceeds (a log with longer lines was not wrapped there)."""
    lengths = Counter(map(len, lines))
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

"""What explain says when no family matches: the lines it read as the likely error (patterns in
builder/data/explain_unrecognised.yaml), quoted with their line numbers instead of a guessed family."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from builder.yamlio import load_data

QUOTED_CHARACTERS = 200  # of each quoted line


@dataclass(frozen=True)
class ErrorLine:
    line: int
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "text": self.text}


@dataclass(frozen=True)
class _Quoting:
    quote: int
    patterns: tuple[re.Pattern[str], ...]
    frames: int
    frame_patterns: tuple[re.Pattern[str], ...]


@lru_cache(maxsize=1)
def _quoting() -> _Quoting:
    data = load_data("explain_unrecognised.yaml")
    return _Quoting(int(data["quote"]), tuple(re.compile(pattern) for pattern in data["patterns"]),
                    int(data["frames"]["quote"]), tuple(re.compile(pattern) for pattern in data["frames"]["patterns"]))


def likely_error_lines(text: str) -> tuple[ErrorLine, ...]:
    """The last lines of `text` that read as an error (a traceback's last line, `ERROR:`, `error:` ...)."""
    quoting = _quoting()
    found: list[ErrorLine] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        matched = next((hit for pattern in quoting.patterns if stripped and (hit := pattern.search(stripped))), None)
        if matched is not None:
            found.append(ErrorLine(number, _around(stripped, matched.end())))
    # Identical repeats (one per rank, one per retry) say nothing new: keep the last of each.
    unique = {entry.text: entry for entry in found}
    return tuple(sorted(unique.values(), key=lambda entry: entry.line)[-quoting.quote:])


def raised_in_lines(text: str) -> tuple[ErrorLine, ...]:
    """The last frames of the log's last traceback (where the error was raised, and its caller), each with
    the code line CPython prints under it."""
    quoting = _quoting()
    lines = text.splitlines()
    frames: list[ErrorLine] = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not any(pattern.search(stripped) for pattern in quoting.frame_patterns):
            continue
        code = lines[index + 1].strip() if index + 1 < len(lines) and stripped.startswith("File ") else ""
        said = f"{stripped}: {code}" if code and not code.startswith(("File ", "^")) else stripped
        frames.append(ErrorLine(index + 1, said[:QUOTED_CHARACTERS]))
    return tuple(frames[-quoting.frames:]) if quoting.frames else ()


def _around(line: str, matched_end: int) -> str:
    """The line, or for a long one the part that ends just after what matched: a long line (a pip command)
    says what failed at its end."""
    if len(line) <= QUOTED_CHARACTERS:
        return line
    end = min(len(line), max(QUOTED_CHARACTERS, matched_end + QUOTED_CHARACTERS // 5))
    start = end - QUOTED_CHARACTERS
    return ("…" if start else "") + line[start:end] + ("…" if end < len(line) else "")

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


@lru_cache(maxsize=1)
def _patterns() -> tuple[int, tuple[re.Pattern[str], ...]]:
    data = load_data("explain_unrecognised.yaml")
    return int(data["quote"]), tuple(re.compile(pattern) for pattern in data["patterns"])


def likely_error_lines(text: str) -> tuple[ErrorLine, ...]:
    """The last lines of `text` that read as an error (a traceback's last line, `ERROR:`, `error:` ...)."""
    quote, patterns = _patterns()
    found: list[ErrorLine] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and any(pattern.search(stripped) for pattern in patterns):
            found.append(ErrorLine(number, stripped[:QUOTED_CHARACTERS]))
    # Identical repeats (one per rank, one per retry) say nothing new: keep the last of each.
    unique = {entry.text: entry for entry in found}
    return tuple(sorted(unique.values(), key=lambda entry: entry.line)[-quote:])

"""How a file that fails its model is named in one line: the first problem's place and message, and how many
there are. Every format's reader says it the same way."""

from __future__ import annotations

from pydantic import ValidationError


def first_problem(exc: ValidationError, with_count: bool = True) -> str:
    """`package.3.version: Input should be a valid string; 2 problem(s)`."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    counted = f"; {exc.error_count()} problem(s)" if with_count else ""
    return f"{where}: {first['msg']}{counted}"

"""`envbuild summary`: the JSON reports of a CI job (lock check, image, matrix, smoke) as one Markdown page.

GitHub shows what a step appends to `$GITHUB_STEP_SUMMARY` on the run's page; GitLab keeps the file
as an artifact. A report that cannot be read (a job stopped while writing it) becomes a line saying
so, not an error: the summary step runs after failures, when such files are likely.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from builder.errors import EnvbuildError
from builder.reports import human_size, json_reports
from builder.safe_io.reading import input_problem, read_bounded
from builder.safe_io.text import escape_unsafe

Kind = Literal["lock", "image", "matrix", "smoke", "unreadable"]
MAX_REPORT_BYTES = 64 * 1024 * 1024
STATUS_MARKS = {"fresh": "✅", "locked": "✅", "unchanged": "✅", "ok": "✅", "passed": "✅",
                "stale": "❌", "missing": "❌", "failed": "❌", "skipped": "⏭️"}


@dataclass(frozen=True)
class Report:
    path: Path
    kind: Kind
    rows: list[dict[str, Any]]
    problem: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "kind": self.kind, "rows": self.rows, "problem": self.problem}


SUMMARISED: dict[str, Kind] = {"lock": "lock", "image": "image", "matrix": "matrix", "smoke": "smoke"}

# What each section reads of a row, typed: a report may come from a pull request's job, or be cut short, and
# a field of the wrong type is the report's problem, said in its line, never an internal error.
Scalar = str | int | float | bool | None


class _Row(BaseModel):
    model_config = ConfigDict(extra="allow")


class CheckRow(_Row):
    name: Scalar = None
    status: Scalar = None
    reason: Scalar = None


class LockRow(_Row):
    target: str
    status: str
    message: str | None = None
    hint: str | None = None


class ImageRow(_Row):
    target: str
    tags: list[str] = Field(default_factory=list)
    size: int | None = None
    pushed: list[str] | bool | None = None  # the references pushed to
    seconds: Scalar = ""


class MatrixRow(_Row):
    target: str
    stage: str
    result: Scalar
    cuda: Scalar = ""
    lock: Scalar = ""
    image: Scalar = ""
    image_size: int | None = None
    summary: dict[str, Scalar] = Field(default_factory=dict)
    seconds: Scalar = ""
    ok: bool = False
    error: Scalar = None
    checks: list[CheckRow] = Field(default_factory=list)


class SmokeRow(_Row):
    summary: dict[str, Scalar] = Field(default_factory=dict)
    checks: list[CheckRow] = Field(default_factory=list)
    seconds: Scalar = ""


ROWS: dict[str, TypeAdapter[Any]] = {"lock": TypeAdapter(list[LockRow]), "image": TypeAdapter(list[ImageRow]),
                                     "matrix": TypeAdapter(list[MatrixRow]), "smoke": TypeAdapter(list[SmokeRow])}


def typed_rows(kind: Kind, rows: list[Any]) -> list[dict[str, Any]]:
    """The rows as the sections read them (every field of its type, defaults filled), or ValueError saying
    which field is not."""
    try:
        return [row.model_dump() for row in ROWS[kind].validate_python(rows)]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"row {where}: {first['msg']}") from None


def report_rows(document: Any) -> tuple[Kind, Any]:
    """The kind of a --json document and its rows: a versioned one (`{"schema_version", "report", ...}`)
    says both; a bare list or object, from an envbuild before the versioned output, is told by its keys."""
    if isinstance(document, dict) and "schema_version" in document and "report" in document:
        name = document["report"]
        kind = SUMMARISED.get(name, "unreadable") if isinstance(name, str) else "unreadable"
        if kind == "unreadable":
            return kind, document
        items = json_reports()["reports"].get(name, {}).get("items")
        rows = document.get(items) if items else document
        return (kind, rows) if kind == report_kind(rows) else ("unreadable", rows)
    return report_kind(document), document


def report_kind(rows: Any) -> Kind:
    """Which command wrote these rows, told by the keys only that command writes."""
    if isinstance(rows, dict):  # `envbuild smoke --json`: one image's suite report (smoke/report.py)
        return "smoke" if {"report_version", "summary", "checks"} <= set(rows) else "unreadable"
    if not isinstance(rows, list) or not rows or not all(isinstance(row, dict) for row in rows):
        return "unreadable"
    keys = set(rows[0])
    if {"stage", "result", "checks"} <= keys:
        return "matrix"
    if {"image_id", "tags"} <= keys:
        return "image"
    if {"status", "input_hash"} <= keys:
        return "lock"
    return "unreadable"


def read_report(path: Path) -> Report:
    problem = input_problem(path)
    if problem:
        return Report(path, "unreadable", [], problem)
    try:
        rows = json.loads(read_bounded(path, MAX_REPORT_BYTES, "report", EnvbuildError))
    except EnvbuildError as exc:
        return Report(path, "unreadable", [], f"cannot be read: {exc.message.removeprefix(f'{path}: ')}")
    except ValueError:
        return Report(path, "unreadable", [], "is empty or not JSON (the command stopped before writing it)")
    except RecursionError:
        return Report(path, "unreadable", [], "is not an envbuild report (values nested too deeply)")
    kind, rows = report_rows(rows)
    if kind == "unreadable":
        return Report(path, kind, [], "is not an envbuild lock, image, matrix or smoke report")
    try:
        return Report(path, kind, typed_rows(kind, [rows] if kind == "smoke" else rows))  # smoke: one image's row
    except ValueError as exc:
        return Report(path, "unreadable", [], f"is an envbuild {kind} report with a field of the wrong type ({exc})")


# A report may come from a pull request's job: its texts must not become HTML, a link, an image that
# calls a server, so CommonMark's backslash escape is applied to those (backticks stay: envbuild's hints use
# code spans, and nothing inside a code span is HTML or a link).
_MARKDOWN_ACTIVE = re.compile(r"([\\\[\]<>!&|])")


def cell(value: Any) -> str:
    """One Markdown table cell: a `|` or a newline would break the row, HTML and links are shown as text."""
    text = escape_unsafe(" ".join(str("" if value is None else value).split()))
    return _MARKDOWN_ACTIVE.sub(r"\\\1", text)


def code(value: Any) -> str:
    """A Markdown code span of `value` outside a table: nothing in it is HTML, a link or emphasis; its fence is
    longer than any run of backticks inside, so the text cannot close it."""
    text = escape_unsafe(" ".join(str("" if value is None else value).split()))
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return lines


def _mark(status: str) -> str:
    return f"{STATUS_MARKS.get(status, '')} {status}".strip()


def _lock_section(report: Report) -> list[str]:
    return _table(["target", "lock", "what to do"],
                  [[row["target"], _mark(row["status"]),
                    "; ".join(text for text in (row.get("message"), row.get("hint")) if text)] for row in report.rows])


def _image_section(report: Report) -> list[str]:
    return _table(["target", "image", "size", "pushed", "seconds"],
                  [[row["target"], " ".join(row.get("tags") or []), human_size(row.get("size")),
                    "yes" if row.get("pushed") else "no", row.get("seconds", "")] for row in report.rows])


def _matrix_section(report: Report) -> list[str]:
    lines = _table(
        ["target", "CUDA", "lock", "stage reached", "image", "size", "passed", "failed", "skipped", "seconds",
         "result"],
        [[row["target"], row.get("cuda", ""), row.get("lock", ""), row["stage"], row.get("image", ""),
          human_size(row.get("image_size")),
          *(row.get("summary", {}).get(k, "") for k in ("passed", "failed", "skipped")),
          row.get("seconds", ""), ("✅ " if row.get("ok") else "❌ ") + str(row["result"])] for row in report.rows])
    problems = [(row["target"], row["stage"], row["error"]) for row in report.rows if row.get("error")]
    problems += [(row["target"], check["name"], check.get("reason") or "failed")
                 for row in report.rows for check in row.get("checks", []) if check.get("status") == "failed"]
    if problems:
        lines += ["", "**What failed**", ""]
        lines += [f"- {code(target)} {cell(what)}: {cell(reason)}" for target, what, reason in problems]
    return lines


def _smoke_section(report: Report) -> list[str]:
    [row] = report.rows
    counts = row.get("summary") or {}
    failed = [check for check in row.get("checks", []) if isinstance(check, dict) and check.get("status") == "failed"]
    lines = _table(["passed", "failed", "skipped", "seconds", "result"],
                   [[*(counts.get(k, "") for k in ("passed", "failed", "skipped")), row.get("seconds", ""),
                     "❌ failed" if failed else "✅ ok"]])
    if failed:
        lines += ["", "**What failed**", ""]
        lines += [f"- {cell(check.get('name'))}: {cell(check.get('reason') or 'failed')}" for check in failed]
    return lines


SECTIONS = {"lock": ("lock check", _lock_section), "image": ("images", _image_section),
            "matrix": ("smoke tests", _matrix_section), "smoke": ("smoke test", _smoke_section)}


def markdown_summary(reports: Sequence[Report]) -> str:
    lines: list[str] = []
    for report in reports:
        if report.kind == "unreadable":
            lines += [f"- {code(report.path)} {cell(report.problem)}", ""]
            continue
        title, section = SECTIONS[report.kind]
        lines += [f"### envbuild {title}: {code(report.path)}", "", *section(report), ""]
    return "\n".join(lines)

"""Output shared by the commands: tables for people, JSON for machines, JUnit for CI."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from xml.etree import ElementTree

from builder.safe_io.text import terminal_line
from builder.safe_io.writing import check_output, write_output
from builder.yamlio import load_data

if TYPE_CHECKING:  # rich takes a tenth of a second to import; --json output never needs it
    from rich.console import Console


PIPE_WIDTH = 160
WORD_LIMIT = 24  # longer words (paths, digests, URLs) may fold rather than push every other column out


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    # CI logs and pipes get plain text (no escape at all: a CI log shows them raw); a terminal gets colour,
    # bold and dim only under NO_COLOR. A pipe is 160 columns wide unless COLUMNS says otherwise (rich
    # reads COLUMNS itself when given no width).
    ci = os.environ.get("CI") == "true"
    columns = os.environ.get("COLUMNS", "")
    return Console(stderr=stderr, no_color=ci or os.environ.get("NO_COLOR") is not None, highlight=False,
                   soft_wrap=False, color_system=None if ci else "auto",
                   width=None if sys.stdout.isatty() or columns.isdigit() else PIPE_WIDTH)


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    from rich.table import Table
    from rich.text import Text

    # cells quote files and logs: an escape sequence (OSC 52 writes the clipboard) is dropped, not printed
    cells = [[terminal_line("" if cell is None else str(cell)) for cell in row] for row in rows]
    out = console()
    table = Table(title=terminal_line(title), title_justify="left", show_lines=False)
    for column, width in zip(columns, column_widths(columns, cells, out.width), strict=True):
        table.add_column(column, overflow="fold", width=width)
    for row in cells:
        # cells are data (`imageio[ffmpeg]`, `[system-requirements] cuda`), never Rich markup
        table.add_row(*(Text(cell, style=cell_style(cell)) for cell in row))
    out.print(table)


def column_widths(columns: Sequence[str], cells: Sequence[Sequence[str]], total: int) -> list[int | None]:
    """Content widths that fit `total` columns of terminal with no word cut inside: each column gets its
    longest word (up to WORD_LIMIT), then the room left is shared in proportion to what each still
    wants. None for every column (rich's own sharing, which folds) when even the words do not fit or
    everything fits as it is."""
    overhead = 3 * len(columns) + 1  # a space of padding each side of a cell, a border between cells
    texts = [[column, *(row[i] for row in cells if i < len(row))] for i, column in enumerate(columns)]
    longest = [max(len(line) for text in column for line in text.splitlines() or [""]) for column in texts]
    words = [min(max([1, *(len(word) for text in column for word in text.split())]), WORD_LIMIT, most)
             for column, most in zip(texts, longest, strict=True)]
    room = total - overhead
    if sum(longest) <= room or sum(words) > room:
        return [None] * len(columns)
    wanted = [most - least for most, least in zip(longest, words, strict=True)]
    spare = room - sum(words)
    return [least + spare * want // max(sum(wanted), 1) for least, want in zip(words, wanted, strict=True)]


# Verdicts and severities as people scan them on a terminal; rich drops the colour under NO_COLOR,
# CI=true and in a pipe. Matched on the cell's first word(s), which the libraries write.
CELL_STYLES: tuple[tuple[str, str], ...] = (
    ("runs (minor-version)", "yellow"), ("runs", "green"), ("ok", "green"), ("passed", "green"),
    ("fresh", "green"), ("locked", "green"),
    ("needs newer driver", "red"), ("no kernels", "red"), ("does not run", "red"), ("failed", "bold red"),
    ("error", "bold red"), ("missing", "red"), ("stale", "yellow"), ("warning", "yellow"), ("unknown", "yellow"),
    ("info", "cyan"), ("note", "cyan"), ("no GPU", "dim"), ("skipped", "dim"),
)


def cell_style(cell: str) -> str:
    """The style of a table cell that is a verdict or a severity; "" for any other."""
    return next((style for word, style in CELL_STYLES if cell == word or cell.startswith(word + " ")), "")


def print_marked(head: str, mark: str, rest: str, stderr: bool = False) -> None:
    """One line, `head` + `mark` + `rest`, where `mark` is a severity or a verdict (`warning`, `error`,
    `runs`): coloured on a terminal as in tables (cell_style), plain in a pipe, under CI=true and NO_COLOR.
    Never wrapped: a log line stays one line. What it quotes of files and logs loses its escape sequences."""
    from rich.text import Text

    console(stderr).print(Text.assemble(terminal_line(head), (mark, cell_style(mark)), terminal_line(rest)),
                          soft_wrap=True)


@lru_cache(maxsize=1)
def json_reports() -> dict[str, Any]:
    """What each command prints with --json (data/json_reports.yaml): the schema version, each report's
    list key (`items`) or its keys that are always there (`fields`)."""
    return load_data("json_reports.yaml")


def report_names() -> list[str]:
    return list(json_reports()["reports"])


def json_document(report: str, data: Mapping[str, Any] | Sequence[Any]) -> dict[str, Any]:
    """The one shape of every --json output: `{"schema_version": N, "report": NAME, ...}`, with a list
    under the report's `items` key and an object's own keys beside the two."""
    table = json_reports()
    entry = table["reports"][report]  # a KeyError is a report missing from data/json_reports.yaml
    head: dict[str, Any] = {"schema_version": table["schema_version"], "report": report}
    if isinstance(data, Mapping):
        return {**head, **data}
    return {**head, entry["items"]: list(data)}


def print_json(report: str, data: Mapping[str, Any] | Sequence[Any]) -> None:
    """`data` as the versioned JSON document of `report` (json_document), on standard output."""
    sys.stdout.write(json.dumps(json_document(report, data), indent=2, sort_keys=False, default=str) + "\n")


def report_schema(report: str) -> dict[str, Any]:
    """The JSON Schema of one --json report, generated from a pydantic model of its document: the version
    and name fixed, the list or the keys that are always there required, further keys allowed."""
    from pydantic import ConfigDict, create_model

    table = json_reports()
    entry = table["reports"][report]
    fields: dict[str, Any] = {"schema_version": (Literal[table["schema_version"]], ...),  # type: ignore[valid-type]
                              "report": (Literal[report], ...)}  # type: ignore[valid-type]
    if "items" in entry:
        fields[entry["items"]] = (list[dict[str, Any]], ...)
    for name in entry.get("fields", ()):
        fields[name] = (Any, ...)
    model = create_model(f"envbuild-{report}-report", __config__=ConfigDict(extra="allow"),
                         __doc__=entry["summary"], **fields)
    schema = model.model_json_schema()
    schema["required"] = list(fields)  # Any-typed keys too: present, whatever their value
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


JUNIT_MARK = b'<testsuite name="envbuild.'


def is_envbuild_junit(head: bytes) -> bool:
    """Whether a file's first bytes are a JUnit report envbuild wrote (its suites are named envbuild.*)."""
    return JUNIT_MARK in head


def check_junit_path(path: Path, force: bool = False) -> None:
    """Whether --junit may write `path`, asked before the run (write_junit's rules)."""
    check_output(path, force=force, owned=is_envbuild_junit, what="the JUnit report")


def write_junit(path: Path, suite: str, cases: Iterable[dict[str, Any]], force: bool = False) -> None:
    """cases: dicts with name, status (passed|failed|skipped), reason, seconds, classname. An earlier report
    of envbuild's is replaced; any other file only with `force`, never through a symbolic link."""
    cases = list(cases)
    root = ElementTree.Element(
        "testsuite",
        name=suite,
        tests=str(len(cases)),
        failures=str(sum(c["status"] == "failed" for c in cases)),
        skipped=str(sum(c["status"] == "skipped" for c in cases)),
        time=f"{sum(float(c.get('seconds') or 0) for c in cases):.3f}",
    )
    for case in cases:
        element = ElementTree.SubElement(
            root, "testcase", name=case["name"], classname=case.get("classname", suite),
            time=f"{float(case.get('seconds') or 0):.3f}",
        )
        if case["status"] == "failed":
            ElementTree.SubElement(element, "failure", message=case.get("reason") or "failed")
        elif case["status"] == "skipped":
            ElementTree.SubElement(element, "skipped", message=case.get("reason") or "skipped")
    # Whole or not at all (a full disk must not leave a 0-byte report that CI reads as "no tests"), and
    # only into a regular file or a new path: never renamed over /dev/stdout, a device or a FIFO.
    document = ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
    write_output(path, document, force=force, owned=is_envbuild_junit, what="the JUnit report",
                 fix="the results above stand; free disk space or give --junit a writable path")


def human_size(size: int | None) -> str:
    """A byte count in SI units (rich's filesize: 1.2 MB); "" when not known."""
    from rich.filesize import decimal

    return "" if size is None else decimal(size)

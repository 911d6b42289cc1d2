"""Output shared by the commands: tables for people, JSON for machines, JUnit for CI."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree

from builder.safe_io.writing import write_file

if TYPE_CHECKING:  # rich takes a tenth of a second to import; --json output never needs it
    from rich.console import Console


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    # CI logs and pipes get plain text; a terminal gets colour.
    plain = os.environ.get("CI") == "true" or os.environ.get("NO_COLOR") is not None
    return Console(stderr=stderr, no_color=plain, highlight=False, soft_wrap=False,
                   width=None if sys.stdout.isatty() else 160)


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left", show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        # cells are data (`imageio[ffmpeg]`, `[system-requirements] cuda`), never Rich markup
        table.add_row(*(Text("" if cell is None else str(cell)) for cell in row))
    console().print(table)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def write_junit(path: Path, suite: str, cases: Iterable[dict[str, Any]]) -> None:
    """cases: dicts with name, status (passed|failed|skipped), reason, seconds, classname."""
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
    write_file(path, document, overwrite=True, what="the JUnit report",
               fix="the results above stand; free disk space or give --junit a writable path")


def human_size(size: int | None) -> str:
    if size is None:
        return ""
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"

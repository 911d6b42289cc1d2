"""explain on a log no family knows: one plain line, exit 1, and the lines it read as the error quoted with
their numbers (builder/explain/unrecognised.py, builder/data/explain_unrecognised.yaml)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from builder.cli.commands import cli
from builder.explain.unrecognised import likely_error_lines

pytestmark = pytest.mark.unit

LINKER = ("building cpu_adam\nc++ -shared cpu_adam.o -lcurand -o cpu_adam.so\n/usr/bin/ld: cannot find -lcurand\n"
          "collect2: error: ld returned 1 exit status\nRuntimeError: Error building extension 'cpu_adam'\n"
          "RuntimeError: Error building extension 'cpu_adam'\n")


def test_the_last_error_lines_are_quoted_once_each_with_their_numbers() -> None:
    quoted = likely_error_lines(LINKER)
    assert [(entry.line, entry.text) for entry in quoted] == [
        (3, "/usr/bin/ld: cannot find -lcurand"), (4, "collect2: error: ld returned 1 exit status"),
        (6, "RuntimeError: Error building extension 'cpu_adam'")]


def test_a_log_without_an_error_line_quotes_nothing() -> None:
    assert likely_error_lines("epoch 1 loss 0.5\nepoch 2 loss 0.4\n") == ()


def test_the_cli_says_not_recognised_in_one_line_exits_1_and_json_carries_the_quoted_lines(tmp_path) -> None:
    log = tmp_path / "build.log"
    log.write_text(LINKER)
    said = CliRunner().invoke(cli, ["explain", str(log)])
    assert said.exit_code == 1
    lines = said.output.splitlines()
    assert lines[0].startswith("nothing recognised in this log")
    assert "read as the error (no family explain knows): line 3: `/usr/bin/ld: cannot find -lcurand`" in lines
    as_json = CliRunner().invoke(cli, ["explain", "--json", str(log)])
    assert as_json.exit_code == 1
    data = json.loads(as_json.output)
    assert data["recognised"] is False
    assert data["likely_error"][0] == {"line": 3, "text": "/usr/bin/ld: cannot find -lcurand"}

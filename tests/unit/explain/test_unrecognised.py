"""explain on a log no family knows: one plain line, exit 1, and the lines it read as the error quoted with
their numbers (builder/explain/unrecognised.py, builder/data/explain_unrecognised.yaml)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from builder.cli.commands import cli
from builder.explain.unrecognised import likely_error_lines, raised_in_lines

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


def test_a_long_line_is_quoted_up_to_what_matched() -> None:
    command = "python setup.py " + " ".join(f"--option-{i}" for i in range(40)) + " --cuda_ext"
    quoted = likely_error_lines(f'Command "{command}" failed with error code 1 in build/pip-req/\n')
    assert len(quoted) == 1
    assert quoted[0].text.startswith("…") and "--cuda_ext" in quoted[0].text
    assert quoted[0].text.endswith("failed with error code 1 in build/pip-req/")


def test_the_last_two_traceback_frames_are_quoted_with_their_code() -> None:
    log = ('Traceback (most recent call last):\n  File "main.py", line 1, in <module>\n    import pkg\n'
           '  File "pkg/__init__.py", line 3, in <module>\n    from .fast import kernel\n'
           '  File "pkg/fast.py", line 1, in <module>\n    import _fast_ext\n'
           "ModuleNotFoundError: No module named '_fast_ext'\n")
    frames = raised_in_lines(log)
    assert [(entry.line, entry.text) for entry in frames] == [
        (4, 'File "pkg/__init__.py", line 3, in <module>: from .fast import kernel'),
        (6, 'File "pkg/fast.py", line 1, in <module>: import _fast_ext')]
    said = CliRunner().invoke(cli, ["explain", "--no-host", "-"], input=log)
    assert "raised in (the traceback's last frames): line 6: `File \"pkg/fast.py\", line 1, in <module>: " \
           "import _fast_ext`" in said.output.splitlines()

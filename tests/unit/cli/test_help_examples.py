"""Each command's help ends with two examples, and each one is a command line envbuild's parser takes."""

from __future__ import annotations

import shlex

import click
import pytest
from click.testing import CliRunner

from builder.cli.commands import cli
from builder.yamlio import data_text, load_yaml

pytestmark = pytest.mark.unit

EXAMPLES: dict[str, list[str]] = load_yaml(data_text("cli_examples.yaml"))["examples"]
SELF_DESCRIBED = {"completion", "schema"}  # their docstrings carry their examples


def _parses(line: str) -> None:
    """The `envbuild ...` part of an example line, parsed (not run) by the real command: an unknown
    flag, a missing value or an extra argument fails; only a file that is not here is let pass."""
    words = shlex.split(line.split("|")[-1] if "| envbuild" in line else line)
    words = words[: words.index(">")] if ">" in words else words
    assert words[0] == "envbuild", line
    command = cli.commands[words[1]]
    try:
        command.make_context(words[1], words[2:])
    except click.BadParameter:  # a file the example names is not here: its flags and arity were taken
        pass


def test_every_command_has_two_examples() -> None:
    assert set(EXAMPLES) | SELF_DESCRIBED == set(cli.commands)
    assert all(len(lines) == 2 for lines in EXAMPLES.values())


@pytest.mark.parametrize("line", [line for lines in EXAMPLES.values() for line in lines])
def test_each_example_is_a_command_line_the_cli_takes(line: str) -> None:
    _parses(line)


def test_a_wrong_example_would_be_caught() -> None:
    with pytest.raises(click.NoSuchOption):
        _parses("envbuild lock --cuda 12.6 --no-such-flag")


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_help_ends_with_the_examples(name: str) -> None:
    shown = CliRunner().invoke(cli, [name, "--help"], terminal_width=100).output.rstrip().splitlines()
    assert [line.strip() for line in shown[-2:]] == EXAMPLES[name]

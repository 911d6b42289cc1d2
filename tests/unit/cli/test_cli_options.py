"""The option groups shared by several commands: declared once, handed to each command as one typed value."""

from __future__ import annotations

import inspect

import pytest
from click.testing import CliRunner

from builder.cli.commands import cli
from builder.cli.options import BuildFlags, ContainerFlags, LockFlags
from builder.errors import UsageError
from builder.image.build import parse_build_args
from builder.specs.target import Sources
from tests.paths import REPO

pytestmark = pytest.mark.unit

SPEC = str(REPO / "envs" / "pytorch.yaml")


def _parameters(command: str) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(cli.commands[command].callback).parameters)


@pytest.mark.parametrize(("command", "groups"), [
    ("image", {"build": BuildFlags, "locks": LockFlags, "sources": Sources}),
    ("matrix", {"build": BuildFlags, "locks": LockFlags, "sources": Sources, "smoke_container": ContainerFlags}),
    ("smoke", {"smoke_container": ContainerFlags}),
    ("lock", {"sources": Sources}),
    ("onboard", {"locks": LockFlags, "sources": Sources}),
])
def test_commands_take_their_shared_options_as_one_value_per_group(command: str, groups: dict) -> None:
    parameters = _parameters(command)
    for name in groups:
        assert name in parameters, f"{command}: no {name} parameter"
    for flag in ("channel", "mirror", "pip_index", "gpus", "shm_size", "build_args", "frozen"):
        assert flag not in parameters, f"{command} still takes {flag} on its own"
    assert len(parameters) <= 16


def test_bad_build_arg_is_one_usage_line() -> None:
    for command in ("image", "matrix"):
        outcome = CliRunner().invoke(cli, [command, SPEC, "--cuda", "12.6", "--build-arg", "nokey"])
        assert outcome.exit_code == 2, outcome.output
        assert outcome.output.strip().splitlines() == ["Error: --build-arg 'nokey': write KEY=VALUE"]


def test_bad_mirror_is_one_usage_line_on_every_command_with_sources() -> None:
    runner = CliRunner()
    for args in (["lock", SPEC], ["image", SPEC, "--all"], ["onboard", SPEC]):
        outcome = runner.invoke(cli, [*args, "--mirror", "conda-forge"])
        assert outcome.exit_code == 2, (args, outcome.output)
        assert outcome.output.strip().splitlines()[-1].startswith("Error: --mirror 'conda-forge': write NAME=URL")


def test_sources_parse_and_build_args() -> None:
    sources = Sources.parse(("http://a",), ("conda-forge=http://m",), "http://p/{tag}")
    assert sources == Sources(("http://a",), (("conda-forge", "http://m"),), "http://p/{tag}")
    assert sources.apply(("conda-forge",)) == ("http://a",)
    assert Sources.parse((), ("conda-forge=http://m",)).apply(("conda-forge", "x")) == ("http://m", "x")
    assert parse_build_args(["A=1", "B=x=y", "C="]) == {"A": "1", "B": "x=y", "C": ""}
    with pytest.raises(UsageError):
        parse_build_args(["=1"])


def test_container_flags_are_checked_only_when_a_container_is_asked_for() -> None:
    flags = ContainerFlags(shm_size="lots")
    with pytest.raises(UsageError, match="--shm-size 'lots'"):
        flags.container()
    assert ContainerFlags(ulimits=("stack=67108864",)).container().ulimits == (("stack", 67108864, 67108864),)


def test_cuda_is_parsed_where_it_enters() -> None:
    runner = CliRunner()
    for args in (["render", SPEC], ["lock", SPEC], ["image", SPEC], ["matrix", SPEC], ["onboard", SPEC]):
        outcome = runner.invoke(cli, [*args, "--cuda", "12.06"])
        assert outcome.exit_code == 2, (args, outcome.output)
        assert outcome.output.strip().splitlines() == [
            "Error: --cuda: '12.06' names no target: write a CUDA version like 12.6, or cpu"]
    outcome = runner.invoke(cli, ["render", SPEC, "--cuda", "99.9"])
    assert outcome.exit_code == 2 and "no target 99.9 in the spec (targets: 13.0, 12.9, 12.6, 11.8, cpu)" in outcome.output


@pytest.mark.parametrize(("given", "conda", "oci"), [("linux-64", "linux-64", "linux/amd64"),
                                                     ("linux/amd64", "linux-64", "linux/amd64"),
                                                     ("linux/arm64", "linux-aarch64", "linux/arm64"),
                                                     ("linux-aarch64", "linux-aarch64", "linux/arm64")])
def test_platform_takes_either_spelling_and_each_command_gets_its_own(given: str, conda: str, oci: str) -> None:
    from builder.specs.compat import conda_platform, oci_platform

    assert conda_platform(given) == conda
    assert oci_platform(given) == oci


def test_lock_solver_and_platform_have_help() -> None:
    for command in ("image", "matrix", "onboard", "lock", "render"):
        shown = CliRunner().invoke(cli, [command, "--help"], terminal_width=250).output
        for line in shown.splitlines():
            if line.strip().startswith(("--locks", "--solver", "--platform")):
                assert len(line.split(None, 2)) == 3, f"{command}: {line.strip()} has no help"

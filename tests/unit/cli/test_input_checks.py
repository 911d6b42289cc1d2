"""Inputs checked before any work starts: duplicate keys in a spec, registries in Docker's reference
grammar, Kubernetes names, label text, the wheel index URL, flags that contradict each other, and
junk in ENVBUILD_* variables. Each is one line naming what is wrong and what to give instead."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from builder import envvars
from builder.errors import UsageError
from builder.specs.model import load_spec, read_yaml_file
from builder.specs.reference import check_dns_label, check_label_text, check_registry, registry_problem
from builder.specs.target import Sources
from tests.paths import REPO

pytestmark = pytest.mark.unit


# --- duplicate keys ------------------------------------------------------------------------------------

def test_a_key_given_twice_is_named_with_its_lines(tmp_path: Path) -> None:
    spec = tmp_path / "team.yaml"
    spec.write_text("name: team\npython: '3.11'\ntorch: '2.13.0'\npython: '3.12'\ntargets: [{cuda: cpu}]\n")
    with pytest.raises(UsageError, match=r"team.yaml: line 4: the key 'python' is given twice \(first at line 2\)"):
        load_spec(spec)


def test_a_nested_duplicate_is_found_too(tmp_path: Path) -> None:
    path = tmp_path / "environment.yml"
    path.write_text("name: x\nimages:\n  runtime: {image: a}\n  runtime: {image: b}\n")
    with pytest.raises(UsageError, match="'runtime' is given twice"):
        read_yaml_file(path, "environment.yml")


def test_merge_keys_and_equal_keys_in_different_mappings_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("a: &base {python: '3.11'}\nb:\n  <<: *base\n  python: '3.12'\nc: {python: '3.10'}\n")
    assert read_yaml_file(path, "spec")["b"] == {"python": "3.12"}


# --- registries, names, labels, URLs --------------------------------------------------------------------

@pytest.mark.parametrize("registry", ["127.0.0.1:5000/team", "ghcr.io/org/sub-team", "localhost:5000", "team",
                                      "docker.io/user", "Registry.Example.org/team", "[::1]:5000/x", "reg.io/a__b/c.d"])
def test_registries_the_engine_takes(registry: str) -> None:
    assert registry_problem(registry) is None


@pytest.mark.parametrize(("registry", "words"), [
    ("http://127.0.0.1:5000/team", "URL"),
    ("registry.example.org/Team", "lower case"),
    ("Team", "lower case"),
    ("reg.io/a//b", "not a repository path part"),
    ("reg.io:port/x", "host name"),
    ("reg.io/team;rm", "not a repository path part"),
    ("/team", "empty"),
])
def test_registries_it_refuses_before_a_build(registry: str, words: str) -> None:
    with pytest.raises(UsageError, match=words) as caught:
        check_registry("--push", registry)
    assert caught.value.message.startswith(f"--push {registry!r}: ") and "e.g. ghcr.io/team" in caught.value.message


@pytest.mark.parametrize("name", ["ml-team", "a", "x" * 63, "team1"])
def test_namespaces_kubernetes_takes(name: str) -> None:
    assert check_dns_label("--namespace", name) == name


@pytest.mark.parametrize("name", ["Bad_NS;x", "-x", "x-", "x" * 64, "a.b", ""])
def test_namespaces_kubernetes_refuses(name: str) -> None:
    with pytest.raises(UsageError, match="--namespace"):
        check_dns_label("--namespace", name)


@pytest.mark.parametrize("value", ["abc\nLABEL pwned=1", "a\tb", "a\rb", "x\x00"])
def test_label_text_is_one_line(value: str) -> None:
    with pytest.raises(UsageError, match="control characters"):
        check_label_text("--revision", value)
    assert check_label_text("--revision", "0123abc (tag v1.2)") == "0123abc (tag v1.2)"


@pytest.mark.parametrize("index", ["not a url", "download.pytorch.org/whl", "ftp://x/whl", "https://", "https://x/a b"])
def test_a_pip_index_must_be_a_url(index: str) -> None:
    with pytest.raises(UsageError, match="--pip-index .*give the wheel index's URL"):
        Sources.parse(pip_index=index)


@pytest.mark.parametrize("index", ["https://download.pytorch.org/whl/{tag}", "http://127.0.0.1:8765/simple",
                                   "file:///srv/wheels"])
def test_pip_index_urls_pass(index: str) -> None:
    assert Sources.parse(pip_index=index).pip_index == index


# --- flags that contradict each other (through the command line) ----------------------------------------

@pytest.mark.parametrize(("args", "words"), [
    (["lock", "SPEC", "--check", "--update", "numpy"], "--check solves nothing, so --update"),
    (["lock", "SPEC", "--check", "--force"], "--check solves nothing, so --force"),
    (["image", "SPEC", "--all", "--cuda", "cpu"], "--all builds every target, --cuda names some"),
    (["image", "SPEC", "--cuda", "cpu", "--push", "https://ghcr.io/team"], "--push 'https://ghcr.io/team': a URL"),
    (["image", "SPEC", "--cuda", "cpu", "--revision", "a\nb"], "--revision 'a\\nb': control characters"),
    (["onboard", "SPEC", "--image", "--pull", "GHCR.io/Team"], "--pull 'GHCR.io/Team': 'Team'"),
])
def test_contradictions_and_bad_values_stop_before_any_work(args: list[str], words: str) -> None:
    from builder.cli.commands import cli

    spec = str(REPO / "envs" / "pytorch.yaml")
    result = CliRunner().invoke(cli, [spec if arg == "SPEC" else arg for arg in args])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and words in errors[0], result.output


# --- ENVBUILD_* variables ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["30s", "nan", "inf", "-1", "0", "soon"])
def test_junk_seconds_are_named(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(envvars.CHANNEL_TIMEOUT, value)
    with pytest.raises(UsageError, match=f"ENVBUILD_CHANNEL_TIMEOUT={value!r}: not a number of seconds"):
        envvars.check_environment()


def test_seconds_unset_empty_and_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(envvars.CHANNEL_TIMEOUT, raising=False)
    assert envvars.seconds(envvars.CHANNEL_TIMEOUT, 30.0) == 30.0
    monkeypatch.setenv(envvars.CHANNEL_TIMEOUT, " ")
    assert envvars.seconds(envvars.CHANNEL_TIMEOUT, 30.0) == 30.0
    monkeypatch.setenv(envvars.CHANNEL_TIMEOUT, "2.5")
    assert envvars.seconds(envvars.CHANNEL_TIMEOUT, 30.0) == 2.5


def test_a_folder_of_an_unknown_user_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(envvars.ENVS_DIR, "~no-such-user-here/envs")
    with pytest.raises(UsageError, match="ENVBUILD_ENVS_DIR='~no-such-user-here/envs'"):
        envvars.check_environment()
    monkeypatch.setenv(envvars.ENVS_DIR, "~/envs")
    assert envvars.folder(envvars.ENVS_DIR) == Path("~/envs").expanduser()


def test_the_names_match_where_they_are_read() -> None:
    """The solver's client and the smoke suite read these in processes of their own, without builder.envvars."""
    from builder.lock import solver_protocol
    from smoke import driver

    assert solver_protocol.SOLVE_TIMEOUT_ENV == envvars.SOLVE_TIMEOUT
    assert solver_protocol.CACHE_ENV == envvars.RATTLER_CACHE
    assert driver.NVIDIA_SMI_TIMEOUT_ENV == envvars.NVIDIA_SMI_TIMEOUT


def test_junk_is_one_line_before_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from builder.cli.commands import cli

    monkeypatch.setenv(envvars.NVIDIA_SMI_TIMEOUT, "forever")
    result = CliRunner().invoke(cli, ["targets", str(REPO / "envs" / "pytorch.yaml")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "Error: ENVBUILD_NVIDIA_SMI_TIMEOUT='forever': not a number of seconds above 0; unset it for the default, "
        "or give e.g. ENVBUILD_NVIDIA_SMI_TIMEOUT=30"]

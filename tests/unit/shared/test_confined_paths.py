"""A file's `-r`/`-c` includes and a spec's CA files stay inside the folder of the file that names them
(symbolic links resolved): a pull request's requirements file cannot read /proc/self/environ or
../secrets into a spec or a CI log, unless the user passes --allow-outside."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from builder.cli.commands import cli
from builder.errors import UsageError
from builder.init.read_requirements import read_requirements
from builder.safe_io.confine import OutsideFolder, confined

pytestmark = pytest.mark.unit

SECRET = "secret-token-7f3a"


def _project(tmp_path: Path, include: str) -> Path:
    """A project folder whose requirements.txt includes `include`, and a secret file beside the folder."""
    (tmp_path / "secrets.txt").write_text(f"{SECRET}==1.0\n", encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    (project / "requirements.txt").write_text(f"torch==2.4.1\n{include}\n", encoding="utf-8")
    return project / "requirements.txt"


@pytest.mark.parametrize("include", ["-r ../secrets.txt", "-c ../secrets.txt", "-r {outside}/secrets.txt",
                                     "-r /proc/self/environ", "-r ./sub/../../secrets.txt"])
def test_an_include_outside_the_files_folder_is_refused_in_one_line(tmp_path: Path, include: str) -> None:
    requirements = _project(tmp_path, include.format(outside=tmp_path))
    with pytest.raises(UsageError) as refused:
        read_requirements(requirements)
    message = str(refused.value)
    assert len(message.splitlines()) == 1
    assert "outside" in message and "--allow-outside" in message and SECRET not in message


def test_a_symbolic_link_that_leads_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    requirements = _project(tmp_path, "-r base.txt")
    (requirements.parent / "base.txt").symlink_to(tmp_path / "secrets.txt")
    with pytest.raises(UsageError, match="leads to .*secrets.txt.*outside"):
        read_requirements(requirements)


def test_an_include_inside_the_folder_is_read_in_place(tmp_path: Path) -> None:
    requirements = _project(tmp_path, "-r sub/base.txt")
    (requirements.parent / "sub").mkdir()
    (requirements.parent / "sub" / "base.txt").write_text("einops==0.8.0\n", encoding="utf-8")
    assert "einops" in read_requirements(requirements).pip_names


def test_allow_outside_reads_the_file_it_names(tmp_path: Path) -> None:
    requirements = _project(tmp_path, "-r ../secrets.txt")
    assert SECRET in read_requirements(requirements, allow_outside=True).pip_names


@pytest.mark.parametrize("command", ["init", "lint"])
def test_the_cli_refuses_in_one_line_and_allow_outside_reads_it(tmp_path: Path, command: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    requirements = _project(tmp_path, "-r ../secrets.txt")
    monkeypatch.chdir(requirements.parent)
    args = ["init", "--from", "requirements.txt", "--name", "probe"] if command == "init" else ["lint", "requirements.txt"]
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 2, refused.output
    assert len(refused.output.strip().splitlines()) == 1 and "--allow-outside" in refused.output
    assert not Path("envs").exists()  # nothing half-written
    allowed = CliRunner().invoke(cli, [*args, "--allow-outside"])
    assert allowed.exit_code in (0, 1), allowed.output  # lint exits 1 on an error finding
    assert "--allow-outside" not in allowed.output


def test_confined_names_where_a_path_leads(tmp_path: Path) -> None:
    (tmp_path / "inside").mkdir()
    (tmp_path / "inside" / "link").symlink_to(tmp_path)
    assert confined(tmp_path / "inside", "a.txt") == (tmp_path / "inside" / "a.txt").resolve()
    for name in ("/etc/passwd", "../x", "link/x"):
        with pytest.raises(OutsideFolder):
            confined(tmp_path / "inside", name)
    with pytest.raises(OutsideFolder, match="absolute or ../"):
        confined(tmp_path / "inside", "sub/../a.txt", plain_relative=True)


def test_a_spec_ca_file_through_a_symbolic_link_out_is_refused(tmp_path: Path) -> None:
    from builder.specs.model import load_spec

    (tmp_path / "key.pem").write_text("not a CA\n", encoding="utf-8")
    envs = tmp_path / "envs"
    envs.mkdir()
    (envs / "ca.pem").symlink_to(tmp_path / "key.pem")
    spec = envs / "vision.yaml"
    spec.write_text("name: vision\npython: '3.11'\ntorch: '2.4.1'\ntargets: [{cuda: cpu}]\n"
                    "ca_certificates: [ca.pem]\n", encoding="utf-8")
    with pytest.raises(UsageError, match="under the spec's folder"):
        load_spec(spec)

"""Outputs a user points a command at (doctor --save, --junit, export, init/ci --out, schema --out): never
written through a symbolic link (a dangling one too), never over a file envbuild did not write unless
--force is given and it is a regular file; a refusal is one line and writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from builder.errors import UsageError
from builder.reports import is_envbuild_junit, write_junit
from builder.safe_io.writing import write_output

pytestmark = pytest.mark.unit

SPEC = "name: team\npython: '3.11'\ntorch: '2.13.0'\ntargets: [{cuda: cpu}]\n"


def _mine(head: bytes) -> bool:
    return head.startswith(b"# mine")


def test_a_new_path_is_written(tmp_path: Path) -> None:
    assert write_output(tmp_path / "out.txt", "# mine\n", owned=_mine) == tmp_path / "out.txt"
    assert (tmp_path / "out.txt").read_text() == "# mine\n"


def test_a_file_envbuild_wrote_is_replaced_without_force(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text("# mine, old\n")
    write_output(tmp_path / "out.txt", "# mine, new\n", owned=_mine)
    assert (tmp_path / "out.txt").read_text() == "# mine, new\n"


def test_a_file_envbuild_did_not_write_is_refused_and_kept(tmp_path: Path) -> None:
    (tmp_path / "team.yaml").write_text(SPEC)
    with pytest.raises(UsageError, match="envbuild did not write it.*--force"):
        write_output(tmp_path / "team.yaml", "# mine\n", owned=_mine)
    assert (tmp_path / "team.yaml").read_text() == SPEC
    assert sorted(p.name for p in tmp_path.iterdir()) == ["team.yaml"]


def test_force_replaces_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "team.yaml").write_text(SPEC)
    write_output(tmp_path / "team.yaml", "# mine\n", owned=_mine, force=True)
    assert (tmp_path / "team.yaml").read_text() == "# mine\n"


@pytest.mark.parametrize("force", [False, True])
def test_a_link_is_never_written_through(tmp_path: Path, force: bool) -> None:
    (tmp_path / "team.yaml").write_text(SPEC)
    (tmp_path / "host.json").symlink_to("team.yaml")
    with pytest.raises(UsageError, match="symbolic link"):
        write_output(tmp_path / "host.json", "# mine\n", owned=lambda _: True, force=force)
    assert (tmp_path / "team.yaml").read_text() == SPEC and (tmp_path / "host.json").is_symlink()


@pytest.mark.parametrize("force", [False, True])
def test_a_dangling_link_is_refused_and_nothing_appears_where_it_points(tmp_path: Path, force: bool) -> None:
    outside = tmp_path / "elsewhere" / "planted.toml"
    outside.parent.mkdir()
    (tmp_path / "pixi.toml").symlink_to(outside)
    with pytest.raises(UsageError, match="symbolic link"):
        write_output(tmp_path / "pixi.toml", "# mine\n", force=force)
    assert not outside.exists()


def test_a_file_is_not_replaced_without_force_when_no_owner_mark_is_known(tmp_path: Path) -> None:
    (tmp_path / "pixi.toml").write_text("# Written by envbuild\n")
    with pytest.raises(UsageError, match="exists; pass --force"):
        write_output(tmp_path / "pixi.toml", "new\n")


def test_a_junit_report_of_envbuilds_is_replaced_and_a_spec_is_not(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    write_junit(report, "envbuild.smoke", [{"name": "a", "status": "passed"}])
    assert is_envbuild_junit(report.read_bytes())
    write_junit(report, "envbuild.smoke", [{"name": "b", "status": "failed"}])
    assert b'name="b"' in report.read_bytes()
    (tmp_path / "team.yaml").write_text(SPEC)
    with pytest.raises(UsageError, match="did not write"):
        write_junit(tmp_path / "team.yaml", "envbuild.smoke", [])
    assert (tmp_path / "team.yaml").read_text() == SPEC


def _envbuild(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CI": "true", "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=env, check=False)


def test_doctor_save_onto_a_spec_is_one_line_and_the_spec_stays(tmp_path: Path) -> None:
    (tmp_path / "team.yaml").write_text(SPEC)
    done = _envbuild(tmp_path, "doctor", "--save", "team.yaml")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().count("\n") == 0 and "did not write" in done.stderr
    assert (tmp_path / "team.yaml").read_text() == SPEC
    again = _envbuild(tmp_path, "doctor", "--save", "host.json")
    assert again.returncode == 0, again.stderr
    assert _envbuild(tmp_path, "doctor", "--save", "host.json").returncode == 0  # its own file: re-recorded


def test_matrix_junit_onto_the_spec_is_refused_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "team.yaml").write_text(SPEC)
    done = _envbuild(tmp_path, "matrix", "team.yaml", "--junit", "team.yaml")
    assert done.returncode == 2 and "did not write" in done.stderr and "--force" in done.stderr
    assert (tmp_path / "team.yaml").read_text() == SPEC


def test_export_with_force_through_a_dangling_link_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "team.yaml").write_text(SPEC)
    (tmp_path / "pixi.toml").symlink_to(tmp_path / "planted.toml")
    done = _envbuild(tmp_path, "export", "pixi", "team.yaml", "--out", "pixi.toml", "--force")
    assert done.returncode == 2 and "symbolic link" in done.stderr
    assert not (tmp_path / "planted.toml").exists()

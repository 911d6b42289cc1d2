"""SPEC's default: the project's one envs/*.yaml, searched for upwards; several or none are said, never guessed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from builder.errors import UsageError
from builder.specs.discovery import default_spec
from tests.paths import REPO

pytestmark = pytest.mark.unit

SHIPPED = REPO / "envs" / "pytorch.yaml"


def _project(root: Path, *names: str) -> Path:
    (root / "envs").mkdir(parents=True)
    for name in names:
        (root / "envs" / name).write_text(SHIPPED.read_text())
    return root


def test_the_only_spec_is_found_from_a_subfolder_and_shown_relative(tmp_path: Path) -> None:
    _project(tmp_path, "team.yaml")
    (tmp_path / "src" / "deep").mkdir(parents=True)
    found = default_spec(tmp_path / "src" / "deep")
    assert found.path == tmp_path / "envs" / "team.yaml"
    assert found.shown == os.path.join("..", "..", "envs", "team.yaml")


def test_several_specs_are_listed_not_guessed(tmp_path: Path) -> None:
    _project(tmp_path, "b.yaml", "a.yml", "notes.txt")
    with pytest.raises(UsageError, match=r"has 2 specs \(envs/a.yml, envs/b.yaml\)"):
        default_spec(tmp_path)


def test_no_spec_says_how_to_write_one(tmp_path: Path) -> None:
    (tmp_path / "envs").mkdir()
    with pytest.raises(UsageError, match="envbuild init"):
        default_spec(tmp_path)


def _envbuild(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120, check=False)


def test_a_command_without_spec_takes_the_only_one_and_says_so_on_stderr(tmp_path: Path) -> None:
    _project(tmp_path, "team.yaml")
    done = _envbuild(tmp_path, "targets", "--json")
    assert done.returncode == 0, done.stderr
    assert "using envs/team.yaml (the project's only spec)" in done.stderr
    assert done.stdout.lstrip().startswith(("[", "{"))  # stdout stays JSON


def test_a_command_without_spec_among_several_exits_2_with_the_list(tmp_path: Path) -> None:
    _project(tmp_path, "a.yaml", "b.yaml")
    done = _envbuild(tmp_path, "targets")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "Error: no SPEC given and the project has 2 specs (envs/a.yaml, envs/b.yaml): give one of them")

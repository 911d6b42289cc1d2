"""Library errors reach the user as one `Error:` line and the error's exit code, never a traceback.

The mapping lives in one place (builder/cli/commands.py's command group); these tests drive real library
failures through the real command, as a subprocess the way a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from builder.errors import EnvbuildError, UsageError
from tests.paths import REPO

pytestmark = pytest.mark.unit

SPEC = REPO / "envs" / "pytorch.yaml"


def _envbuild(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "CI": "true", **(env or {})})


def _spec_with_unknown_cuda(tmp_path: Path) -> Path:
    data = yaml.safe_load(SPEC.read_text())
    data["targets"] = [{"cuda": "9.9"}]
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump(data))
    return spec


def test_usage_error_from_the_library_is_one_line_exit_2(tmp_path: Path) -> None:
    done = _envbuild("targets", str(_spec_with_unknown_cuda(tmp_path)))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    assert "9.9" in lines[0] and "Traceback" not in done.stderr and done.stdout == ""


def test_envbuild_error_from_the_library_is_one_line_exit_1(tmp_path: Path) -> None:
    # No engine answers on a socket that does not exist: the library's EngineUnreachable (exit 1).
    done = _envbuild("images", str(SPEC), env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: no Docker engine answers at"), done.stderr
    assert "Traceback" not in done.stderr


def test_cli_usage_error_raised_in_a_command_is_one_line_exit_2() -> None:
    done = _envbuild("image", str(SPEC))  # neither --cuda nor --all
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "Error: name a target with --cuda X.Y (or --cuda cpu), or build every target with --all"]


def test_errors_carry_message_and_exit_code_without_click() -> None:
    assert (EnvbuildError("x").exit_code, UsageError("y").exit_code) == (1, 2)
    assert str(UsageError("one line")) == "one line" == UsageError("one line").message
    assert isinstance(UsageError("y"), EnvbuildError)

"""gitlab-ci-local (installed by `make setup` from npm) run on a team repository holding envbuild's generated
.gitlab-ci.yml: what the GitLab pipeline tests share."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from builder.specs.model import load_spec
from builder.specs.target import resolve_targets
from builder.teams.ci import CiOptions, write_pipeline
from tests.paths import REPO

TOOL = REPO / ".tools" / "node_modules" / ".bin" / "gitlab-ci-local"
CUDA_KEYS = ["cuda13.0", "cuda12.9", "cuda12.6", "cuda11.8"]


def gitlab_ci_local(repo: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    if not TOOL.exists():
        pytest.skip("gitlab-ci-local is not installed: `make setup` installs it where npm is available")
    # Its own state and home inside the test folder: nothing of the user's is read or written.
    return subprocess.run([str(TOOL), "--home", str(repo / ".gcl-home"), *args], cwd=repo, check=False,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0"})


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                   check=True, capture_output=True, text=True)


def team_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A team repository on its default branch: the shipped spec and the generated pipeline, committed;
    the test runs inside it."""
    (tmp_path / "envs").mkdir()
    shutil.copy(REPO / "envs" / "pytorch.yaml", tmp_path / "envs" / "pytorch.yaml")
    monkeypatch.chdir(tmp_path)
    spec = load_spec(Path("envs/pytorch.yaml"))
    # The job installs this very checkout (a pinned source a runner reaches is the product's default).
    write_pipeline("gitlab", spec, Path("envs/pytorch.yaml"), resolve_targets(spec),
                   options=CiOptions(install_from="envbuild @ git+https://example.org/team/envbuild.git@v0.1.0"))
    (tmp_path / ".gitignore").write_text(".gcl-home/\n.gitlab-ci-local/\n")
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "pipeline")
    git(tmp_path, "remote", "add", "origin", "https://example.org/team/ml.git")
    return tmp_path

"""The lock check job of the generated .gitlab-ci.yml, run for real by gitlab-ci-local's shell executor."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.paths import REPO
from tests.unit.teams.gitlab_local_helpers import CUDA_KEYS, gitlab_ci_local, team_repo


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return team_repo(tmp_path, monkeypatch)


# Not a unit test: the job pip-installs envbuild with its dependencies into a fresh venv (about 2 min).
@pytest.mark.world
def test_lock_check_job_runs_and_says_what_to_commit(repo: Path) -> None:
    if shutil.which("rsync") is None:
        pytest.skip("gitlab-ci-local's shell executor needs rsync (tests/world/engine.sh installs it)")
    done = gitlab_ci_local(repo, "--force-shell-executor", "--variable", f"ENVBUILD_REQUIREMENT=envbuild @ {REPO.as_uri()}",
                           "lock-check", timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    hint = "cuda12.6: no committed lock; run `envbuild lock envs/pytorch.yaml` and commit envs/pytorch/locks/cuda12.6/"
    assert hint in output
    reports = repo / ".gitlab-ci-local" / "artifacts" / "lock-check" / "reports"
    rows = json.loads((reports / "lock-check.json").read_text())["locks"]
    assert {row["target"]: row["status"] for row in rows} == {key: "missing" for key in CUDA_KEYS + ["cpu"]}
    summary = (reports / "summary.md").read_text()
    assert "| cuda12.6 | ❌ missing | no committed lock; run `envbuild lock envs/pytorch.yaml`" in summary

"""The generated .gitlab-ci.yml as GitLab reads it: gitlab-ci-local (installed by `make setup` from npm)
expands it, validates it against GitLab's schema, lists its jobs per pipeline kind, and runs the lock
check job for real with its shell executor."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from builder.spec.model import load_spec
from builder.spec.target import resolve_targets
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


@pytest.fixture
def repo(tmp_path: Path, monkeypatch) -> Path:
    """A team repository on its default branch: the shipped spec and the generated pipeline, committed."""
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


def listed(repo: Path, *args: str) -> dict[str, str]:
    done = gitlab_ci_local(repo, "--list-json", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    # A matrix job is listed as `build: [cuda12.6,12.6,pytorch:...]`: keep the job and its target.
    return {re.sub(r": \[([^,\]]+).*", r":\1", job["name"]): job["when"] for job in json.loads(done.stdout)}


@pytest.mark.unit
def test_gitlab_reads_the_pipeline_jobs_and_stages(repo: Path) -> None:
    jobs = listed(repo)
    assert jobs == {"lock-check": "on_success",
                    **{f"build:{key}": "on_success" for key in CUDA_KEYS + ["cpu"]},
                    **{f"smoke-gpu:{key}": "on_success" for key in CUDA_KEYS},
                    "smoke-cpu:cpu": "on_success"}


@pytest.mark.unit
def test_a_merge_request_pipeline_never_reaches_the_gpu_runners(repo: Path) -> None:
    jobs = listed(repo, "--variable", "CI_PIPELINE_SOURCE=merge_request_event", "--unset-variable", "CI_COMMIT_BRANCH",
                  "--ignore-predefined-vars", "CI_PIPELINE_SOURCE")
    assert {name: when for name, when in jobs.items() if name.startswith("smoke-gpu")} == {
        f"smoke-gpu:{key}": "never" for key in CUDA_KEYS}
    assert all(when == "never" for name, when in jobs.items() if name.startswith("build"))


@pytest.mark.unit
def test_preview_expands_the_shared_install_into_every_job(repo: Path) -> None:
    done = gitlab_ci_local(repo, "--preview")
    assert done.returncode == 0, done.stderr
    expanded = yaml.safe_load(done.stdout)
    for name in ("lock-check", "build", "smoke-gpu", "smoke-cpu"):
        job = expanded[name]
        assert 'pip install --quiet "$ENVBUILD_REQUIREMENT"' in job["before_script"][0], name
        assert "envbuild summary" in job["after_script"][0], name
    assert expanded["smoke-gpu"]["tags"] == ["gpu"] and "services" not in expanded["smoke-gpu"]
    assert expanded["build"]["services"] == [{"name": "docker:27-dind"}]


@pytest.mark.unit
def test_gitlab_ci_local_rejects_a_broken_pipeline(repo: Path) -> None:
    """Negative control: its schema check does fail a pipeline GitLab would refuse."""
    data = yaml.safe_load(Path(".gitlab-ci.yml").read_text())
    data["build"]["artifacts"]["when"] = "sometimes"
    Path(".gitlab-ci.yml").write_text(yaml.safe_dump(data))
    done = gitlab_ci_local(repo, "--list")
    assert done.returncode != 0
    assert "when" in done.stdout + done.stderr


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
    rows = json.loads((reports / "lock-check.json").read_text())
    assert {row["target"]: row["status"] for row in rows} == {key: "missing" for key in CUDA_KEYS + ["cpu"]}
    summary = (reports / "summary.md").read_text()
    assert "| cuda12.6 | ❌ missing | no committed lock; run `envbuild lock envs/pytorch.yaml`" in summary

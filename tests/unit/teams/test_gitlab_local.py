"""The generated .gitlab-ci.yml as GitLab reads it: gitlab-ci-local (installed by `make setup` from npm)
expands it, validates it against GitLab's schema and lists its jobs per pipeline kind. Its shell executor
running the lock check job for real is tests/system/test_gitlab_local_world.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.unit.teams.gitlab_local_helpers import CUDA_KEYS, gitlab_ci_local, team_repo


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return team_repo(tmp_path, monkeypatch)


def listed(repo: Path, *args: str) -> dict[str, str]:
    done = gitlab_ci_local(repo, "--list-json", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    # A matrix job is listed as `build: [cuda12.6,12.6,pytorch:...]`: keep the job and its target.
    return {re.sub(r": \[([^,\]]+).*", r":\1", job["name"]): job["when"] for job in json.loads(done.stdout)}


@pytest.mark.unit
def test_gitlab_reads_the_pipeline_jobs_and_stages(repo: Path) -> None:
    jobs = listed(repo)
    ids = [key.replace(".", "-") for key in CUDA_KEYS]
    assert jobs == {"lock-check": "on_success",
                    **{f"build-{i}": "on_success" for i in ids + ["cpu"]},
                    **{f"smoke-gpu-{i}": "on_success" for i in ids}}


@pytest.mark.unit
def test_a_merge_request_pipeline_never_reaches_the_gpu_runners(repo: Path) -> None:
    jobs = listed(repo, "--variable", "CI_PIPELINE_SOURCE=merge_request_event", "--unset-variable", "CI_COMMIT_BRANCH",
                  "--ignore-predefined-vars", "CI_PIPELINE_SOURCE")
    assert {name: when for name, when in jobs.items() if name.startswith("smoke-gpu")} == {
        f"smoke-gpu-{key.replace('.', '-')}": "never" for key in CUDA_KEYS}
    assert all(when == "never" for name, when in jobs.items() if name.startswith("build"))


@pytest.mark.unit
def test_preview_expands_the_shared_install_into_every_job(repo: Path) -> None:
    done = gitlab_ci_local(repo, "--preview")
    assert done.returncode == 0, done.stderr
    expanded = yaml.safe_load(done.stdout)
    for name in ("lock-check", "build-cuda12-6", "smoke-gpu-cuda12-6", "build-cpu"):
        job = expanded[name]
        assert 'pip install --quiet "$ENVBUILD_REQUIREMENT"' in job["before_script"][0], name
        assert "envbuild summary" in job["after_script"][0], name
    assert expanded["smoke-gpu-cuda12-6"]["tags"] == ["gpu"] and "services" not in expanded["smoke-gpu-cuda12-6"]
    assert expanded["build-cuda12-6"]["services"] == [{"name": "docker:27-dind"}]
    # Each smoke job needs only its own target's build (and takes its dotenv report: the pushed digest).
    assert expanded["smoke-gpu-cuda12-6"]["needs"] == [{"job": "build-cuda12-6", "artifacts": True, "optional": False}]
    assert expanded["build-cuda12-6"]["variables"]["ENVBUILD_TARGET"] == "cuda12.6"
    assert expanded["build-cuda12-6"]["variables"]["DOCKER_HOST"] == "tcp://docker:2375"
    assert expanded["build-cuda12-6"]["timeout"] == "60 minutes"


@pytest.mark.unit
def test_gitlab_ci_local_rejects_a_broken_pipeline(repo: Path) -> None:
    """Negative control: its schema check does fail a pipeline GitLab would refuse."""
    data = yaml.safe_load(Path(".gitlab-ci.yml").read_text())
    data["build-cuda12-6"]["artifacts"]["when"] = "sometimes"
    Path(".gitlab-ci.yml").write_text(yaml.safe_dump(data))
    done = gitlab_ci_local(repo, "--list")
    assert done.returncode != 0
    assert "when" in done.stdout + done.stderr

"""OCI source and revision labels from the spec's git checkout (a real temporary repository)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from builder.image.provenance import DIRTY_LABEL, REVISION_LABEL, SOURCE_LABEL, source_labels, strip_credentials

pytestmark = pytest.mark.unit


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.org",
                           "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "team"
    (repo / "envs").mkdir(parents=True)
    (repo / "envs" / "vision.yaml").write_text("name: vision\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "spec")
    return repo


def test_a_clean_checkout_gives_remote_head_and_clean(checkout: Path) -> None:
    git(checkout, "remote", "add", "origin", "https://builder:s3cret-token@git.example.org/team/vision.git")
    labels = source_labels(checkout / "envs" / "vision.yaml")
    assert labels == {SOURCE_LABEL: "https://git.example.org/team/vision.git",
                      REVISION_LABEL: git(checkout, "rev-parse", "HEAD"), DIRTY_LABEL: "false"}
    assert "s3cret" not in str(labels)


def test_an_edited_tracked_file_marks_it_dirty_an_untracked_one_does_not(checkout: Path) -> None:
    (checkout / "notes.txt").write_text("untracked\n")
    assert source_labels(checkout / "envs" / "vision.yaml")[DIRTY_LABEL] == "false"
    (checkout / "envs" / "vision.yaml").write_text("name: vision\npython: '3.11'\n")
    labels = source_labels(checkout / "envs" / "vision.yaml")
    assert labels[DIRTY_LABEL] == "true" and labels[REVISION_LABEL] == git(checkout, "rev-parse", "HEAD")


def test_no_remote_means_no_source_label(checkout: Path) -> None:
    labels = source_labels(checkout / "envs" / "vision.yaml")
    assert SOURCE_LABEL not in labels and labels[REVISION_LABEL]


def test_the_upstream_remote_wins_over_origin(checkout: Path) -> None:
    git(checkout, "remote", "add", "origin", "https://git.example.org/fork/vision.git")
    git(checkout, "remote", "add", "team", "https://git.example.org/team/vision.git")
    git(checkout, "update-ref", "refs/remotes/team/main", "HEAD")
    git(checkout, "branch", "-q", "--set-upstream-to=team/main")
    assert source_labels(checkout / "envs" / "vision.yaml")[SOURCE_LABEL] == "https://git.example.org/team/vision.git"


def test_command_line_values_override_git(checkout: Path) -> None:
    git(checkout, "remote", "add", "origin", "https://git.example.org/team/vision.git")
    labels = source_labels(checkout / "envs" / "vision.yaml", source="https://ci:tok@mirror.example/vision",
                           revision="v1.2.3")
    assert labels == {SOURCE_LABEL: "https://mirror.example/vision", REVISION_LABEL: "v1.2.3"}


def test_outside_a_checkout_there_are_no_labels(tmp_path: Path) -> None:
    (tmp_path / "vision.yaml").write_text("name: vision\n")
    assert source_labels(tmp_path / "vision.yaml") == {}
    assert source_labels(tmp_path / "vision.yaml", revision="abc") == {REVISION_LABEL: "abc"}


def test_a_checkout_without_commits_has_no_revision(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "vision.yaml").write_text("name: vision\n")
    assert source_labels(tmp_path / "vision.yaml") == {}


@pytest.mark.parametrize(("url", "clean"), [
    ("https://user:pass@git.example.org/team/vision.git", "https://git.example.org/team/vision.git"),
    ("https://oauth2:tok@git.example.org:8443/team/vision.git?private_token=x#frag",
     "https://git.example.org:8443/team/vision.git"),
    ("ssh://git@git.example.org/team/vision.git", "ssh://git.example.org/team/vision.git"),
    ("git@git.example.org:team/vision.git", "git@git.example.org:team/vision.git"),
    ("ghp_token@git.example.org:team/vision.git", "git.example.org:team/vision.git"),
    ("https://git.example.org/team/vision.git", "https://git.example.org/team/vision.git"),
])
def test_credentials_never_reach_a_label(url: str, clean: str) -> None:
    assert strip_credentials(url) == clean

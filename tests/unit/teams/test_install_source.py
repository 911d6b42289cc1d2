"""Where generated CI installs envbuild from: a pinned real source, or a CI variable; never a bare name."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from builder.errors import UsageError
from builder.teams.install_source import (
    checked_install_from,
    git_checkout_source,
    install_source_from,
    network_git_url,
)

pytestmark = pytest.mark.unit
SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize("given, expected", [
    ("envbuild==1.2.0", "envbuild==1.2.0"),
    (f"git+https://example.org/team/envbuild.git@{SHA}", f"git+https://example.org/team/envbuild.git@{SHA}"),
    ("envbuild @ git+ssh://git@example.org/team/envbuild.git@v1.2.0",
     "envbuild @ git+ssh://git@example.org/team/envbuild.git@v1.2.0"),
    ("https://example.org/envbuild-1.2.0-py3-none-any.whl#sha256=" + "ab" * 32,
     "https://example.org/envbuild-1.2.0-py3-none-any.whl#sha256=" + "ab" * 32),
    ("tools/envbuild-1.2.0-py3-none-any.whl", "./tools/envbuild-1.2.0-py3-none-any.whl"),
    ("./vendor/envbuild", "./vendor/envbuild"),
])
def test_pinned_sources_are_taken(given: str, expected: str) -> None:
    assert checked_install_from(given).requirement == expected


@pytest.mark.parametrize("given, reason", [
    ("envbuild", "pin one version"),
    ("envbuild>=0.1", "pin one version"),
    ("envbuild==0.*", "pin one version"),
    ("git+https://example.org/team/envbuild.git", "pin a commit or tag"),
    ("envbuild @ git+https://example.org/team/envbuild.git", "pin a commit or tag"),
    (f"git+file:///srv/envbuild@{SHA}", "a runner cannot reach this URL"),
    ("https://example.org/envbuild-1.2.0-py3-none-any.whl", "add the file's hash"),
    ("file:///srv/envbuild-1.2.0-py3-none-any.whl#sha256=" + "ab" * 32, "a runner cannot reach this URL"),
    ("/srv/envbuild-1.2.0-py3-none-any.whl", "must be inside the repository"),
    ("../elsewhere/envbuild.whl", "must be inside the repository"),
    ("envbuild @ git+https://example.org/${{ github.token }}@v1", "cannot contain $"),
    ("envbuild==1.0\nrm -rf /", "give a pinned source"),
    ("", "give a pinned source"),
])
def test_unpinned_or_unreachable_sources_are_refused(given: str, reason: str) -> None:
    with pytest.raises(UsageError, match="^--install-from.*" + reason.replace("$", r"\$")):
        checked_install_from(given)


def test_pip_recorded_vcs_install_is_pinned_to_its_commit() -> None:
    source = install_source_from({"url": "https://example.org/team/envbuild.git",
                                  "vcs_info": {"vcs": "git", "commit_id": SHA, "requested_revision": "main"}})
    assert source.requirement == f"envbuild @ git+https://example.org/team/envbuild.git@{SHA}"


def test_archive_install_keeps_its_hash_and_a_local_one_is_unset() -> None:
    digest = "cd" * 32
    remote = install_source_from({"url": "https://example.org/envbuild-1.0-py3-none-any.whl",
                                  "archive_info": {"hashes": {"sha256": digest}}})
    assert remote.requirement == f"envbuild @ https://example.org/envbuild-1.0-py3-none-any.whl#sha256={digest}"
    local = install_source_from({"url": "file:///tmp/envbuild-1.0-py3-none-any.whl",
                                 "archive_info": {"hashes": {"sha256": digest}}})
    assert local.requirement == "" and local.origin == "unset"


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    folder = tmp_path / "envbuild"
    folder.mkdir()
    git(folder, "init", "-q")
    (folder / "pyproject.toml").write_text("[project]\nname = 'envbuild'\n")
    git(folder, "add", ".")
    git(folder, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "start")
    return folder


def test_editable_git_checkout_installs_its_origin_at_head(checkout: Path) -> None:
    git(checkout, "remote", "add", "origin", "git@example.org:team/envbuild.git")
    head = git(checkout, "rev-parse", "HEAD")
    source = install_source_from({"url": checkout.as_uri(), "dir_info": {"editable": True}})
    assert source.requirement == f"envbuild @ git+ssh://git@example.org/team/envbuild.git@{head}"
    assert source.origin == "git checkout" and "push this commit first" in source.note
    (checkout / "pyproject.toml").write_text("changed\n")
    assert "uncommitted changes" in git_checkout_source(checkout).note


def test_checkout_without_a_reachable_remote_leaves_it_to_the_ci_variable(checkout: Path, tmp_path: Path) -> None:
    assert git_checkout_source(checkout).requirement == ""
    git(checkout, "remote", "add", "origin", str(tmp_path / "mirror.git"))
    source = git_checkout_source(checkout)
    assert source.requirement == "" and "no origin remote a runner can reach" in source.note
    assert git_checkout_source(tmp_path / "not-a-repo").requirement == ""


@pytest.mark.parametrize("remote, url", [
    ("git@example.org:team/envbuild.git", "ssh://git@example.org/team/envbuild.git"),
    ("https://example.org/team/envbuild.git", "https://example.org/team/envbuild.git"),
    ("ssh://git@example.org:2222/team/envbuild.git", "ssh://git@example.org:2222/team/envbuild.git"),
    ("/srv/git/envbuild.git", None),
    ("file:///srv/git/envbuild.git", None),
])
def test_network_git_url(remote: str, url: str | None) -> None:
    assert network_git_url(remote) == url

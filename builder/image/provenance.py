"""Where an image's spec came from: the OCI source and revision labels, read from its git checkout.

`org.opencontainers.image.source` is the checkout's remote URL without credentials,
`org.opencontainers.image.revision` its HEAD commit, and `io.envbuild.source-dirty` says whether
tracked files differed from HEAD when the image was built (git describe --dirty's meaning:
untracked files do not count). `--source` / `--revision` override what git says. A label whose
value is unknown is left out, never written empty.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

SOURCE_LABEL = "org.opencontainers.image.source"
REVISION_LABEL = "org.opencontainers.image.revision"
DIRTY_LABEL = "io.envbuild.source-dirty"
GIT_TIMEOUT = 10.0


@dataclass(frozen=True)
class GitSource:
    url: str | None
    revision: str | None
    dirty: bool


def _git(folder: Path, *args: str) -> str | None:
    """One git answer, or None when git is missing, the folder is no checkout, or git refuses."""
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def strip_credentials(url: str) -> str:
    """A remote URL fit for a public label: no user name or password, query or fragment (tokens
    live there). The scp-like form keeps only the conventional `git@` user."""
    parts = urlsplit(url)
    if parts.scheme and parts.netloc:
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    user, at, rest = url.partition("@")
    if at and ":" in rest and "/" not in user:
        return url if user == "git" else rest
    return url


def _remote_name(folder: Path) -> str | None:
    upstream = _git(folder, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}")
    remotes = (_git(folder, "remote") or "").split()
    if upstream and "/" in upstream and upstream.split("/", 1)[0] in remotes:
        return upstream.split("/", 1)[0]
    if "origin" in remotes:
        return "origin"
    return remotes[0] if remotes else None


def git_source(folder: Path) -> GitSource | None:
    """The checkout `folder` lies in, or None when it lies in none."""
    if _git(folder, "rev-parse", "--is-inside-work-tree") != "true":
        return None
    remote = _remote_name(folder)
    url = _git(folder, "remote", "get-url", remote) if remote else None
    revision = _git(folder, "rev-parse", "--verify", "--quiet", "HEAD")
    status = _git(folder, "status", "--porcelain", "--untracked-files=no")
    return GitSource(strip_credentials(url) if url else None, revision or None, bool(status))


def source_labels(spec_path: Path | None, source: str | None = None, revision: str | None = None) -> dict[str, str]:
    """The provenance labels of an image built from the spec at `spec_path`."""
    found = git_source(spec_path.resolve().parent) if spec_path is not None else None
    labels: dict[str, str] = {}
    url = strip_credentials(source) if source else (found.url if found else None)
    if url:
        labels[SOURCE_LABEL] = url
    if revision:
        labels[REVISION_LABEL] = revision
    elif found and found.revision:
        labels[REVISION_LABEL] = found.revision
        labels[DIRTY_LABEL] = "true" if found.dirty else "false"
    return labels

"""Where a generated CI job pip-installs envbuild from: a pinned, real source, never a bare name.

envbuild is not on the public package index, so `pip install envbuild` on a runner would fail, or
worse, install whatever someone published under that unclaimed name onto a team's GPU runner. The
jobs therefore install exactly one of:

- what the team gives (`envbuild ci --install-from`): a pinned requirement (`envbuild==1.2.0` on
  their own index), a VCS URL pinned to a commit or tag (`git+https://host/org/envbuild@<sha>`), a
  wheel URL carrying its hash (`https://host/envbuild-1.2.0-py3-none-any.whl#sha256=...`), or a
  path inside the repository (`./tools/envbuild-1.2.0-py3-none-any.whl`);
- else where this envbuild was installed from (pip's `direct_url.json`): the VCS URL and commit pip
  recorded, a hashed archive URL, or, for a git checkout (`pip install -e .`), its `origin` remote at
  the checked-out commit;
- else nothing: the pipeline then reads the CI variable ENVBUILD_REQUIREMENT and each job stops
  first thing with one line saying what to set.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

from packaging.requirements import InvalidRequirement, Requirement

from builder.errors import UsageError
from builder.safe_io.text import has_unsafe_characters

DISTRIBUTION = "envbuild"
VCS_PREFIXES = ("git+", "hg+", "svn+", "bzr+")
# URL schemes a runner can reach; a file:// URL or a local remote names a folder on this machine only.
NETWORK_SCHEMES = ("https", "http", "ssh", "git")
SCP_LIKE = re.compile(r"(?P<user>[A-Za-z0-9._-]+)@(?P<host>[A-Za-z0-9.-]+):(?P<path>[^/].*)")
COMMIT = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


@dataclass(frozen=True)
class InstallSource:
    """requirement: what `pip install` gets ("" when unknown); origin: where it came from, for people."""

    requirement: str
    origin: str
    note: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"requirement": self.requirement, "origin": self.origin, "note": self.note}


def checked_install_from(value: str) -> InstallSource:
    """A team's `--install-from`, refused in one line unless it pins one build of envbuild."""
    text = value.strip()
    if not text or has_unsafe_characters(value):
        raise UsageError("--install-from: give a pinned source, e.g. git+https://host/org/envbuild@<commit>")
    if "$" in text:
        # GitHub evaluates ${{ }} and GitLab expands $NAME in variable values: the job would install
        # something other than what the file shows.
        raise UsageError(f"--install-from {value!r}: a source cannot contain $ (CI systems expand it)")
    if text.startswith(VCS_PREFIXES):
        return InstallSource(_pinned_vcs_url(text), "given")
    if "://" in text and not re.match(r"[A-Za-z0-9._-]+\s*@", text):
        return InstallSource(_hashed_archive_url(text), "given")
    if text.startswith(("./", "../")) or text.endswith((".whl", ".tar.gz", ".zip")):
        return InstallSource(_repository_path(text), "given")
    return _pinned_requirement(value, text)


def _pinned_requirement(value: str, text: str) -> InstallSource:
    """`envbuild==X.Y.Z` or `envbuild @ URL`: one version, or a URL pinned like the forms above."""
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        raise UsageError(f"--install-from {value!r}: not a pip requirement, URL or path") from None
    if requirement.url:
        inner = requirement.url
        checked = _pinned_vcs_url(inner) if inner.startswith(VCS_PREFIXES) else _hashed_archive_url(inner)
        return InstallSource(f"{requirement.name} @ {checked}", "given")
    specifiers = list(requirement.specifier)
    if len(specifiers) != 1 or specifiers[0].operator not in ("==", "===") or "*" in specifiers[0].version:
        raise UsageError(f"--install-from {value!r}: pin one version ({requirement.name}==X.Y.Z): an unpinned "
                         "name installs whatever the index serves under it")
    return InstallSource(text, "given")


def _pinned_vcs_url(url: str) -> str:
    # pip reads `@ref` after the path as the revision: without one the job installs a moving branch.
    location = url.split("+", 1)[1].split("#", 1)[0]
    path = urlparse(location).path
    if "@" not in path.rsplit("/", 1)[-1] or not path.rsplit("@", 1)[1]:
        raise UsageError(f"--install-from {url!r}: pin a commit or tag (…/envbuild.git@<commit>); a branch moves")
    if urlparse(location).scheme not in NETWORK_SCHEMES:
        raise UsageError(f"--install-from {url!r}: a runner cannot reach this URL; give the repository's "
                         "https or ssh URL")
    return url


def _hashed_archive_url(url: str) -> str:
    parsed = urlparse(url)
    if parsed.scheme not in ("https", "http"):
        raise UsageError(f"--install-from {url!r}: a runner cannot reach this URL; give an https URL")
    if not re.search(r"(^|&)sha256=[0-9a-f]{64}($|&)", parsed.fragment):
        raise UsageError(f"--install-from {url!r}: add the file's hash (#sha256=<64 hex digits>) so the job "
                         "installs exactly this file")
    return url


def _repository_path(text: str) -> str:
    path = PurePosixPath(text)
    if path.is_absolute() or ".." in path.parts:
        raise UsageError(f"--install-from {text!r}: a path must be inside the repository (./dist/envbuild-….whl)")
    return text if text.startswith("./") else f"./{text}"


def detected_install_source() -> InstallSource:
    """Where this envbuild came from, as pip recorded it, or an unset source with the reason."""
    try:
        distribution = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return InstallSource("", "unset", "envbuild runs from a source folder, not an installed package")
    raw = distribution.read_text("direct_url.json")
    if raw is None:
        # No direct URL: pip took it from a package index, which has this version.
        return InstallSource(f"{DISTRIBUTION}=={distribution.version}", "package index",
                             "the jobs' pip must see the same index (PIP_INDEX_URL)")
    return install_source_from(json.loads(raw))


def install_source_from(direct_url: dict[str, Any]) -> InstallSource:
    """The pinned source a `direct_url.json` (PEP 610) points at, as a runner can install it."""
    url = str(direct_url.get("url", ""))
    vcs_info = direct_url.get("vcs_info")
    if vcs_info and urlparse(url).scheme in NETWORK_SCHEMES:
        return InstallSource(f"{DISTRIBUTION} @ {vcs_info['vcs']}+{url}@{vcs_info['commit_id']}", "vcs install")
    archive = direct_url.get("archive_info")
    if archive is not None and urlparse(url).scheme in ("https", "http"):
        digest = (archive.get("hashes") or {}).get("sha256")
        if digest:
            return InstallSource(f"{DISTRIBUTION} @ {url.split('#', 1)[0]}#sha256={digest}", "archive install")
    if direct_url.get("dir_info") is not None and url.startswith("file://"):
        return git_checkout_source(Path(unquote(urlparse(url).path)))
    return InstallSource("", "unset", f"envbuild was installed from {url or 'an unknown place'}, "
                                      "which a runner cannot reach")


def git_checkout_source(folder: Path) -> InstallSource:
    """A git checkout's `origin` remote at its checked-out commit."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                              check=False, timeout=30)
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        commit, remote = git("rev-parse", "HEAD"), git("remote", "get-url", "origin")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.TimeoutExpired):
        return InstallSource("", "unset", f"{folder}: git cannot be run")
    if not COMMIT.fullmatch(commit):
        return InstallSource("", "unset", "envbuild was installed from a folder that is not a git checkout")
    url = network_git_url(remote)
    if url is None:
        return InstallSource("", "unset", "envbuild's git checkout has no origin remote a runner can reach"
                             + (f" ({remote})" if remote else ""))
    note = "push this commit first: the jobs install it from the remote"
    if dirty:
        note += "; uncommitted changes in envbuild's checkout are not in it"
    return InstallSource(f"{DISTRIBUTION} @ git+{url}@{commit}", "git checkout", note)


def network_git_url(remote: str) -> str | None:
    """`git@host:org/repo.git` -> `ssh://git@host/org/repo.git`; https/ssh URLs as they are; else None."""
    scp = SCP_LIKE.fullmatch(remote)
    if scp and "://" not in remote:
        return f"ssh://{scp['user']}@{scp['host']}/{scp['path']}"
    if urlparse(remote).scheme in NETWORK_SCHEMES and urlparse(remote).netloc:
        return remote
    return None


def install_source(install_from: str | None) -> InstallSource:
    return checked_install_from(install_from) if install_from is not None else detected_install_source()


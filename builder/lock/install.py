"""Verified install of one platform of a conda-lock.yml: every package's hash is checked first.

Every package is downloaded by this module (file:// and http(s)://) and its sha256 and md5 are
compared with the lock BEFORE anything is linked; only then does `rattler.install` link the verified
local files, from a fresh package cache per call (rattler does not check the sha256 of file://
packages and keeps a wrong hash in its cache, so a shared cache could launder a bad file). The pip
entries of the lock are installed after, by the environment's own pip with `--require-hashes`.

This module runs in two places:
- on the host (`install_lock`, `export_platform_plan`), which takes the lock as builder.formats.conda_lock
  reads it (one model, one set of messages);
- inside an image's builder stage, where only a Python >= 3.10 and the py-rattler wheel exist:
  `python -m builder.lock.install --plan plan.json --prefix /opt/env [--staging /out/opt/env]`.
So at module level it imports only the standard library (the image holds this one file, not the
package); rattler is imported where conda packages are linked (an image step that installs only pip
wheels runs without it); YAML, pydantic, conda-lock and builder.errors are imported inside the
host-only functions.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only for annotations: the image has no pydantic, and rattler only where it links
    import rattler

    from builder.formats.conda_lock import CondaLock

PLAN_FORMAT = 1
PLAN_KIND = "envbuild-install-plan"
# Big CUDA packages over a slow mirror: a whole install may take many minutes.
DEFAULT_TIMEOUT_S = 3600.0
_CHUNK = 1 << 20
_REQUEST_TIMEOUT_S = 60.0  # connect, and each read: a silent server is given up on after this
_ATTEMPTS = 4
_RETRY_PAUSE_S = 1.0
_PARALLEL_DOWNLOADS = 4
_TELL_EVERY_S = 0.2  # how often the download's byte count is told (a line each time, in the host's pipe)
_EVENT_PREFIX = "envbuild-event "  # builder/events.py's LINE_PREFIX: --progress lines the host reads
# Above the largest conda package published (CUDA's, about 2 GiB): a URL streaming forever ends here.
_MAX_PACKAGE_BYTES = 8 << 30
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_MD5_RE = re.compile(r"[0-9a-f]{32}")
_PACKAGE_SUFFIXES = (".conda", ".tar.bz2")
# Where tarfile's data filter is told a package would land: never created, so its checks stay by name.
_NOWHERE = "/nonexistent-envbuild-prefix"
_FILTER_REFUSALS = {
    "AbsolutePathError": "names an absolute path",
    "OutsideDestinationError": "lands outside the environment",
    "SpecialFileError": "is a device node or a FIFO",
    "AbsoluteLinkError": "links to an absolute path",
    "LinkOutsideDestinationError": "links outside the environment",
}
# conda-meta fields that name this call's temporary package cache: dropped so that an installed
# prefix (and an image layer made of it) does not depend on where the cache happened to be.
_CACHE_FIELDS = ("extracted_package_dir", "link", "package_tarball_full_path")
_CACHE_TAG = "CACHEDIR.TAG"
# What an image's builder stage holds of envbuild to run this module alone (`python3 -m
# builder.lock.install`), relative to the builder package: the lock package's face, this module, and
# proc.py for its exit. The build context copies these, and its test runs exactly these. Not the
# package's own __init__.py: it holds __version__, and these bytes are in the cache key of every layer
# group, so an envbuild upgrade would rebuild the CUDA layers; the context writes a version-free
# marker in its place (this module never reads __version__).
RUNS_ALONE_WITH = ("proc.py", "lock/__init__.py", "lock/install.py")


class InstallError(Exception):
    """A failure the user can act on, as one line. Host-side entry points re-raise it as
    builder.errors.EnvbuildError; the in-image entry point prints it and exits 1."""


@dataclass(frozen=True)
class CondaArtifact:
    """One conda package of the plan, with the hashes the lock promises."""

    name: str
    version: str
    url: str
    sha256: str | None = None
    md5: str | None = None

    @property
    def file_name(self) -> str:
        return _file_name_of(self.url)


@dataclass(frozen=True)
class PipArtifact:
    """One pip wheel (or sdist) of the plan; pip checks `sha256` with --require-hashes."""

    name: str
    version: str
    url: str
    sha256: str


@dataclass(frozen=True)
class InstallPlan:
    """What to install for one platform: the JSON the image build carries into its builder stage."""

    platform: str
    conda: tuple[CondaArtifact, ...]
    pip: tuple[PipArtifact, ...] = ()

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "kind": PLAN_KIND,
            "format": PLAN_FORMAT,
            "platform": self.platform,
            "conda": [asdict(a) for a in self.conda],
            "pip": [asdict(a) for a in self.pip],
        }

    @classmethod
    def from_json_dict(cls, data: object, source: str) -> InstallPlan:
        """Validate a plan read from JSON; any defect is one InstallError line naming `source`."""
        if not isinstance(data, dict) or data.get("kind") != PLAN_KIND:
            raise InstallError(f"{source}: not an envbuild install plan (no \"kind\": \"{PLAN_KIND}\")")
        if data.get("format") != PLAN_FORMAT:
            raise InstallError(
                f"{source}: install plan format {data.get('format')!r} is not {PLAN_FORMAT}: "
                "export the plan again with this envbuild version"
            )
        platform = data.get("platform")
        if not isinstance(platform, str) or not platform:
            raise InstallError(f"{source}: install plan has no platform")
        conda = tuple(_conda_artifact(e, f"{source}: conda[{i}]") for i, e in enumerate(_list(data, "conda", source)))
        pip = tuple(_pip_artifact(e, f"{source}: pip[{i}]") for i, e in enumerate(_list(data, "pip", source)))
        return cls(platform=platform, conda=conda, pip=pip)


@dataclass(frozen=True)
class InstallResult:
    """What an install did. `root` is where files were written (the staging folder when staging),
    `prefix` the path written into files (where the environment will live)."""

    prefix: Path
    root: Path
    conda_packages: int
    pip_packages: int
    downloaded_bytes: int
    seconds: float

    def to_json_dict(self) -> dict[str, Any]:
        return {**asdict(self), "prefix": str(self.prefix), "root": str(self.root)}


# ---------------------------------------------------------------- reading plans (stdlib only)


def read_plan(path: Path) -> InstallPlan:
    """Read an install plan written by `export_platform_plan` (JSON)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InstallError(f"{path}: install plan not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InstallError(f"{path}: install plan is not readable JSON ({exc})") from None
    return InstallPlan.from_json_dict(data, str(path))


def _is_plan_file(path: Path) -> bool:
    """A JSON file written by `export_platform_plan` (not a conda-lock.yml in JSON form)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False  # read_lock says what is wrong with it
    return isinstance(data, dict) and data.get("kind") == PLAN_KIND


def read_explicit(path: Path) -> InstallPlan:
    """Read a conda explicit lockfile (`@EXPLICIT`, `URL#md5` lines, `# pip name @ URL` lines).

    Explicit files carry only md5 for conda packages; pip lines are left to the caller (conda-lock
    installs them with a separate `run pip install` call), so the plan has no pip entries.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InstallError(f"{path}: cannot read explicit lockfile ({exc.strerror})") from None
    if "@EXPLICIT" not in (line.strip() for line in lines):
        raise InstallError(f"{path}: not an explicit lockfile (no @EXPLICIT line)")
    platform = _explicit_platform(lines) or "noarch"
    artifacts = tuple(
        _explicit_artifact(line.strip(), f"{path}:{n}")
        for n, line in enumerate(lines, start=1)
        if line.strip() and not line.lstrip().startswith(("#", "@"))
    )
    return InstallPlan(platform=platform, conda=artifacts)


# ---------------------------------------------------------------- host side (conda-lock.yml)


def export_platform_plan(lockfile: Path | CondaLock, platform: str, source: str = "") -> dict[str, Any]:
    """The JSON install plan (urls, sha256, md5, pip entries) of one platform of a lockfile.

    Host-only: takes the lock as read once by builder.formats.conda_lock.read_lock (or its path). Raises
    EnvbuildError with one line when the file is missing, corrupted or lacks the platform.
    """
    return _host_errors(lambda: plan_from_lock(lockfile, platform, source).to_json_dict())


def plan_from_lock(lockfile: Path | CondaLock, platform: str, source: str = "") -> InstallPlan:
    """The install plan of `platform` of a lock: a CondaLock, a conda-lock.yml, or a JSON plan file
    written by `export_platform_plan`. `source` names a CondaLock's file in messages."""
    if isinstance(lockfile, (str, Path)):
        path = Path(lockfile)
        if path.suffix == ".json" and _is_plan_file(path):
            plan = read_plan(path)
            if plan.platform != platform:
                raise InstallError(f"{path}: install plan is for {plan.platform}, not {platform}")
            return plan
        from builder.formats.conda_lock import read_lock  # host-only: pydantic and YAML (which reads JSON locks too)

        return _plan_from_conda_lock(read_lock(path), platform, str(path))
    return _plan_from_conda_lock(lockfile, platform, source or "the lock")


def install_lock(
    lockfile: Path,
    platform: str,
    prefix: Path,
    *,
    staging: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    cache_dir: Path | None = None,
    pip: bool = True,
    add: bool = False,
) -> InstallResult:
    """Install `platform` of `lockfile` into `prefix` (or into `staging`, with `prefix` written
    into the files), every package hash-checked before anything is linked. `add`: keep what the
    prefix holds (see `install_plan`).

    `cache_dir` chooses where this call's fresh download folder and package cache are made (e.g.
    on the prefix's file system); they are removed afterwards. `pip=False` skips the pip entries.
    Raises EnvbuildError (one line) on a bad lockfile, a hash mismatch, a failed download or install.
    """
    return _host_errors(
        lambda: install_plan(
            plan_from_lock(lockfile, platform),
            Path(prefix),
            staging=staging,
            timeout=timeout,
            cache_dir=cache_dir,
            pip=pip,
            add=add,
        )
    )


# ---------------------------------------------------------------- installing (stdlib + rattler)


def install_plan(
    plan: InstallPlan,
    prefix: Path,
    *,
    staging: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    cache_dir: Path | None = None,
    pip: bool = True,
    add: bool = False,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> InstallResult:
    """Download and verify every conda package of `plan`, then link them and install its pip
    entries. Raises InstallError; nothing is linked unless every conda package verified. `progress`
    hears each step (download, link, pip, bytecode) start and end, and the bytes downloaded, as dicts
    of builder.events.Event's fields (this module runs where envbuild is not installed).

    `add`: the plan is one more group of an environment already in `prefix` (an image layer): what
    the prefix holds stays, and only the files this call writes are byte-compiled, so the layer
    holds this group's files and no rewritten copy of a lower layer's."""
    started = time.monotonic()
    deadline = started + timeout
    prefix = Path(prefix)
    root = Path(staging) if staging is not None else prefix
    wanted_pip = plan.pip if pip else ()
    _check_pip_entries(wanted_pip)
    if cache_dir is not None:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
    if add and staging is not None:
        raise InstallError("--add installs into the prefix itself: give no --staging")
    work = Path(tempfile.mkdtemp(prefix="envbuild-install-", dir=cache_dir))
    try:
        marker = work / "started"
        marker.touch()
        steps = _Steps(progress)
        with steps.step("download", f"{len(plan.conda)} conda packages", unit="bytes") as moved:
            verified, downloaded = _download_all(plan.conda, work / "downloads", deadline, moved)
        with steps.step("link", f"{len(verified)} packages into the environment (rattler)"):
            _link(plan, verified, root, prefix if staging is not None else None, work / "pkgs", deadline, keep=add)
        if wanted_pip:
            with steps.step("pip", f"{len(wanted_pip)} locked wheels, hashes required"):
                _pip_install(wanted_pip, root, prefix, work, deadline, compile_now=staging is None and not add)
        if staging is not None:
            with steps.step("bytecode", "byte-compiling the environment"):
                _compile_bytecode(root, prefix, deadline)
        elif add:
            with steps.step("bytecode", "byte-compiling the new files"):
                _compile_new_files(root, marker.stat().st_ctime_ns, deadline)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return InstallResult(
        prefix=prefix,
        root=root,
        conda_packages=len(plan.conda),
        pip_packages=len(wanted_pip),
        downloaded_bytes=downloaded,
        seconds=round(time.monotonic() - started, 3),
    )


def _download_all(
    artifacts: tuple[CondaArtifact, ...], folder: Path, deadline: float, moved: Callable[[int], None] | None = None
) -> tuple[list[tuple[CondaArtifact, Path]], int]:
    """Download the packages side by side (a few at a time: CUDA's big ones dominate), each into its own
    folder, and check its hashes; the first failure raises once the downloads under way have stopped."""
    from concurrent.futures import ThreadPoolExecutor

    targets = [folder / f"{index:05d}" / artifact.file_name for index, artifact in enumerate(artifacts)]
    for target in targets:
        target.parent.mkdir(parents=True)
    stop = _Stop()

    def fetch(pair: tuple[CondaArtifact, Path]) -> int:
        artifact, target = pair
        sha256, md5, size = _download(artifact.url, target, deadline, artifact.name, stop, moved)
        _verify(artifact, sha256, md5)
        _check_members(artifact, target)
        return size

    with ThreadPoolExecutor(max_workers=_PARALLEL_DOWNLOADS) as pool:
        futures = [pool.submit(fetch, pair) for pair in zip(artifacts, targets, strict=True)]
        try:
            sizes = [future.result() for future in futures]
        except BaseException:
            stop.set()
            for future in futures:
                future.cancel()
            raise
    return list(zip(artifacts, targets, strict=True)), sum(sizes)


class _Stop:
    """Set once one download failed: the others stop at their next chunk instead of finishing."""

    def __init__(self) -> None:
        import threading

        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def __bool__(self) -> bool:
        return self._event.is_set()


class _Steps:
    """The install's steps told to `progress` (install_plan): each one's start and end (or failure), and for
    the download the bytes so far, at most every _TELL_EVERY_S from however many threads."""

    def __init__(self, progress: Callable[[dict[str, Any]], None] | None) -> None:
        import threading

        self.progress = progress
        self._lock = threading.Lock()
        self._bytes, self._told = 0, 0.0

    def _tell(self, **event: Any) -> None:
        if self.progress is not None:
            self.progress(event)

    @contextmanager
    def step(self, subject: str, text: str, unit: str = "") -> Iterator[Callable[[int], None]]:
        self._bytes, self._told, started = 0, 0.0, time.monotonic()
        counted = {"completed": 0, "unit": unit} if unit else {}
        self._tell(subject=subject, state="start", text=text, **counted)

        def moved(size: int) -> None:
            with self._lock:
                self._bytes += size
                now = time.monotonic()
                if now - self._told < _TELL_EVERY_S:
                    return
                self._told = now
                self._tell(subject=subject, state="update", text=text, completed=self._bytes, unit=unit)
        try:
            yield moved
        except BaseException as exc:
            self._tell(subject=subject, state="failed", text=str(exc) or type(exc).__name__)
            raise
        self._tell(subject=subject, state="done", text=f"{text}: done in {time.monotonic() - started:.1f} s",
                   **({**counted, "completed": self._bytes} if unit else {}))


def _verify(artifact: CondaArtifact, sha256: str, md5: str) -> None:
    for kind, expected, actual in (("sha256", artifact.sha256, sha256), ("md5", artifact.md5, md5)):
        if expected is not None and expected != actual:
            raise InstallError(
                f"{artifact.name} {artifact.version} ({artifact.file_name}): {kind} mismatch, "
                f"lock expects {expected}, downloaded file has {actual}; nothing was installed"
            )


# ---------------------------------------------------------------- a package's members (stdlib only)


def _check_members(artifact: CondaArtifact, path: Path) -> None:
    """A package is data: every file it holds lands inside the prefix. A member with an absolute name,
    one that climbs out with `..` or through a symbolic link, a link that leads out, or a device node
    is refused before anything is linked (a hash only says the file is the one the lock named, and a
    lock can arrive in a pull request). A .conda is a zip of tars: its member names are checked, and
    its tars too where a zstd reader exists (Python 3.14, or the zstandard module on the host)."""
    what = f"{artifact.name} {artifact.version} ({artifact.file_name})"
    try:
        if artifact.file_name.endswith(".tar.bz2"):
            with tarfile.open(path, "r|bz2") as archive:
                _check_tar(archive, what)
        else:
            _check_conda_zip(path, what)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise InstallError(f"{what}: not a readable package archive ({_first_line(str(exc)) or type(exc).__name__})"
                           "; nothing was installed") from None


def _check_conda_zip(path: Path, what: str) -> None:
    open_zstd = _zstd_reader()
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if "/" in info.filename or "\\" in info.filename or info.filename in ("", ".", ".."):
                raise InstallError(_member_refused(what, info.filename, "is not a file name of the .conda's top level"))
            if info.filename.endswith(".tar.zst") and open_zstd is not None:
                with archive.open(info) as raw, open_zstd(raw) as stream:
                    with tarfile.open(fileobj=stream, mode="r|") as inner:
                        _check_tar(inner, f"{what}: {info.filename}")


def _zstd_reader() -> Any:
    """A function from a binary stream to its zstd-decompressed stream, or None where neither Python's
    own zstd (3.14) nor the zstandard module is there (an image's Python: the zip's names are checked)."""
    try:
        from compression import zstd  # type: ignore[import-not-found,unused-ignore]

        return zstd.ZstdFile
    except ImportError:
        pass
    try:
        import zstandard  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    return lambda raw: zstandard.ZstdDecompressor().stream_reader(raw)


def _check_tar(archive: tarfile.TarFile, what: str) -> None:
    """Each member on its own (tarfile's data filter where this Python has it), then every path with
    the archive's own symbolic links followed: a chain of links inside can still lead out."""
    links: dict[str, str] = {}
    members: list[tuple[str, str | None]] = []
    for member in archive:
        problem = _member_problem(member)
        if problem:
            raise InstallError(_member_refused(what, member.name, problem))
        name = member.name
        if member.issym():
            links[posixpath.normpath(name)] = member.linkname
        members.append((name, member.linkname if member.islnk() else None))
    for name, hard_link in members:
        for path in (name, hard_link) if hard_link is not None else (name,):
            if not _stays_inside(path, links):
                raise InstallError(_member_refused(what, name, "leads outside the environment through its links"))


def _member_problem(member: tarfile.TarInfo) -> str | None:
    """Why one member cannot be in a package, else None. tarfile's data filter would extract an
    absolute name below the destination; a package names none, so it is refused here first."""
    if member.name.startswith("/") or member.issym() and member.linkname.startswith("/"):
        return "names an absolute path"
    if member.isdev():
        return "is a device node or a FIFO"
    data_filter = getattr(tarfile, "data_filter", None)  # Python 3.10.12, 3.11.4, 3.12 and later
    if data_filter is not None:
        try:
            data_filter(member, _NOWHERE)
        except tarfile.FilterError as exc:
            kind = type(exc).__name__
            return _FILTER_REFUSALS.get(kind, f"is refused by tarfile's data filter ({kind})")
    return None


def _stays_inside(path: str, links: dict[str, str]) -> bool:
    """Whether `path`, relative to the archive's root, resolves inside it with the archive's symbolic
    links (`links`, by normalised name) followed as the file system would, up to 40 hops."""
    pending = [part for part in reversed(path.split("/"))]
    resolved: list[str] = []
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return False
            resolved.pop()
            continue
        resolved.append(part)
        target = links.get("/".join(resolved))
        if target is not None:
            hops += 1
            if hops > 40 or target.startswith("/"):
                return False
            resolved.pop()
            pending.extend(reversed(target.split("/")))
    return True


def _member_refused(what: str, name: str, problem: str) -> str:
    return (f"{what}: its member {_shown(name)} {problem}; a package's files must stay inside the environment: "
            "the package is not what its channel published, nothing was installed")


class _Transfer:
    """One download's hashes and size, kept across a resumed request; `moved` hears each change of size."""

    def __init__(self, moved: Callable[[int], None] | None = None) -> None:
        self.moved = moved
        self.size = 0
        self.restart()

    def restart(self) -> None:
        if self.moved and self.size:
            self.moved(-self.size)  # from the start again: what came is counted again as it comes
        self.sha256, self.md5, self.size = hashlib.sha256(), hashlib.md5(), 0  # md5 is conda's, not security

    def add(self, chunk: bytes) -> None:
        self.sha256.update(chunk)
        self.md5.update(chunk)
        self.size += len(chunk)
        if self.moved:
            self.moved(len(chunk))

    def result(self) -> tuple[str, str, int]:
        return self.sha256.hexdigest(), self.md5.hexdigest(), self.size


class _Retryable(Exception):
    """A connection that failed or went silent mid-transfer: tried again, resuming where it stopped."""


def _download(url: str, target: Path, deadline: float, what: str, stop: object = False,
              moved: Callable[[int], None] | None = None) -> tuple[str, str, int]:
    """Copy `url` to `target`, hashing on the way; returns (sha256, md5, size). A URL is data: it is
    never expanded from the environment. Every request has a connect and a read timeout, every file a
    size cap; a dropped or silent connection is retried (resuming with a Range request) a few times."""
    _check_url(url, what)
    scheme = urllib.parse.urlsplit(url).scheme
    transfer = _Transfer(moved)
    if scheme == "file":
        with open(target, "wb") as out:
            _copy_local(url, out, transfer, deadline, what, stop)
        return transfer.result()
    if scheme not in ("http", "https"):
        raise InstallError(f"{what}: unsupported URL scheme in {url} (use file://, http:// or https://)")
    with open(target, "wb") as out:
        for attempt in range(_ATTEMPTS):
            try:
                _fetch_http(url, out, transfer, deadline, what, stop)
                return transfer.result()
            except _Retryable as exc:
                if attempt + 1 == _ATTEMPTS or time.monotonic() > deadline:
                    raise InstallError(f"{what}: cannot download {url} ({exc}; tried {_ATTEMPTS} times)") from None
                time.sleep(min(_RETRY_PAUSE_S * (attempt + 1), max(0.0, deadline - time.monotonic())))
    raise AssertionError("unreachable")


def _fetch_http(url: str, out: Any, transfer: _Transfer, deadline: float, what: str, stop: object) -> None:
    """One request for the rest of `url` (a Range request when some of it came already), within the
    connect and read timeout; a failure worth another try raises _Retryable."""
    headers = {"Range": f"bytes={transfer.size}-"} if transfer.size else {}
    request = urllib.request.Request(url, headers=headers)  # the caller checked the scheme
    timeout = max(1.0, min(_REQUEST_TIMEOUT_S, deadline - time.monotonic()))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as src:  # scheme checked
            _receive(src, url, out, transfer, deadline, what, stop)
    except Exception as exc:  # noqa: BLE001 - sorted into retry or refusal right here
        raise _http_failure(exc, url, what, timeout) from None


def _receive(src: Any, url: str, out: Any, transfer: _Transfer, deadline: float, what: str, stop: object) -> None:
    if transfer.size and src.status != 206:  # the server ignored the range: from the start again
        out.seek(0)
        out.truncate()
        transfer.restart()
    length = src.headers.get("Content-Length")
    expected = transfer.size + int(length) if length and length.isdigit() and len(length) < 20 else None
    if expected is not None and expected > _MAX_PACKAGE_BYTES:
        raise InstallError(_too_large(what, url))
    _copy_hashing(src, out, transfer, deadline, what, stop)
    if expected is not None and transfer.size < expected:  # read1 ends quietly at a dropped connection
        raise _Retryable(f"the connection closed after {transfer.size} of {expected} bytes")


def _http_failure(exc: Exception, url: str, what: str, timeout: float) -> Exception:
    """What a failed request means: a server error, a silence or a dropped connection is tried again
    (_Retryable); any other failure is the user's one line (InstallError)."""
    import http.client

    if isinstance(exc, (InstallError, _Retryable)):
        return exc
    if isinstance(exc, urllib.error.HTTPError):
        if exc.code >= 500 or exc.code == 429:
            return _Retryable(f"HTTP {exc.code}")
        return InstallError(f"{what}: cannot download {url} (HTTP {exc.code} {exc.reason})")
    reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc
    if isinstance(exc, TimeoutError) or isinstance(reason, TimeoutError):
        return _Retryable(f"no answer for {timeout:.0f} s")
    if isinstance(exc, (http.client.HTTPException, ConnectionError)):
        return _Retryable(type(exc).__name__)
    if isinstance(exc, OSError):
        return InstallError(f"{what}: cannot download {url} ({reason})")
    raise exc


def _copy_local(url: str, out: Any, transfer: _Transfer, deadline: float, what: str, stop: object) -> None:
    """A file:// package: only a regular file is read (a FIFO would block the open, a device never end)."""
    import stat

    path = urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InstallError(f"{what}: cannot download {url} ({exc.strerror or exc})") from None
    with os.fdopen(handle, "rb") as src:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            raise InstallError(f"{what}: {url} is not a regular file (a FIFO or a device?); a lock names package files")
        _copy_hashing(src, out, transfer, deadline, what, stop)


def _copy_hashing(src: Any, out: Any, transfer: _Transfer, deadline: float, what: str, stop: object) -> None:
    # read1: one read from the socket at a time, so the deadline is checked however slowly bytes trickle in
    read = getattr(src, "read1", src.read)
    while chunk := read(_CHUNK):
        if stop:
            raise InstallError(f"{what}: download stopped (another package failed)")
        if time.monotonic() > deadline:
            raise InstallError(f"{what}: install timed out while downloading; raise the timeout")
        transfer.add(chunk)
        if transfer.size > _MAX_PACKAGE_BYTES:
            raise InstallError(_too_large(what, "the package"))
        out.write(chunk)


def _too_large(what: str, url: str) -> str:
    return (f"{what}: {url} is larger than {_MAX_PACKAGE_BYTES >> 30} GiB, more than any conda package; "
            "the lock names something else: lock again")


def _check_url(url: str, what: str) -> None:
    """A lock's URL is data: `$` placeholders are not filled from the user's environment (a tampered lock
    would send a secret to its own server), and no control or line character may hide in it."""
    if "${" in url or re.search(r"\$[A-Za-z_]", url):
        raise InstallError(f"{what}: the URL {_shown(url)} holds a variable placeholder; envbuild does not expand "
                           "variables from a lock (they would be sent to its server): lock again with the real URL")
    if any(_is_hidden_character(character) for character in url):
        raise InstallError(f"{what}: the URL {_shown(url)} holds control or line characters; lock again")


def _is_hidden_character(character: str) -> bool:
    import unicodedata

    return unicodedata.category(character) in ("Cc", "Cf", "Zl", "Zp") or character == "\x85"


def _shown(text: str) -> str:
    return ascii(text)[1:-1][:200]


def _link(
    plan: InstallPlan,
    verified: list[tuple[CondaArtifact, Path]],
    root: Path,
    written_prefix: Path | None,
    package_cache: Path,
    deadline: float,
    keep: bool = False,
) -> None:
    """Link the verified local files with rattler; conda-meta then names the locked URLs.

    rattler makes the prefix hold exactly the records it is given: with `keep`, the prefix's own
    records are given too (unchanged, so rattler neither downloads nor relinks them)."""
    if not verified:
        return
    import rattler

    records = _run_async(_records_for(verified), deadline, "reading packages")
    if keep:
        records = [*_installed_records(root), *records]
    root.mkdir(parents=True, exist_ok=True)
    had_cache_tag = (root / _CACHE_TAG).exists()
    install = rattler.install(
        records,
        target_prefix=root,
        cache_dir=package_cache,
        platform=rattler.Subdir(plan.platform),
        show_progress=False,
        execute_link_scripts=False,
        alternative_target_prefix=written_prefix,
    )
    _run_async(install, deadline, "linking")
    if not had_cache_tag:
        # rattler marks prefixes as caches (pixi's choice, so backups skip them); an image's
        # environment is not a cache, and backup tools must not skip it.
        (root / _CACHE_TAG).unlink(missing_ok=True)
    for artifact, _ in verified:
        _restore_locked_origin(root, artifact)


def _installed_records(root: Path) -> list[rattler.RepoDataRecord]:
    import rattler

    meta = root / "conda-meta"
    return [rattler.PrefixRecord.from_path(path) for path in sorted(meta.glob("*.json"))] if meta.is_dir() else []


async def _records_for(verified: list[tuple[CondaArtifact, Path]]) -> list[rattler.RepoDataRecord]:
    import rattler

    records = []
    for artifact, path in verified:
        try:
            record = await rattler.RepoDataRecord.from_package_archive(path)
        except Exception as exc:  # noqa: BLE001 - rattler's errors are plain exceptions
            raise InstallError(f"{artifact.name}: {artifact.file_name} is not a conda package ({exc})") from None
        # The hashes were verified against the lock above; the record carries them into conda-meta.
        record.md5 = bytes.fromhex(_md5_of(path)) if artifact.md5 is None else bytes.fromhex(artifact.md5)
        record.channel = _channel_of(artifact.url)
        records.append(record)
    return records


def _md5_of(path: Path) -> str:
    digest = hashlib.md5()  # conda's file hash, not security
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _restore_locked_origin(root: Path, artifact: CondaArtifact) -> None:
    """conda-meta records the local file rattler linked from; put back the lock's URL and drop the
    fields that name this call's temporary cache."""
    stem = _dist_name(artifact.file_name)
    meta = root / "conda-meta" / f"{stem}.json"
    if not meta.is_file():
        raise InstallError(f"{artifact.name}: rattler left no conda-meta/{stem}.json; the install is incomplete")
    record = json.loads(meta.read_text(encoding="utf-8"))
    record["url"] = artifact.url
    record["channel"] = _channel_of(artifact.url)
    for field in _CACHE_FIELDS:
        record.pop(field, None)
    meta.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _pip_install(entries: tuple[PipArtifact, ...], root: Path, prefix: Path, work: Path, deadline: float,
                 compile_now: bool = True) -> None:
    python = root / "bin" / "python"
    if not python.exists():
        raise InstallError(
            f"the lock has {len(entries)} pip package(s) but the environment has no bin/python: "
            "add python to the conda dependencies"
        )
    requirements = work / "pip-requirements.txt"
    requirements.write_text(
        "".join(f"{e.name} @ {_checked(e.url, e.name)} --hash=sha256:{e.sha256}\n" for e in entries),
        encoding="utf-8",
    )
    command = [
        str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--require-hashes",
        "--disable-pip-version-check", "--no-input", *([] if compile_now else ["--no-compile"]),
        "-r", str(requirements),
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=max(1.0, deadline - time.monotonic()), check=False
        )
    except subprocess.TimeoutExpired:
        raise InstallError("pip install of the locked wheels timed out; raise the timeout") from None
    if done.returncode != 0:
        raise InstallError(f"pip install of the locked wheels failed: {_last_line(done.stderr or done.stdout)}")
    if root != prefix:
        _retarget_shebangs(root, prefix)


def _compile_bytecode(root: Path, prefix: Path, deadline: float) -> None:
    """Byte-compile the staged env with pycs that name no source mtime (`unchecked-hash`).

    The image build gives every staged file one fixed mtime so the layer is reproducible; pycs that
    record the install-time mtime (pip's, conda's) then all read as stale, and every python process
    as the image's non-root user compiled each imported module again (904 modules, 3.2 s instead of
    1.3 s for `import torch` 2.14.1 measured). Same sources, same bytes: PYTHONHASHSEED is fixed and
    the paths compiled in are the final prefix's. A file that does not compile keeps no pyc."""
    python = root / "bin" / "python"
    if not python.exists() or not (root / "lib").is_dir():
        return
    command = [
        str(python), "-m", "compileall", "-q", "-f", "-j", "0", "--invalidation-mode", "unchecked-hash",
        "-s", str(root.resolve()), "-p", str(prefix), str((root / "lib").resolve()),
    ]  # fmt: skip
    try:
        subprocess.run(command, capture_output=True, timeout=max(1.0, deadline - time.monotonic()), check=False,
                       env={**os.environ, "PYTHONHASHSEED": "0"})
    except subprocess.TimeoutExpired:
        raise InstallError("byte-compiling the environment timed out; raise the timeout") from None


_COMPILE_FILES = """
import compileall, multiprocessing, py_compile, sys
files = sys.stdin.read().split("\\0")
def one(path):
    return compileall.compile_file(path, quiet=2, force=True,
                                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
with multiprocessing.get_context("fork").Pool() as pool:
    pool.map(one, [f for f in files if f], chunksize=32)
"""


def _compile_new_files(root: Path, since_ns: int, deadline: float) -> None:
    """Byte-compile (`unchecked-hash`, as `_compile_bytecode`) the .py files this call wrote: those
    whose inode changed after `since_ns`. Hard links from rattler's cache keep the package's mtimes,
    so the change time, not the modification time, says what is new."""
    python = root / "bin" / "python"
    if not python.exists() or not (root / "lib").is_dir():
        return
    new = [str(path) for path in (root / "lib").rglob("*.py")
           if not path.is_symlink() and path.stat().st_ctime_ns >= since_ns]
    if not new:
        return
    try:
        subprocess.run([str(python), "-c", _COMPILE_FILES], input="\0".join(new), capture_output=True, text=True,
                       timeout=max(1.0, deadline - time.monotonic()), check=False,
                       env={**os.environ, "PYTHONHASHSEED": "0"})
    except subprocess.TimeoutExpired:
        raise InstallError("byte-compiling the environment timed out; raise the timeout") from None


def _retarget_shebangs(root: Path, prefix: Path) -> None:
    """pip writes the staging interpreter into console-script shebangs; the image runs the final one."""
    staged = f"#!{root}/bin/".encode()
    final = f"#!{prefix}/bin/".encode()
    for script in (root / "bin").iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        with open(script, "rb") as f:
            head = f.read(len(staged))
        if head == staged:
            script.write_bytes(final + script.read_bytes()[len(staged) :])


def _check_pip_entries(entries: tuple[PipArtifact, ...]) -> None:
    for entry in entries:
        if not _SHA256_RE.fullmatch(entry.sha256):
            raise InstallError(
                f"pip package {entry.name} {entry.version} has no sha256 in the lock: lock again "
                "against an index that serves #sha256= fragments"
            )


def _run_async(awaitable: Any, deadline: float, step: str) -> Any:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise InstallError(f"install timed out before {step}; raise the timeout")

    async def bounded() -> Any:
        return await asyncio.wait_for(awaitable, timeout=remaining)

    try:
        return asyncio.run(bounded())
    except asyncio.TimeoutError:
        raise InstallError(f"install timed out while {step}; raise the timeout") from None
    except InstallError:
        raise
    except Exception as exc:  # noqa: BLE001 - rattler raises its own exception classes
        raise InstallError(f"{step} failed: {_first_line(str(exc))}") from None


# ---------------------------------------------------------------- small helpers


def _checked(url: str, what: str) -> str:
    _check_url(url, what)
    return url


def _file_name_of(url: str) -> str:
    """The package's file name: one path component, or the URL is refused (`%2F` or `..` would make
    the downloader write outside its folder)."""
    name = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
    if (not name or name in (".", "..") or "/" in name or "\\" in name
            or any(_is_hidden_character(character) for character in name)):
        raise InstallError(f"{_shown(url)}: the package file name {_shown(name)} is not a single file name "
                           "(an encoded / or ..); the lock was edited: lock again")
    return name


def _dist_name(file_name: str) -> str:
    for suffix in _PACKAGE_SUFFIXES:
        if file_name.endswith(suffix):
            return file_name[: -len(suffix)]
    raise InstallError(f"{file_name}: not a conda package file name (.conda or .tar.bz2)")


def _channel_of(url: str) -> str:
    """The channel URL of a package URL: everything before `/<subdir>/<file>`."""
    return url.split("#", 1)[0].rsplit("/", 2)[0]


def _list(data: dict[str, Any], key: str, source: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise InstallError(f"{source}: \"{key}\" must be a list")
    return value


def _text(entry: dict[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise InstallError(f"{where}: \"{key}\" is missing or not a string")
    return value


def _hash(entry: dict[str, Any], key: str, pattern: re.Pattern[str], where: str) -> str | None:
    value = entry.get(key)
    if value in (None, ""):
        return None
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise InstallError(f"{where}: \"{key}\" is not a hex {key} digest (the lock was cut short or edited); "
                           "lock again with `envbuild lock --force`")
    return value


def _conda_artifact(entry: object, where: str) -> CondaArtifact:
    if not isinstance(entry, dict):
        raise InstallError(f"{where}: must be an object")
    artifact = CondaArtifact(
        name=_text(entry, "name", where),
        version=_text(entry, "version", where),
        url=_text(entry, "url", where),
        sha256=_hash(entry, "sha256", _SHA256_RE, where),
        md5=_hash(entry, "md5", _MD5_RE, where),
    )
    _check_conda_artifact(artifact, where)
    return artifact


def _check_conda_artifact(artifact: CondaArtifact, where: str) -> None:
    if artifact.sha256 is None and artifact.md5 is None:
        raise InstallError(f"{where}: {artifact.name} has neither sha256 nor md5; it cannot be verified")
    if not artifact.file_name.endswith(_PACKAGE_SUFFIXES):
        raise InstallError(f"{where}: {artifact.url} is not a .conda or .tar.bz2 package URL")


def _pip_artifact(entry: object, where: str) -> PipArtifact:
    if not isinstance(entry, dict):
        raise InstallError(f"{where}: must be an object")
    return PipArtifact(
        name=_text(entry, "name", where),
        version=_text(entry, "version", where),
        url=_text(entry, "url", where),
        sha256=_hash(entry, "sha256", _SHA256_RE, where) or "",
    )


def _explicit_platform(lines: list[str]) -> str | None:
    for line in lines:
        if line.startswith("# platform:"):
            return line.split(":", 1)[1].strip()
    return None


def _explicit_artifact(line: str, where: str) -> CondaArtifact:
    url, _, fragment = line.partition("#")
    sha256 = md5 = None
    if fragment.startswith("sha256:"):
        sha256 = fragment.removeprefix("sha256:")
    elif fragment:
        md5 = fragment
    if sha256 is not None and not _SHA256_RE.fullmatch(sha256) or md5 is not None and not _MD5_RE.fullmatch(md5):
        raise InstallError(f"{where}: the hash after # is not a hex md5 or sha256:<hex>")
    file_name = _file_name_of(url)
    for suffix in _PACKAGE_SUFFIXES:
        if file_name.endswith(suffix):
            name, version, _build = file_name[: -len(suffix)].rsplit("-", 2)
            break
    else:
        raise InstallError(f"{where}: {url} is not a .conda or .tar.bz2 package URL")
    artifact = CondaArtifact(name=name, version=version, url=url, sha256=sha256, md5=md5)
    _check_conda_artifact(artifact, where)
    return artifact


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text.strip())


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


# ---------------------------------------------------------------- host-only parsing


def _plan_from_conda_lock(lock: CondaLock, platform: str, path: str) -> InstallPlan:
    if platform not in lock.metadata.platforms:
        raise InstallError(
            f"{path}: no platform {platform} in the lock (it has {', '.join(lock.metadata.platforms)})"
        )
    conda: list[CondaArtifact] = []
    pip: list[PipArtifact] = []
    for dep in lock.package:
        if dep.platform != platform or dep.name.startswith("__"):
            continue
        # The checks a plan read back from JSON gets (the installer's, in the image or a child
        # process): a lock cut short or edited (a hash half there) is named here, with its own path,
        # never later as a temporary plan.json.
        entry = {"name": dep.name, "version": dep.version, "url": dep.url, "sha256": dep.hash.sha256 or None}
        if dep.manager == "conda":
            conda.append(_conda_artifact({**entry, "md5": dep.hash.md5 or None}, f"{path}: {dep.name}"))
        else:
            pip.append(_pip_artifact(entry, f"{path}: {dep.name}"))
    return InstallPlan(platform=platform, conda=tuple(conda), pip=tuple(pip))


def _host_errors(action: Any) -> Any:
    from builder.errors import EnvbuildError  # host-only: the image holds this file alone

    try:
        return action()
    except InstallError as exc:
        raise EnvbuildError(str(exc)) from None


# ---------------------------------------------------------------- in-image entry point


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m builder.lock.install",
        description="Install a verified envbuild install plan (JSON) with rattler.",
    )
    parser.add_argument("--plan", type=Path, required=True, help="install plan JSON (envbuild export)")
    parser.add_argument("--prefix", type=Path, required=True, help="where the environment will live")
    parser.add_argument("--staging", type=Path, help="write the files here, with --prefix inside them")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds for the whole install")
    parser.add_argument("--cache-dir", type=Path, help="where to make this run's fresh download folder")
    parser.add_argument("--no-pip", action="store_true", help="skip the pip entries")
    parser.add_argument("--add", action="store_true",
                        help="add to the environment in --prefix (keep what it holds; compile only new files)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--progress", action="store_true",
                        help="each step's start and end, and the bytes downloaded, as event lines on stderr")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        result = install_plan(
            read_plan(args.plan),
            args.prefix,
            staging=args.staging,
            timeout=args.timeout,
            cache_dir=args.cache_dir,
            pip=not args.no_pip,
            add=args.add,
            progress=_event_line if args.progress else None,
        )
    except InstallError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result.to_json_dict(), sort_keys=True))
    else:
        print(
            f"installed {result.conda_packages} conda and {result.pip_packages} pip package(s) into "
            f"{result.root} for {result.prefix} ({result.downloaded_bytes} bytes, {result.seconds:.1f} s)"
        )
    return 0


def _event_line(event: dict[str, Any]) -> None:
    print(_EVENT_PREFIX + json.dumps(event), file=sys.stderr, flush=True)


def exit_hard(code: int) -> None:
    """Leave without interpreter teardown: py-rattler crashes at exit in some short runs."""
    from builder.proc import exit_now  # shipped beside this module in the build context

    exit_now(code)


if __name__ == "__main__":
    try:
        status = main()
    except SystemExit as exc:  # argparse's usage errors
        status = exc.code if isinstance(exc.code, int) else 2
    exit_hard(status)

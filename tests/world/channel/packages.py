"""Conda packages and channels made from plain files, for the offline test world (not shipped in the wheel).

A package is written in either conda format (`.tar.bz2` with the standard library, `.conda` as a
stored zip of two zstd tarballs) with `info/index.json`, `info/paths.json` (sha256 + size of every
file), `info/files` and, for noarch python, `info/link.json`. Archives are deterministic: sorted
entries, one fixed mtime, uid/gid 0, no user names, so the same inputs give the same sha256 and a
lockfile made against one build of a channel stays valid against a rebuild.

`index_channel` writes `repodata.json` for every subdir with rattler's indexer (conda-index needs
conda, which we do not have); `serve_directory` serves a folder over http, because conda-lock and
its pip resolver refuse `file://` URLs.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import io
import json
import os
import shutil
import socketserver
import stat
import tarfile
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from builder.errors import EnvbuildError

SUBDIRS = ("linux-64", "osx-arm64", "win-64", "noarch")
PACKAGE_FORMATS = (".tar.bz2", ".conda")

# 2023-11-14T22:13:20Z: any fixed instant works; it must be after 1980 for zip entries.
FIXED_EPOCH = 1_700_000_000
_ZIP_DATE_TIME = (2023, 11, 14, 22, 13, 20)
# zstd level 3 packs the ~900 MB torch tree in seconds; bz2 would take minutes.
_ZSTD_LEVEL = 3
_COPY_CHUNK = 1 << 20

# conda's `arch`/`platform` fields in index.json, as conda-build writes them per subdir.
_SUBDIR_ARCH_PLATFORM = {
    "linux-64": ("x86_64", "linux"),
    "linux-aarch64": ("aarch64", "linux"),
    "osx-64": ("x86_64", "osx"),
    "osx-arm64": ("arm64", "osx"),
    "win-64": ("x86_64", "win"),
    "noarch": (None, None),
}


@dataclass(frozen=True)
class PackageFile:
    """One file of a package, at `path` relative to the install prefix.

    `symlink_to` makes it a symbolic link (then `data` is ignored). `prefix_placeholder` names a
    text that the installer replaces with the real prefix (shebangs of scripts, config files).
    """

    path: str
    data: bytes = b""
    mode: int = 0o644
    symlink_to: str | None = None
    prefix_placeholder: str | None = None


@dataclass(frozen=True)
class CondaPackage:
    """The metadata of one conda package and, for small packages, its files."""

    name: str
    version: str
    build: str
    build_number: int = 0
    subdir: str = "noarch"  # linux-64, osx-arm64, win-64 or noarch
    noarch: str | None = None  # "python" or "generic" for noarch packages
    depends: tuple[str, ...] = ()
    constrains: tuple[str, ...] = ()
    files: tuple[PackageFile, ...] = ()
    track_features: str = ""
    # noarch python console scripts, "name = module:function"; the installer writes them.
    entry_points: tuple[str, ...] = ()
    license: str = ""
    timestamp_ms: int = FIXED_EPOCH * 1000
    extra_index: dict[str, object] = field(default_factory=dict, hash=False, compare=False)

    @property
    def dist_name(self) -> str:
        return f"{self.name}-{self.version}-{self.build}"

    def file_name(self, fmt: str) -> str:
        return self.dist_name + fmt


@dataclass(frozen=True)
class _Entry:
    """A member of the package's payload, before archiving; `open_data` streams regular files."""

    path: str
    mode: int
    size: int
    open_data: Callable[[], IO[bytes]] | None
    symlink_to: str | None = None
    prefix_placeholder: str | None = None


def write_package(channel_root: Path, pkg: CondaPackage, fmt: str = ".tar.bz2") -> Path:
    """Write `pkg` with its in-memory `files` into `channel_root/<subdir>/` and return the path."""
    entries = [_entry_from_file(f) for f in pkg.files]
    return _write(channel_root, pkg, entries, fmt)


def write_package_from_tree(
    channel_root: Path, pkg_meta: CondaPackage, tree: Path, fmt: str = ".conda"
) -> Path:
    """Write a package whose payload is every file and link under `tree` (prefix-relative).

    For big payloads (the torch tree): files are streamed from disk, hashed while archived, and
    never held in memory. `pkg_meta.files` are added on top (e.g. a generated launcher).
    """
    if not tree.is_dir():
        raise EnvbuildError(f"package tree {tree} is not a folder: unpack the payload there first")
    entries = list(_entries_from_tree(tree)) + [_entry_from_file(f) for f in pkg_meta.files]
    return _write(channel_root, pkg_meta, entries, fmt)


def index_record(pkg: CondaPackage) -> dict[str, object]:
    """The package's `info/index.json` content, which is also its repodata record minus the hashes."""
    return _index_json(pkg)


def index_channel(channel_root: Path) -> None:
    """(Re)write repodata.json for every subdir of the channel, noarch always included.

    Conda clients and rattler require `noarch/repodata.json` even when noarch is empty.
    """
    channel_root.mkdir(parents=True, exist_ok=True)
    (channel_root / "noarch").mkdir(exist_ok=True)
    import asyncio

    import rattler.index  # imported late: py-rattler starts a runtime on import

    # force: a rewritten package keeps its file name, and only a full re-read sees the new hash.
    # One repodata.json per subdir and nothing else: every conda client reads the same source.
    asyncio.run(rattler.index.index_fs(channel_root, force=True, write_zst=False, write_shards=False))


def write_repodata(channel_root: Path, subdir: str, records: dict[str, dict[str, object]]) -> Path:
    """Write `repodata.json` for one subdir straight from records (file name -> index record).

    For synthetic channels that hold only metadata: no package file is needed to solve.
    """
    folder = channel_root / subdir
    folder.mkdir(parents=True, exist_ok=True)
    repodata = {
        "info": {"subdir": subdir},
        "packages": {fn: r for fn, r in sorted(records.items()) if fn.endswith(".tar.bz2")},
        "packages.conda": {fn: r for fn, r in sorted(records.items()) if fn.endswith(".conda")},
        "removed": [],
        "repodata_version": 1,
    }
    target = folder / "repodata.json"
    _atomic_write_bytes(target, json.dumps(repodata, indent=1, sort_keys=True).encode())
    return target


@contextlib.contextmanager
def serve_directory(root: Path, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve `root` over http in a background thread; yields the base URL (no trailing slash)."""
    server = make_http_server(root, host, port)
    thread = threading.Thread(target=server.serve_forever, name="envbuild-serve", daemon=True)
    thread.start()
    try:
        bound_host, bound_port = server.server_address[:2]
        yield f"http://{bound_host}:{bound_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def make_http_server(root: Path, host: str = "127.0.0.1", port: int = 0) -> socketserver.TCPServer:
    """A threaded, quiet static file server for `root`, bound but not yet serving."""
    if not root.is_dir():
        raise EnvbuildError(f"cannot serve {root}: it is not a folder")
    handler = functools.partial(_QuietHandler, directory=str(root))
    try:
        server = _ThreadingServer((host, port), handler)
    except OSError as exc:
        raise EnvbuildError(
            f"cannot listen on {host}:{port} ({exc.strerror}): stop whatever holds the port or pick another"
        ) from exc
    return server


class _ThreadingServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    # Solvers fetch hundreds of files; one log line each would bury test output.
    def log_message(self, format: str, *args: object) -> None:  # stdlib signature
        return

    # Channels are immutable for a given URL; ETag-free static files are fine with HTTP/1.0.
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".json": "application/json",
        ".conda": "application/octet-stream",
        ".bz2": "application/x-bzip2",
        ".whl": "application/octet-stream",
        ".metadata": "text/plain",
    }


# ---- archive writing ------------------------------------------------------------------------


def _write(channel_root: Path, pkg: CondaPackage, entries: list[_Entry], fmt: str) -> Path:
    _check_package(pkg, fmt)
    entries = _sorted_unique(entries)
    folder = channel_root / pkg.subdir
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / pkg.file_name(fmt)
    tmp = folder / f".{target.name}.part-{os.getpid()}"
    try:
        if fmt == ".tar.bz2":
            _write_tar_bz2(tmp, pkg, entries)
        else:
            _write_conda(tmp, pkg, entries)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _check_package(pkg: CondaPackage, fmt: str) -> None:
    if fmt not in PACKAGE_FORMATS:
        raise EnvbuildError(f"unknown package format {fmt!r}: use one of {', '.join(PACKAGE_FORMATS)}")
    if pkg.subdir not in _SUBDIR_ARCH_PLATFORM:
        raise EnvbuildError(f"unknown subdir {pkg.subdir!r} for {pkg.dist_name}")
    if (pkg.subdir == "noarch") != (pkg.noarch is not None):
        raise EnvbuildError(f"{pkg.dist_name}: noarch packages (and only those) go in subdir noarch")
    if pkg.noarch not in (None, "python", "generic"):
        raise EnvbuildError(f"{pkg.dist_name}: noarch must be 'python' or 'generic'")
    if pkg.entry_points and pkg.noarch != "python":
        raise EnvbuildError(f"{pkg.dist_name}: entry points are only written for noarch python packages")


def _sorted_unique(entries: list[_Entry]) -> list[_Entry]:
    by_path: dict[str, _Entry] = {}
    for entry in entries:
        if entry.path.startswith(("/", "info/")) or ".." in entry.path.split("/"):
            raise EnvbuildError(f"package path {entry.path!r} must be relative and outside info/")
        by_path[entry.path] = entry  # later entries (explicit files) override the tree
    return [by_path[p] for p in sorted(by_path)]


def _entry_from_file(f: PackageFile) -> _Entry:
    if f.symlink_to is not None:
        return _Entry(f.path, 0o777, 0, None, symlink_to=f.symlink_to)
    data = f.data
    return _Entry(f.path, f.mode, len(data), lambda: io.BytesIO(data), prefix_placeholder=f.prefix_placeholder)


def _entries_from_tree(tree: Path) -> Iterator[_Entry]:
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames.sort()
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, tree).replace(os.sep, "/")
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                yield _Entry(rel, 0o777, 0, None, symlink_to=os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                yield _Entry(rel, _normal_mode(st.st_mode), st.st_size, functools.partial(open, full, "rb"))
        # symlinked folders were yielded as links; do not descend into them
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]


def _normal_mode(mode: int) -> int:
    # Only the executable bit is meaningful in a package; umask-dependent bits would break determinism.
    return 0o755 if mode & 0o111 else 0o644


class _HashingReader:
    """Wraps a file so that what tarfile reads is also hashed (one pass over big payloads)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self.sha256 = hashlib.sha256()
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        chunk = self._raw.read(n)
        self.sha256.update(chunk)
        self.size += len(chunk)
        return chunk


def _tarinfo(path: str, mode: int, size: int, symlink_to: str | None = None) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path)
    info.mtime = FIXED_EPOCH
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if symlink_to is not None:
        info.type = tarfile.SYMTYPE
        info.linkname = symlink_to
        info.mode = 0o777
    else:
        info.mode = mode
        info.size = size
    return info


def _add_payload(tar: tarfile.TarFile, entries: list[_Entry]) -> list[dict[str, object]]:
    """Add every payload entry to `tar`; return the paths.json records."""
    records: list[dict[str, object]] = []
    for entry in entries:
        if entry.symlink_to is not None:
            tar.addfile(_tarinfo(entry.path, 0o777, 0, entry.symlink_to))
            records.append({"_path": entry.path, "path_type": "softlink", "size_in_bytes": 0})
            continue
        assert entry.open_data is not None
        with entry.open_data() as raw:
            reader = _HashingReader(raw)
            tar.addfile(_tarinfo(entry.path, entry.mode, entry.size), reader)  # type: ignore[arg-type]
        if reader.size != entry.size:
            raise EnvbuildError(f"{entry.path} changed size while it was packed: pack from a still tree")
        record: dict[str, object] = {
            "_path": entry.path,
            "path_type": "hardlink",
            "sha256": reader.sha256.hexdigest(),
            "size_in_bytes": reader.size,
        }
        if entry.prefix_placeholder:
            record["prefix_placeholder"] = entry.prefix_placeholder
            record["file_mode"] = "text"
        records.append(record)
    return records


def _info_files(pkg: CondaPackage, paths: list[dict[str, object]]) -> list[tuple[str, bytes]]:
    index = _index_json(pkg)
    files = [
        ("info/files", "".join(f"{p['_path']}\n" for p in paths).encode()),
        ("info/index.json", _json_bytes(index)),
        ("info/paths.json", _json_bytes({"paths": paths, "paths_version": 1})),
    ]
    placeholders = [p for p in paths if "prefix_placeholder" in p]
    if placeholders:
        # Old clients read has_prefix instead of paths.json.
        lines = "".join(f"{p['prefix_placeholder']} text {p['_path']}\n" for p in placeholders)
        files.append(("info/has_prefix", lines.encode()))
    if pkg.noarch == "python":
        link = {"noarch": {"type": "python", "entry_points": list(pkg.entry_points)}, "package_metadata_version": 1}
        files.append(("info/link.json", _json_bytes(link)))
    return sorted(files)


def _index_json(pkg: CondaPackage) -> dict[str, object]:
    arch, platform = _SUBDIR_ARCH_PLATFORM[pkg.subdir]
    index: dict[str, object] = {
        "arch": arch,
        "build": pkg.build,
        "build_number": pkg.build_number,
        "constrains": list(pkg.constrains),
        "depends": list(pkg.depends),
        "license": pkg.license,
        "name": pkg.name,
        "platform": platform,
        "subdir": pkg.subdir,
        "timestamp": pkg.timestamp_ms,
        "version": pkg.version,
    }
    if pkg.noarch:
        index["noarch"] = pkg.noarch
    if pkg.track_features:
        index["track_features"] = pkg.track_features
    index.update(pkg.extra_index)
    return {k: v for k, v in index.items() if v is not None}


def _json_bytes(obj: object) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()


def _add_bytes(tar: tarfile.TarFile, path: str, data: bytes) -> None:
    tar.addfile(_tarinfo(path, 0o644, len(data)), io.BytesIO(data))


def _write_tar_bz2(target: Path, pkg: CondaPackage, entries: list[_Entry]) -> None:
    # tarfile's bz2 mode writes no timestamp or name header, so the output is stable.
    with open(target, "wb") as out, tarfile.open(fileobj=out, mode="w:bz2", format=tarfile.PAX_FORMAT) as tar:
        paths = _add_payload(tar, entries)
        for path, data in _info_files(pkg, paths):
            _add_bytes(tar, path, data)


def _write_conda(target: Path, pkg: CondaPackage, entries: list[_Entry]) -> None:
    """A `.conda` is a stored zip of metadata.json, pkg-*.tar.zst and info-*.tar.zst (CEP 2)."""
    import zstandard

    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".pack-") as tmp:
        pkg_tar = Path(tmp) / f"pkg-{pkg.dist_name}.tar.zst"
        info_tar = Path(tmp) / f"info-{pkg.dist_name}.tar.zst"
        compressor = zstandard.ZstdCompressor(level=_ZSTD_LEVEL)
        with open(pkg_tar, "wb") as raw, compressor.stream_writer(raw, closefd=False) as zst:
            with tarfile.open(fileobj=zst, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                paths = _add_payload(tar, entries)
        with open(info_tar, "wb") as raw, compressor.stream_writer(raw, closefd=False) as zst:
            with tarfile.open(fileobj=zst, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                for path, data in _info_files(pkg, paths):
                    _add_bytes(tar, path, data)
        with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED) as zf:
            _zip_bytes(zf, "metadata.json", json.dumps({"conda_pkg_format_version": 2}).encode())
            _zip_file(zf, info_tar)
            _zip_file(zf, pkg_tar)


def _zip_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_ZIP_DATE_TIME)
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    info.create_system = 3  # unix, whatever this machine is
    return info


def _zip_bytes(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    zf.writestr(_zip_info(name), data)


def _zip_file(zf: zipfile.ZipFile, path: Path) -> None:
    size = path.stat().st_size
    with open(path, "rb") as src, zf.open(_zip_info(path.name), "w", force_zip64=size > 0x7FFFFFFF) as dst:
        shutil.copyfileobj(src, dst, _COPY_CHUNK)


# ---- small helpers --------------------------------------------------------------------------


def _atomic_write_bytes(target: Path, data: bytes) -> None:
    tmp = target.with_name(f".{target.name}.part-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_COPY_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def package_files(channel_root: Path) -> Iterable[Path]:
    """Every package file of a channel, sorted (for mirrors and checks)."""
    for fmt in PACKAGE_FORMATS:
        yield from sorted(channel_root.glob(f"*/*{fmt}"))

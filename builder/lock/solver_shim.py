"""`envbuild-micromamba`: answers conda-lock's solver calls with py-rattler.

conda-lock has no solver of its own: it runs a conda-compatible executable and reads JSON from it.
No conda, mamba or micromamba can be installed offline, so this CLI answers exactly the calls
conda-lock 4 makes when it believes it talks to micromamba (its path ends in `micromamba`):

    --version
    config --json list pkgs_dirs            info --json
    create --prefix P --dry-run --json --override-channels --channel C... SPECS   (solve)
    list --no-pip -p FAKEPREFIX --json                                           (--update)
    update --override-channels --channel C... -p FAKEPREFIX --json --dry-run SPECS
    create --quiet [--copy] --file EXPLICIT --yes --prefix P                     (install)
    run --prefix P pip install --no-deps -r REQ

Virtual packages: conda-lock passes them twice, as CONDA_OVERRIDE_* variables (empty = absent) and
as records named `__x` in a temporary file:// channel of its own. Both become rattler
GenericVirtualPackages; the records are never offered as installable packages.

Anything else is refused on stderr with exit 2. Every process leaves through `os._exit` because
py-rattler crashes at interpreter exit in some short runs, after the work is done.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from builder import __version__
from builder.lock.solver_protocol import (
    CACHE_ENV,
    DEFAULT_SOLVE_TIMEOUT_S,
    FORWARDED_ENV,
    MICROMAMBA_COMPAT_VERSION,
    SOLVE_TIMEOUT_ENV,
    version_text,
)
from builder.proc import die_with_parent, exit_now

# Bound at run time by _load_solver_libraries(), only for the calls that solve or install.
if TYPE_CHECKING:
    import asyncio
    import socket

    import rattler
    from rattler.exceptions import InvalidMatchSpecError, SolverError

    from builder.lock import install as installer

OVERRIDE_PREFIX = "CONDA_OVERRIDE_"
# A conflict explanation conda-lock prints to the user: one screen, not a dump.
MAX_EXPLANATION_LINES = 25
MAX_EXPLANATION_CHARS = 2400
# conda-lock's virtual-package channel holds a few dozen records; a repodata file larger than this
# belongs to a real channel.
FAKE_CHANNEL_MAX_BYTES = 1 << 20
EXIT_UNSOLVABLE = 1
EXIT_USAGE = 2


class ShimUsageError(Exception):
    """A call this shim does not answer: printed on stderr, exit 2."""


class ShimFailure(Exception):
    """A call that was understood but failed (channel unreachable, install refused): exit 1."""


@dataclass(frozen=True)
class SolveRequest:
    """One dry-run solve as conda-lock asks for it."""

    subdir: str
    channels: tuple[str, ...]
    specs: tuple[str, ...]


@dataclass(frozen=True)
class ChannelSet:
    """The channels to solve against, with conda-lock's fake virtual-package channel taken apart."""

    sources: tuple[str, ...]
    virtual_packages: tuple[rattler.GenericVirtualPackage, ...]


# ---------------------------------------------------------------- entry point


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run one call in this process, then leave without interpreter teardown (the console script
    `envbuild-micromamba` is builder/lock/solver_client.py, which forwards solves to the service first)."""
    args = list(sys.argv[1:] if argv is None else argv)
    die_with_parent()  # a solve must not go on after conda-lock (and envbuild) died
    try:
        code = answer(args)
    finally:
        _cleanup_cache()
    exit_now(code)
    raise AssertionError("unreachable")


def answer(args: list[str]) -> int:
    """One call answered here, its failures printed as conda-lock expects them; the exit code."""
    try:
        return dispatch(args)
    except ShimUsageError as exc:
        print(f"envbuild-micromamba: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ShimFailure as exc:
        if "--json" in args:
            # conda-lock reads a failed solve's "message" from stdout and shows it to the user
            _print_json({"success": False, "message": str(exc)})
        print(f"envbuild-micromamba: {exc}", file=sys.stderr)
        return 1
    except SystemExit as exc:  # argparse's own usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE


# ---------------------------------------------------------------- solver service
#
# One `envbuild lock` run makes a dozen solves (targets x platforms), each of them a new process
# that imports rattler and reads the channels' repodata again. While a run lasts, a service
# process holds rattler and one Gateway (repodata read once, kept in memory) and answers the dry-run
# solves that `envbuild-micromamba` (builder/lock/solver_client.py) forwards to it over a unix socket;
# its answers are the very bytes this module would print. Anything it cannot reach is answered here.


def serve(path: str) -> NoReturn:
    """The service: one call at a time (a call reads os.environ and prints to stdout), until the
    envbuild process that started it ends it or dies."""
    import socket

    die_with_parent()
    _load_solver_libraries()
    # The repodata cache lives where the caller said (ENVBUILD_RATTLER_CACHE, in its scratch
    # folder), so ending this process with SIGKILL leaves nothing behind.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(16)
        while True:
            connection, _ = listener.accept()
            with connection:
                try:
                    _answer_connection(connection)
                except (OSError, ValueError, KeyError):
                    continue  # a caller that went away, or sent no request: the next one


def _answer_connection(connection: socket.socket) -> None:
    import contextlib
    import io

    request = json.loads(b"".join(iter(lambda: connection.recv(1 << 20), b"")).decode())
    for key in [k for k in os.environ if k.startswith(FORWARDED_ENV)]:
        del os.environ[key]
    os.environ.update(request["env"])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = answer(list(request["args"]))
        except Exception as exc:  # noqa: BLE001 - the caller prints it; the service goes on
            print(f"envbuild-micromamba service: {type(exc).__name__}: {exc}", file=sys.stderr)
            code = 1
    connection.sendall(json.dumps({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}).encode())


def dispatch(args: list[str]) -> int:
    """Run one micromamba-style call and return its exit code; output goes to stdout."""
    if args in (["--version"], ["-V"]):
        sys.stdout.write(version_text())
        return 0
    if not args:
        raise ShimUsageError("no command given; this shim answers conda-lock's calls only (see --help of envbuild)")
    command, rest = args[0], args[1:]
    if command != "config":
        _load_solver_libraries()
    handlers = {
        "config": _config,
        "info": _info,
        "create": _create,
        "update": _update,
        "list": _list,
        "run": _run,
    }
    handler = handlers.get(command)
    if handler is None:
        raise ShimUsageError(f"unsupported command {command!r}: only {', '.join(handlers)} as conda-lock calls them")
    return handler(rest)


def _load_solver_libraries() -> None:
    """rattler, asyncio and the installer, for the calls that solve or install: conda-lock asks
    `--version` twice per lock, and those answers should not pay a tenth of a second of imports."""
    global asyncio, rattler, InvalidMatchSpecError, SolverError, installer
    import asyncio

    import rattler
    from rattler.exceptions import InvalidMatchSpecError, SolverError

    from builder.lock import install as installer


def _parser(command: str) -> argparse.ArgumentParser:
    parser = _StrictParser(prog=f"envbuild-micromamba {command}", add_help=False)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("-y", "--yes", action="store_true")
    parser.add_argument("-q", "--quiet", action="store_true")
    parser.add_argument("-p", "--prefix")
    parser.add_argument("-n", "--name")
    return parser


class _StrictParser(argparse.ArgumentParser):
    """argparse that reports one line through ShimUsageError instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise ShimUsageError(f"{self.prog}: {message}")


def _add_channel_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--channel", action="append", default=[])
    parser.add_argument("--override-channels", action="store_true")
    parser.add_argument("--dry-run", action="store_true")


# ---------------------------------------------------------------- config / info


def _config(args: list[str]) -> int:
    if args not in (["--json", "list", "pkgs_dirs"], ["list", "pkgs_dirs", "--json"]):
        raise ShimUsageError(f"unsupported config call {' '.join(args)!r}: only `config --json list pkgs_dirs`")
    _print_json({"pkgs_dirs": [str(p) for p in _pkgs_dirs()]})
    return 0


def _info(args: list[str]) -> int:
    if args != ["--json"]:
        raise ShimUsageError(f"unsupported info call {' '.join(args)!r}: only `info --json`")
    subdir = _target_subdir()
    _print_json(
        {
            "pkgs_dirs": [str(p) for p in _pkgs_dirs()],
            "package cache": [str(p) for p in _pkgs_dirs()],
            "platform": subdir,
            "virtual packages": [_virtual_text(v) for v in _override_virtual_packages(subdir)],
            "micromamba version": MICROMAMBA_COMPAT_VERSION,
            "envbuild-micromamba version": __version__,
        }
    )
    return 0


def _pkgs_dirs() -> list[Path]:
    # conda-lock points CONDA_PKGS_DIRS at a temporary folder of its own; it only reads records
    # back from there for LINK-only answers, which this shim never gives.
    configured = os.environ.get("CONDA_PKGS_DIRS", "")
    return [Path(p) for p in configured.split(os.pathsep) if p] or [_cache_root() / "pkgs"]


# ---------------------------------------------------------------- create: solve or install


def _create(args: list[str]) -> int:
    parser = _parser("create")
    _add_channel_options(parser)
    parser.add_argument("-f", "--file")
    parser.add_argument("--copy", action="store_true")
    parser.add_argument("specs", nargs="*")
    opts = parser.parse_args(args)
    if opts.file is not None:
        return _install_explicit(opts)
    if not (opts.dry_run and opts.json):
        raise ShimUsageError("create without --file is answered only as a solve: pass --dry-run --json")
    if not opts.specs:
        raise ShimUsageError("create --dry-run needs at least one spec")
    request = SolveRequest(subdir=_target_subdir(), channels=tuple(opts.channel), specs=tuple(opts.specs))
    try:
        records = asyncio.run(_solve(request))
    except SolverError as exc:
        return _print_unsolvable(request, _channel_set(request), str(exc))
    _print_json(_dry_run_answer(opts.prefix, records, records, removed=()))
    return 0


def _install_explicit(opts: argparse.Namespace) -> int:
    """`create --file EXPLICIT --prefix P`: conda-lock's install path, verified by builder.lock.install."""
    if opts.specs or opts.channel:
        raise ShimUsageError("create --file takes no specs or channels: the explicit file names every package")
    if opts.prefix is None:
        raise ShimUsageError("create --file needs --prefix (named environments are not supported)")
    if opts.file.endswith((".yml", ".yaml")):
        raise ShimUsageError(
            "create --file with an environment file needs a solve: install an explicit lockfile or conda-lock.yml"
        )
    try:
        plan = installer.read_explicit(Path(opts.file))
        # --copy needs nothing extra: rattler hard-links from a cache that is deleted afterwards.
        result = installer.install_plan(plan, Path(opts.prefix), cache_dir=_configured_cache(), pip=False)
    except installer.InstallError as exc:
        raise ShimFailure(str(exc)) from None
    if not opts.quiet:
        print(f"installed {result.conda_packages} packages into {result.root} ({result.seconds:.1f} s)")
    return 0


# ---------------------------------------------------------------- list / update (conda-lock --update)


def _list(args: list[str]) -> int:
    parser = _parser("list")
    parser.add_argument("--no-pip", action="store_true")
    opts = parser.parse_args(args)
    if opts.prefix is None or not opts.json:
        raise ShimUsageError("list is answered only as `list --no-pip -p PREFIX --json`")
    entries = [_list_entry(meta) for meta in _read_conda_meta(Path(opts.prefix))]
    _print_json(sorted(entries, key=lambda e: e["name"]))
    return 0


def _list_entry(meta: dict[str, Any]) -> dict[str, Any]:
    fn = str(meta.get("fn") or _file_name(meta["url"]))
    return {
        "base_url": _channel_url(meta),
        "build_number": int(meta.get("build_number", 0)),
        "build_string": meta.get("build", ""),
        "channel": _channel_url(meta),
        "dist_name": _strip_package_suffix(fn),
        "name": meta["name"],
        "platform": meta.get("subdir", ""),
        "version": meta["version"],
    }


def _update(args: list[str]) -> int:
    """Move only the named packages: every other installed package is a locked (preferred) record
    and stays requested, so it changes only when the named update forces it."""
    parser = _parser("update")
    _add_channel_options(parser)
    parser.add_argument("specs", nargs="*")
    opts = parser.parse_args(args)
    if opts.prefix is None or not (opts.dry_run and opts.json) or not opts.specs:
        raise ShimUsageError("update is answered only as `update -p PREFIX --json --dry-run SPECS`")
    installed = _read_conda_meta(Path(opts.prefix))
    request = SolveRequest(subdir=_target_subdir(), channels=tuple(opts.channel), specs=tuple(opts.specs))
    try:
        records, kept = asyncio.run(_solve_update(request, installed))
    except SolverError as exc:
        return _print_unsolvable(request, _channel_set(request), str(exc))
    changed = [r for r in records if _identity(r) not in kept]
    solved_names = {r.name.normalized for r in records}
    removed = tuple(m for m in installed if m["name"] not in solved_names and not m["name"].startswith("__"))
    _print_json(_dry_run_answer(opts.prefix, changed, changed, removed=removed))
    return 0


async def _solve_update(
    request: SolveRequest, installed: list[dict[str, Any]]
) -> tuple[list[rattler.RepoDataRecord], set[tuple[str, str, str, str]]]:
    named = {_spec(s).name.normalized for s in request.specs if _spec(s).name is not None}
    keep = [m for m in installed if m["name"] not in named and not m["name"].startswith("__")]
    channels = _channel_set(request)
    gateway = _gateway()
    locked = await _locked_records(gateway, channels, request.subdir, keep)
    # The locked records are only a preference to rattler: this solve finds the versions the named
    # packages can move to, but may move others needlessly (the newest numpy build being py313 drags
    # python from 3.11). So solve again with those versions and every other package pinned exactly,
    # and keep the first answer only when the pins conflict (the update really needs others to move).
    preferred = await _run_solver(
        gateway, channels, request.subdir, [*request.specs, *(m["name"] for m in keep)], locked
    )
    moved = [f"{r.name.normalized} =={r.version}" for r in preferred if r.name.normalized in named]
    pinned = [*request.specs, *moved, *(_exact_spec(r) for r in locked)]
    try:
        records = await _run_solver(gateway, channels, request.subdir, pinned, locked)
    except SolverError:
        records = preferred
    return records, {_meta_identity(m) for m in keep}


def _exact_spec(record: rattler.RepoDataRecord) -> str:
    return f"{record.name.normalized} =={record.version} {record.build}"


async def _locked_records(
    gateway: rattler.Gateway, channels: ChannelSet, subdir: str, keep: list[dict[str, Any]]
) -> list[rattler.RepoDataRecord]:
    """The channel's own records of the kept packages (full metadata, constrains included); a
    package the channel no longer has is rebuilt from conda-lock's conda-meta entry."""
    if not keep:
        return []
    try:
        found = await gateway.query(
            list(channels.sources), [subdir, "noarch"],  # type: ignore[list-item]  # rattler checks the name
            [m["name"] for m in keep], recursive=False
        )
    except Exception as exc:  # noqa: BLE001 - gateway errors: unreachable channel, bad repodata
        raise ShimFailure(f"cannot read the channels for {subdir}: {_first_line(str(exc))}") from None
    by_identity = {_identity(r): r for source in found for r in source}
    return [by_identity.get(_meta_identity(m)) or _record_from_meta(m) for m in keep]


def _record_from_meta(meta: dict[str, Any]) -> rattler.RepoDataRecord:
    package = rattler.PackageRecord(
        name=meta["name"],
        version=meta["version"],
        build=rattler.BuildString(meta.get("build") or "0"),
        build_number=int(meta.get("build_number", 0)),
        subdir=meta.get("subdir") or "noarch",
        depends=list(meta.get("depends") or []),
        constrains=list(meta.get("constrains") or []),
        md5=bytes.fromhex(meta["md5"]) if meta.get("md5") else None,
        sha256=bytes.fromhex(meta["sha256"]) if meta.get("sha256") else None,
    )
    fn = str(meta.get("fn") or _file_name(meta["url"]))
    return rattler.RepoDataRecord(package, fn, meta["url"], _channel_url(meta))


def _read_conda_meta(prefix: Path) -> list[dict[str, Any]]:
    folder = prefix / "conda-meta"
    if not folder.is_dir():
        raise ShimFailure(f"{prefix} is not an environment (no conda-meta folder)")
    entries = []
    for path in sorted(folder.glob("*.json")):
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ShimFailure(f"{path}: unreadable conda-meta record ({exc})") from None
        if not isinstance(entry, dict) or not {"name", "version", "url"} <= entry.keys():
            raise ShimFailure(f"{path}: conda-meta record lacks name, version or url")
        entries.append(entry)
    return entries


# ---------------------------------------------------------------- run (pip in the prefix)


def _run(args: list[str]) -> int:
    prefix, command = _split_run_args(args)
    if not command or command[0] != "pip":
        raise ShimUsageError("run is answered only as `run --prefix P pip ...` (conda-lock's pip step)")
    python = Path(prefix) / "bin" / "python"
    if not python.exists():
        raise ShimFailure(f"{prefix} has no bin/python: add python to the conda dependencies for pip packages")
    return subprocess.run([str(python), "-m", "pip", *command[1:]], check=False).returncode


def _split_run_args(args: list[str]) -> tuple[str, list[str]]:
    prefix = None
    position = 0
    while position < len(args) and args[position].startswith("-"):
        option = args[position]
        if option in ("-p", "--prefix") and position + 1 < len(args):
            prefix = args[position + 1]
            position += 2
        elif option.startswith("--prefix="):
            prefix = option.split("=", 1)[1]
            position += 1
        else:
            raise ShimUsageError(f"run: unsupported option {option!r}")
    if prefix is None:
        raise ShimUsageError("run needs --prefix (named environments are not supported)")
    return prefix, args[position:]


# ---------------------------------------------------------------- solving


async def _solve(request: SolveRequest) -> list[rattler.RepoDataRecord]:
    return await _run_solver(_gateway(), _channel_set(request), request.subdir, list(request.specs), [])


async def _run_solver(
    gateway: rattler.Gateway,
    channels: ChannelSet,
    subdir: str,
    specs: Iterable[str],
    locked: list[rattler.RepoDataRecord],
) -> list[rattler.RepoDataRecord]:
    if not channels.sources:
        raise ShimUsageError("no channel to solve against: conda-lock passes --channel for each one")
    # rattler treats a zero timedelta as no limit at all: keep at least a millisecond.
    timeout = datetime.timedelta(seconds=max(_solve_timeout(), 0.001))
    matchspecs = [_spec(s) for s in specs]
    try:
        return await rattler.solve(
            sources=list(channels.sources),
            specs=matchspecs,
            gateway=gateway,
            platforms=[subdir, "noarch"],  # type: ignore[list-item]  # rattler checks the name
            locked_packages=locked,
            virtual_packages=list(channels.virtual_packages),
            timeout=timeout,
        )
    except SolverError:
        raise
    except Exception as exc:  # noqa: BLE001 - gateway errors: unreachable channel, bad repodata
        raise ShimFailure(f"cannot read the channels for {subdir}: {_first_line(str(exc))}") from None


def _spec(text: str) -> rattler.MatchSpec:
    try:
        # Lenient like conda: `pytorch 2.1` means ==2.1, `pytorch 2.1.*` a series.
        return rattler.MatchSpec(text, strict=False)
    except InvalidMatchSpecError as exc:
        raise ShimUsageError(f"invalid spec {text!r}: {exc}") from None


_GATEWAY: rattler.Gateway | None = None


def _gateway() -> rattler.Gateway:
    """One per process: the service keeps the repodata it read for the next solve."""
    global _GATEWAY
    if _GATEWAY is None:
        _GATEWAY = rattler.Gateway(cache_dir=_cache_root() / "repodata", show_progress=False)
    return _GATEWAY


def _cache_root() -> Path:
    """ENVBUILD_RATTLER_CACHE, else one temporary folder per process, removed before it exits."""
    configured = _configured_cache()
    if configured is not None:
        return configured
    global _TEMP_CACHE
    if _TEMP_CACHE is None:
        _TEMP_CACHE = Path(tempfile.mkdtemp(prefix="envbuild-micromamba-"))
    return _TEMP_CACHE


_TEMP_CACHE: Path | None = None


def _configured_cache() -> Path | None:
    configured = os.environ.get(CACHE_ENV, "")
    return Path(configured) if configured else None


def _cleanup_cache() -> None:
    if _TEMP_CACHE is not None:
        shutil.rmtree(_TEMP_CACHE, ignore_errors=True)


def _solve_timeout() -> float:
    raw = os.environ.get(SOLVE_TIMEOUT_ENV, "")
    if not raw:
        return DEFAULT_SOLVE_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ShimUsageError(f"{SOLVE_TIMEOUT_ENV}={raw!r} is not a positive number of seconds")
    return value


def _target_subdir() -> str:
    subdir = os.environ.get("CONDA_SUBDIR", "")
    if not subdir:
        return str(rattler.Subdir.current())
    try:
        return str(rattler.Subdir(subdir))
    except Exception:  # noqa: BLE001 - rattler's ParseSubdirError
        raise ShimUsageError(f"CONDA_SUBDIR={subdir!r} is not a conda platform (e.g. linux-64, osx-arm64)") from None


# ---------------------------------------------------------------- channels and virtual packages


def _channel_set(request: SolveRequest) -> ChannelSet:
    """Split conda-lock's channels into real sources and virtual packages.

    A local channel whose records for this subdir (and noarch) are all `__x` virtual packages is
    conda-lock's fake channel: its records become virtual packages and the channel is dropped.
    The CONDA_OVERRIDE_* variables add or replace versions (conda-lock sets them to match).
    """
    sources: list[str] = []
    from_channels: list[rattler.GenericVirtualPackage] = []
    for channel in request.channels:
        records = _local_channel_records(channel, request.subdir)
        virtual = [r for r in records if str(r.get("name", "")).startswith("__")]
        if records and len(virtual) == len(records):
            from_channels.extend(_virtual_from_record(r) for r in virtual)
        else:
            sources.append(channel)
    merged = _merge_virtual(from_channels, _override_virtual_packages(request.subdir), request.subdir)
    return ChannelSet(sources=tuple(sources), virtual_packages=tuple(merged))


def _local_channel_records(channel: str, subdir: str) -> list[dict[str, Any]]:
    """The records of a small file:// channel's subdir and noarch (empty for remote, unknown or
    large ones: reading a real local channel here would cost a JSON parse of megabytes per solve)."""
    parts = urllib.parse.urlsplit(channel)
    if parts.scheme != "file":
        return []
    from urllib.request import url2pathname

    root = Path(url2pathname(parts.path))
    paths = [root / folder / "repodata.json" for folder in (subdir, "noarch")]
    paths = [path for path in paths if path.is_file()]
    if any(path.stat().st_size > FAKE_CHANNEL_MAX_BYTES for path in paths):
        return []
    records: list[dict[str, Any]] = []
    for path in paths:
        try:
            repodata = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return []  # not ours to judge: rattler reports a broken channel
        for key in ("packages", "packages.conda"):
            records.extend(r for r in (repodata.get(key) or {}).values() if isinstance(r, dict))
    return records


def _virtual_from_record(record: dict[str, Any]) -> rattler.GenericVirtualPackage:
    return _virtual(str(record["name"]), str(record.get("version") or "0"), str(record.get("build") or "0"))


def _override_virtual_packages(subdir: str) -> list[rattler.GenericVirtualPackage]:
    """CONDA_OVERRIDE_X=value gives __x (value is a version; for __archspec, the build string).
    Empty means absent, as in conda."""
    packages = []
    for key, value in sorted(os.environ.items()):
        if not key.startswith(OVERRIDE_PREFIX) or not value.strip():
            continue
        name = "__" + key.removeprefix(OVERRIDE_PREFIX).lower()
        if name == "__archspec":
            packages.append(_virtual(name, "1", value.strip()))
        else:
            packages.append(_virtual(name, value.strip(), "0"))
    return packages


def _merge_virtual(
    from_channels: list[rattler.GenericVirtualPackage],
    overrides: list[rattler.GenericVirtualPackage],
    subdir: str,
) -> list[rattler.GenericVirtualPackage]:
    """One package per name: an override wins, else the highest version (conda-lock's fake channel
    carries two __osx for osx-64, of which conda uses the higher). The platform family's own
    marker (__unix / __win) is implied by the subdir, as micromamba does."""
    chosen: dict[str, rattler.GenericVirtualPackage] = {}
    for package in from_channels:
        name = package.name.normalized
        if name not in chosen or package.version > chosen[name].version:
            chosen[name] = package
    for package in overrides:
        chosen[package.name.normalized] = package
    family = "__win" if subdir.startswith("win-") else "__unix" if subdir != "noarch" else None
    if family is not None and family not in chosen:
        chosen[family] = _virtual(family, "0", "0")
    return [chosen[name] for name in sorted(chosen)]


def _virtual(name: str, version: str, build: str) -> rattler.GenericVirtualPackage:
    try:
        return rattler.GenericVirtualPackage(rattler.PackageName(name), rattler.Version(version),
                                             rattler.BuildString(build))
    except Exception as exc:  # noqa: BLE001 - rattler's parse errors
        raise ShimUsageError(f"virtual package {name}={version}={build} is not valid: {exc}") from None


def _virtual_text(package: rattler.GenericVirtualPackage) -> str:
    build = str(package.build_string)
    return f"{package.name.normalized} {package.version}" + ("" if build == "0" else f" {build}")


# ---------------------------------------------------------------- answers


def _dry_run_answer(
    prefix: str | None,
    fetch: list[rattler.RepoDataRecord],
    link: list[rattler.RepoDataRecord],
    removed: tuple[dict[str, Any], ...],
) -> dict[str, Any]:
    actions: dict[str, Any] = {
        "FETCH": [_fetch_entry(r) for r in fetch],
        "LINK": [_link_entry(r) for r in link],
        "PREFIX": prefix,
    }
    if removed:
        actions["UNLINK"] = [_list_entry(m) for m in removed]
    return {"actions": actions, "dry_run": True, "prefix": prefix, "success": True}


def _fetch_entry(record: rattler.RepoDataRecord) -> dict[str, Any]:
    """The full repodata record, as micromamba prints it: rattler's JSON plus url, fn, channel."""
    entry = json.loads(record.to_json())
    entry["url"] = record.url
    entry["fn"] = record.file_name
    entry["channel"] = record.channel
    entry.setdefault("constrains", [])
    entry.setdefault("depends", [])
    return entry


def _link_entry(record: rattler.RepoDataRecord) -> dict[str, Any]:
    return {
        "base_url": (record.channel or "").rstrip("/"),
        "build_number": record.build_number,
        "build_string": str(record.build),
        "channel": (record.channel or "").rstrip("/"),
        "dist_name": _strip_package_suffix(record.file_name),
        "name": record.name.normalized,
        "platform": record.subdir,
        "version": str(record.version),
    }


def _print_unsolvable(request: SolveRequest, channels: ChannelSet, message: str) -> int:
    explanation = explain_conflict(request, channels, message)
    # conda-lock prints "message" to the user, then our whole stdout again: keep it to that key.
    _print_json({"success": False, "message": explanation})
    return EXIT_UNSOLVABLE


def explain_conflict(request: SolveRequest, channels: ChannelSet, solver_message: str) -> str:
    """A screen-sized explanation: what was asked, which virtual packages were present, and
    rattler's reason, trimmed."""
    virtual = ", ".join(_virtual_text(v) for v in channels.virtual_packages) or "none"
    header = [
        f"Cannot solve for {request.subdir}: {' '.join(request.specs)}",
        f"virtual packages: {virtual}",
    ]
    reason = [line.rstrip() for line in solver_message.strip().splitlines() if line.strip()]
    if "cancelled" in solver_message.lower():
        reason = [
            f"the solver gave up after {_solve_timeout():g} s ({SOLVE_TIMEOUT_ENV}): raise it, or pin "
            "versions of the packages with many candidates"
        ]
    if "__cuda" in solver_message and not any(v.name.normalized == "__cuda" for v in channels.virtual_packages):
        reason.append("hint: a CUDA build was required but this target has no __cuda (use --with-cuda X.Y)")
    lines = header + reason
    if len(lines) > MAX_EXPLANATION_LINES:
        hidden = len(lines) - MAX_EXPLANATION_LINES + 1
        lines = [*lines[: MAX_EXPLANATION_LINES - 1], f"... ({hidden} more lines)"]
    text = "\n".join(lines)
    return text if len(text) <= MAX_EXPLANATION_CHARS else text[: MAX_EXPLANATION_CHARS - 4] + " ..."


def _print_json(value: object) -> None:
    # stdout must be exactly one JSON document: conda-lock parses it whole on failure.
    print(json.dumps(value, indent=1, sort_keys=True))


# ---------------------------------------------------------------- small helpers


def _identity(record: rattler.RepoDataRecord) -> tuple[str, str, str, str]:
    return (record.name.normalized, str(record.version), str(record.build), record.subdir)


def _meta_identity(meta: dict[str, Any]) -> tuple[str, str, str, str]:
    return (meta["name"], str(meta["version"]), str(meta.get("build", "")), str(meta.get("subdir", "")))


def _channel_url(meta: dict[str, Any]) -> str:
    # conda-lock's fake conda-meta `channel` drops the port of http URLs: derive it from the url.
    return str(meta["url"]).split("#", 1)[0].rsplit("/", 2)[0]


def _file_name(url: str) -> str:
    return urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])


def _strip_package_suffix(file_name: str) -> str:
    for suffix in (".conda", ".tar.bz2"):
        if file_name.endswith(suffix):
            return file_name[: -len(suffix)]
    return file_name


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text.strip())

"""Writing the paths a user names: the text goes to a temporary sibling, is synced, and is renamed into
place, so a file is whole or not there. Only a regular file or a new path is replaced: a rename onto a
device, FIFO or socket (or a link to one) would replace that node itself, so it is refused, --force or
not. `write_file` writes through a link to a regular file (the file changes, the link stays);
`write_output`, for what a command writes where its user points it (a spec, a host file, a JUnit report,
an export), never does: a symbolic link there (a dangling one too) is refused, and so is a file envbuild
did not write, unless --force is given and it is a regular file.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from builder.errors import EnvbuildError, UsageError
from builder.safe_io.reading import kind_of


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


class WriteError(EnvbuildError):
    """A write that failed on the way (a full disk, no permission): `reason` is the system's word for it."""

    def __init__(self, path: Path, what: str, reason: str, fix: str) -> None:
        super().__init__(f"{path}: cannot write{_named(what)} ({reason}); {fix}")
        self.reason = reason


def write_destination(path: Path, what: str = "") -> tuple[Path, os.stat_result | None]:
    """Where writing `path` puts the file (a link to a regular file is written through), and what is
    there now (None: a new path); a folder, device, FIFO, socket or link loop is refused in one line."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError(f"{path} is a symbolic link loop (a link that leads back to itself); "
                             "give another path") from None
        raise WriteError(path, what, exc.strerror or str(exc), "check the path and its permissions") from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{path} is a folder; give a file name")
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise UsageError(f"{path} is {kind_of(info.st_mode)}, not a regular file; envbuild writes{_named(what)} "
                         "only to a regular file or a new path, never into a device, FIFO or socket: give a file path")
    destination = Path(os.path.realpath(path)) if os.path.islink(path) else path
    return destination, info


def _named(what: str) -> str:
    return f" {what}" if what else ""


def write_file(path: Path, data: str | bytes, *, overwrite: bool = False, what: str = "",
               fix: str = "free disk space or choose another path") -> Path:
    """Write `data` to `path` whole or not at all: into a temporary sibling, synced, then renamed into
    place. An existing file is replaced only with `overwrite` (else: one UsageError line naming
    --force); without it the file is hard-linked into place, which fails if the name appeared
    meanwhile. A replaced file keeps its mode. Returns where the file was written."""
    destination, existing = write_destination(path, what)
    if (existing is not None or os.path.islink(path)) and not overwrite:
        raise UsageError(f"{path} exists; pass --force to replace it")
    return _write_whole(destination, path, data, existing, overwrite, what, fix,
                        lambda: write_destination(destination, what))


def _write_whole(destination: Path, shown: Path, data: str | bytes, existing: os.stat_result | None,
                 overwrite: bool, what: str, fix: str, recheck: Callable[[], object]) -> Path:
    """`data` into a synced temporary sibling of `destination`, renamed into place after `recheck()` (which
    raises when something else took the name meanwhile)."""
    path = shown
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
        handle, staging_name = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".tmp",
                                                dir=destination.parent)
    except OSError as exc:
        raise WriteError(path, what, exc.strerror or str(exc), fix) from None
    staging = Path(staging_name)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
            stream.flush()
            os.fsync(stream.fileno())  # on disk before the rename: a power cut leaves old or new, never empty
        os.chmod(staging, stat.S_IMODE(existing.st_mode) if existing is not None else 0o666 & ~_umask())
        recheck()  # again, just before the rename: nothing else may have taken its place
        _put_in_place(staging, destination, path, overwrite)
        _sync_folder(destination.parent)
    except OSError as exc:
        raise WriteError(path, what, exc.strerror or str(exc), fix) from None
    finally:
        try:
            staging.unlink(missing_ok=True)
        except OSError:
            pass
    return destination


def _put_in_place(staging: Path, destination: Path, shown: Path, overwrite: bool) -> None:
    if overwrite:
        os.replace(staging, destination)
        return
    try:
        os.link(staging, destination)
    except FileExistsError:
        raise UsageError(f"{shown} exists; pass --force to replace it") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        # A file system without hard links: the existence check above is the guard.
        os.replace(staging, destination)


def sync_file(path: Path) -> None:
    """A file's data on disk before it is renamed into place (a power cut then leaves the old file or
    the new one, never an empty one)."""
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _sync_folder(folder: Path) -> None:
    """The rename itself survives a power cut once the folder is synced (where the system allows it)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


# What a command writes where its user points it: how much of an existing file is read to tell whether
# envbuild wrote it (the mark each writer leaves in its first lines).
OWNED_HEAD_BYTES = 4096


def output_destination(path: Path, what: str = "") -> os.stat_result | None:
    """What is at `path` itself, links not followed (None: nothing), for `write_output`: a symbolic link (a
    dangling one too), a folder, a device, FIFO or socket is refused in one line."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise WriteError(path, what, exc.strerror or str(exc), "check the path and its permissions") from None
    if stat.S_ISLNK(info.st_mode):
        raise UsageError(f"{path} is {_link_words(path)}; envbuild writes{_named(what)} only to a regular file or a "
                         "new path, never through a symbolic link: give the file's own path")
    if stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{path} is a folder; give a file name")
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"{path} is {kind_of(info.st_mode)}, not a regular file; envbuild writes{_named(what)} "
                         "only to a regular file or a new path, never into a device, FIFO or socket: give a file path")
    return info


def _link_words(path: Path) -> str:
    """What the symbolic link at `path` is, in words: a loop, or a link to what (and what that is)."""
    target = os.readlink(path)
    try:
        leads_to = kind_of(os.stat(path).st_mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop (a link that leads back to itself)"
        leads_to = "which does not exist" if exc.errno == errno.ENOENT else "which cannot be read"
        return f"a symbolic link to {target}, {leads_to}"
    return f"a symbolic link to {target} ({leads_to})"


def _head(path: Path) -> bytes:
    """The first bytes of the regular file at `path`, opened without following a link or blocking."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return b""
    try:
        return os.read(handle, OWNED_HEAD_BYTES) if stat.S_ISREG(os.fstat(handle).st_mode) else b""
    finally:
        os.close(handle)


def check_output(path: Path, *, force: bool = False, owned: Callable[[bytes], bool] | None = None,
                 what: str = "") -> os.stat_result | None:
    """Whether `write_output` may write `path` (raises one UsageError line if not), checked before a command's
    work so that a refusal costs nothing: a new path, or a regular file that envbuild wrote (`owned` tells
    from its first bytes; None: no file is replaced without force), or any regular file with `force`."""
    existing = output_destination(path, what)
    if existing is None or force:
        return existing
    if owned is None:
        raise UsageError(f"{path} exists; pass --force to replace it")
    if not owned(_head(path)):
        raise UsageError(f"{path} exists and envbuild did not write it; nothing was written: give another path, "
                         "or pass --force to replace it")
    return existing


def write_output(path: Path, data: str | bytes, *, force: bool = False, owned: Callable[[bytes], bool] | None = None,
                 what: str = "", fix: str = "free disk space or choose another path") -> Path:
    """Write an output whole or not at all at `path` itself (check_output's rules, O_NOFOLLOW's meaning: a
    link is never written through); the name is checked again just before the rename."""
    existing = check_output(path, force=force, owned=owned, what=what)

    def recheck() -> None:
        now = output_destination(path, what)
        if existing is None and now is not None:
            raise UsageError(f"{path} appeared while envbuild wrote it; nothing was replaced: run again")

    return _write_whole(path, path, data, existing, existing is not None, what, fix, recheck)

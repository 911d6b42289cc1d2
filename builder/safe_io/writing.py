"""Writing the paths a user names: the text goes to a temporary sibling, is synced, and is renamed into
place, so a file is whole or not there. Only a regular file or a new path is replaced: a rename onto a
device, FIFO or socket (or a link to one) would replace that node itself, so it is refused, --force or
not. A link to a regular file is written through (the file changes, the link stays).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
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
        _put_in_place(staging, destination, path, overwrite, what)
        _sync_folder(destination.parent)
    except OSError as exc:
        raise WriteError(path, what, exc.strerror or str(exc), fix) from None
    finally:
        try:
            staging.unlink(missing_ok=True)
        except OSError:
            pass
    return destination


def _put_in_place(staging: Path, destination: Path, shown: Path, overwrite: bool, what: str) -> None:
    write_destination(destination, what)  # again, just before the rename: nothing else may have taken its place
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

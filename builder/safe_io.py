"""The paths a user names, read and written safely by construction; standard output with its errors checked.

Reading: only a regular file (or `-`, standard input) is read, and never more than a cap. A FIFO
would block the read forever, a device like /dev/zero would never end, a directory or a symbolic
link loop is not a file: each is refused in one line that names what the path is.

Writing: the text goes to a temporary sibling, is synced, and is renamed into place, so a file is
whole or not there. Only a regular file or a new path is replaced: a rename onto a device, FIFO or
socket (or a link to one) would replace that node itself, so it is refused, --force or not. A link
to a regular file is written through (the file changes, the link stays).

Standard output: what a command prints is checked where it is written. A full disk, a reader that
went away and a closed stdout each end in one `Error:` line and exit 1, never a silent exit 0.
"""

from __future__ import annotations

import errno
import io
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from builder.errors import EnvbuildError, UsageError

STDIN = "-"
MIB = 1024 * 1024

KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
}


def kind_of(mode: int) -> str:
    """What a node is, in words ("a character device"); "a regular file" for one."""
    return "a regular file" if stat.S_ISREG(mode) else KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _stat_problem(path: Path, exc: OSError) -> str:
    """Why stat() of `path` failed, as a phrase after its name."""
    if exc.errno == errno.ELOOP:
        return "is a symbolic link loop (a link that leads back to itself), not a file"
    if exc.errno == errno.ENOENT:
        if os.path.islink(path):
            return f"is a symbolic link to {os.readlink(path)}, which does not exist"
        return "does not exist"
    if exc.errno == errno.ENAMETOOLONG:
        return "is a name too long for the file system"
    return f"cannot be read ({exc.strerror or exc})"


def input_problem(path: Path, dir_okay: bool = False) -> str | None:
    """Why `path` cannot be read as a file, as a phrase after its name ("is a FIFO (named pipe), not a
    regular file"); None for a regular file (or a directory, with `dir_okay`)."""
    try:
        info = os.stat(path)
    except OSError as exc:
        return _stat_problem(path, exc)
    if stat.S_ISREG(info.st_mode) or (dir_okay and stat.S_ISDIR(info.st_mode)):
        return None
    return f"is {kind_of(info.st_mode)}, not a regular file"


def _refused(path: Path | str, what: str, problem: str) -> str:
    fix = "check the path" if "does not exist" in problem else "give a regular file"
    return f"{path}: cannot read the {what}: it {problem}; {fix}"


def _too_large(path: Path | str, limit: int, what: str) -> str:
    size = f"{limit // MIB} MiB" if limit >= MIB else f"{limit // 1024} kB"
    return f"{path}: larger than {size}, not a {what}; give the right file"


def read_bounded(path: Path | str, limit: int, what: str,
                 error: Callable[[str], Exception] = UsageError) -> bytes:
    """At most `limit` bytes of the regular file `path` (`-`: standard input), or `error` with one
    line saying why not. Nothing but a regular file is opened for reading: a FIFO without a writer
    would block here forever."""
    if str(path) == STDIN:
        return read_stdin(limit, what, error)
    problem = input_problem(Path(path))
    if problem:
        raise error(_refused(path, what, problem))
    try:
        # O_NONBLOCK: had a FIFO taken the file's place since the check, opening it must not block.
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(_refused(path, what, _stat_problem(Path(path), exc))) from None
    with os.fdopen(handle, "rb") as stream:
        mode = os.fstat(handle).st_mode
        if not stat.S_ISREG(mode):
            raise error(_refused(path, what, f"is {kind_of(mode)}, not a regular file"))
        try:
            data = stream.read(limit + 1)
        except OSError as exc:
            raise error(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise error(_too_large(path, limit, what))
    return data


def read_stdin(limit: int, what: str, error: Callable[[str], Exception] = UsageError) -> bytes:
    """At most `limit` bytes of standard input: an endless one (`yes |`, `< /dev/zero`) ends at the cap."""
    stream = sys.stdin
    if stream is None:  # Python's stand-in for a closed file descriptor 0
        raise error(f"standard input is closed; pipe the {what} in, or give its FILE")
    try:
        data = stream.buffer.read(limit + 1)
    except (OSError, ValueError) as exc:  # ValueError: closed by the caller
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "it is closed"
        raise error(f"cannot read the {what} from standard input ({reason}); pipe it in, or give its FILE") from None
    if len(data) > limit:
        raise error(f"standard input: more than {limit // MIB} MiB, not a {what}; pipe in the {what} itself")
    return data


# --- writing ------------------------------------------------------------------------------------------

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


def os_error_reason(exc: OSError) -> str:
    """The system's short word for a failed file operation ("No space left on device"). shutil's
    copytree gathers one error per file into a single exception whose text runs to kilobytes: its
    first file's reason stands for all of them."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) and exc.args[0]:
        first = str(exc.args[0][0][-1])
        said = re.match(r"\[Errno \d+\] ([^:]+)", first)
        return said.group(1) if said else first[:120]
    return exc.strerror or str(exc)[:160] or type(exc).__name__


def os_error_line(exc: OSError) -> str:
    """One line for a file operation that failed outside the writers above: where, why, and the fix."""
    where = exc.filename
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) and exc.args[0]:
        where = exc.args[0][0][1]
        more = len(exc.args[0]) - 1
        if more:
            return (f"{where} and {more} more file(s): cannot copy ({os_error_reason(exc)}); check free disk space "
                    "and permissions there")
    prefix = f"{where}: " if where else ""
    return f"{prefix}{os_error_reason(exc)}; check free disk space and permissions there"


# --- standard output ------------------------------------------------------------------------------------

class OutputError(EnvbuildError):
    """Standard output could not take what a command printed."""


def output_error(exc: OSError) -> OutputError:
    if exc.errno == errno.EPIPE:
        return OutputError("standard output: its reader went away (broken pipe), so the output is incomplete; "
                           "read all of it, or redirect it to a file")
    if exc.errno == errno.EBADF:
        return OutputError("standard output is closed, so the output was lost; run the command with its output "
                           "open (e.g. > FILE)")
    fix = "free disk space where it goes, or redirect it elsewhere" if exc.errno in (errno.ENOSPC, errno.EDQUOT) \
        else "redirect it elsewhere"
    return OutputError(f"cannot write standard output ({exc.strerror or exc}); the output is incomplete: {fix}")


class CheckedOutput(io.TextIOBase):
    """Standard output whose write and flush errors become one OutputError (the first only: after a
    failure the rest of the output is dropped, so the error is said once)."""

    def __init__(self, stream: IO[str] | None) -> None:
        super().__init__()
        self._stream = stream
        self.failed = False

    def _call(self, action: Callable[[IO[str]], Any]) -> Any:
        if self.failed:
            return 0
        try:
            if self._stream is None:
                raise OSError(errno.EBADF, os.strerror(errno.EBADF))
            return action(self._stream)
        except OSError as exc:
            self.failed = True
            raise output_error(exc) from None

    def write(self, text: str) -> int:
        # click probes with b"" and "" to tell text streams from binary ones, and swallows what the
        # probe raises: an empty write must not touch the stream (a closed one would fail it unseen).
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if not text:
            return 0
        return self._call(lambda stream: stream.write(text)) or 0

    def flush(self) -> None:
        self._call(lambda stream: stream.flush())

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return bool(self._stream and self._stream.isatty())

    def fileno(self) -> int:
        if self._stream is None:
            raise io.UnsupportedOperation("standard output is closed")
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._stream, "errors", None)


def _reserve_standard_descriptors() -> None:
    """A closed descriptor 0, 1 or 2 would be handed to the next file opened (a temporary file
    would then receive what children print): each closed one is held on /dev/null, read-only, so
    writing to it still fails as a closed one does."""
    for wanted in (0, 1, 2):
        try:
            os.fstat(wanted)
            continue
        except OSError:
            pass
        held = os.open(os.devnull, os.O_RDONLY)
        if held != wanted:
            os.dup2(held, wanted)
            os.close(held)


@contextmanager
def checked_stdout() -> Iterator[CheckedOutput]:
    """Inside: sys.stdout is a CheckedOutput (a closed stdout included); the caller flushes it at the
    end to learn whether everything was written (an OutputError if not)."""
    _reserve_standard_descriptors()
    original = sys.stdout
    checked = CheckedOutput(original)
    sys.stdout = checked
    try:
        yield checked
    finally:
        sys.stdout = original


def settle_stdout() -> None:
    """Flush standard output before an error is said: a failure to write it is then not said as well
    (the command's own error is the one that counts)."""
    try:
        sys.stdout.flush()
    except (EnvbuildError, OSError, ValueError, AttributeError):
        pass


# --- a lock between envbuild processes ---------------------------------------------------------------

@contextmanager
def exclusive_lock(path: Path, timeout: float, waiting: Callable[[], None],
                   timed_out: Callable[[], Exception]) -> Iterator[None]:
    """An exclusive flock on `path` while inside (see acquire_lock)."""
    handle = acquire_lock(path, timeout, waiting, timed_out)
    try:
        yield
    finally:
        release_lock(path, handle)


def acquire_lock(path: Path, timeout: float, waiting: Callable[[], None],
                 timed_out: Callable[[], Exception]) -> int:
    """An exclusive flock on the file that is at `path` now; `waiting` is called once when another
    process holds it, `timed_out()` is raised after `timeout` seconds. Its last holder removes the
    file (release_lock), and one who waited on the removed file tries again on the new one, so no
    lock file stays behind."""
    import fcntl

    deadline = time.monotonic() + timeout
    said = False
    while True:
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            if not said:
                waiting()
                said = True
            if time.monotonic() > deadline:
                raise timed_out() from None
            time.sleep(0.1)
            continue
        except BaseException:
            os.close(handle)
            raise
        try:
            if os.stat(path).st_ino == os.fstat(handle).st_ino:
                return handle
        except FileNotFoundError:
            pass
        os.close(handle)


def release_lock(path: Path, handle: int) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only folder after all: the file stays, the lock still ends with the close
    os.close(handle)

"""Reading the paths a user names: only a regular file (or `-`, standard input) is read, and never more
than a cap. A FIFO would block the read forever, a device like /dev/zero would never end, a directory or a
symbolic link loop is not a file: each is refused in one line that names what the path is.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

from builder.errors import UsageError

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

"""Standard output with its errors checked where it is written: a full disk, a reader that went away and
a closed stdout each end in one `Error:` line and exit 1, never a silent exit 0.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from builder.errors import EnvbuildError


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

    def write_bytes(self, data: bytes) -> int:
        """Bytes after the text written so far (click's shell completion writes its script as bytes)."""
        def both(stream: IO[str]) -> int:
            stream.flush()
            return stream.buffer.write(data)  # type: ignore[attr-defined]
        return self._call(both) or 0

    @property
    def buffer(self) -> CheckedBytes:  # type: ignore[override]
        return CheckedBytes(self)

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


class CheckedBytes(io.RawIOBase):
    """The binary side of a CheckedOutput: the same checks, the same single error."""

    def __init__(self, text: CheckedOutput) -> None:
        super().__init__()
        self._text = text

    def write(self, data: Any) -> int:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"a bytes-like object is required, not {type(data).__name__}")
        if not data:
            return 0  # click's probe, as in CheckedOutput.write
        return self._text.write_bytes(bytes(data))

    def flush(self) -> None:
        self._text.flush()

    def writable(self) -> bool:
        return True


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

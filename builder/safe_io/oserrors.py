"""An OSError as the short words a one-line error can hold (shutil's copy errors run to kilobytes)."""

from __future__ import annotations

import re
import shutil


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

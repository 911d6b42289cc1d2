"""Files envbuild writes into a team's repository (a spec, a CI pipeline): templates and safe writes.

The templates live in `builder/data/templates/` and render through builder.templates' one Jinja
environment, whose filters make every value one YAML scalar (or one comment line).
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from builder.errors import EnvbuildError, UsageError


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def write_new_file(path: Path, text: str, force: bool = False) -> None:
    """Write `text` to `path` whole or not at all; an existing file is replaced only with `force`.

    The text goes to a temporary sibling first. Without `force` it is hard-linked into place, which
    fails when the name exists, so a file that appears meanwhile is not replaced either.
    """
    if path.is_dir():
        raise UsageError(f"{path} is a folder; give a file name")
    if path.exists() and not force:
        raise UsageError(f"{path} exists; pass --force to replace it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, staging_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise EnvbuildError(f"{path}: cannot write ({exc.strerror})") from None
    staging = Path(staging_name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(staging, 0o666 & ~_umask())
        if force:
            os.replace(staging, path)
            return
        try:
            os.link(staging, path)
        except FileExistsError:
            raise UsageError(f"{path} exists; pass --force to replace it") from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            # A file system without hard links: the existence check above is the guard.
            os.replace(staging, path)
    except OSError as exc:
        raise EnvbuildError(f"{path}: cannot write ({exc.strerror})") from None
    finally:
        staging.unlink(missing_ok=True)

"""Files envbuild writes into a team's repository (a spec, a CI pipeline): templates and safe writes.

The templates live in `builder/data/templates/`. Every value reaches the text through a filter that
makes it one YAML scalar (or one comment line), so no value can add a key, a job or a step.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from builder import __version__
from builder.errors import EnvbuildError, UsageError
from builder.render import yaml_str


def comment_text(value: Any) -> str:
    """Text for a `#` comment: control characters (a newline would end the comment) shown escaped."""
    return json.dumps(str(value), ensure_ascii=False)[1:-1]


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("builder", "data/templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters.update(yaml_str=yaml_str, comment=comment_text)
    return env


def render_template(name: str, **values: Any) -> str:
    return _environment().get_template(name).render(version=__version__, **values)


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

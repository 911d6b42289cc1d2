"""Files envbuild writes into a team's repository (a spec, a CI pipeline): templates and safe writes.

The templates live in `builder/data/templates/` and render through builder.templates' one Jinja
environment, whose filters make every value one YAML scalar (or one comment line).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from builder import __version__
from builder.errors import EnvbuildError, UsageError
from builder.safe_io.writing import write_output


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def write_new_file(path: Path, text: str, force: bool = False, owned: Callable[[bytes], bool] | None = None,
                   what: str = "") -> None:
    """Write `text` to `path` whole or not at all, never through a symbolic link; an existing file is replaced
    only when `owned` says envbuild wrote it, or with `force` when it is a regular file
    (builder.safe_io.write_output)."""
    write_output(path, text, force=force, owned=owned, what=what)


OWNED_MANIFEST = ".envbuild-written.json"


def _digest(path: Path) -> str:
    if path.is_symlink():
        return "link:" + os.readlink(path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _entries(root: Path) -> dict[str, str]:
    """Every file and link under root (relative path -> digest); folders are implied by their files."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or path.is_file():
            found[path.relative_to(root).as_posix()] = _digest(path)
        elif path.is_dir() and not any(path.iterdir()):
            found[path.relative_to(root).as_posix() + "/"] = "folder"
    return found


def check_owned_folder(out: Path) -> None:
    """Refuse a folder that holds anything envbuild did not write there itself, or changed since."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise UsageError(f"{out} exists and is not a folder; give a new or empty folder")
    if not out.exists() or not any(out.iterdir()):
        return
    try:
        written = json.loads((out / OWNED_MANIFEST).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        raise UsageError(f"{out} is not empty and envbuild did not write it (no {OWNED_MANIFEST}); "
                         "give a new or empty folder") from None
    for name, digest in _entries(out).items():
        if name == OWNED_MANIFEST:
            continue
        if name not in written:
            raise UsageError(f"{out}: {name} was not written by envbuild; move it away or give another folder")
        if written[name] != digest:
            raise UsageError(f"{out}: {name} was changed since envbuild wrote it; move it away or give another folder")


def write_owned_folder(out: Path, fill: Callable[[Path], object], written_by: str) -> Path:
    """Fill a new folder and put it at `out` whole or not at all, replacing only a folder that
    envbuild wrote itself (its manifest lists every file with its digest) and nobody changed.

    `fill` writes into a temporary sibling; the manifest is added, then the sibling is renamed into
    place. An earlier folder is moved aside first, checked again (a file could have appeared in the
    meantime) and only then removed; if the check fails it is moved back untouched."""
    check_owned_folder(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp's 0700 would make the folder private
    except OSError as exc:
        raise EnvbuildError(f"{out}: cannot write ({exc.strerror}); nothing was changed there; free disk space "
                            "or choose another --out") from None
    try:
        fill(staging)
        manifest = {"written_by": written_by, "version": __version__, "files": _entries(staging)}
        (staging / OWNED_MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        if out.exists() and any(out.iterdir()):
            previous = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            out.rename(previous / out.name)
            try:
                check_owned_folder(previous / out.name)
            except UsageError:
                (previous / out.name).rename(out)
                previous.rmdir()
                raise
            staging.rename(out)
            shutil.rmtree(previous, ignore_errors=True)
        else:
            staging.rename(out)  # an empty folder is replaced in one rename
    except OSError as exc:
        raise EnvbuildError(f"{out}: cannot write ({exc.strerror or exc}); nothing was changed there; free disk "
                            "space or choose another --out") from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return out

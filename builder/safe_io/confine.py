"""Paths that a file names, kept inside the folder of that file.

A requirements file's `-r`/`-c` line or a spec's CA file arrives with the file, often in a pull request:
followed blindly it reads /proc/self/environ or ../../secrets into a spec or a CI log. A named path is
taken only when, with every symbolic link resolved, it stays under the (resolved) folder; the caller
words the refusal, and decides whether the user may allow it.

Standard library only, so that any reader (the in-image installer included) can use it.
"""

from __future__ import annotations

from pathlib import Path, PurePath


class OutsideFolder(ValueError):
    """A named path that leaves its folder: `path` is where it leads, `why` says how."""

    def __init__(self, name: str, folder: Path, path: Path, why: str) -> None:
        super().__init__(f"{name!r} {why}")
        self.name = name
        self.folder = folder
        self.path = path
        self.why = why


def confined(folder: Path, name: str | PurePath, *, plain_relative: bool = False) -> Path:
    """`name` (relative to `folder`, or absolute) resolved, symbolic links followed; raises OutsideFolder
    when that is not under `folder` resolved. `plain_relative` also refuses an absolute name or one with
    `..` even where it happens to lead back inside (a name that must read as a file under the folder)."""
    base = Path(folder).resolve()
    relative = PurePath(name)
    path = (base / relative).resolve()
    shown = str(name)
    if plain_relative and (relative.is_absolute() or ".." in relative.parts):
        raise OutsideFolder(shown, base, path, f"is an absolute or ../ path, not a file under {base}")
    if not path.is_relative_to(base):
        lexical = base / relative
        how = "is" if path == lexical else f"leads to {path} (through .. or a symbolic link),"
        raise OutsideFolder(shown, base, path, f"{how} outside {base}")
    return path

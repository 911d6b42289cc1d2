"""A Dockerfile's installs of a Python project it COPYs in: `uv sync` (the project's uv.lock, else its
pyproject.toml) and `pip install /folder[extra]` (the folder's pyproject.toml).

The project's own package is built in the image from its source, which a spec cannot carry: it is named. What
it installs with it is read into the Dockerfile's reading in its place, as if the Dockerfile listed it: the
lock's pins (builder/init/uv_lock.py), else the pyproject's [project] dependencies and the extras asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from builder.errors import UsageError
from builder.formats.uv_lock import read_uv_lock
from builder.init.reading import Reading, read_pip_text
from builder.init.uv_lock import read_uv_lock_into
from builder.init.variants import read_toml_file

UV_SYNC_VALUE_FLAGS = {"--extra", "--project", "--directory", "--package", "--group", "--only-group", "--python",
                       "-p", "--index", "--default-index", "--index-url", "--extra-index-url", "--find-links", "-f",
                       "--no-group", "--no-extra", "--config-file", "--cache-dir"}


def uv_sync_arguments(words: tuple[str, ...]) -> tuple[dict[str, list[str]], set[str]]:
    """`uv sync`'s options that take a value (by flag, every value given) and the flags without one."""
    values: dict[str, list[str]] = {}
    flags: set[str] = set()
    position = 0
    while position < len(words):
        flag, sep, value = words[position].partition("=")
        if flag in UV_SYNC_VALUE_FLAGS:
            if not sep:
                position += 1
                value = words[position] if position < len(words) else ""
            values.setdefault(flag, []).append(value)
        elif flag.startswith("-"):
            flags.add(flag)
        position += 1
    return values, flags


def read_uv_sync(reading: Reading, entry: str, words: tuple[str, ...], lock: Path | None,
                 pyproject: Path | None) -> None:
    """`uv sync [--extra X] [--all-extras]` of the project whose uv.lock (else pyproject.toml) the build
    context holds; named when it holds neither."""
    values, flags = uv_sync_arguments(words)
    extras, all_extras = tuple(values.get("--extra", [])), "--all-extras" in flags
    if lock is not None:
        try:
            parsed = read_uv_lock(lock)
        except UsageError:
            parsed = None
        if parsed is not None:
            read_uv_lock_into(reading, parsed, extras, all_extras)
            reading.note(entry, "unmapped", "the project itself is built in the image from its source, which a spec "
                                            f"cannot carry; its packages ({lock.name}, as locked for Linux x86-64) "
                                            "were read in its place")
            return
    if pyproject is not None and read_project_folder(reading, pyproject, extras, entry, all_extras):
        return
    reading.note(entry, "unmapped", "`uv sync` installs the project's uv.lock (or its pyproject.toml), which the "
                                    "build context here does not hold: run `envbuild init` on that file")


def read_project_folder(reading: Reading, pyproject: Path, extras: tuple[str, ...], entry: str,
                        all_extras: bool = False) -> bool:
    """A project folder's pyproject.toml: its [project] dependencies and the extras asked for, read as pip
    lines; False when the file has no [project] table."""
    try:
        data = read_toml_file(pyproject, "pyproject.toml")
    except UsageError:
        return False
    project = data.get("project")
    if not isinstance(project, dict):
        return False
    optional = project.get("optional-dependencies")
    optional = optional if isinstance(optional, dict) else {}
    wanted = list(optional) if all_extras else [e for e in extras if e in optional]
    requirements = [*_strings(project.get("dependencies")), *(r for e in wanted for r in _strings(optional[e]))]
    name = project.get("name") or pyproject.parent.name
    read_from = f"{pyproject.name} [project]" + (f", extras {', '.join(wanted)}" if wanted else "")
    reading.note(entry, "unmapped", f"the project {name} is built in the image from its source, which a spec cannot "
                                    f"carry; its dependencies ({read_from}) were read in its place")
    for requirement in requirements:
        read_pip_text(reading, requirement)
    return True


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def folder_and_extras(target: str) -> tuple[str, tuple[str, ...]] | None:
    """`/tmp/fa4[cu13,dev]` -> (`/tmp/fa4`, (`cu13`, `dev`)): a pip target that names a local folder."""
    if not target.startswith((".", "/")):
        return None
    folder, _, rest = target.partition("[")
    if not rest:
        return folder, ()
    try:
        extras = Requirement(f"project[{rest}").extras
    except InvalidRequirement:
        return None
    return folder, tuple(sorted(extras))

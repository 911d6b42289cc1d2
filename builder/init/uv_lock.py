"""Reading a uv.lock (builder/formats/uv_lock.py types it) into a `Reading`: what `uv sync` installs on Linux.

A uv.lock holds every package uv resolved for every platform; `uv sync` installs the project's dependencies
(and the extras asked for) at their locked versions, with what they pull in. The project's direct
dependencies are read as pinned pip lines, each the version uv locked for Linux x86-64 (a package locked per
platform, e.g. torch `2.11.0+cu128` from PyTorch's cu128 index on Linux and `2.11.0` from PyPI elsewhere, is
read as the Linux one, by the marker uv wrote); their own dependencies are the resolver's, not the project's
choices, and are left to the spec's solve. The extras and groups not asked for are named with their packages.
A Dockerfile's `uv sync` reads the lock beside it into the Dockerfile's reading (builder/init/dockerfile.py).
"""

from __future__ import annotations

from pathlib import Path

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.markers import default_environment as marker_environment

from builder.formats.uv_lock import UvDependency, UvLock, UvPackage, read_uv_lock
from builder.init.reading import LINUX_MARKERS, Reading, read_pip_text
from builder.init.uv_project import read_requires_python
from builder.init.variants import is_pytorch_wheel_index, read_index_url


def read_uv_lock_file(path: Path) -> Reading:
    """A uv.lock given to init on its own: the project's dependencies (no extras: `uv sync` installs none
    unless asked) and the Python range it was locked for."""
    lock = read_uv_lock(path)
    reading = Reading(str(path), kind="uv.lock")
    reading.has_pip_section = True
    read_requires_python(reading, lock.requires_python)
    read_uv_lock_into(reading, lock, extras=(), all_extras=False)
    reading.note("(the whole file)", "assumed",
                 f"a lock of {len(lock.package)} packages for every platform uv resolves: the project's direct "
                 "dependencies were read at the versions locked for Linux x86-64; the rest are theirs, left to the "
                 "spec's solve")
    return reading


def read_uv_lock_into(reading: Reading, lock: UvLock, extras: tuple[str, ...], all_extras: bool) -> None:
    """The packages `uv sync [--extra X ...|--all-extras]` installs from the lock, read into `reading`."""
    projects = lock.projects
    if not projects:
        raise reading.fail("a uv.lock names its project as a package whose source is the folder (`editable` or "
                           "`virtual`); this one has none, so what `uv sync` installs is unknown")
    for project in projects:
        wanted = list(project.optional_dependencies) if all_extras else [e for e in extras
                                                                        if e in project.optional_dependencies]
        for dependency in [*project.dependencies, *(d for e in wanted for d in project.optional_dependencies[e])]:
            _read_dependency(reading, lock, dependency)
        _name_unread(reading, lock, project, set(wanted))


def _on_linux(marker: str | None) -> bool:
    if not marker:
        return True
    environment: dict[str, str] = {key: str(value) for key, value in marker_environment().items()}
    environment.update(LINUX_MARKERS, extra="")
    try:
        return Marker(marker).evaluate(environment)
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return True


def _read_dependency(reading: Reading, lock: UvLock, dependency: UvDependency) -> None:
    if not _on_linux(dependency.marker):
        return
    locked = lock.locked(dependency)
    if locked is None or locked.is_project:
        return
    if locked.name in {_name(line) for line in reading.pip} or (locked.name == "torch" and reading.pip_torch):
        return
    text = f"{locked.name}=={locked.version}" if locked.version else locked.name
    registry = locked.registry
    if registry is None:
        kind = next(iter(locked.source), "source")
        reading.note(f"{text} ({kind} {locked.source.get(kind, '')})".strip(), "unmapped",
                     f"uv locked it from a {kind}, not an index; publish it to an index and pin it by version")
        return
    if locked.name == "torch" and is_pytorch_wheel_index(registry):
        read_index_url(reading, f"torch from {registry}", registry)
    read_pip_text(reading, text)


def _name(line: str) -> str:
    return line.split("=", 1)[0].split("[", 1)[0].strip().lower()


def _name_unread(reading: Reading, lock: UvLock, project: UvPackage, read: set[str]) -> None:
    """The extras and groups `uv sync` was not asked for, in one note each kind, with the packages only they
    would add."""
    have = {_name(line) for line in reading.pip} | {"torch", "torchvision"}
    sections = {"extras": {n: d for n, d in project.optional_dependencies.items() if n not in read},
                "groups": project.dev_dependencies}
    for kind, chosen in sections.items():
        names = sorted({d.name for deps in chosen.values() for d in deps
                        if _on_linux(d.marker) and d.name not in have and not _is_project(lock, d)})
        if not names:
            continue
        why = ("developer tools (`uv sync` installs the dev group unless --no-dev)" if kind == "groups"
               else "extras `uv sync` installs only when asked (--extra NAME, --all-extras)")
        reading.note(f"{project.name} {kind} {', '.join(chosen)}: {', '.join(names)}", "dropped",
                     f"{why}; add the packages to `pip:` if the env needs them")


def _is_project(lock: UvLock, dependency: UvDependency) -> bool:
    locked = lock.locked(dependency)
    return locked is not None and locked.is_project

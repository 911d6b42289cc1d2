"""Which spec a command means when none is given: the one `envs/*.yaml` of the project, found by searching
up from the current folder (as pixi finds its manifest). Several are never guessed between."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from builder.errors import UsageError

SPEC_FOLDER = "envs"
SPEC_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class FoundSpec:
    path: Path
    shown: str  # the path as the user reads it: relative to the current folder (../envs/x.yaml from a subfolder)


def project_specs(start: Path) -> tuple[Path, list[Path]]:
    """The nearest folder at or above `start` holding envs/*.yaml (or .yml), and those files, sorted;
    (start, []) when no folder up to the root has any."""
    for folder in (start, *start.parents):
        envs = folder / SPEC_FOLDER
        if envs.is_dir():
            found = sorted(p for p in envs.iterdir() if p.suffix in SPEC_SUFFIXES and p.is_file())
            if found:
                return folder, found
    return start, []


def _shown(path: Path, cwd: Path) -> str:
    return os.path.relpath(path, cwd)


def default_spec(cwd: Path | None = None) -> FoundSpec:
    """The project's only spec; a UsageError that lists them when there are several or says how to
    make one when there is none."""
    cwd = (cwd or Path.cwd()).absolute()
    _, specs = project_specs(cwd)
    if not specs:
        raise UsageError(f"no SPEC given and no {SPEC_FOLDER}/*.yaml in {cwd} or a folder above it: give SPEC, "
                         "or write one with `envbuild init`")
    if len(specs) > 1:
        names = ", ".join(_shown(p, cwd) for p in specs)
        raise UsageError(f"no SPEC given and the project has {len(specs)} specs ({names}): give one of them")
    return FoundSpec(specs[0], _shown(specs[0], cwd))

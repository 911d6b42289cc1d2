"""The pyproject.toml of a uv project envbuild exports (`envbuild export uv`), as one typed value and its one
writer.

teams/export.py decides what the project holds (an extra per pip-route target, each with its PyTorch
wheel index); this writes it as uv reads it. A team's own pyproject.toml is init's to read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.formats.toml_tables import toml_text
from builder.generated_files import write_new_file


@dataclass(frozen=True)
class UvIndex:
    """`[[tool.uv.index]]`: a named index, explicit (only the packages that name it take from it)."""

    name: str
    url: str
    explicit: bool = True


@dataclass(frozen=True)
class UvSource:
    """One entry of `[tool.uv.sources]`: this package from `index` when `extra` is asked for."""

    index: str
    extra: str


@dataclass(frozen=True)
class UvProject:
    name: str
    requires_python: str
    dependencies: tuple[str, ...] = ()
    optional_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    version: str = "0.0.0"
    package: bool = False  # a project of dependencies, not a package uv builds
    environments: tuple[str, ...] = ()  # the markers uv resolves for
    conflicts: tuple[tuple[str, ...], ...] = ()  # groups of extras that exclude each other
    sources: Mapping[str, tuple[UvSource, ...]] = field(default_factory=dict)
    indexes: tuple[UvIndex, ...] = ()
    header: tuple[str, ...] = ()  # comment lines above the tables


def dumps(project: UvProject) -> str:
    uv: dict[str, Any] = {"package": project.package, "environments": list(project.environments)}
    if project.conflicts:
        uv["conflicts"] = [[{"extra": extra} for extra in group] for group in project.conflicts]
    tables: list[tuple[str, Mapping[str, Any]]] = [
        ("project", {"name": project.name, "version": project.version, "requires-python": project.requires_python,
                     "dependencies": list(project.dependencies)}),
        ("project.optional-dependencies", {name: list(lines) for name, lines in project.optional_dependencies.items()}),
        ("tool.uv", uv),
        ("tool.uv.sources", {name: [{"index": s.index, "extra": s.extra} for s in sources]
                             for name, sources in project.sources.items() if sources}),
        *(("[tool.uv.index]", {"name": i.name, "url": i.url, "explicit": i.explicit}) for i in project.indexes),
    ]
    return toml_text(project.header, tables)


def write(path: Path, project: UvProject, force: bool = False) -> str:
    """Write the project file (never over a file unless `force`); the text written."""
    text = dumps(project)
    write_new_file(path, text, force=force)
    return text

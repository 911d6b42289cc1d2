"""The pixi.toml envbuild exports (`envbuild export pixi`), as one typed value and its one writer.

teams/export.py decides what the workspace holds (a feature and an environment per target, the floors
of its rich platforms); this writes it as pixi 0.71 reads it. A team's own pixi.toml is init's to read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.formats.toml_tables import toml_text
from builder.generated_files import write_new_file


@dataclass(frozen=True)
class CudaFloor:
    """A rich platform's `cuda`: the oldest driver (`13.0`) and, when known, the lowest GPU (`7.5`)."""

    driver: str
    arch: str | None = None

    def as_toml(self) -> Any:
        return {"driver": self.driver, "arch": self.arch} if self.arch else self.driver


@dataclass(frozen=True)
class RichPlatform:
    """A platform bound to the machines it runs on: `{ name = "linux-64-cuda12-6", platform = "linux-64",
    cuda = { driver = "12.0", arch = "7.5" } }`."""

    name: str
    platform: str
    cuda: CudaFloor

    def as_toml(self) -> dict[str, Any]:
        return {"name": self.name, "platform": self.platform, "cuda": self.cuda.as_toml()}


@dataclass(frozen=True)
class CondaDependency:
    """`python = "3.11.*"`, or with a build `pytorch = { version = "==2.7.1", build = "cuda126*" }`."""

    version: str
    build: str | None = None

    def as_toml(self) -> Any:
        return {"version": self.version, "build": self.build} if self.build else self.version


@dataclass(frozen=True)
class PypiDependency:
    """`einops = ">=0.7"`, or a table when it names extras or an index."""

    version: str
    extras: tuple[str, ...] = ()
    index: str | None = None

    def as_toml(self) -> Any:
        if not self.extras and self.index is None:
            return self.version
        table: dict[str, Any] = {"version": self.version}
        if self.extras:
            table["extras"] = list(self.extras)
        if self.index is not None:
            table["index"] = self.index
        return table


@dataclass(frozen=True)
class Feature:
    name: str
    platforms: tuple[str, ...]  # names: a plain subdir or a rich platform's name
    dependencies: Mapping[str, CondaDependency] = field(default_factory=dict)
    pypi_dependencies: Mapping[str, PypiDependency] = field(default_factory=dict)


@dataclass(frozen=True)
class PixiManifest:
    name: str
    channels: tuple[str, ...]
    platforms: tuple[str | RichPlatform, ...]
    requires_pixi: str
    dependencies: Mapping[str, CondaDependency] = field(default_factory=dict)
    pypi_dependencies: Mapping[str, PypiDependency] = field(default_factory=dict)
    features: tuple[Feature, ...] = ()
    environments: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    header: tuple[str, ...] = ()  # comment lines above the tables


def _entries(dependencies: Mapping[str, CondaDependency] | Mapping[str, PypiDependency]) -> dict[str, Any]:
    return {name: dependency.as_toml() for name, dependency in dependencies.items()}


def dumps(manifest: PixiManifest) -> str:
    """The manifest's TOML: the workspace, the default feature's dependencies, then each feature's own
    tables, then the environments."""
    platforms = [p.as_toml() if isinstance(p, RichPlatform) else p for p in manifest.platforms]
    tables: list[tuple[str, Mapping[str, Any]]] = [("workspace", {
        "name": manifest.name, "channels": list(manifest.channels), "platforms": platforms,
        "requires-pixi": manifest.requires_pixi})]
    tables.append(("dependencies", _entries(manifest.dependencies)))
    if manifest.pypi_dependencies:
        tables.append(("pypi-dependencies", _entries(manifest.pypi_dependencies)))
    for feature in manifest.features:
        tables.append((f"feature.{feature.name}", {"platforms": list(feature.platforms)}))
        tables.append((f"feature.{feature.name}.dependencies", _entries(feature.dependencies)))
        if feature.pypi_dependencies:
            tables.append((f"feature.{feature.name}.pypi-dependencies", _entries(feature.pypi_dependencies)))
    tables.append(("environments", {name: list(features) for name, features in manifest.environments.items()}))
    return toml_text(manifest.header, tables)


def write(path: Path, manifest: PixiManifest, force: bool = False) -> str:
    """Write the manifest (never over a file unless `force`); the text written."""
    text = dumps(manifest)
    write_new_file(path, text, force=force)
    return text

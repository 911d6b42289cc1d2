"""A team's uv.lock (uv's universal lockfile) as one typed value, read in one place with one set of messages.

init reads a project's uv.lock (`envbuild init --from uv.lock`, or the lock a Dockerfile's `uv sync` installs)
through `read_uv_lock`; nothing else parses the file. The model keeps what init uses of uv's format (version 1,
any revision): the Python range, and per package its name, version, source and dependencies (with their
markers, and the version and source uv names where a package is locked more than once), the rest ignored.
A real lock of a large project is a few MiB (lerobot's, with ~800 packages for every platform, is 1.1 MiB).
"""

from __future__ import annotations

from pathlib import Path

import tomllib
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from builder.errors import UsageError
from builder.userfile import MAX_LOCK_BYTES, decode, read_capped

UV_LOCK_FIX = "give envbuild the uv.lock `uv lock` wrote"
READABLE_VERSIONS = (1,)


class UvDependency(BaseModel):
    """One entry of a package's `dependencies` (or of one of its extras): a name, and where uv locked the
    package more than once (per platform), the version, source and marker of the one meant."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    name: str
    version: str | None = None
    source: dict[str, str] = Field(default_factory=dict)
    marker: str | None = None
    extra: list[str] = Field(default_factory=list)


class UvPackage(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    name: str
    version: str | None = None  # a virtual or dynamic project has none
    source: dict[str, str] = Field(default_factory=dict)
    dependencies: list[UvDependency] = Field(default_factory=list)
    optional_dependencies: dict[str, list[UvDependency]] = Field(default_factory=dict,
                                                                 alias="optional-dependencies")
    dev_dependencies: dict[str, list[UvDependency]] = Field(default_factory=dict, alias="dev-dependencies")

    @property
    def is_project(self) -> bool:
        """The project (or a workspace member) uv.lock was made for: its source is the folder itself."""
        return "editable" in self.source or "virtual" in self.source

    @property
    def registry(self) -> str | None:
        return self.source.get("registry")


class UvLock(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)
    version: int
    requires_python: str | None = Field(default=None, alias="requires-python")
    package: list[UvPackage] = Field(default_factory=list)

    @property
    def projects(self) -> list[UvPackage]:
        return [p for p in self.package if p.is_project]

    def locked(self, dependency: UvDependency) -> UvPackage | None:
        """The locked package a dependency entry means: the one of its name, or where uv locked several, the
        one of the version and source the entry names."""
        same = [p for p in self.package if p.name == dependency.name]
        if len(same) > 1:
            same = [p for p in same if p.version == dependency.version
                    and (not dependency.source or p.source == dependency.source)] or same[:1]
        return same[0] if same else None


def read_uv_lock(path: Path) -> UvLock:
    """The uv.lock at `path` (size-capped, UTF-8, TOML), or one UsageError line saying why not."""
    data = read_capped(path, MAX_LOCK_BYTES, "uv.lock", UsageError)
    text = decode(data, path, "uv.lock", UsageError, UV_LOCK_FIX)
    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc}); {UV_LOCK_FIX}") from None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{path}: not a uv.lock envbuild reads ({exc or 'nested too deeply'}); {UV_LOCK_FIX}") \
            from None
    return parse_uv_lock(parsed, str(path))


def parse_uv_lock(data: object, source: str) -> UvLock:
    if not isinstance(data, dict) or not isinstance(data.get("package"), list):
        raise UsageError(f"{source}: not a uv.lock (expected `version` and [[package]] tables); {UV_LOCK_FIX}")
    if data.get("version") not in READABLE_VERSIONS:
        raise UsageError(f"{source}: a uv.lock of format version {data.get('version')!r}; envbuild reads version "
                         f"1 (uv 0.3 and later); {UV_LOCK_FIX}")
    try:
        return UvLock.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"{source}: not a uv.lock envbuild reads ({where}: {first['msg']}; {exc.error_count()} "
                         f"problem(s)); {UV_LOCK_FIX}") from None

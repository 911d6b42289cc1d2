"""The conda-lock.yml lockfile as one typed value, read in one place with one set of messages.

Every stage that needs a lock's content (the lock check, the mixed-CUDA guard, the build context and
its install plan, onboard's install) takes a `CondaLock` from `read_lock`, and init takes a team's own
conda-lock.yml through `parse_lock`; nothing else parses the file (conda-lock's own models write it, in
lock/run.py). The model keeps what envbuild uses of conda-lock's format (version 1 on disk; version 2 has the
same package fields) and ignores the rest.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from builder.errors import EnvbuildError
from builder.formats.problems import first_problem
from builder.safe_io.reading import read_bounded
from builder.userfile import MAX_EXPANDED_NODES, MAX_LOCK_BYTES, decode, load_yaml


class PackageHash(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    md5: str | None = None
    sha256: str | None = None


class LockedPackage(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    name: str
    version: str
    manager: Literal["conda", "pip"]
    platform: str
    url: str
    hash: PackageHash = PackageHash()
    dependencies: dict[str, str] = Field(default_factory=dict)
    category: str = "main"

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1].split("#")[0]

    @property
    def build(self) -> str | None:
        """The conda build string from the file name (`pytorch-2.7.1-cuda118_py311_h1_0.conda`)."""
        if self.manager != "conda":
            return None
        stem = self.filename.removesuffix(".conda").removesuffix(".tar.bz2")
        return stem.rsplit("-", 1)[-1]

    @property
    def channel(self) -> str | None:
        """The channel's name from a conda package's URL (`https://host/conda-forge/linux-64/x.conda`)."""
        if self.manager != "conda":
            return None
        parts = self.url.split("#")[0].split("/")
        return parts[-3] if len(parts) >= 5 and "://" in self.url else None


class LockMetadata(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    platforms: list[str]
    channels: list[dict] = Field(default_factory=list)
    content_hash: dict[str, str] = Field(default_factory=dict)


class CondaLock(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    version: int
    metadata: LockMetadata
    package: list[LockedPackage]

    def for_platform(self, platform: str) -> list[LockedPackage]:
        return [p for p in self.package if p.platform == platform]

    def find(self, name: str, platform: str) -> LockedPackage | None:
        return next((p for p in self.for_platform(platform) if p.name == name), None)


# conda-lock writes version 1; its version 2 ("v2prelim") keeps the package fields envbuild reads.
READABLE_VERSIONS = (1, 2)


LOCK_FIX = "run `envbuild lock --force`"


@dataclass(frozen=True)
class LockFile:
    """A conda-lock.yml envbuild wrote, read from disk once: its identity (`sha256`) and its content (`lock`,
    parsed when first asked for) are of the same bytes, so a check and the sha it records cannot disagree."""

    path: Path
    data: bytes

    @classmethod
    def read(cls, path: Path) -> LockFile:
        if not path.is_file():
            raise EnvbuildError(f"{path}: lockfile not found; run `envbuild lock` first")
        return cls(path, read_bounded(path, MAX_LOCK_BYTES, "lockfile", EnvbuildError))

    @cached_property
    def sha256(self) -> str:
        """The identity of a lockfile: images are labelled and tagged with it, lock info records it."""
        return hashlib.sha256(self.data).hexdigest()

    @cached_property
    def lock(self) -> CondaLock:
        """The content; anything unreadable is one clear line, never a traceback."""
        fix = f"the lockfile is corrupted; {LOCK_FIX}"
        text = decode(self.data, self.path, "lockfile", EnvbuildError, fix)
        data = load_yaml(text, self.path, "lockfile", EnvbuildError, fix,
                         loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader), max_nodes=MAX_EXPANDED_NODES)
        return parse_lock(data, str(self.path), EnvbuildError, LOCK_FIX)


def read_lock(path: Path) -> CondaLock:
    """Parse a conda-lock.yml envbuild wrote; anything unreadable is one clear line, never a traceback."""
    return LockFile.read(path).lock


def parse_lock(data: object, source: str, error: type[EnvbuildError], fix: str,
               versions: tuple[int, ...] | None = READABLE_VERSIONS) -> CondaLock:
    """A conda-lock.yml's parsed YAML as a `CondaLock`, or one `error` line that ends with `fix`. `versions`
    None takes any format version (a team's own lock, from any conda-lock, for the package fields alone)."""
    if not isinstance(data, dict):
        raise error(f"{source}: not a conda-lock lockfile (expected a mapping with version, metadata, "
                    f"package); {fix}")
    if versions is not None and data.get("version") not in versions:
        raise error(f"{source}: not a conda-lock lockfile envbuild reads (format version "
                    f"{data.get('version')!r}, expected 1 or 2); {fix}")
    try:
        return CondaLock.model_validate(data)
    except ValidationError as exc:
        raise error(f"{source}: not a valid conda-lock lockfile, the lockfile is corrupted ({first_problem(exc)}); "
                    f"{fix}") from None


def lockfile_sha256(path: Path) -> str:
    """The identity of a lockfile: images are labelled and tagged with it, lock info records it."""
    return hashlib.sha256(read_bounded(path, MAX_LOCK_BYTES, "lockfile", EnvbuildError)).hexdigest()


def lockfile_schema() -> dict[str, object]:
    """The JSON Schema of the part of conda-lock.yml envbuild reads (CondaLock; other keys are allowed)."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **CondaLock.model_json_schema()}

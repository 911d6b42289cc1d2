"""The conda-lock.yml lockfile as a typed value (what envbuild reads of conda-lock's v1 format)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from builder.errors import EnvbuildError


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


def read_lock(path: Path) -> CondaLock:
    """Parse a conda-lock.yml; anything unreadable is one clear line, never a traceback."""
    from builder.userfile import MAX_EXPANDED_NODES, MAX_LOCK_BYTES, read_yaml

    if not path.is_file():
        raise EnvbuildError(f"{path}: cannot read the lockfile (no such file); run `envbuild lock`")
    data = read_yaml(path, "lockfile", EnvbuildError, "the lockfile is corrupted; run `envbuild lock --force`",
                     limit=MAX_LOCK_BYTES, loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader),
                     max_nodes=MAX_EXPANDED_NODES)
    try:
        lock = CondaLock.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise EnvbuildError(
            f"{path}: not a conda-lock v1 lockfile ({where}: {first['msg']}); run `envbuild lock --force`"
        ) from None
    if lock.version != 1:
        raise EnvbuildError(f"{path}: conda-lock format version {lock.version}, envbuild reads version 1")
    return lock


def lockfile_sha256(path: Path) -> str:
    """The identity of a lockfile: images are labelled and tagged with it, lock info records it."""
    return hashlib.sha256(path.read_bytes()).hexdigest()

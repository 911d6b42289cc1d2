"""The CUDA a pip package is built for, where its name, an extra, a local version tag or its version says so.

The rules and rows are data (data/cuda_bound_packages.yaml, each with the upstream page it was read from);
this module applies them to one requirement. `envbuild lint` compares the result with the target's CUDA.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from builder.yamlio import data_text


@dataclass(frozen=True)
class BoundPackage:
    """A requirement and the CUDA it is built for: `12` (a major) or `11.8`, with how that was read."""

    text: str
    name: str
    cuda: str
    how: str

    @property
    def major(self) -> str:
        return self.cuda.split(".")[0]


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    text = data_text("cuda_bound_packages.yaml")
    table: dict[str, Any] = yaml.safe_load(text)
    return table


def cuda_bound(text: str) -> BoundPackage | None:
    """The CUDA a pip requirement line is built for; None when nothing in it says."""
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return None
    name = canonicalize_name(requirement.name)
    readers = (_by_local_tag(requirement), _by_name(name), _by_extra(name, requirement), _by_version(name, requirement))
    for found in readers:
        if found:
            cuda, how = found
            return BoundPackage(text, name, cuda, how)
    return None


def _cuda(match: re.Match[str]) -> str:
    minor = match.groupdict().get("minor")
    return f"{int(match['major'])}.{minor}" if minor else str(int(match["major"]))


def _by_name(name: str) -> tuple[str, str] | None:
    for rule in _table()["names"]:
        match = re.match(rule["pattern"], name)
        if match:
            return _cuda(match), "by its name"
    return None


def _by_extra(name: str, requirement: Requirement) -> tuple[str, str] | None:
    for rule in _table()["extras"]:
        if rule["package"] != name:
            continue
        for extra in sorted(requirement.extras):
            match = re.match(rule["pattern"], extra.lower())
            if match:
                return _cuda(match), f"by its extra [{extra}]"
    return None


def _by_local_tag(requirement: Requirement) -> tuple[str, str] | None:
    for specifier in requirement.specifier:
        local = specifier.version.split("+", 1)[1] if "+" in specifier.version else ""
        for rule in _table()["local_versions"] if local else []:
            match = re.search(rule["pattern"], local.lower())
            if match:
                return _cuda(match), f"by its local tag +{local}"
    return None


def _by_version(name: str, requirement: Requirement) -> tuple[str, str] | None:
    pins = [s.version for s in requirement.specifier if s.operator in ("==", "===") and "*" not in s.version]
    if not pins:
        return None
    try:
        version = Version(pins[0])
    except InvalidVersion:
        return None
    for package in _table()["versions"]:
        if package["package"] != name:
            continue
        for row in package["rows"]:
            if SpecifierSet(row["versions"]).contains(version, prereleases=True):
                return str(row["cuda"]), f"by {name} {version}'s row in envbuild's CUDA table"
    return None

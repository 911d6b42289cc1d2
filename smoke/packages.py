"""Which NVIDIA library packages this environment installed: pip wheels (nvidia-cudnn-cu12, ...) by
their metadata, conda packages (cudnn, nccl) by the prefix's conda-meta records. No torch here."""

from __future__ import annotations

import importlib.metadata
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class InstalledPackage:
    manager: str  # "pip" or "conda"
    name: str
    version: str

    def describe(self) -> str:
        return f"the {self.manager} package {self.name} {self.version}"


def wheel_versions(pattern: str, distributions: Iterable[tuple[str, str]] | None = None) -> list[InstalledPackage]:
    """Installed distributions whose normalised name fully matches `pattern` (e.g. r'nvidia-nccl-cu\\d+').
    `distributions` ((name, version) pairs) replaces this Python's own in tests."""
    if distributions is None:
        distributions = ((d.metadata["Name"] or "", d.version) for d in importlib.metadata.distributions())
    found = []
    for name, version in distributions:
        normalised = re.sub(r"[-_.]+", "-", name).lower()
        if re.fullmatch(pattern, normalised):
            found.append(InstalledPackage("pip", normalised, version))
    return sorted(set(found), key=lambda p: p.name)


def conda_versions(name: str, prefix: Path | None = None) -> list[InstalledPackage]:
    """The conda package `name` recorded in the prefix's conda-meta (none outside a conda env)."""
    meta = Path(sys.prefix if prefix is None else prefix) / "conda-meta"
    found = []
    for record in sorted(meta.glob(f"{name}-[0-9]*.json")):
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if data.get("name") == name and data.get("version"):
            found.append(InstalledPackage("conda", name, str(data["version"])))
    return found

"""Build the offline world under one folder (default `.world/`), cached at three levels:

1. downloads: a marker per cache folder (see downloads.py), so a warm build uses no network;
2. packages: each package file has a key (its metadata, its inputs' hashes, the packing code);
   only packages whose key changed are rewritten (the 900 MB torch repack is done once);
3. the whole world: a stamp over the table, the pins and this code; when it matches, a build
   returns at once without reading a wheel or starting rattler.

Layout: `conda/<channel>/<subdir>/...`, `pypi/simple/...` + `pypi/files/...`, `cache/...`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from builder.errors import EnvbuildError, UsageError
from tests.world.channel.packages import PACKAGE_FORMATS, index_channel, write_package, write_package_from_tree

from . import debian_python, downloads, pypi, recipes
from .local_version import with_local_version
from .wheels import WheelInfo

HERE = Path(__file__).resolve().parent
TABLE_FILE = HERE / "world.yaml"
PINS_FILE = HERE / "wheels.txt"
# The real CUDA torch and torchvision with their closure: served on the pip index only.
CUDA_PINS_FILE = HERE / "cuda_wheels.txt"
CHANNELS = ("conda-forge", "pytorch", "nvidia")
_STAMP = ".world-stamp"
# The code whose output is in a package file: a change here repacks everything.
_PACKING_CODE = (HERE / "packages.py", HERE / "wheels.py", HERE / "debian_python.py")


@dataclass(frozen=True)
class WorldLayout:
    root: Path

    @property
    def conda(self) -> Path:
        return self.root / "conda"

    @property
    def pypi(self) -> Path:
        return self.root / "pypi"

    @property
    def cache(self) -> Path:
        # Other parts of the world (engine, images) keep their own caches under cache/ too.
        return self.root / "cache" / "channel"

    @property
    def stamp(self) -> Path:
        return self.root / _STAMP

    def channel(self, name: str) -> Path:
        return self.conda / name


@dataclass
class BuildReport:
    cached: bool
    seconds: float
    written: list[str] = field(default_factory=list)
    kept: int = 0
    removed: list[str] = field(default_factory=list)


def load_table() -> dict[str, Any]:
    return yaml.safe_load(TABLE_FILE.read_text())


def build_world(root: Path, log: Callable[[str], None] = lambda _: None) -> BuildReport:
    """Build (or refresh) the whole world under `root`; returns what was done."""
    start = time.monotonic()
    layout = WorldLayout(root.resolve())
    stamp = _world_stamp(layout)
    if _stamp_matches(layout, stamp):
        return BuildReport(cached=True, seconds=time.monotonic() - start)
    table = load_table()
    log("fetching inputs (cached after the first build)")
    wheels = downloads.fetch_wheels(PINS_FILE, layout.cache / "wheels")
    debs = downloads.fetch_debs(table["debian_python"]["packages"], layout.cache / "debs")
    inputs = recipes.Inputs(table, _by_name(wheels), tuple(debs), tuple(debian_python.deb_version(d) for d in debs))
    report = BuildReport(cached=False, seconds=0.0)
    planned = recipes.plan_world(inputs)
    for channel in CHANNELS:
        subdirs = table[_table_key(channel)]["subdirs"]
        changed = _write_channel(layout, channel, [p for p in planned if p.channel == channel], subdirs, report, log)
        if changed or not (layout.channel(channel) / "noarch" / "repodata.json").is_file():
            log(f"indexing {channel}")
            index_channel(layout.channel(channel))
    log("fetching the CUDA wheels (about 2.9 GB, cached after the first build)")
    cuda_wheels = downloads.fetch_wheels(CUDA_PINS_FILE, layout.cache / "cuda-wheels")
    served = _as_served(cuda_wheels, table["pip_index"], layout.cache / "served", log)
    log("writing the pip index")
    pypi.build_index(wheels + served, layout.pypi)
    layout.stamp.write_text(_world_stamp(layout))
    report.seconds = time.monotonic() - start
    return report


def _as_served(wheels: list[WheelInfo], changes: dict[str, Any], dest: Path,
               log: Callable[[str], None]) -> list[WheelInfo]:
    """The wheels as the index serves them: world.yaml's `pip_index` changes applied (local_version.py)."""
    by_pin = {(w["name"], w["version"]): w["local"] for w in changes["local_versions"]}
    served = []
    for wheel in wheels:
        local = by_pin.pop((wheel.name, wheel.version), None)
        if local is not None:
            log(f"serving {wheel.filename} as {wheel.version}+{local}")
            wheel = with_local_version(wheel, local, dest / "local-versions")
        served.append(wheel)
    if by_pin:
        missing = ", ".join(f"{name}=={version}" for name, version in by_pin)
        raise EnvbuildError(f"world.yaml: pip_index names {missing}, which cuda_wheels.txt does not pin")
    return served


def _write_channel(layout: WorldLayout, channel: str, planned: list[recipes.Planned], subdirs: list[str],
                   report: BuildReport, log: Callable[[str], None]) -> bool:
    root = layout.channel(channel)
    for subdir in subdirs:
        (root / subdir).mkdir(parents=True, exist_ok=True)
    keys = layout.cache / "keys" / channel
    wanted: set[str] = set()
    changed = False
    for item in planned:
        rel = f"{item.meta.subdir}/{item.meta.file_name(item.fmt)}"
        if rel in wanted:
            raise EnvbuildError(f"world.yaml plans {channel}/{rel} twice: make the two builds differ")
        wanted.add(rel)
        key = _package_key(item)
        key_file = keys / f"{rel}.key"
        if (root / rel).is_file() and key_file.is_file() and key_file.read_text() == key:
            report.kept += 1
            continue
        log(f"writing {channel}/{rel}")
        _write_one(layout, root, item)
        key_file.parent.mkdir(parents=True, exist_ok=True)
        key_file.write_text(key)
        report.written.append(f"{channel}/{rel}")
        changed = True
    for fmt in PACKAGE_FORMATS:
        for stale in root.glob(f"*/*{fmt}"):
            rel = f"{stale.parent.name}/{stale.name}"
            if rel not in wanted:
                stale.unlink()
                report.removed.append(f"{channel}/{rel}")
                changed = True
    return changed


def _write_one(layout: WorldLayout, channel_root: Path, item: recipes.Planned) -> None:
    if item.fill_tree is None:
        write_package(channel_root, item.meta, item.fmt)
        return
    tree = layout.cache / "trees" / item.meta.dist_name
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    try:
        item.fill_tree(tree)
        write_package_from_tree(channel_root, item.meta, tree, item.fmt)
    finally:
        # Unpacked trees are big (torch: ~900 MB) and cheap to remake from the cached wheel.
        shutil.rmtree(tree, ignore_errors=True)


def _package_key(item: recipes.Planned) -> str:
    digest = hashlib.sha256(repr(item.meta).encode())
    digest.update(item.fmt.encode() + b"\0" + item.source.encode())
    if item.real:
        for code in _PACKING_CODE:
            digest.update(code.read_bytes())
    else:
        digest.update((HERE / "packages.py").read_bytes())
    return digest.hexdigest()


def _world_stamp(layout: WorldLayout) -> str:
    """Everything a world depends on that a warm check can read in milliseconds."""
    digest = hashlib.sha256()
    for path in [TABLE_FILE, PINS_FILE, CUDA_PINS_FILE, *_PACKING_CODE, *sorted(HERE.glob("*.py"))]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for marker in (layout.cache / "wheels" / ".complete", layout.cache / "debs" / ".complete",
                   layout.cache / "cuda-wheels" / ".complete"):
        digest.update(marker.read_bytes() if marker.is_file() else b"-")
    return digest.hexdigest()


def _stamp_matches(layout: WorldLayout, stamp: str) -> bool:
    stamp_file = layout.stamp
    if not stamp_file.is_file() or stamp_file.read_text() != stamp:
        return False
    needed = [layout.channel(c) / "noarch" / "repodata.json" for c in CHANNELS] + [layout.pypi / "simple" / "index.html"]
    return all(p.is_file() for p in needed)


def _by_name(wheels: list[WheelInfo]) -> dict[str, list[WheelInfo]]:
    grouped: dict[str, list[WheelInfo]] = {}
    for wheel in wheels:
        grouped.setdefault(wheel.name, []).append(wheel)
    return grouped


def _table_key(channel: str) -> str:
    return {"conda-forge": "conda_forge", "pytorch": "pytorch_channel", "nvidia": "nvidia_channel"}[channel]


def remove_world(root: Path) -> None:
    """Delete what `build_world` made under `root` (its caches too), and nothing else there."""
    layout = WorldLayout(root)
    for folder in (layout.conda, layout.pypi, layout.cache):
        shutil.rmtree(folder, ignore_errors=True)
    layout.stamp.unlink(missing_ok=True)


def world_port() -> int:
    """The fixed port of the world's server: lockfiles record the URL, so it must not move."""
    raw = os.environ.get("ENVBUILD_WORLD_PORT", "8765")
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise UsageError(f"ENVBUILD_WORLD_PORT={raw!r} is not a port number: set it to e.g. 8765")
    return int(raw)

"""A synthetic conda-forge-like channel for the lock benchmark: repodata only, no package files.

Shape (per solve platform, about `names * versions_per_name * 1.2` records plus the default env's):
- 40 % noarch python libraries (`python >=3.9`), 40 % C libraries, 20 % compiled python
  extensions with one build per python (3.11, 3.12) pinned to `python_abi`;
- dependencies only point to lower-numbered names (a DAG, so every spec is solvable), drawn with a
  bias to low numbers (a few "popular" packages many depend on, like conda-forge's libzlib or
  numpy), 0-5 per package, newer versions adding some, with version bounds that exist;
- the packages envbuild's default env needs (python, python_abi, cuda-version, cuda-cudart, pytorch
  builds, torchvision, numpy, torch's runtime deps), made from the same plan as the world's
  conda-forge channel, payload-free.

`repodata.json` is written directly: rattler's `index_fs` reads package files, and 20,000 of them
would take minutes to write. A record's sha256/md5 are digests of the record itself (there is no
file to hash), so a lock against this channel cannot be installed; it only measures solving.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from tests.world.channel.packages import CondaPackage, index_record, write_repodata

from . import recipes
from .build import PINS_FILE, load_table
from .downloads import read_pins
from .wheels import WheelInfo, read_wheel

_PYTHONS = ("3.11", "3.12")


@dataclass(frozen=True)
class SyntheticChannel:
    root: Path
    records_per_subdir: dict[str, int]
    names: tuple[str, ...]  # the synthetic names, lowest (most depended on) first


def make_synthetic_channel(root: Path, names: int = 2000, versions_per_name: int = 10,
                           subdirs: Iterable[str] = ("linux-64", "osx-arm64"), seed: int = 0,
                           wheel_cache: Path | None = None) -> SyntheticChannel:
    """Write a synthetic channel under `root` (subdirs + noarch) and return what it holds.

    `wheel_cache`: a world's `cache/wheels`; with it the default-env packages carry their real
    dependencies (jinja2 -> markupsafe, sympy -> mpmath), without it only the versions from the pins.
    """
    subdirs = tuple(subdirs)
    rng = random.Random(seed)
    per_subdir: dict[str, dict[str, dict[str, object]]] = {s: {} for s in (*subdirs, "noarch")}
    kinds = _kinds(names, rng)
    versions = [_versions(versions_per_name, rng) for _ in range(names)]
    for i in range(names):
        for v_index, version in enumerate(versions[i]):
            depends = _depends(i, v_index, kinds, versions, rng)
            for pkg in _packages(i, kinds[i], version, depends, subdirs):
                _add(per_subdir, pkg)
    for item in recipes.plan_conda_forge(_default_env_inputs(wheel_cache)):
        if item.meta.subdir in per_subdir:
            _add(per_subdir, item.meta)
    root.mkdir(parents=True, exist_ok=True)
    for subdir, records in per_subdir.items():
        write_repodata(root, subdir, records)
    counts = {s: len(per_subdir[s]) + len(per_subdir["noarch"]) for s in subdirs}
    return SyntheticChannel(root, counts, tuple(_name(i, kinds[i]) for i in range(names)))


def _kinds(names: int, rng: random.Random) -> list[str]:
    kinds = ["noarch"] * (names * 4 // 10) + ["clib"] * (names * 4 // 10)
    kinds += ["pyext"] * (names - len(kinds))
    rng.shuffle(kinds)
    return kinds


def _versions(count: int, rng: random.Random) -> list[str]:
    major, minor, out = rng.randint(0, 3), rng.randint(0, 9), []
    for _ in range(count):
        out.append(f"{major}.{minor}.{rng.randint(0, 5)}")
        if rng.random() < 0.25:
            major, minor = major + 1, 0
        else:
            minor += 1
    return out


def _depends(i: int, v_index: int, kinds: list[str], versions: list[list[str]], rng: random.Random) -> list[str]:
    if i == 0:
        return []
    # The same seed per (name, version) family keeps older versions' deps a subset of newer ones'.
    family = random.Random(i * 7919)
    count = min(i, family.choice((0, 1, 1, 2, 2, 3, 3, 4, 5)) + (1 if v_index >= 7 else 0))
    targets = sorted({int(i * family.random() ** 2) for _ in range(count)})
    specs = []
    for j in targets:
        if kinds[i] == "noarch" and kinds[j] != "noarch":
            continue  # a noarch package cannot need a platform-only one in every subdir we write
        dep_versions = versions[j]
        choice = rng.random()
        if choice < 0.4:
            specs.append(_name(j, kinds[j]))
        elif choice < 0.8:
            specs.append(f"{_name(j, kinds[j])} >={dep_versions[rng.randrange(len(dep_versions) // 2 + 1)]}")
        else:
            upper = int(dep_versions[-1].split(".")[0]) + 1
            specs.append(f"{_name(j, kinds[j])} >={dep_versions[0]},<{upper}.0a0")
    return specs


def _packages(i: int, kind: str, version: str, depends: list[str], subdirs: tuple[str, ...]) -> Iterable[CondaPackage]:
    name = _name(i, kind)
    if kind == "noarch":
        yield CondaPackage(name, version, recipes.NOARCH_PYTHON_BUILD, 0, noarch="python",
                           depends=("python >=3.9", *depends))
        return
    for subdir in subdirs:
        if kind == "clib":
            yield CondaPackage(name, version, f"{_hash(name, version, subdir)}_0", 0, subdir=subdir, depends=tuple(depends))
            continue
        for short in _PYTHONS:
            nodot = short.replace(".", "")
            minor = int(short.split(".")[1])
            yield CondaPackage(
                name, version, f"py{nodot}{_hash(name, version, subdir, short)}_0", 0, subdir=subdir,
                depends=(f"python >={short},<3.{minor + 1}.0a0", f"python_abi {short}.* *_cp{nodot}", *depends))


def _add(per_subdir: dict[str, dict[str, dict[str, object]]], pkg: CondaPackage) -> None:
    record = index_record(pkg)
    blob = json.dumps(record, sort_keys=True).encode()
    record["sha256"] = hashlib.sha256(blob).hexdigest()
    record["md5"] = hashlib.md5(blob).hexdigest()
    record["size"] = len(blob)
    per_subdir[pkg.subdir][pkg.file_name(".conda")] = record


def _default_env_inputs(wheel_cache: Path | None) -> recipes.Inputs:
    table = load_table()
    wheels: dict[str, list[WheelInfo]] = {}
    on_disk = sorted(wheel_cache.glob("*.whl")) if wheel_cache and wheel_cache.is_dir() else []
    if on_disk:
        for path in on_disk:
            info = read_wheel(path)
            wheels.setdefault(info.name, []).append(info)
    else:
        for pin in read_pins(PINS_FILE):
            version = next(iter(pin.specifier)).version
            info = WheelInfo(Path(f"{pin.name}-{version}.whl"), canonicalize_name(pin.name), version, (), "", (),
                             True, f"{pin.name}-{version}.dist-info", "")
            wheels.setdefault(info.name, []).append(info)
    # Metadata only: no Debian packages; a linux-64 python 3.11 record stands in for the real one.
    return recipes.Inputs(table, wheels, metadata_only=True)


def _name(i: int, kind: str) -> str:
    prefix = {"noarch": "py-synth", "clib": "libsynth", "pyext": "synth-ext"}[kind]
    return f"{prefix}-{i:04d}"


def _hash(*parts: str) -> str:
    return "h" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:7]

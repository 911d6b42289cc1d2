"""Reading a pixi.lock (versions 4 to 7): one variant per environment, from the builds it locked.

Every version lists, per environment, its channels and per platform the URL of each locked package
(`- conda: URL`, `- pypi: URL`); the file name of a URL names the package, its version and its build.
Version 7 names its platforms (`p1`, `linux-64`) in a `platforms:` list with the virtual packages each
declared (`__cuda=12`, `__cuda_arch=8.6`). Torch, its CUDA, torchvision and Python are read from their
builds; of the rest, the packages that no other locked package depends on (the file's `packages:` records list
each one's `depends` / `requires_dist`) are what the manifest asked for, and so is any package the manifest
beside the lock names (a lock alone cannot tell an asked-for package that another also depends on): they are
kept at their locked versions (a wheel) or named (a pypi package from git or a folder). Everything else is their
dependencies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from builder.errors import UsageError
from builder.init.reading import Reading, read_channel_list, read_conda_text, read_pip_text
from builder.init.variants import Variant, VariantsReading, read_toml_file
from builder.specs.cuda import CudaVersion

LOCK_VERSIONS = (4, 5, 6, 7)
CONDA_FILE = re.compile(r"(?P<name>.+)-(?P<version>[^-]+)-(?P<build>[^-]+)\.(conda|tar\.bz2)")
WHEEL_FILE = re.compile(r"(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl")
LOCKED_TORCH = ("pytorch", "pytorch-gpu", "pytorch-cpu")


@dataclass(frozen=True)
class LockPlatform:
    name: str
    subdir: str
    virtual: dict[str, str]


def read_pixi_lock_data(data: Any, source: str, asked: frozenset[str] = frozenset()) -> VariantsReading:
    """`asked`: the package names the manifest beside the lock asks for (kept even where another locked
    package also depends on them)."""
    reading = VariantsReading(source, kind="pixi.lock")
    version = data.get("version") if isinstance(data, dict) else None
    if version not in LOCK_VERSIONS:
        found = f"version {version}" if isinstance(version, (int, str)) else "no `version:`"
        raise reading.fail(f"a pixi.lock of {found}; envbuild reads pixi.lock versions "
                           f"{LOCK_VERSIONS[0]} to {LOCK_VERSIONS[-1]} (run `pixi lock` with a newer pixi)")
    environments = data.get("environments")
    if not isinstance(environments, dict) or not environments:
        raise reading.fail("a pixi.lock lists its `environments:`; this one has none")
    platforms = _lock_platforms(data.get("platforms"))
    records = _records(data.get("packages"))
    for name, body in environments.items():
        if isinstance(body, dict):
            _read_environment(reading, str(name), body, platforms, (records, asked))
    reading.note("(the whole file)", "assumed", "a lock, mostly dependencies: torch, its CUDA and Python were read "
                                               "per environment, and the packages no other locked package "
                                               "depends on (what the manifest asked for) kept at their locked "
                                               "versions; the rest are their dependencies")
    reading.summarise()
    return reading


def _lock_platforms(entries: Any) -> dict[str, LockPlatform]:
    """Version 7's `platforms:` (name, subdir, virtual packages `__cuda=12`); earlier versions name subdirs."""
    platforms: dict[str, LockPlatform] = {}
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name"):
            virtual = {}
            for package in entry.get("virtual-packages") or []:
                name, _, rest = str(package).partition("=")
                virtual[name] = rest.split("=")[0]
            name = str(entry["name"])
            platforms[name] = LockPlatform(name, str(entry.get("subdir") or name), virtual)
    return platforms


def _records(entries: Any) -> dict[str, dict[str, Any]]:
    """The file's package records by their URL (`conda:`/`pypi:` from version 5, `url:` in version 4)."""
    records: dict[str, dict[str, Any]] = {}
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict):
            url = entry.get("conda") or entry.get("pypi") or entry.get("url")
            if url:
                records[str(url)] = entry
    return records


def _read_environment(reading: VariantsReading, name: str, body: dict[str, Any],
                      platforms: dict[str, LockPlatform],
                      known: tuple[dict[str, dict[str, Any]], frozenset[str]]) -> None:
    packages: dict[str, Any] = body["packages"] if isinstance(body.get("packages"), dict) else {}
    locked = {str(p): platforms.get(str(p), LockPlatform(str(p), str(p), {})) for p in packages}
    subdirs = [p.subdir for p in locked.values()]
    linux = next((s for s in ("linux-64", "linux-aarch64") if s in subdirs), subdirs[0] if subdirs else None)
    chosen = [p for p in locked.values() if p.subdir == linux]
    for platform in chosen:
        label = f"environment {name}" + (f" on {platform.name}" if len(chosen) > 1 else "")
        variant = _read_locked(reading, label, body, platform, packages.get(platform.name) or [])
        _read_requested(variant.reading, packages.get(platform.name) or [], *known)
        if variant.reading.conda_torch is None and variant.reading.pip_torch is None:
            reading.note(label, "dropped", "no torch locked in it")
            continue
        reading.variants.append(variant)


def _read_locked(parent: Reading, label: str, body: dict[str, Any], platform: LockPlatform,
                 entries: list[Any]) -> Variant:
    reading = Reading(parent.source, kind="pixi.lock")
    reading.platforms = [platform.subdir]
    urls = [c.get("url") if isinstance(c, dict) else c for c in body.get("channels") or []]
    read_channel_list(reading, [str(u).rstrip("/").rsplit("/", 1)[-1] for u in urls if u])
    conda, pypi = _locked_files(entries)
    _read_locked_conda(reading, conda)
    for name, (version, _) in pypi.items():
        if name in ("torch", "torchvision") and not (name == "torch" and reading.conda_torch):
            read_pip_text(reading, f"{name}=={version}")
    driver = platform.virtual.get("__cuda")
    entry = f"platform {platform.name} ({platform.subdir}: " + ", ".join(
        f"{k}={v}" for k, v in platform.virtual.items() if k.startswith("__cuda")) + ")"
    return Variant(label, reading, driver or None, entry, platform.virtual.get("__cuda_arch") or None, entry)


def _locked_files(entries: list[Any]) -> tuple[dict[str, tuple[str, str, str]], dict[str, tuple[str, str]]]:
    """The environment's conda packages {name: (version, build, channel)} and wheels {name: (version, url)}."""
    conda: dict[str, tuple[str, str, str]] = {}
    pypi: dict[str, tuple[str, str]] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        if entry.get("conda"):
            url = str(entry["conda"])
            found = CONDA_FILE.fullmatch(url.rsplit("/", 1)[-1])
            channel = re.search(r"://[^/]+/([^/]+)/(linux|osx|win|noarch)", url)
            if found:
                conda[found["name"].lower()] = (found["version"], found["build"], channel[1] if channel else "")
        elif entry.get("pypi"):
            url = str(entry["pypi"])
            found = WHEEL_FILE.fullmatch(unquote(url.rsplit("/", 1)[-1]))
            if found:
                pypi[found["name"].lower().replace("_", "-")] = (found["version"], url)
    return conda, pypi


def _read_locked_conda(reading: Reading, conda: dict[str, tuple[str, str, str]]) -> None:
    """The locked torch with its build and channel (the build names its CUDA), its CUDA, torchvision, Python."""
    _read_locked_torch(reading, conda)
    for name in ("cuda-version", "pytorch-cuda", "cpuonly"):
        if name in conda:
            read_conda_text(reading, f"{name}={conda[name][0]}")
    for name, (_, build, _) in conda.items():
        cuda = CudaVersion.from_build(build)
        if cuda:
            reading.locked_cuda.append((name, str(cuda)))
    if "torchvision" in conda:
        version, build, _ = conda["torchvision"]
        read_conda_text(reading, f"torchvision={version}={build}")
    if "python" in conda:
        read_conda_text(reading, f"python={conda['python'][0]}")


def _read_locked_torch(reading: Reading, conda: dict[str, tuple[str, str, str]]) -> None:
    """The first of the lock's torch packages, as a conda line with its build and channel."""
    name = next((name for name in LOCKED_TORCH if name in conda), None)
    if name is None:
        return
    version, build, channel = conda[name]
    text = f"pytorch={version}={build}"
    read_conda_text(reading, f"{channel}::{text}" if channel else text)


# read from their builds above, or installer and metapackage plumbing a spec does not list
READ_ELSEWHERE = {*LOCKED_TORCH, "torchvision", "python", "cuda-version", "pytorch-cuda", "cpuonly", "pytorch-mutex",
                  "python_abi", "torch"}


def _read_requested(reading: Reading, entries: list[Any], records: dict[str, dict[str, Any]],
                    asked: frozenset[str] = frozenset()) -> None:
    """The packages of one platform that no other locked package depends on, or that the manifest asks for:
    conda ones kept at their locked version, wheels pinned, a pypi package from git or a folder named."""
    locked = [(kind, str(entry[kind])) for entry in entries if isinstance(entry, dict)
              for kind in ("conda", "pypi") if entry.get(kind)]
    named = {url: _locked_name(kind, url, records.get(url, {})) for kind, url in locked}
    needed = {_requirement_name(str(d)) for url in named for key in ("depends", "requires_dist")
              for d in records.get(url, {}).get(key) or []}
    for kind, url in locked:
        name = named[url]
        if not name or (name in needed and name not in asked) or name in READ_ELSEWHERE or name.startswith("_"):
            continue
        version = str(records.get(url, {}).get("version") or "")
        if kind == "conda":
            found = CONDA_FILE.fullmatch(url.rsplit("/", 1)[-1])
            read_conda_text(reading, f"{name}={found['version'] if found else version}".rstrip("="))
        elif WHEEL_FILE.fullmatch(unquote(url.rsplit("/", 1)[-1])) and version:
            read_pip_text(reading, f"{name}=={version}")
        else:
            reading.note(url, "unmapped", f"{name}: a pypi package the lock takes from git or a folder; publish it "
                                          "to an index and pin it by version")


def _locked_name(kind: str, url: str, record: dict[str, Any]) -> str:
    if record.get("name"):
        return _requirement_name(str(record["name"]))
    found = (CONDA_FILE if kind == "conda" else WHEEL_FILE).fullmatch(unquote(url.rsplit("/", 1)[-1]))
    return _requirement_name(found["name"]) if found else ""


def _requirement_name(text: str) -> str:
    """`llvm-openmp >=9.0.1`, `numpy>=1.0 ; extra == 'x'` -> the package's name, lowercased, `_` as `-`."""
    return re.split(r"[\s<>=!~;\[(]", text.strip(), maxsplit=1)[0].lower().replace("_", "-")


def manifest_beside(lock: Path) -> frozenset[str]:
    """The package names the pixi manifest beside a lock asks for (`pixi.toml`, or a pyproject.toml with
    `[tool.pixi]`, under the lock's own name stem): its dependencies and pypi-dependencies, its features'
    and its targets'. Empty when none sits there or it is no manifest."""
    stem = lock.name[: -len("pixi.lock")] if lock.name.endswith("pixi.lock") else ""
    for name in ("pixi.toml", "pyproject.toml"):
        path = lock.with_name(stem + name)
        if not path.is_file():
            continue
        try:
            data = read_toml_file(path, name)
        except UsageError:
            return frozenset()
        table = data if name == "pixi.toml" else (data.get("tool") or {}).get("pixi") or {}
        return frozenset(_requirement_name(str(key)) for section in _manifest_sections(table)
                         for key in section)
    return frozenset()


def _manifest_sections(table: Any) -> list[dict[str, Any]]:
    """The dependency tables of a manifest: top level, each feature's and each target's within them."""
    if not isinstance(table, dict):
        return []
    scopes = [table, *_values(table.get("feature")), *_values(table.get("target"))]
    scopes += [target for scope in list(scopes[1:]) for target in _values(scope.get("target"))]
    return [section for scope in scopes for key in ("dependencies", "pypi-dependencies")
            if isinstance(section := scope.get(key), dict)]


def _values(table: Any) -> list[dict[str, Any]]:
    return [v for v in table.values() if isinstance(v, dict)] if isinstance(table, dict) else []

"""Reading an environment file into a `Reading`: what its lines say, in file order, before anything is decided.

environment.yml files are read key by key; requirements.txt, conda-lock.yml, uv.lock and Dockerfiles are read
into the same `Reading` (their lines by builder/init/reading.py's readers), so one set of decisions
(`builder.init.choose`) serves every format. pixi.toml, pixi.lock and uv's pyproject.toml declare several
CUDA variants: their readers (builder/init/pixi_manifest.py, pixi_lock.py, uv_project.py) read one
`Reading` per variant (builder/init/variants.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from builder.errors import UsageError
from builder.formats.conda_lock import LockedPackage, parse_lock
from builder.init.dockerfile import read_dockerfile
from builder.init.pixi_lock import manifest_beside, read_pixi_lock_data
from builder.init.pixi_manifest import read_pixi_manifest_data
from builder.init.platform_hints import keep_file_platform
from builder.init.read_requirements import include_requirements, read_requirements
from builder.init.reading import (
    Reading,
    read_channel_list,
    read_conda_text,
    read_environment_dependency,
    read_pip_text,
    read_text_file,
)
from builder.init.uv_lock import read_uv_lock_file
from builder.init.uv_project import read_pyproject_data
from builder.init.variants import read_toml_file
from builder.specs.cuda import CudaVersion
from builder.specs.model import read_yaml_file
from builder.userfile import MAX_EXPANDED_NODES, MAX_LOCK_BYTES, MAX_SPEC_BYTES, read_capped, read_yaml

TOP_LEVEL_READ = {"name", "channels", "dependencies", "prefix", "platforms"}


def read_environment(path: Path) -> Reading:
    return read_environment_data(read_yaml_file(path, "environment.yml"), str(path))


FORMATS = ("an environment.yml, a requirements.txt, a conda-lock.yml, a Dockerfile, a pixi.toml, a pixi.lock, "
           "a pyproject.toml or a uv.lock")


def read_source(path: Path, allow_outside: bool = False) -> Reading:
    """Any file `envbuild init --from` takes, recognised by its name and then by its content. `allow_outside`:
    a requirements file's `-r`/`-c` may name a file outside its folder."""
    kind = source_kind(path)
    if kind == "Dockerfile":
        reading = read_dockerfile(path)
        keep_file_platform(reading, None, path.name)
        return reading
    if kind == "requirements.txt":
        reading = read_requirements(path, allow_outside)
        keep_file_platform(reading, read_text_file(path, "requirements file"), path.name)
        return reading
    if kind in ("pixi.toml", "pyproject.toml"):
        data = read_toml_file(path, kind)
        return read_pixi_manifest_data(data, str(path)) if kind == "pixi.toml" else read_pyproject_data(data, str(path))
    if kind == "uv.lock":
        return read_uv_lock_file(path)
    if kind == "pixi.lock":
        return read_pixi_lock_data(read_yaml(path, kind, UsageError, "give envbuild the pixi.lock pixi wrote",
                                             limit=MAX_LOCK_BYTES, max_nodes=MAX_EXPANDED_NODES), str(path),
                                   manifest_beside(path))
    data = read_yaml_file(path, kind)
    if kind == "conda-lock.yml" or (isinstance(data, dict) and "package" in data and "dependencies" not in data):
        return read_conda_lock_data(data, str(path))
    reading = read_environment_data(data, str(path),
                                    lambda into, line: include_requirements(into, path, line, allow_outside))
    keep_file_platform(reading, read_text_file(path, kind), path.name)
    return reading


def source_kind(path: Path) -> str:
    """The format of a file envbuild init reads: by its name, else by its first meaningful line."""
    kind = _kind_by_name(path.name.lower())
    if kind:
        return kind
    text = read_capped(path, MAX_SPEC_BYTES, "file envbuild init reads", UsageError).decode("utf-8", "replace")
    head = [line.strip() for line in text.splitlines()[:200]]
    meaningful = [line for line in head if line and not line.startswith("#")]
    if meaningful and re.match(r"(?i)(FROM|ARG)\s", meaningful[0]):
        return "Dockerfile"
    if meaningful and re.match(r"(name|channels|dependencies|version|metadata|package)\s*:", meaningful[0]):
        return "environment.yml"
    raise UsageError(f"{path}: not a file envbuild init reads; give it {FORMATS} (recognised by name, "
                     "then by content)")


def _kind_by_name(name: str) -> str | None:
    if name in ("dockerfile", "containerfile") or name.startswith(("dockerfile.", "containerfile.")) \
            or name.endswith((".dockerfile", ".containerfile")):
        return "Dockerfile"
    if name.endswith(("conda-lock.yml", "conda-lock.yaml")):
        return "conda-lock.yml"
    if name.endswith("pixi.lock"):
        return "pixi.lock"
    if name.endswith("uv.lock"):
        return "uv.lock"
    if name.endswith(".toml"):
        return "pyproject.toml" if name.endswith("pyproject.toml") else "pixi.toml"
    if name.endswith((".yml", ".yaml")):
        return "environment.yml"
    if name.endswith(".txt") or name.startswith("requirements"):
        return "requirements.txt"
    return None


def read_conda_lock_data(data: Any, source: str) -> Reading:
    """A team's conda-lock.yml (as formats/conda_lock.py types it): the locked torch build names the route and
    CUDA; the rest of a lock is mostly dependencies, so no other package becomes an extra."""
    reading = Reading(source, kind="conda-lock.yml")
    if not isinstance(data, dict) or not isinstance(data.get("package"), list):
        raise reading.fail("a conda-lock.yml has a `package:` list of locked records; this one has none")
    # Locks older than conda-lock's format version 1 name no version and may name no platforms.
    metadata = data.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    version = data.get("version") if isinstance(data.get("version"), int) else 0
    lock = parse_lock({**data, "version": version, "metadata": {"platforms": [], **metadata}}, source,
                      UsageError, "give envbuild the conda-lock.yml conda-lock wrote", versions=None)
    platforms = lock.metadata.platforms
    _read_locked_channels(reading, lock.metadata.channels)
    platform = "linux-64" if "linux-64" in platforms or not platforms else platforms[0]
    records = lock.for_platform(platform)
    if platforms:
        reading.platforms = [platform]
    names = {p.name.lower(): p for p in records if p.manager == "conda"}
    _read_locked_cuda(reading, records)
    _read_locked_torch(reading, names, records)
    _read_locked_versions(reading, names)
    reading.note("(the whole file)", "assumed",
                 f"a lock of {len(records)} {platform} packages, most of them dependencies: torch, its CUDA and "
                 "Python were read; add the packages you asked for to `conda:`")
    return reading


def _read_locked_channels(reading: Reading, channels: list[dict]) -> None:
    for channel in channels:
        url = channel.get("url")
        if isinstance(url, str):
            read_channel_list(reading, [url.rstrip("/").rsplit("/", 1)[-1] if "://" in url else url])


def _read_locked_cuda(reading: Reading, records: list[LockedPackage]) -> None:
    """The CUDA each locked package was built for, as its build string or version says."""
    for record in records:
        name = record.name.lower()
        built_for = CudaVersion.from_build(record.build or "")
        if built_for:
            reading.locked_cuda.append((name, str(built_for)))
        elif name in ("cuda-version", "cudatoolkit", "cuda-cudart") and record.version:
            reading.locked_cuda.append((name, record.version))


def _read_locked_torch(reading: Reading, names: dict[str, LockedPackage], records: list[LockedPackage]) -> None:
    """The locked conda torch as a line with its build and channel, else a pip torch by version."""
    for name in ("pytorch", "pytorch-gpu", "pytorch-cpu"):
        if name in names:
            record = names[name]
            text = f"{name}={record.version}" + (f"={record.build}" if record.build else "")
            read_conda_text(reading, f"{record.channel}::{text}" if record.channel else text)
            break
    pip_torch = [p for p in records if p.manager == "pip" and p.name.lower() == "torch"]
    if "pytorch" not in names and pip_torch:
        read_pip_text(reading, f"torch=={pip_torch[0].version}")


def _read_locked_versions(reading: Reading, names: dict[str, LockedPackage]) -> None:
    """The locked versions that name the CUDA, the route and torchvision, and Python's."""
    for name in ("cuda-version", "cudatoolkit", "pytorch-cuda", "cpuonly", "torchvision"):
        if name in names:
            read_conda_text(reading, f"{name}={names[name].version}")
    python = names.get("python") or names.get("python_abi")
    if python:
        read_conda_text(reading, f"python={python.version}")


def read_environment_data(data: Any, source: str, include: Callable[[Reading, str], bool] | None = None) -> Reading:
    """An environment.yml's data; `include` reads a `pip:` list's `-r FILE` line in its place (the file's own
    folder is the one conda runs pip from)."""
    reading = Reading(source)
    dependencies = _dependency_list(reading, data)
    if isinstance(data.get("name"), str):
        reading.name = data["name"]
    if "prefix" in data:
        reading.exported = True
        reading.note("prefix:", "dropped", "a folder on the machine that exported the env")
    read_channel_list(reading, data.get("channels"))
    _read_platforms(reading, data.get("platforms"))
    _note_unread_keys(reading, data)
    for item in dependencies:
        read_environment_dependency(reading, item, include)
    if reading.conda_lines and reading.with_builds * 2 >= reading.conda_lines:
        reading.exported = True
    return reading


def _dependency_list(reading: Reading, data: Any) -> list[Any]:
    if not isinstance(data, dict):
        raise reading.fail("an environment.yml is a YAML mapping with `dependencies:` (and usually name, channels)")
    dependencies = data.get("dependencies")
    if not isinstance(dependencies, list) or not dependencies:
        raise reading.fail("no `dependencies:` list, so there is nothing to import")
    return dependencies


def _read_platforms(reading: Reading, platforms: Any) -> None:
    if isinstance(platforms, list) and all(isinstance(p, str) for p in platforms):
        reading.platforms = list(platforms)
    elif platforms is not None:
        reading.note(f"platforms: {platforms}", "unmapped", "not a list of conda platforms (e.g. linux-64)")


def _note_unread_keys(reading: Reading, data: dict[str, Any]) -> None:
    for key in data:
        if key not in TOP_LEVEL_READ:
            reason = ("envbuild specs set no environment variables; set them in your job or image"
                      if key == "variables" else "not a key envbuild reads from an environment.yml")
            reading.note(f"{key}:", "unmapped", reason)

"""The pip part of a lock: resolved by uv, per platform, on top of the conda part conda-lock solved,
and written into the same conda-lock.yml as `manager: pip` entries in conda-lock's own format.

conda-lock's vendored pip solver (poetry) does not finish in 10 minutes on torch 2.14's CUDA wheels:
their `cuda-toolkit[cublas,cudart,...]` requirement with 11 extras behind platform markers makes it
try extras combinations one by one (measured on the offline world). uv resolves the same 31 wheels in
about 2 s, evaluates markers for the target platform rather than the host's, and writes PEP 751
`pylock.toml`, from which every entry takes its wheel URL and sha256.

What the conda part installs is left out of the pip resolution (`--excludes`), the way conda-lock
treats conda packages as installed: a pip requirement on numpy is met by conda's numpy.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from builder.errors import EnvbuildError
from builder.proc import ProcessTimeout, run
from builder.yamlio import load_yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# conda subdir -> uv's --python-platform; {glibc} is the target's __glibc minor (manylinux_2_{glibc}).
UV_PLATFORMS = {
    "linux-64": "x86_64-manylinux_2_{glibc}",
    "linux-aarch64": "aarch64-manylinux_2_{glibc}",
    "osx-64": "x86_64-apple-darwin",
    "osx-arm64": "aarch64-apple-darwin",
    "win-64": "x86_64-pc-windows-msvc",
}
# The manylinux levels uv names; a __glibc outside them is clamped to the nearest.
MANYLINUX_MINORS = range(17, 41)
PIP_TIMEOUT_S = 300.0


class PipResolveError(EnvbuildError):
    """uv found no set of wheels for the pip part (its explanation is the message)."""


@dataclass(frozen=True)
class PipPart:
    """What a target asks of pip: requirement lines and where they may come from."""
    requirements: tuple[str, ...]
    index: str | None
    allow_pypi_requests: bool

    def index_args(self) -> list[str]:
        if not self.index:
            return []
        # A replaced index is the only source; with PyPI allowed the index is asked first, and uv's
        # first-index strategy keeps torch from being taken from PyPI when the index has it.
        return ["--extra-index-url", self.index] if self.allow_pypi_requests else ["--index-url", self.index]


@dataclass(frozen=True)
class PipPackage:
    name: str
    version: str
    url: str
    sha256: str
    dependencies: tuple[str, ...]


def uv_platform(platform: str, virtual_packages: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """uv's --python-platform for a conda subdir, and the environment it reads (macOS's version)."""
    if platform not in UV_PLATFORMS:
        raise EnvbuildError(f"{platform}: envbuild cannot lock pip packages for this platform; "
                            f"it knows {', '.join(UV_PLATFORMS)}")
    env: dict[str, str] = {}
    glibc = str(virtual_packages.get("__glibc", "2.17")).split("=")[0]
    minor = int(glibc.split(".")[1]) if re.fullmatch(r"2\.\d+", glibc) else 17
    minor = min(max(minor, MANYLINUX_MINORS.start), MANYLINUX_MINORS.stop - 1)
    if "__osx" in virtual_packages:
        env["MACOSX_DEPLOYMENT_TARGET"] = str(virtual_packages["__osx"]).split("=")[0]
    return UV_PLATFORMS[platform].format(glibc=minor), env


def mapping_file() -> Path:
    """The PyPI-to-conda name table, in conda-lock's format (builder/data/pypi_to_conda.yaml); the lock's
    inputs hash it, since it decides which pip requirements conda's packages already meet."""
    return Path(str(resources.files("builder").joinpath("data/pypi_to_conda.yaml")))


@lru_cache(maxsize=1)
def conda_to_pypi_names() -> dict[str, str]:
    """conda name -> PyPI name, from the table conda-lock reads the other way."""
    table = load_yaml(mapping_file().read_text(encoding="utf-8")) or {}
    return {str(entry["conda_name"]): str(entry["pypi_name"]) for entry in table.values()}


def provided_by_conda(conda_names: Iterable[str]) -> list[str]:
    """The PyPI names the conda part already installs (python itself is the interpreter)."""
    mapping = conda_to_pypi_names()
    return sorted({mapping.get(name, name) for name in conda_names if name != "python"})


def _uv() -> str:
    """The uv that ships with envbuild (its `uv` dependency), else one on PATH."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):  # uv's UvNotFound is a FileNotFoundError
        found = shutil.which("uv")
        if found:
            return found
    raise PipResolveError("uv, which resolves the pip packages of a lock, is not installed: "
                          "reinstall envbuild with its dependencies, or put uv on PATH")


def resolve_platform(part: PipPart, platform: str, python_version: str, virtual_packages: Mapping[str, str],
                     conda_names: Iterable[str], work: Path, constraints: Iterable[str] = (),
                     timeout: float = PIP_TIMEOUT_S) -> list[PipPackage]:
    """The wheels pip installs on `platform` for `part`, next to conda's packages and python."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "requirements.in").write_text("\n".join(part.requirements) + "\n", encoding="utf-8")
    (work / "excludes.txt").write_text("\n".join(provided_by_conda(conda_names)) + "\n", encoding="utf-8")
    (work / "constraints.txt").write_text("\n".join(constraints) + "\n", encoding="utf-8")
    python_platform, platform_env = uv_platform(platform, virtual_packages)
    command = [
        _uv(), "pip", "compile", str(work / "requirements.in"),
        "--python-version", python_version, "--python-platform", python_platform,
        "--excludes", str(work / "excludes.txt"), "--constraints", str(work / "constraints.txt"),
        # Only what the lock reads decides it: no user uv.toml, no interpreter download, no sdist
        # built on this host for another platform.
        "--no-config", "--no-python-downloads", "--no-build", "--no-header", "--quiet",
        *part.index_args(),
    ]
    env = {**os.environ, **platform_env, "NO_COLOR": "1"}
    locked = _uv_output([*command, "--format", "pylock.toml"], env, timeout, platform)
    graph = _uv_output([*command, "--format", "requirements.txt", "--annotation-style", "split"], env,
                       timeout, platform)
    return pylock_packages(locked, requirers(graph))


def _uv_output(command: list[str], env: dict[str, str], timeout: float, platform: str) -> str:
    try:
        done = run(command, timeout=timeout, what=f"uv resolving the pip packages for {platform}", env=env)
    except ProcessTimeout as exc:
        raise PipResolveError(f"{platform}: {exc}") from None
    if done.returncode != 0:
        raise PipResolveError(f"{platform}: uv found no pip packages that fit: {uv_explanation(done.stderr)}")
    return done.stdout


def uv_explanation(stderr: str) -> str:
    """uv's reason on one line: its "Because ..." sentence when it gives one, without box marks."""
    lines = [re.sub(r"^[\s×╰─▶│]+", "", line).strip() for line in stderr.splitlines()]
    text = " ".join(line for line in lines if line)
    because = text.find("Because ")
    if because >= 0:
        return text[because:]
    return re.sub(r"^error:\s*", "", text) or "uv failed without output"


def requirers(requirements_txt: str) -> dict[str, set[str]]:
    """Who asked for each pinned package, from uv's `# via` annotations."""
    asked_by: dict[str, set[str]] = {}
    current: str | None = None
    for line in requirements_txt.splitlines():
        pinned = re.match(r"^([A-Za-z0-9_.\-]+)==", line)
        if pinned:
            current = _normal(pinned.group(1))
            asked_by.setdefault(current, set())
            continue
        via = re.match(r"^\s+#\s+(?:via\s+)?([A-Za-z0-9_.\-]+)\s*$", line)
        if current and via and via.group(1) != "via":
            asked_by[current].add(_normal(via.group(1)))
    return asked_by


def pylock_packages(pylock_text: str, asked_by: Mapping[str, set[str]]) -> list[PipPackage]:
    """Each package of uv's pylock.toml with its one wheel; its dependencies from the `# via` graph."""
    data = tomllib.loads(pylock_text)
    depends: dict[str, list[str]] = {}
    for name, parents in asked_by.items():
        for parent in parents:
            depends.setdefault(parent, []).append(name)
    packages = []
    for entry in data.get("packages", []):
        name = _normal(entry["name"])
        wheels = entry.get("wheels") or []
        if len(wheels) != 1 or "sha256" not in (wheels[0].get("hashes") or {}):
            raise PipResolveError(f"{name} {entry.get('version')}: uv chose {len(wheels)} wheels with hashes "
                                  "for one platform; envbuild locks exactly one")
        packages.append(PipPackage(name, str(entry["version"]), wheels[0]["url"], wheels[0]["hashes"]["sha256"],
                                   tuple(sorted(depends.get(name, ())))))
    return packages


def _normal(name: str) -> str:
    return canonicalize_name(name)


def previous_pins(lockfile: Any, keep_moving: Iterable[str]) -> dict[str, list[str]]:
    """Per platform, `name==version` of the pip packages an `--update` leaves where they are
    (`lockfile`: conda-lock's own model of the lock being updated)."""
    moving = {_normal(name) for name in keep_moving}
    pins: dict[str, list[str]] = {}
    for package in lockfile.package:
        if package.manager == "pip" and _normal(package.name) not in moving:
            pins.setdefault(package.platform, []).append(f"{package.name}=={package.version}")
    return pins


def without_pip_entries(lockfile: Any) -> Any:
    """The lock without its pip entries (conda-lock then updates the conda part alone)."""
    return lockfile.model_copy(update={"package": [p for p in lockfile.package if p.manager != "pip"]})


def with_pip_part(lockfile: Any, part: PipPart, virtual_packages: Mapping[str, Mapping[str, str]], work: Path,
                  pins: Mapping[str, list[str]] | None = None) -> Any:
    """The conda lock `lockfile` (conda-lock's model, in memory) with `part` resolved on each of its
    platforms as pip entries; the caller writes the result once."""
    from conda_lock.lockfile.v1.models import HashModel
    from conda_lock.lockfile.v2prelim.models import LockedDependency

    conda = [p for p in lockfile.package if p.manager == "conda"]
    added = []
    for platform in lockfile.metadata.platforms:
        here = [p for p in conda if p.platform == platform]
        python = next((p.version for p in here if p.name == "python"), None)
        if python is None:
            raise PipResolveError(f"{platform}: the conda part has no python for the pip packages to run on; "
                                  "add python to the spec's conda packages")
        resolved = resolve_platform(part, platform, python, virtual_packages.get(platform, {}),
                                    [p.name for p in here], work / f"pip-{platform}",
                                    constraints=(pins or {}).get(platform, ()))
        added += [LockedDependency(name=p.name, version=p.version, manager="pip", platform=platform,
                                   dependencies={d: "*" for d in p.dependencies}, url=p.url,
                                   hash=HashModel(sha256=p.sha256), categories={"main"})
                  for p in resolved]
    return lockfile.model_copy(update={"package": conda + added})

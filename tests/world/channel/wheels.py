"""Wheels repacked as conda packages: noarch python (pure wheels) or one platform (cp311 wheels).

The layout follows conda-build's output for `pip install .` recipes: noarch python packages carry
`site-packages/` and `python-scripts/` (the installer moves them under the installed python) and
list console scripts in `info/link.json`; platform packages carry
`lib/pythonX.Y/site-packages/` and write their console scripts into `bin/` with the prefix
placeholder in the shebang, which the installer replaces.
"""

from __future__ import annotations

import email.parser
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from builder.errors import EnvbuildError
from tests.world.channel.packages import PackageFile, sha256_of

# conda-build's placeholder; any installer replaces it with the real prefix.
PREFIX_PLACEHOLDER = "/opt/anaconda1anaconda2anaconda3"
_COPY_CHUNK = 1 << 20


@dataclass(frozen=True)
class WheelInfo:
    """What a wheel says about itself (METADATA, WHEEL, entry_points.txt)."""

    path: Path
    name: str  # canonical index name, e.g. typing-extensions
    version: str
    requires_dist: tuple[str, ...]
    requires_python: str
    console_scripts: tuple[str, ...]  # "name = module:function"
    pure: bool
    dist_info: str  # folder name inside the wheel
    sha256: str

    @property
    def filename(self) -> str:
        return self.path.name


def read_wheel(path: Path) -> WheelInfo:
    """Parse a wheel's metadata without unpacking it."""
    with zipfile.ZipFile(path) as zf:
        dist_info = _dist_info_dir(zf, path)
        metadata = email.parser.BytesParser().parsebytes(zf.read(f"{dist_info}/METADATA"))
        wheel = email.parser.BytesParser().parsebytes(zf.read(f"{dist_info}/WHEEL"))
        names = set(zf.namelist())
        entry_points = zf.read(f"{dist_info}/entry_points.txt").decode() if f"{dist_info}/entry_points.txt" in names else ""
    return WheelInfo(
        path=path,
        name=canonicalize_name(metadata["Name"]),
        version=metadata["Version"],
        requires_dist=tuple(metadata.get_all("Requires-Dist") or ()),
        requires_python=metadata.get("Requires-Python", "") or "",
        console_scripts=tuple(_scripts(entry_points)),
        pure=(wheel.get("Root-Is-Purelib", "false").strip().lower() == "true"),
        dist_info=dist_info,
        sha256=sha256_of(path),
    )


def wheel_core_metadata(path: Path) -> bytes:
    """The wheel's METADATA file, byte for byte (PEP 658 serves exactly this)."""
    with zipfile.ZipFile(path) as zf:
        return zf.read(f"{_dist_info_dir(zf, path)}/METADATA")


def conda_depends(wheel: WheelInfo, pypi_to_conda: dict[str, str], python_short: str) -> tuple[str, ...]:
    """Requires-Dist as conda specs, evaluated for CPython `python_short` on Linux.

    Extras are dropped (conda has none); environment markers are decided for the one interpreter
    the world runs for real, which is how conda-forge recipes freeze them too.
    """
    env = {**default_environment(), "python_version": python_short, "python_full_version": f"{python_short}.0",
           "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
    specs: list[str] = []
    for line in wheel.requires_dist:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = conda_name(req.name, pypi_to_conda)
        constraint = ",".join(sorted(str(s) for s in req.specifier))
        specs.append(f"{name} {constraint}" if constraint else name)
    return tuple(sorted(set(specs)))


def conda_name(index_name: str, pypi_to_conda: dict[str, str]) -> str:
    canonical = canonicalize_name(index_name)
    return pypi_to_conda.get(canonical, canonical)


def noarch_python_spec(wheel: WheelInfo) -> str:
    constraint = ",".join(sorted(s.replace(" ", "") for s in wheel.requires_python.split(",") if s.strip()))
    return f"python {constraint}" if constraint else "python"


def unpack_wheel(wheel: WheelInfo, tree: Path, python_short: str | None) -> None:
    """Unpack `wheel` into `tree` in conda's layout; `python_short=None` means noarch python."""
    site = "site-packages" if python_short is None else f"lib/python{python_short}/site-packages"
    scripts = "python-scripts" if python_short is None else "bin"
    data_prefix = wheel.dist_info.removesuffix(".dist-info") + ".data/"
    with zipfile.ZipFile(wheel.path) as zf:
        for member in zf.infolist():
            if member.is_dir():
                continue
            rel = _conda_path(member.filename, data_prefix, site, scripts)
            target = tree / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(member) as src, open(target, "wb") as dst:
                _copy(src, dst, rewrite_shebang=rel.startswith(scripts + "/"), python_short=python_short)
            if (member.external_attr >> 16) & 0o111 or rel.startswith(scripts + "/"):
                os.chmod(target, 0o755)
    # pip reads INSTALLER to tell its own installs from other tools'.
    (tree / site / wheel.dist_info / "INSTALLER").write_text("conda\n")


def entry_point_scripts(wheel: WheelInfo, python_short: str) -> tuple[PackageFile, ...]:
    """bin/ launchers for a platform package, as conda-build writes them."""
    files = []
    for entry in wheel.console_scripts:
        name, target = (part.strip() for part in entry.split("=", 1))
        module, _, attr = target.partition(":")
        head, _, rest = attr.partition(".")
        call = f"{head}.{rest}" if rest else head
        script = (
            f"#!{PREFIX_PLACEHOLDER}/bin/python{python_short}\n"
            "# -*- coding: utf-8 -*-\n"
            "import re\nimport sys\n"
            f"from {module} import {head}\n"
            "if __name__ == '__main__':\n"
            "    sys.argv[0] = re.sub(r'(-script\\.pyw?|\\.exe)?$', '', sys.argv[0])\n"
            f"    sys.exit({call}())\n"
        )
        files.append(PackageFile(f"bin/{name}", script.encode(), 0o755, prefix_placeholder=PREFIX_PLACEHOLDER))
    return tuple(files)


def _conda_path(member: str, data_prefix: str, site: str, scripts: str) -> str:
    if ".." in member.split("/") or member.startswith("/"):
        raise EnvbuildError(f"wheel member {member!r} escapes the package: refusing to repack it")
    if not member.startswith(data_prefix):
        return f"{site}/{member}"
    scheme, _, rest = member[len(data_prefix):].partition("/")
    if scheme in ("purelib", "platlib"):
        return f"{site}/{rest}"
    if scheme == "scripts":
        return f"{scripts}/{rest}"
    if scheme == "data":
        return rest
    raise EnvbuildError(f"wheel member {member!r} uses the {scheme!r} scheme, which the world does not repack")


def _copy(src, dst, rewrite_shebang: bool, python_short: str | None) -> None:  # type: ignore[no-untyped-def]
    first = src.read(_COPY_CHUNK)
    if rewrite_shebang and re.match(rb"#!python[w]?\b", first):
        # A wheel's `#!python` means "the interpreter that installs me".
        interpreter = f"{PREFIX_PLACEHOLDER}/bin/python{python_short or ''}".encode()
        first = b"#!" + interpreter + first[first.index(b"\n"):] if b"\n" in first else b"#!" + interpreter
    dst.write(first)
    for chunk in iter(lambda: src.read(_COPY_CHUNK), b""):
        dst.write(chunk)


def _dist_info_dir(zf: zipfile.ZipFile, path: Path) -> str:
    tops = {n.split("/", 1)[0] for n in zf.namelist() if n.split("/", 1)[0].endswith(".dist-info")}
    if len(tops) != 1:
        raise EnvbuildError(f"{path.name} is not a wheel with exactly one .dist-info folder")
    return tops.pop()


def _scripts(entry_points: str) -> list[str]:
    scripts, section = [], ""
    for raw in entry_points.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif line and not line.startswith(("#", ";")) and section in ("console_scripts", "gui_scripts"):
            name, _, target = line.partition("=")
            scripts.append(f"{name.strip()} = {target.strip()}")
    return sorted(scripts)


"""Fetch the world's inputs once: pinned wheels with `pip download`, Debian packages with
`apt-get download`. Both land in the world's cache; a marker holding the hash of the request
makes the next build skip the network entirely."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from builder.errors import EnvbuildError

from .wheels import WheelInfo, read_wheel

_MARKER = ".complete"
# The interpreter every real package of the world is for: CPython 3.11 on manylinux x86_64 up to
# glibc 2.28 (conda-lock's pip solver accepts no newer tag). pip does not widen a `--platform` to the
# older manylinux tags, so each one that a pinned wheel carries (nvidia-* use 2_27, 2_25, 2_5 ...) is listed.
_MANYLINUX = ("manylinux_2_28", "manylinux_2_27", "manylinux_2_26", "manylinux_2_25", "manylinux_2_24",
              "manylinux_2_18", "manylinux_2_17", "manylinux2014", "manylinux_2_12", "manylinux2010",
              "manylinux_2_5", "manylinux1")
_PIP_TARGET = [
    "--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
    *[arg for tag in _MANYLINUX for arg in ("--platform", f"{tag}_x86_64")],
]


def read_pins(pins_file: Path) -> list[Requirement]:
    """The `name==version` lines of a pins file (comments and blank lines skipped)."""
    pins = []
    for raw in pins_file.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        if len(req.specifier) != 1 or next(iter(req.specifier)).operator != "==":
            raise EnvbuildError(f"{pins_file.name}: {line!r} must pin one exact version (name==X.Y.Z)")
        pins.append(req)
    return pins


def fetch_wheels(pins_file: Path, dest: Path) -> list[WheelInfo]:
    """Download every pinned wheel into `dest` (once) and return them, one per pin."""
    dest.mkdir(parents=True, exist_ok=True)
    pins = read_pins(pins_file)
    request = hashlib.sha256(pins_file.read_bytes() + " ".join(_PIP_TARGET).encode()).hexdigest()
    if _marker_matches(dest, request):
        return _wheels_for(pins, dest)
    # pip refuses two pins of one name in a single call (numpy 2.3 and 2.4): one round per repeat.
    for round_pins in _rounds(pins):
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(dest), *_PIP_TARGET,
              *[str(p) for p in round_pins]], what="pip download of the world's wheels")
    wheels = _wheels_for(pins, dest)
    keep = {w.path.name for w in wheels}
    for stale in dest.glob("*.whl"):
        if stale.name not in keep:
            stale.unlink()
    (dest / _MARKER).write_text(request)
    return wheels


def fetch_debs(packages: list[str], dest: Path) -> list[Path]:
    """`apt-get download` the Debian packages into `dest` (once); return the .deb files."""
    dest.mkdir(parents=True, exist_ok=True)
    request = hashlib.sha256(" ".join(packages).encode()).hexdigest()
    if not _marker_matches(dest, request):
        for old in dest.glob("*.deb"):
            old.unlink()
        if shutil.which("apt-get") is None:
            raise EnvbuildError("apt-get not found: the world's python is repacked from Debian packages")
        _run(["apt-get", "download", "-q", *packages], what="apt-get download (run `apt-get update` first if it "
             "cannot find the packages)", cwd=dest)
        (dest / _MARKER).write_text(request)
    return [_one_deb(dest, name) for name in packages]


def _rounds(pins: list[Requirement]) -> list[list[Requirement]]:
    rounds: list[list[Requirement]] = []
    for pin in pins:
        for group in rounds:
            if all(canonicalize_name(p.name) != canonicalize_name(pin.name) for p in group):
                group.append(pin)
                break
        else:
            rounds.append([pin])
    return rounds


def _wheels_for(pins: list[Requirement], dest: Path) -> list[WheelInfo]:
    infos = [read_wheel(p) for p in sorted(dest.glob("*.whl"))]
    found = []
    for pin in pins:
        version = next(iter(pin.specifier)).version
        matches = [w for w in infos if w.name == canonicalize_name(pin.name) and pin.specifier.contains(w.version, prereleases=True)]
        if len(matches) != 1:
            raise EnvbuildError(
                f"expected one wheel for {pin.name}=={version} in {dest}, found {len(matches)}: "
                "delete the cache folder and build again"
            )
        found.append(matches[0])
    return found


def _one_deb(dest: Path, package: str) -> Path:
    matches = sorted(dest.glob(f"{package}_*.deb"))
    if len(matches) != 1:
        raise EnvbuildError(f"expected one {package}_*.deb in {dest}, found {len(matches)}: delete it and build again")
    return matches[0]


def _marker_matches(dest: Path, request: str) -> bool:
    marker = dest / _MARKER
    return marker.is_file() and marker.read_text() == request


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise EnvbuildError(f"{what} failed (exit {done.returncode}): {' | '.join(tail)}")

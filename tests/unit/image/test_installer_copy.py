"""The installer copy that every layer group's cache key holds: no version-bearing bytes in it, so an
envbuild upgrade leaves the CUDA and torch layers cached (issue 34 item 5)."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import builder
from builder.image.context import installer_sources
from builder.lock.install import RUNS_ALONE_WITH
from tests.paths import REPO

pytestmark = pytest.mark.unit


def _builder_tree(root: Path, version: str) -> Path:
    """A copy of envbuild's package files the installer copy is made from, with `version` in its
    __init__.py (what an upgrade changes)."""
    source = REPO / "builder"
    package = root / "builder"
    for name in (*RUNS_ALONE_WITH, "__init__.py"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, package / name)
    init = package / "__init__.py"
    text = init.read_text(encoding="utf-8")
    assert f'__version__ = "{builder.__version__}"' in text
    init.write_text(text.replace(builder.__version__, version), encoding="utf-8")
    return package


def _files(top: Path) -> dict[str, bytes]:
    return {path.relative_to(top).as_posix(): path.read_bytes() for path in sorted(top.rglob("*")) if path.is_file()}


def test_a_version_bump_leaves_the_installer_copy_byte_identical(tmp_path: Path) -> None:
    copies = []
    for version in (builder.__version__, "99.0.0"):
        out = tmp_path / f"out-{version}"
        installer_sources(out, _builder_tree(tmp_path / f"src-{version}", version))
        copies.append(_files(out))
    assert copies[0] == copies[1], "the installer copy changed with envbuild's version"
    assert all(b"__version__ =" not in data for data in copies[0].values()), sorted(copies[0])


def test_the_copy_is_the_installer_files_and_a_marker(tmp_path: Path) -> None:
    installer_sources(tmp_path)
    files = _files(tmp_path / "builder")
    assert sorted(files) == sorted((*RUNS_ALONE_WITH, "__init__.py"))
    for name in RUNS_ALONE_WITH:
        assert filecmp.cmp(REPO / "builder" / name, tmp_path / "builder" / name, shallow=False), name


def test_the_copy_runs_alone_as_a_regular_package(tmp_path: Path) -> None:
    """Python without site-packages or PYTHONPATH (-I), the copy alone on the path: the installer
    imports, and `builder` is the copy's own regular package (a namespace one would lose to any other
    `builder` on an image's path)."""
    installer_sources(tmp_path)
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import builder, builder.lock.install as m; "
             "print(builder.__file__); print(m.RUNS_ALONE_WITH)")
    done = subprocess.run([sys.executable, "-I", "-c", probe, str(tmp_path)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == str(tmp_path / "builder" / "__init__.py")

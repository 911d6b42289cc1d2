"""Conda packages written by tests/world/channel/packages.py: written, indexed and installed with rattler
into temporary channels. The offline world built from them is tested in tests/system/test_channel_world.py.

rattler runs in child processes (tests/world/channel/rattler_ops.py): it can crash at interpreter exit and
would take pytest along.
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from builder.errors import EnvbuildError
from tests.unit.world.channel_helpers import rattler_install, rattler_solve
from tests.world.channel import rattler_ops
from tests.world.channel.packages import (
    CondaPackage,
    PackageFile,
    serve_directory,
    sha256_of,
    write_package,
    write_package_from_tree,
)

PLACEHOLDER = "/opt/anaconda1anaconda2anaconda3"


def _hello(build: str = "0") -> CondaPackage:
    return CondaPackage(
        "hello", "1.0", build, subdir="linux-64", depends=("libfoo >=1",), constrains=("bar <2",),
        files=(
            PackageFile("bin/hello", b"#!/bin/sh\necho hello\n", 0o755),
            PackageFile("share/hello/data.bin", bytes(range(256)) * 4),
            PackageFile("share/hello/config.txt", f"prefix={PLACEHOLDER}\n".encode(), prefix_placeholder=PLACEHOLDER),
            PackageFile("bin/hi", symlink_to="hello"),
        ),
    )


def _libfoo() -> CondaPackage:
    return CondaPackage("libfoo", "1.2", "h0_0", subdir="linux-64", files=(PackageFile("lib/libfoo.txt", b"foo"),))


def _index(channel: Path) -> None:
    rattler_ops.run("index", str(channel))


# ---- unit: writing, indexing, installing ----------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize("fmt", [".tar.bz2", ".conda"])
def test_written_package_installs_with_its_files_and_hashes(tmp_path: Path, fmt: str) -> None:
    channel = tmp_path / "channel"
    write_package(channel, _hello(), fmt)
    write_package(channel, _libfoo(), fmt)
    _index(channel)
    prefix = tmp_path / "env"
    records = rattler_install(channel, prefix, "hello")
    assert {r["file_name"] for r in records} == {f"hello-1.0-0{fmt}", f"libfoo-1.2-h0_0{fmt}"}

    for f in _hello().files:
        installed = prefix / f.path
        if f.symlink_to:
            assert installed.is_symlink() and os.readlink(installed) == f.symlink_to
        elif f.prefix_placeholder:
            assert installed.read_text() == f"prefix={prefix}\n"  # the installer replaced the placeholder
        else:
            assert installed.read_bytes() == f.data
            assert bool(installed.stat().st_mode & 0o111) == bool(f.mode & 0o111)
    # paths.json as the installer recorded it (conda-meta) carries the hashes we wrote
    meta = json.loads((prefix / "conda-meta" / "hello-1.0-0.json").read_text())
    recorded = {p["_path"]: p for p in meta["paths_data"]["paths"]}
    data = _hello().files[1]
    assert recorded[data.path]["sha256"] == hashlib.sha256(data.data).hexdigest()
    assert recorded[data.path]["size_in_bytes"] == len(data.data)


@pytest.mark.unit
@pytest.mark.parametrize("fmt", [".tar.bz2", ".conda"])
def test_archives_are_deterministic(tmp_path: Path, fmt: str) -> None:
    first = write_package(tmp_path / "a", _hello(), fmt)
    second = write_package(tmp_path / "b", _hello(), fmt)
    assert first.read_bytes() == second.read_bytes()
    changed = CondaPackage(**{**_hello().__dict__, "files": _hello().files[:1] + (PackageFile("share/x", b"y"),)})
    assert write_package(tmp_path / "c", changed, fmt).read_bytes() != first.read_bytes()


@pytest.mark.unit
def test_tree_packages_ignore_mtimes_and_umask(tmp_path: Path) -> None:
    def make_tree(root: Path, mtime: int, mode: int) -> Path:
        (root / "lib" / "pkg").mkdir(parents=True)
        (root / "lib" / "pkg" / "mod.py").write_text("X = 1\n")
        (root / "bin").mkdir()
        (root / "bin" / "tool").write_text("#!/bin/sh\n")
        os.chmod(root / "bin" / "tool", mode)
        os.symlink("pkg", root / "lib" / "alias")
        for path in root.rglob("*"):
            os.utime(path, (mtime, mtime), follow_symlinks=False)
        return root

    meta = CondaPackage("treepkg", "0.1", "0", subdir="linux-64")
    one = write_package_from_tree(tmp_path / "c1", meta, make_tree(tmp_path / "t1", 1_000_000, 0o755))
    two = write_package_from_tree(tmp_path / "c2", meta, make_tree(tmp_path / "t2", 2_000_000, 0o775))
    assert one.read_bytes() == two.read_bytes()
    _index(tmp_path / "c1")
    prefix = tmp_path / "env"
    rattler_install(tmp_path / "c1", prefix, "treepkg")
    assert (prefix / "lib" / "pkg" / "mod.py").read_text() == "X = 1\n"
    assert os.readlink(prefix / "lib" / "alias") == "pkg"
    assert os.access(prefix / "bin" / "tool", os.X_OK)


@pytest.mark.unit
def test_tar_bz2_members_are_owned_by_root_with_a_fixed_mtime(tmp_path: Path) -> None:
    path = write_package(tmp_path, _hello(), ".tar.bz2")
    with tarfile.open(path) as tar:
        members = tar.getmembers()
    assert {(m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, "", "")}
    assert len({m.mtime for m in members}) == 1
    payload = [m.name for m in members if not m.name.startswith("info/")]
    assert payload == sorted(payload)


@pytest.mark.unit
def test_index_lists_what_was_written(tmp_path: Path) -> None:
    channel = tmp_path / "channel"
    written = [write_package(channel, _hello(), ".tar.bz2"), write_package(channel, _hello("1"), ".conda"),
               write_package(channel, CondaPackage("gen", "2.0", "0", noarch="generic", track_features="gen-feature"))]
    _index(channel)
    listed: dict[str, dict] = {}
    for subdir in ("linux-64", "noarch"):
        repodata = json.loads((channel / subdir / "repodata.json").read_text())
        listed |= repodata["packages"] | repodata["packages.conda"]
    assert set(listed) == {p.name for p in written}
    for path in written:
        assert listed[path.name]["sha256"] == sha256_of(path)
        assert listed[path.name]["size"] == path.stat().st_size
    assert listed["hello-1.0-0.tar.bz2"]["depends"] == ["libfoo >=1"]
    assert listed["hello-1.0-0.tar.bz2"]["constrains"] == ["bar <2"]
    assert listed["gen-2.0-0.tar.bz2"]["track_features"] == "gen-feature"
    assert listed["gen-2.0-0.tar.bz2"]["noarch"] == "generic"


@pytest.mark.unit
def test_noarch_python_files_move_under_the_installed_python(tmp_path: Path) -> None:
    channel = tmp_path / "channel"
    write_package(channel, CondaPackage("python", "3.11.9", "h0_0_cpython", subdir="linux-64"))
    write_package(channel, CondaPackage(
        "tool", "1.0", "pyh0_0", noarch="python", depends=("python >=3.9",), entry_points=("tool = tool_mod:main",),
        files=(PackageFile("site-packages/tool_mod.py", b"def main():\n    return 0\n"),)), ".conda")
    _index(channel)
    prefix = tmp_path / "env"
    rattler_install(channel, prefix, "tool")
    assert (prefix / "lib" / "python3.11" / "site-packages" / "tool_mod.py").is_file()
    launcher = (prefix / "bin" / "tool").read_text()
    assert launcher.startswith(f"#!{prefix}/bin/python")
    assert "tool_mod" in launcher


@pytest.mark.unit
@pytest.mark.parametrize("bad", [
    CondaPackage("x", "1", "0", subdir="noarch"),  # noarch subdir without a noarch kind
    CondaPackage("x", "1", "0", subdir="linux-64", noarch="python"),
    CondaPackage("x", "1", "0", subdir="linux-64", files=(PackageFile("../escape", b""),)),
    CondaPackage("x", "1", "0", subdir="linux-64", files=(PackageFile("info/index.json", b"{}"),)),
    CondaPackage("x", "1", "0", subdir="linux-64", entry_points=("x = y:z",)),
])
def test_bad_packages_are_refused(tmp_path: Path, bad: CondaPackage) -> None:
    with pytest.raises(EnvbuildError):
        write_package(tmp_path, bad)
    assert not list(tmp_path.rglob("x-1-0*"))


@pytest.mark.unit
def test_serve_directory_serves_the_folder(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "file.bin").write_bytes(b"\x00payload")
    with serve_directory(tmp_path) as base:
        assert base.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(f"{base}/sub/file.bin") as response:
            assert response.read() == b"\x00payload"
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{base}/sub/nope")
        assert missing.value.code == 404


@pytest.mark.unit
def test_synthetic_channel_is_solvable_and_has_the_default_env(tmp_path: Path) -> None:
    from tests.world.channel.synthetic import make_synthetic_channel

    made = make_synthetic_channel(tmp_path / "synthetic", names=300, versions_per_name=5)
    assert made.records_per_subdir["linux-64"] > 300 * 5
    top = [made.names[i] for i in range(150, 300, 10)]  # higher names pull in lower ones
    solved = rattler_solve([str(tmp_path / "synthetic")], *top, "pytorch 2.13.*", "python 3.11.*", cuda="12.6")
    assert solved["pytorch"]["build"].startswith("cuda12")
    assert set(top) <= set(solved)
    assert len(solved) > len(top) + 5  # dependencies came along

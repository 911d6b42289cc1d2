"""Conda packages written by tests/world/channel/packages.py, and the offline world built from them.

`unit` tests write small packages into temporary channels and install them with rattler.
`world` tests use the world under ENVBUILD_WORLD_DIR (default .world/; built here when missing,
cached otherwise) served over http on a free port. rattler runs in child processes
(tests/world/channel/rattler_ops.py): it can crash at interpreter exit and would take pytest along.
"""

from __future__ import annotations

import hashlib
import html.parser
import json
import os
import subprocess
import sys
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from builder.errors import EnvbuildError
from tests.paths import REPO
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


def _install(channel: Path | str, prefix: Path, *specs: str, platform: str = "linux-64", cuda: str | None = None):
    args = ["install", "--channel", str(channel), "--platform", platform, "--prefix", str(prefix),
            "--cache", str(prefix.parent / "pkgs")]
    if cuda:
        args += ["--cuda", cuda]
    return rattler_ops.run(*args, *specs)


def _solve(channels: list[str], *specs: str, platform: str = "linux-64", cuda: str | None = None):
    args = ["solve", "--platform", platform]
    for channel in channels:
        args += ["--channel", channel]
    if cuda:
        args += ["--cuda", cuda]
    return {r["name"]: r for r in rattler_ops.run(*args, *specs)}


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
    records = _install(channel, prefix, "hello")
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
    _install(tmp_path / "c1", prefix, "treepkg")
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
    _install(channel, prefix, "tool")
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
    solved = _solve([str(tmp_path / "synthetic")], *top, "pytorch 2.13.*", "python 3.11.*", cuda="12.6")
    assert solved["pytorch"]["build"].startswith("cuda12")
    assert set(top) <= set(solved)
    assert len(solved) > len(top) + 5  # dependencies came along


# ---- world: the built channels and pip index ------------------------------------------------


@pytest.fixture(scope="module")
def world() -> Path:
    root = Path(os.environ.get("ENVBUILD_WORLD_DIR", REPO / ".world"))
    done = subprocess.run([sys.executable, "-m", "tests.world.channel", "build", "--world", str(root)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert "world at" in done.stdout, done.stderr[-2000:]
    return root


@pytest.fixture(scope="module")
def served(world: Path):
    with serve_directory(world) as base:
        yield base


@pytest.mark.world
@pytest.mark.parametrize(("cuda", "flavour"), [("11.8", "cuda118_"), (None, "cpu_")])
def test_solve_picks_the_build_the_driver_allows(world: Path, cuda: str | None, flavour: str) -> None:
    solved = _solve([str(world / "conda" / "conda-forge")], "pytorch 2.7.*", "cuda-version 11.8.*", "python 3.11.*",
                    cuda=cuda)
    assert solved["pytorch"]["version"] == "2.7.1"
    assert solved["pytorch"]["build"].startswith(flavour)


@pytest.mark.world
def test_legacy_pytorch_channel_uses_the_mutex(world: Path) -> None:
    channels = [str(world / "conda" / c) for c in ("pytorch", "nvidia", "conda-forge")]
    cpu = _solve(channels, "pytorch 2.5.*", "cpuonly", "python 3.11.*")
    assert cpu["pytorch"]["build"] == "py3.11_cpu_0" and cpu["pytorch-mutex"]["build"] == "cpu"
    gpu = _solve(channels, "pytorch 2.5.*", "pytorch-cuda 12.4.*", "python 3.11.*", cuda="12.4")
    assert gpu["pytorch"]["build"].startswith("py3.11_cuda12.4_") and gpu["pytorch-mutex"]["build"] == "cuda"
    assert gpu["cuda-runtime"]["channel"].rstrip("/").endswith("nvidia")


@pytest.mark.world
def test_real_python_runs_and_pip_installs_from_the_local_index(served: str, tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    records = _install(f"{served}/conda/conda-forge", prefix, "python 3.11.*", "pip")  # over http: hashes checked
    assert {r["name"] for r in records} >= {"python", "pip", "python_abi"}
    python = prefix / "bin" / "python"
    probe = subprocess.run([python, "-c", "import ssl, sqlite3, json; print(1)"], capture_output=True, text=True)
    assert probe.stdout.strip() == "1", probe.stderr
    pip = [python, "-m", "pip", "--isolated", "--disable-pip-version-check"]
    version = subprocess.run([*pip, "--version"], capture_output=True, text=True)
    assert str(prefix) in version.stdout, version.stderr
    install = subprocess.run([*pip, "install", "--no-cache-dir", "--root-user-action=ignore",
                              "--index-url", f"{served}/pypi/simple", "mpmath"], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-2000:]
    assert (prefix / "lib" / "python3.11" / "site-packages" / "mpmath" / "__init__.py").is_file()
    imported = subprocess.run([python, "-c", "import mpmath; print(mpmath.__file__)"], capture_output=True, text=True)
    assert imported.stdout.startswith(str(prefix)), imported.stderr


@pytest.mark.world
@pytest.mark.torch
def test_cpu_torch_package_imports_with_the_world_python(served: str, tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    records = _install(f"{served}/conda/conda-forge", prefix, "pytorch 2.13.*", "python 3.11.*", "numpy")
    assert next(r for r in records if r["name"] == "pytorch")["build"].startswith("cpu_py311_")
    run = subprocess.run(
        [prefix / "bin" / "python", "-c", "import torch, numpy; print(torch.__version__, torch.ones(3).sum().item())"],
        capture_output=True, text=True, timeout=300)
    assert run.stdout.split() == ["2.13.0+cpu", "3.0"], run.stderr[-2000:]


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.append(dict(attrs))


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url) as response:
        return response.read()


@pytest.mark.world
@pytest.mark.parametrize("project", ["torch", "fsspec", "numpy"])
def test_pip_index_serves_hashes_and_metadata(served: str, project: str) -> None:
    page_url = f"{served}/pypi/simple/{project}/"
    parser = _Links()
    parser.feed(_fetch(page_url).decode())
    assert parser.links, f"no links on {page_url}"
    for link in parser.links:
        href = link["href"] or ""
        url, _, fragment = urllib.parse.urljoin(page_url, href).partition("#")
        assert fragment.startswith("sha256=")
        metadata = _fetch(url + ".metadata")
        assert link["data-core-metadata"] == link["data-dist-info-metadata"] == f"sha256={hashlib.sha256(metadata).hexdigest()}"
        assert b"Name: " in metadata and b"Version: " in metadata
        if project != "torch":  # hashing the 190 MB torch wheel over http adds nothing
            assert hashlib.sha256(_fetch(url)).hexdigest() == fragment.removeprefix("sha256=")


@pytest.mark.world
def test_second_build_is_served_from_the_cache(world: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tests.world.channel", "build", "--world", str(world)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert "is up to date" in done.stdout, done.stdout + done.stderr

"""A package is data: after its hashes check out, every member of a .tar.bz2 or a .conda must land inside
the prefix (no absolute name, no `..`, no link out, no chain of links out, no device node), or the
install stops before anything is linked. Real archives, written as a channel writes them or crafted
with tarfile/zipfile; the in-image fallbacks (no data filter, no zstd reader) are run too."""

from __future__ import annotations

import hashlib
import io
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from builder.lock import install
from builder.lock.install import CondaArtifact, InstallError
from tests.world.channel.packages import CondaPackage, PackageFile, write_package

pytestmark = pytest.mark.unit


def _download(path: Path, folder: Path) -> None:
    artifact = CondaArtifact(path.name.split("-")[0], "1.0", path.as_uri(),
                             sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    install._download_all((artifact,), folder, time.monotonic() + 60)


def _package(tmp_path: Path, fmt: str, *files: PackageFile) -> Path:
    return write_package(tmp_path / "channel", CondaPackage("probe", "1.0", "0", subdir="linux-64", files=files), fmt)


def _tar_bz2(tmp_path: Path, *members: tarfile.TarInfo) -> Path:
    path = tmp_path / "probe-1.0-0.tar.bz2"
    with tarfile.open(path, "w:bz2") as archive:
        archive.addfile(_file("info/index.json", b"{}"), io.BytesIO(b"{}"))
        for member in members:
            archive.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return path


def _file(name: str, data: bytes = b"x") -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.size = len(data)
    return member


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type, member.linkname = kind, target
    return member


def _device(name: str) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type = tarfile.CHRTYPE
    return member


@pytest.mark.parametrize("fmt", [".tar.bz2", ".conda"])
def test_a_package_as_a_channel_writes_it_passes(tmp_path: Path, fmt: str) -> None:
    path = _package(tmp_path, fmt, PackageFile("lib/libprobe.so.1", b"\x7fELF"),
                    PackageFile("lib/libprobe.so", symlink_to="libprobe.so.1"),
                    PackageFile("share/probe/data.txt", b"data"), PackageFile("bin/up", symlink_to="../lib/libprobe.so"))
    _download(path, tmp_path / "downloads")


HOSTILE_MEMBERS = {
    "absolute name": (_file("/etc/profile.d/evil.sh"), "absolute path"),
    "dot-dot name": (_file("lib/../../evil.sh"), "outside"),
    "symlink out": (_link("lib/libc.so", "../../../etc/passwd"), "outside"),
    "absolute symlink": (_link("lib/libc.so", "/etc/passwd"), "absolute path"),
    "hard link out": (_link("lib/libc.so", "../../etc/shadow", tarfile.LNKTYPE), "outside"),
    "device node": (_device("lib/kmem"), "device node"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_MEMBERS))
@pytest.mark.parametrize("filtered", [True, False], ids=["data-filter", "no-data-filter"])
def test_a_member_that_leaves_the_prefix_stops_the_install(tmp_path: Path, case: str, filtered: bool,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    if not filtered:  # an image's Python older than 3.10.12 / 3.11.4
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    member, words = HOSTILE_MEMBERS[case]
    with pytest.raises(InstallError, match=words) as refused:
        _download(_tar_bz2(tmp_path, member), tmp_path / "downloads")
    assert "nothing was installed" in str(refused.value) and len(str(refused.value).splitlines()) == 1


def test_a_chain_of_links_that_each_stay_inside_but_lead_out_together_is_refused(tmp_path: Path) -> None:
    # lib/up leads to the root (inside); lib/out by name is lib/etc/passwd (inside), through lib/up it is ../etc
    chain = (_link("lib/up", ".."), _link("lib/out", "up/../../etc/passwd"))
    with pytest.raises(InstallError, match="through its links"):
        _download(_tar_bz2(tmp_path, *chain), tmp_path / "downloads")


def test_a_file_written_beneath_a_link_out_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InstallError, match="outside"):
        _download(_tar_bz2(tmp_path, _link("share/x", "../.."), _file("share/x/etc/evil.sh")), tmp_path / "d")


def test_a_conda_zip_member_with_a_path_is_refused(tmp_path: Path) -> None:
    path = _package(tmp_path, ".conda", PackageFile("lib/a.txt", b"a"))
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("../../evil.sh", b"echo")
    with pytest.raises(InstallError, match="top level"):
        _download(path, tmp_path / "downloads")


@pytest.mark.parametrize("zstd", [True, False], ids=["zstd-reader", "names-only"])
def test_a_conda_whose_inner_tar_leads_out_is_refused_where_zstd_can_be_read(tmp_path: Path, zstd: bool,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = _package(tmp_path, ".conda", PackageFile("lib/libc.so", symlink_to="../../../etc/passwd"))
    if not zstd:
        monkeypatch.setattr(install, "_zstd_reader", lambda: None)
        _download(path, tmp_path / "downloads")  # the zip's names are all an image's Python can check
        return
    if install._zstd_reader() is None:
        pytest.skip("no zstd reader on this Python")
    with pytest.raises(InstallError, match="pkg-.*libc.so.*outside"):
        _download(path, tmp_path / "downloads")


def test_an_archive_that_is_not_one_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "probe-1.0-0.tar.bz2"
    path.write_bytes(b"BZh9 not really")
    with pytest.raises(InstallError, match="not a readable package archive"):
        _download(path, tmp_path / "downloads")

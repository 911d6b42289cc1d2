"""builder.lock.install, the verified installer of one platform of a conda-lock.yml, on locks it must refuse,
its plans, and what importing it pulls in. Installing for real runs in tests/system/test_install_world.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO
from tests.unit.lock.install_helpers import (
    PLATFORM,
    call_installer,
    hashes,
    lock_document,
    sample_channel,
    sample_lockfile,
    write_lock,
)


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    return sample_channel(tmp_path_factory.mktemp("channel"))


# ---------------------------------------------------------------- bad lockfiles: one clear line


@pytest.mark.unit
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("version: 1\npackage: [\n  - {name: x\n", "not valid YAML"),
        ("version: 1\nmetadata: {platforms: [linux-64]}\npackage: 7\n", "not a valid conda-lock lockfile"),
        ("- just\n- a list\n", "not a conda-lock lockfile"),
        ("version: 99\nmetadata: {}\npackage: []\n", "not a conda-lock lockfile"),
    ],
)
def test_a_corrupted_lockfile_gives_one_clear_line(tmp_path: Path, content: str, expected: str) -> None:
    bad = tmp_path / "conda-lock.yml"
    bad.write_text(content)
    out = call_installer("install_lock", bad, prefix=tmp_path / "env")
    assert out.get("type") == "EnvbuildError", out
    assert expected in out["error"] and str(bad) in out["error"] and "\n" not in out["error"]
    assert not (tmp_path / "env").exists()


@pytest.mark.unit
def test_a_lock_entry_without_its_hashes_is_refused(tmp_path: Path) -> None:
    document = lock_document("file:///nowhere", {})
    document["package"] = [{
        "name": "x", "version": "1.0", "manager": "conda", "platform": PLATFORM, "dependencies": {},
        "url": "file:///nowhere/linux-64/x-1.0-0.tar.bz2", "hash": {"md5": "", "sha256": ""},
        "category": "main", "optional": False,
    }]  # fmt: skip
    out = call_installer("install_lock", write_lock(tmp_path / "conda-lock.yml", document), prefix=tmp_path / "env")
    assert out.get("type") == "EnvbuildError" and "cannot be verified" in out["error"], out


@pytest.mark.unit
def test_missing_lockfile_and_missing_platform(tmp_path: Path, channel: tuple[Path, dict[str, Path]]) -> None:
    lockfile = sample_lockfile(tmp_path, channel)
    missing = call_installer("install_lock", tmp_path / "absent.yml", prefix=tmp_path / "env")
    assert missing.get("type") == "EnvbuildError" and "not found" in missing["error"], missing
    other = call_installer("install_lock", lockfile, platform="osx-arm64", prefix=tmp_path / "env")
    assert other.get("type") == "EnvbuildError" and "no platform osx-arm64" in other["error"], other
    assert "linux-64" in other["error"]


# ---------------------------------------------------------------- plans and the installer's imports


@pytest.mark.unit
def test_export_platform_plan_lists_urls_and_hashes(tmp_path: Path, channel: tuple[Path, dict[str, Path]]) -> None:
    lockfile = sample_lockfile(tmp_path, channel)
    _, files = channel
    out = call_installer("export_platform_plan", lockfile)
    plan = out["result"]
    assert plan["kind"] == "envbuild-install-plan" and plan["platform"] == PLATFORM
    by_name = {e["name"]: e for e in plan["conda"]}
    assert set(by_name) == set(files)
    for name, path in files.items():
        assert by_name[name]["sha256"] == hashes(path)["sha256"]
        assert by_name[name]["md5"] == hashes(path)["md5"]
        assert by_name[name]["url"].endswith("/" + path.name)


@pytest.mark.unit
def test_importing_the_installer_pulls_in_no_host_only_library() -> None:
    code = (
        "import os, sys; import builder.lock.install; "
        "print(sorted(m for m in ('yaml', 'pydantic', 'click', 'conda_lock', 'builder.errors') if m in sys.modules)); "
        "sys.stdout.flush(); os._exit(0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


@pytest.mark.unit
def test_read_explicit_takes_urls_and_md5_and_ignores_pip_lines(tmp_path: Path) -> None:
    explicit = tmp_path / "conda-linux-64.lock"
    explicit.write_text(
        "# platform: linux-64\n@EXPLICIT\n"
        f"http://127.0.0.1:9/linux-64/lib-foo-1.2-h0_0.conda#{'a' * 32}\n"
        f"http://127.0.0.1:9/noarch/notes-2.0-0.tar.bz2#sha256:{'b' * 64}\n"
        "# pip envbuild-probe @ http://127.0.0.1:9/p.whl#sha256=" + "c" * 64 + "\n"
    )
    plan = call_installer("read_explicit", explicit)["result"]
    assert plan["platform"] == PLATFORM and plan["pip"] == []
    assert [(e["name"], e["version"], e["md5"], e["sha256"]) for e in plan["conda"]] == [
        ("lib-foo", "1.2", "a" * 32, None),
        ("notes", "2.0", None, "b" * 64),
    ]
    explicit.write_text("@EXPLICIT\nhttp://127.0.0.1:9/linux-64/x-1-0.conda#nothex\n")
    out = call_installer("read_explicit", explicit)
    assert out.get("type") == "InstallError" and f"{explicit}:2" in out["error"], out
    assert "hash after #" in out["error"]

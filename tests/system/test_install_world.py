"""builder.lock.install: the verified installer of one platform of a conda-lock.yml, installing for real.

Locks here are written by hand from a channel made with tests/world/channel/packages.py (conda-lock itself runs in
tests/system/test_solver_shim_world.py). Every rattler call runs in a child process that prints one JSON line and
leaves with os._exit: py-rattler can crash at interpreter exit and would take pytest along, so the
tests judge the printed line, not the exit code alone. Locks the installer refuses: tests/unit/lock/test_install.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.system.conda_lock_helpers import venv_python_package
from tests.unit.lock.install_helpers import (
    PLATFORM,
    call_installer,
    channel_files,
    hashes,
    lock_document,
    sample_channel,
    sample_lockfile,
    sample_packages,
    write_lock,
)
from tests.world.channel.packages import serve_directory


def _base_has_pip() -> bool:
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    done = subprocess.run([str(base), "-m", "pip", "--version"], capture_output=True, check=False)
    return done.returncode == 0


def _wheel(folder: Path, name: str = "envbuild_probe", version: str = "1.0") -> Path:
    """A minimal pure-Python wheel with a console script (pip writes its shebang)."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": b"VALUE = 42\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: envbuild-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}/entry_points.txt": f"[console_scripts]\nprobe = {name}:VALUE\n".encode(),
    }
    record_lines = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record_lines.append(f"{path},sha256={digest},{len(data)}")
    record_lines.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record_lines) + "\n").encode()
    target = folder / f"{name}-{version}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w") as whl:
        for path, data in files.items():
            whl.writestr(path, data)
    return target


def _pip_entry(wheel: Path, sha256: str | None = None) -> dict[str, Any]:
    return {
        "name": "envbuild-probe", "version": "1.0", "manager": "pip", "platform": PLATFORM, "dependencies": {},
        "url": wheel.as_uri(), "hash": {"sha256": sha256 or hashlib.sha256(wheel.read_bytes()).hexdigest()},
        "category": "main", "optional": False,
    }  # fmt: skip


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    return sample_channel(tmp_path_factory.mktemp("channel"))


@pytest.fixture
def lockfile(tmp_path: Path, channel: tuple[Path, dict[str, Path]]) -> Path:
    return sample_lockfile(tmp_path, channel)


# ---------------------------------------------------------------- installing


@pytest.mark.world
def test_install_lock_installs_every_package_and_records_the_locked_urls(tmp_path: Path, lockfile: Path) -> None:
    prefix = tmp_path / "env"
    out = call_installer("install_lock", lockfile, prefix=prefix)
    assert "result" in out, out
    assert out["result"]["conda_packages"] == 3 and out["result"]["pip_packages"] == 0
    assert out["result"]["downloaded_bytes"] > 0
    assert (prefix / "lib/libfoo.txt").read_bytes() == b"foo\n"
    assert (prefix / "bin/hello").read_text() == f"#!/bin/sh\necho {prefix}\n"
    assert not (prefix / "CACHEDIR.TAG").exists()

    locked_urls = {p["url"] for p in yaml.safe_load(lockfile.read_text())["package"]}
    metas = [json.loads(p.read_text()) for p in (prefix / "conda-meta").glob("*.json")]
    assert {m["url"] for m in metas} == locked_urls
    for meta in metas:
        # nothing in conda-meta may name this call's temporary download folder or cache
        assert "envbuild-install-" not in json.dumps(meta)
        assert {"extracted_package_dir", "link"}.isdisjoint(meta)
        assert meta["md5"] and meta["sha256"]


@pytest.mark.world
def test_reinstalling_into_the_same_prefix_reads_its_conda_meta(tmp_path: Path, lockfile: Path) -> None:
    prefix = tmp_path / "env"
    assert "result" in call_installer("install_lock", lockfile, prefix=prefix)
    again = call_installer("install_lock", lockfile, prefix=prefix)
    assert "result" in again, again
    assert len(list((prefix / "conda-meta").glob("*.json"))) == 3


@pytest.mark.world
def test_add_keeps_what_the_prefix_holds_and_touches_none_of_it(tmp_path: Path, lockfile: Path) -> None:
    """An image's later layer groups: each install adds its packages to the prefix; rattler would
    otherwise make the prefix hold exactly the records it is given and unlink the earlier group."""
    document = yaml.safe_load(lockfile.read_text())
    first, rest = document["package"][:2], document["package"][2:]
    prefix = tmp_path / "env"
    out = call_installer("install_lock", write_lock(tmp_path / "first.yml", {**document, "package": first}),
                         prefix=prefix)
    assert "result" in out, out
    before = {p: p.stat().st_ctime_ns for p in prefix.rglob("*") if p.is_file() and "conda-meta" not in p.parts}
    added = call_installer("install_lock", write_lock(tmp_path / "rest.yml", {**document, "package": rest}),
                           prefix=prefix, add=True)
    assert "result" in added and added["result"]["conda_packages"] == len(rest), added
    metas = {json.loads(p.read_text())["name"] for p in (prefix / "conda-meta").glob("*.json")}
    assert metas == {p["name"] for p in document["package"]}
    # the first group's files are where they were, never relinked (a layer would copy them up)
    assert {p: p.stat().st_ctime_ns for p in before} == before


@pytest.mark.world
def test_install_over_http(tmp_path: Path, channel: tuple[Path, dict[str, Path]]) -> None:
    root, files = channel
    with serve_directory(root) as url:
        lock = write_lock(tmp_path / "conda-lock.yml", lock_document(url, files))
        out = call_installer("install_lock", lock, prefix=tmp_path / "env")
    assert "result" in out, out
    meta = json.loads((tmp_path / "env/conda-meta/libfoo-1.2-h0_0.json").read_text())
    assert meta["url"] == f"{url}/linux-64/libfoo-1.2-h0_0.tar.bz2"


@pytest.mark.world
@pytest.mark.parametrize("kind", ["sha256", "md5"])
def test_a_wrong_hash_refuses_before_anything_is_installed(tmp_path: Path, channel, kind: str) -> None:
    root, files = channel
    document = lock_document(root.as_uri(), files)
    # the LAST package is wrong: the ones before it downloaded and verified fine, yet none is linked
    victim = document["package"][-1]
    expected = "0" * len(victim["hash"][kind])
    victim["hash"][kind] = expected
    prefix = tmp_path / "env"
    out = call_installer("install_lock", write_lock(tmp_path / "conda-lock.yml", document), prefix=prefix)
    assert out.get("type") == "EnvbuildError", out
    actual = hashes(files[victim["name"]])[kind]
    assert f"{kind} mismatch" in out["error"] and victim["name"] in out["error"]
    assert expected in out["error"] and actual in out["error"]
    assert "\n" not in out["error"]
    assert not prefix.exists()


@pytest.mark.world
def test_a_tampered_package_file_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "channel"
    files = channel_files(root, sample_packages())
    lock = write_lock(tmp_path / "conda-lock.yml", lock_document(root.as_uri(), files))
    files["hello"].write_bytes(files["hello"].read_bytes() + b"\0")  # same name, different bytes
    prefix = tmp_path / "env"
    out = call_installer("install_lock", lock, prefix=prefix)
    assert out.get("type") == "EnvbuildError" and "hello" in out["error"] and "mismatch" in out["error"], out
    assert not prefix.exists()


@pytest.mark.world
def test_staging_writes_files_there_with_the_final_prefix_inside(tmp_path: Path, lockfile: Path) -> None:
    staging, final = tmp_path / "out/opt/env", tmp_path / "final/opt/env"
    out = call_installer("install_lock", lockfile, prefix=final, staging=staging)
    assert "result" in out, out
    assert out["result"]["root"] == str(staging) and out["result"]["prefix"] == str(final)
    assert (staging / "bin/hello").read_text() == f"#!/bin/sh\necho {final}\n"
    assert not final.exists()


@pytest.mark.world
def test_the_lock_in_json_form_installs_too(tmp_path: Path, lockfile: Path) -> None:
    as_json = tmp_path / "conda-lock.json"
    as_json.write_text(json.dumps(yaml.safe_load(lockfile.read_text())))
    out = call_installer("install_lock", as_json, prefix=tmp_path / "env")
    assert "result" in out and out["result"]["conda_packages"] == 3, out


@pytest.mark.world
def test_a_timeout_stops_the_install_with_one_line(tmp_path: Path, lockfile: Path) -> None:
    out = call_installer("install_lock", lockfile, prefix=tmp_path / "env", timeout=1e-9)
    assert out.get("type") == "EnvbuildError" and "timed out" in out["error"], out
    assert not (tmp_path / "env/conda-meta").exists()


# ---------------------------------------------------------------- pip entries


@pytest.fixture
def python_channel(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    if not _base_has_pip():
        pytest.skip("this machine's base interpreter has no pip: the prefix's python borrows it")
    root = tmp_path / "pychannel"
    return root, channel_files(root, [*sample_packages(), venv_python_package(PLATFORM)])


@pytest.mark.world
def test_pip_entries_install_with_their_hashes_and_staged_shebangs_point_at_the_final_prefix(
    tmp_path: Path, python_channel
) -> None:
    root, files = python_channel
    wheel = _wheel(tmp_path / "wheels")
    lock = write_lock(tmp_path / "conda-lock.yml", lock_document(root.as_uri(), files, [_pip_entry(wheel)]))
    staging, final = tmp_path / "out/opt/env", tmp_path / "final/opt/env"
    out = call_installer("install_lock", lock, prefix=final, staging=staging)
    assert "result" in out and out["result"]["pip_packages"] == 1, out
    site = list(staging.glob("lib/python*/site-packages/envbuild_probe/__init__.py"))
    assert site and site[0].read_text() == "VALUE = 42\n"
    first_line = (staging / "bin/probe").read_text().splitlines()[0]
    assert first_line == f"#!{final}/bin/python"


@pytest.mark.world
def test_a_wrong_pip_hash_fails_the_install(tmp_path: Path, python_channel) -> None:
    root, files = python_channel
    wheel = _wheel(tmp_path / "wheels")
    pip = [_pip_entry(wheel, sha256="1" * 64)]
    lock = write_lock(tmp_path / "conda-lock.yml", lock_document(root.as_uri(), files, pip))
    out = call_installer("install_lock", lock, prefix=tmp_path / "env")
    assert out.get("type") == "EnvbuildError" and "pip install" in out["error"], out
    assert not list((tmp_path / "env").glob("lib/python*/site-packages/envbuild_probe"))


@pytest.mark.world
def test_a_pip_entry_without_sha256_is_refused_before_anything_is_installed(tmp_path: Path, lockfile: Path) -> None:
    document = yaml.safe_load(lockfile.read_text())
    entry = _pip_entry(_wheel(tmp_path / "wheels"))
    entry["hash"] = {}
    document["package"].append(entry)
    out = call_installer("install_lock", write_lock(tmp_path / "nohash.yml", document), prefix=tmp_path / "env")
    assert out.get("type") == "EnvbuildError" and "no sha256" in out["error"], out
    assert not (tmp_path / "env").exists()


@pytest.mark.world
def test_pip_false_skips_the_pip_entries(tmp_path: Path, lockfile: Path) -> None:
    document = yaml.safe_load(lockfile.read_text())
    document["package"].append(_pip_entry(_wheel(tmp_path / "wheels")))
    out = call_installer("install_lock", write_lock(tmp_path / "withpip.yml", document), prefix=tmp_path / "env", pip=False)
    assert "result" in out and out["result"]["pip_packages"] == 0, out


def _isolated_tree(tmp_path: Path) -> tuple[Path, Path]:
    """What an image's builder stage holds: the files the build context copies, and rattler."""
    import importlib.util

    from builder.image.context import installer_sources

    src = tmp_path / "stage/src/builder"
    installer_sources(src.parent)
    spec = importlib.util.find_spec("rattler")
    assert spec is not None and spec.submodule_search_locations
    site = tmp_path / "stage/site"
    site.mkdir()
    (site / "rattler").symlink_to(Path(list(spec.submodule_search_locations)[0]))
    return src.parent, site


@pytest.mark.world
def test_the_plan_entry_point_runs_with_only_the_standard_library_and_rattler(tmp_path: Path, lockfile: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(call_installer("export_platform_plan", lockfile)["result"]))
    src, site = _isolated_tree(tmp_path)
    base = Path(getattr(sys, "_base_executable", sys.executable))
    # -I: no PYTHONPATH, no user or venv site-packages; the path holds the copied module and rattler only.
    launcher = (
        "import sys; sys.path[:0] = [sys.argv.pop(1), sys.argv.pop(1)]; import runpy; "
        "runpy.run_module('builder.lock.install', run_name='__main__', alter_sys=True)"
    )
    staging, final = tmp_path / "out/opt/env", tmp_path / "final/opt/env"
    done = subprocess.run(
        [str(base), "-I", "-c", launcher, str(src), str(site), "--plan", str(plan), "--prefix", str(final),
         "--staging", str(staging), "--json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stdout[-2000:]
    result = json.loads(lines[-1])
    assert result["conda_packages"] == 3 and result["root"] == str(staging)
    assert (staging / "bin/hello").read_text() == f"#!/bin/sh\necho {final}\n"

    bad = tmp_path / "bad-plan.json"
    bad.write_text(json.dumps({"kind": "envbuild-install-plan", "format": 1, "platform": PLATFORM, "conda": [{}]}))
    refused = subprocess.run(
        [str(base), "-I", "-c", launcher, str(src), str(site), "--plan", str(bad), "--prefix", str(tmp_path / "x")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert refused.returncode == 1 and "error:" in refused.stderr and "conda[0]" in refused.stderr



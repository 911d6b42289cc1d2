"""builder.lock.install: the verified installer of one platform of a conda-lock.yml.

Locks here are written by hand from a channel made with tests/world/channel/packages.py (conda-lock itself runs in
tests/test_solver_shim.py). Every rattler call runs in a child process that prints one JSON line and
leaves with os._exit: py-rattler can crash at interpreter exit and would take pytest along, so the
tests judge the printed line, not the exit code alone.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.paths import REPO
from tests.world.channel.packages import CondaPackage, PackageFile, serve_directory, write_package

PLACEHOLDER = "/opt/anaconda1anaconda2anaconda3"
PLATFORM = "linux-64"

# Runs one builder.lock.install function in a child process: argv[1] is a JSON call, the last stdout line
# is {"result": ...} or {"error": "...", "type": "..."}.
_DRIVER = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    call = json.loads(sys.argv[1])
    try:
        import builder.lock.install as inst
        kwargs = {k: (Path(v) if k in ("staging", "cache_dir") and v else v) for k, v in call["kwargs"].items()}
        if call["function"] == "install_lock":
            result = inst.install_lock(Path(call["lockfile"]), call["platform"], Path(call["prefix"]), **kwargs)
            out = {"result": result.to_json_dict()}
        elif call["function"] == "export_platform_plan":
            out = {"result": inst.export_platform_plan(Path(call["lockfile"]), call["platform"])}
        elif call["function"] == "read_explicit":
            out = {"result": inst.read_explicit(Path(call["lockfile"])).to_json_dict()}
        else:
            raise SystemExit("unknown function")
    except Exception as exc:
        out = {"error": str(exc), "type": type(exc).__name__}
    print(json.dumps(out))
    sys.stdout.flush()
    os._exit(0)
    """
)


# ---------------------------------------------------------------- channel and lock helpers


def _index(channel: Path) -> None:
    code = (
        "import os, sys; from pathlib import Path; from tests.world.channel.packages import index_channel; "
        "index_channel(Path(sys.argv[1])); sys.stdout.flush(); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code, str(channel)], cwd=REPO, check=False, timeout=120)
    assert (channel / "noarch" / "repodata.json").is_file(), "indexing the test channel failed"


def _packages() -> list[CondaPackage]:
    return [
        CondaPackage("libfoo", "1.2", "h0_0", subdir=PLATFORM, files=(PackageFile("lib/libfoo.txt", b"foo\n"),)),
        CondaPackage(
            "hello", "1.0", "h1_0", subdir=PLATFORM, depends=("libfoo >=1",),
            files=(
                PackageFile("bin/hello", f"#!/bin/sh\necho {PLACEHOLDER}\n".encode(), 0o755, prefix_placeholder=PLACEHOLDER),
                PackageFile("share/hello/data.bin", bytes(range(256)) * 8),
            ),
        ),  # fmt: skip
        CondaPackage("notes", "2.0", "0", noarch="generic", files=(PackageFile("share/notes.txt", b"notes\n"),)),
    ]


def _venv_python_package() -> CondaPackage:
    """A `python` whose bin/python runs this machine's base interpreter as a venv rooted at the
    prefix (pyvenv.cfg), so pip installs into the prefix; the base's own pip is visible to it."""
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    cfg = f"home = {base.parent}\ninclude-system-site-packages = true\nversion = {sys.version.split()[0]}\n"
    return CondaPackage(
        "python", "3.11.7", "h0_0", subdir=PLATFORM,
        files=(PackageFile("bin/python", symlink_to=str(base)), PackageFile("pyvenv.cfg", cfg.encode())),
    )  # fmt: skip


def _base_has_pip() -> bool:
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    done = subprocess.run([str(base), "-m", "pip", "--version"], capture_output=True, check=False)
    return done.returncode == 0


def _make_channel(root: Path, packages: list[CondaPackage]) -> dict[str, Path]:
    files = {pkg.name: write_package(root, pkg) for pkg in packages}
    _index(root)
    return files


def _hashes(path: Path) -> dict[str, str]:
    data = path.read_bytes()
    return {"md5": hashlib.md5(data).hexdigest(), "sha256": hashlib.sha256(data).hexdigest()}  # noqa: S324


def _lock_document(base_url: str, files: dict[str, Path], pip: list[dict[str, Any]] = ()) -> dict[str, Any]:
    """A conda-lock v1 lockfile (what conda-lock writes) for the given package files."""
    packages = []
    for name, path in sorted(files.items()):
        subdir = path.parent.name
        version = path.name.split("-")[-2]
        packages.append({
            "name": name, "version": version, "manager": "conda", "platform": PLATFORM, "dependencies": {},
            "url": f"{base_url}/{subdir}/{path.name}", "hash": _hashes(path), "category": "main", "optional": False,
        })  # fmt: skip
    packages.extend(pip)
    return {
        "version": 1,
        "metadata": {
            "content_hash": {PLATFORM: "0" * 64},
            "channels": [{"url": base_url, "used_env_vars": []}],
            "platforms": [PLATFORM],
            "sources": ["environment.yml"],
        },
        "package": packages,
    }


def _write_lock(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _call(function: str, lockfile: Path, platform: str = PLATFORM, prefix: Path | None = None, **kwargs: Any) -> dict:
    call = {
        "function": function, "lockfile": str(lockfile), "platform": platform, "prefix": str(prefix),
        "kwargs": {k: str(v) if isinstance(v, Path) else v for k, v in kwargs.items()},
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(call)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"driver printed nothing (exit {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(lines[-1])


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
    root = tmp_path_factory.mktemp("channel")
    return root, _make_channel(root, _packages())


@pytest.fixture
def lockfile(tmp_path: Path, channel: tuple[Path, dict[str, Path]]) -> Path:
    root, files = channel
    return _write_lock(tmp_path / "conda-lock.yml", _lock_document(root.as_uri(), files))


# ---------------------------------------------------------------- installing


@pytest.mark.world
def test_install_lock_installs_every_package_and_records_the_locked_urls(tmp_path: Path, lockfile: Path) -> None:
    prefix = tmp_path / "env"
    out = _call("install_lock", lockfile, prefix=prefix)
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
    assert "result" in _call("install_lock", lockfile, prefix=prefix)
    again = _call("install_lock", lockfile, prefix=prefix)
    assert "result" in again, again
    assert len(list((prefix / "conda-meta").glob("*.json"))) == 3


@pytest.mark.world
def test_install_over_http(tmp_path: Path, channel: tuple[Path, dict[str, Path]]) -> None:
    root, files = channel
    with serve_directory(root) as url:
        lock = _write_lock(tmp_path / "conda-lock.yml", _lock_document(url, files))
        out = _call("install_lock", lock, prefix=tmp_path / "env")
    assert "result" in out, out
    meta = json.loads((tmp_path / "env/conda-meta/libfoo-1.2-h0_0.json").read_text())
    assert meta["url"] == f"{url}/linux-64/libfoo-1.2-h0_0.tar.bz2"


@pytest.mark.world
@pytest.mark.parametrize("kind", ["sha256", "md5"])
def test_a_wrong_hash_refuses_before_anything_is_installed(tmp_path: Path, channel, kind: str) -> None:
    root, files = channel
    document = _lock_document(root.as_uri(), files)
    # the LAST package is wrong: the ones before it downloaded and verified fine, yet none is linked
    victim = document["package"][-1]
    expected = "0" * len(victim["hash"][kind])
    victim["hash"][kind] = expected
    prefix = tmp_path / "env"
    out = _call("install_lock", _write_lock(tmp_path / "conda-lock.yml", document), prefix=prefix)
    assert out.get("type") == "EnvbuildError", out
    actual = _hashes(files[victim["name"]])[kind]
    assert f"{kind} mismatch" in out["error"] and victim["name"] in out["error"]
    assert expected in out["error"] and actual in out["error"]
    assert "\n" not in out["error"]
    assert not prefix.exists()


@pytest.mark.world
def test_a_tampered_package_file_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "channel"
    files = _make_channel(root, _packages())
    lock = _write_lock(tmp_path / "conda-lock.yml", _lock_document(root.as_uri(), files))
    files["hello"].write_bytes(files["hello"].read_bytes() + b"\0")  # same name, different bytes
    prefix = tmp_path / "env"
    out = _call("install_lock", lock, prefix=prefix)
    assert out.get("type") == "EnvbuildError" and "hello" in out["error"] and "mismatch" in out["error"], out
    assert not prefix.exists()


@pytest.mark.world
def test_staging_writes_files_there_with_the_final_prefix_inside(tmp_path: Path, lockfile: Path) -> None:
    staging, final = tmp_path / "out/opt/env", tmp_path / "final/opt/env"
    out = _call("install_lock", lockfile, prefix=final, staging=staging)
    assert "result" in out, out
    assert out["result"]["root"] == str(staging) and out["result"]["prefix"] == str(final)
    assert (staging / "bin/hello").read_text() == f"#!/bin/sh\necho {final}\n"
    assert not final.exists()


@pytest.mark.world
def test_the_lock_in_json_form_installs_too(tmp_path: Path, lockfile: Path) -> None:
    as_json = tmp_path / "conda-lock.json"
    as_json.write_text(json.dumps(yaml.safe_load(lockfile.read_text())))
    out = _call("install_lock", as_json, prefix=tmp_path / "env")
    assert "result" in out and out["result"]["conda_packages"] == 3, out


@pytest.mark.world
def test_a_timeout_stops_the_install_with_one_line(tmp_path: Path, lockfile: Path) -> None:
    out = _call("install_lock", lockfile, prefix=tmp_path / "env", timeout=1e-9)
    assert out.get("type") == "EnvbuildError" and "timed out" in out["error"], out
    assert not (tmp_path / "env/conda-meta").exists()


# ---------------------------------------------------------------- pip entries


@pytest.fixture
def python_channel(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    if not _base_has_pip():
        pytest.skip("this machine's base interpreter has no pip: the prefix's python borrows it")
    root = tmp_path / "pychannel"
    return root, _make_channel(root, [*_packages(), _venv_python_package()])


@pytest.mark.world
def test_pip_entries_install_with_their_hashes_and_staged_shebangs_point_at_the_final_prefix(
    tmp_path: Path, python_channel
) -> None:
    root, files = python_channel
    wheel = _wheel(tmp_path / "wheels")
    lock = _write_lock(tmp_path / "conda-lock.yml", _lock_document(root.as_uri(), files, [_pip_entry(wheel)]))
    staging, final = tmp_path / "out/opt/env", tmp_path / "final/opt/env"
    out = _call("install_lock", lock, prefix=final, staging=staging)
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
    lock = _write_lock(tmp_path / "conda-lock.yml", _lock_document(root.as_uri(), files, pip))
    out = _call("install_lock", lock, prefix=tmp_path / "env")
    assert out.get("type") == "EnvbuildError" and "pip install" in out["error"], out
    assert not list((tmp_path / "env").glob("lib/python*/site-packages/envbuild_probe"))


@pytest.mark.world
def test_a_pip_entry_without_sha256_is_refused_before_anything_is_installed(tmp_path: Path, lockfile: Path) -> None:
    document = yaml.safe_load(lockfile.read_text())
    entry = _pip_entry(_wheel(tmp_path / "wheels"))
    entry["hash"] = {}
    document["package"].append(entry)
    out = _call("install_lock", _write_lock(tmp_path / "nohash.yml", document), prefix=tmp_path / "env")
    assert out.get("type") == "EnvbuildError" and "no sha256" in out["error"], out
    assert not (tmp_path / "env").exists()


@pytest.mark.world
def test_pip_false_skips_the_pip_entries(tmp_path: Path, lockfile: Path) -> None:
    document = yaml.safe_load(lockfile.read_text())
    document["package"].append(_pip_entry(_wheel(tmp_path / "wheels")))
    out = _call("install_lock", _write_lock(tmp_path / "withpip.yml", document), prefix=tmp_path / "env", pip=False)
    assert "result" in out and out["result"]["pip_packages"] == 0, out


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
    out = _call("install_lock", bad, prefix=tmp_path / "env")
    assert out.get("type") == "EnvbuildError", out
    assert expected in out["error"] and str(bad) in out["error"] and "\n" not in out["error"]
    assert not (tmp_path / "env").exists()


@pytest.mark.unit
def test_a_lock_entry_without_its_hashes_is_refused(tmp_path: Path) -> None:
    document = _lock_document("file:///nowhere", {})
    document["package"] = [{
        "name": "x", "version": "1.0", "manager": "conda", "platform": PLATFORM, "dependencies": {},
        "url": "file:///nowhere/linux-64/x-1.0-0.tar.bz2", "hash": {"md5": "", "sha256": ""},
        "category": "main", "optional": False,
    }]  # fmt: skip
    out = _call("install_lock", _write_lock(tmp_path / "conda-lock.yml", document), prefix=tmp_path / "env")
    assert out.get("type") == "EnvbuildError" and "cannot be verified" in out["error"], out


@pytest.mark.unit
def test_missing_lockfile_and_missing_platform(tmp_path: Path, lockfile: Path) -> None:
    missing = _call("install_lock", tmp_path / "absent.yml", prefix=tmp_path / "env")
    assert missing.get("type") == "EnvbuildError" and "not found" in missing["error"], missing
    other = _call("install_lock", lockfile, platform="osx-arm64", prefix=tmp_path / "env")
    assert other.get("type") == "EnvbuildError" and "no platform osx-arm64" in other["error"], other
    assert "linux-64" in other["error"]


# ---------------------------------------------------------------- plans and the in-image entry point


@pytest.mark.unit
def test_export_platform_plan_lists_urls_and_hashes(tmp_path: Path, lockfile: Path, channel) -> None:
    _, files = channel
    out = _call("export_platform_plan", lockfile)
    plan = out["result"]
    assert plan["kind"] == "envbuild-install-plan" and plan["platform"] == PLATFORM
    by_name = {e["name"]: e for e in plan["conda"]}
    assert set(by_name) == set(files)
    for name, path in files.items():
        assert by_name[name]["sha256"] == _hashes(path)["sha256"]
        assert by_name[name]["md5"] == _hashes(path)["md5"]
        assert by_name[name]["url"].endswith("/" + path.name)


def _isolated_tree(tmp_path: Path) -> tuple[Path, Path]:
    """What an image's builder stage holds: the files the build context copies, and rattler."""
    import importlib.util

    from builder.lock.install import RUNS_ALONE_WITH

    src = tmp_path / "stage/src/builder"
    for name in RUNS_ALONE_WITH:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / "builder" / name, src / name)
    spec = importlib.util.find_spec("rattler")
    assert spec is not None and spec.submodule_search_locations
    site = tmp_path / "stage/site"
    site.mkdir()
    (site / "rattler").symlink_to(Path(list(spec.submodule_search_locations)[0]))
    return src.parent, site


@pytest.mark.world
def test_the_plan_entry_point_runs_with_only_the_standard_library_and_rattler(tmp_path: Path, lockfile: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(_call("export_platform_plan", lockfile)["result"]))
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
    plan = _call("read_explicit", explicit)["result"]
    assert plan["platform"] == PLATFORM and plan["pip"] == []
    assert [(e["name"], e["version"], e["md5"], e["sha256"]) for e in plan["conda"]] == [
        ("lib-foo", "1.2", "a" * 32, None),
        ("notes", "2.0", None, "b" * 64),
    ]
    explicit.write_text("@EXPLICIT\nhttp://127.0.0.1:9/linux-64/x-1-0.conda#nothex\n")
    out = _call("read_explicit", explicit)
    assert out.get("type") == "InstallError" and f"{explicit}:2" in out["error"], out
    assert "hash after #" in out["error"]

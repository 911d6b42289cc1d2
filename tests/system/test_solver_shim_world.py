"""envbuild-micromamba: conda-lock's solver calls answered by py-rattler.

Two kinds of test:
- contract: the calls conda-lock 4 really makes were recorded (tests/fixtures/conda-lock-calls/,
  made with recorder.py there) and are replayed against the shim; its answers are read with
  conda-lock's own code and types. A live run checks that conda-lock still makes those calls:
  set ENVBUILD_UPDATE_FIXTURES=1 to re-record them after a conda-lock upgrade, then review the diff.
- end to end: `conda-lock lock/install --conda envbuild-micromamba` against a small channel made
  here with tests/world/channel/packages.py and served over http, from a clean working folder each time (conda-lock
  silently reads a virtual-packages.yml in its working folder).

The shim and rattler always run in child processes (py-rattler can crash at interpreter exit);
the tests judge output, not only exit codes. The calls it answers without a channel, and those it
refuses: tests/unit/lock/test_solver_shim.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import paths
from tests.paths import REPO
from tests.system.conda_lock_helpers import (
    SUBDIRS,
    build_of,
    lock_with_conda_lock,
    locked_packages,
    make_channel,
    run_conda_lock,
    small_package,
    small_world,
)
from tests.unit.lock.install_helpers import index_in_child
from tests.unit.lock.solver_shim_helpers import SHIM, clean_env, dry_run_args, run_shim
from tests.world.channel.packages import serve_directory, write_package

FIXTURES = paths.FIXTURES / "conda-lock-calls"
UPDATE_FIXTURES = os.environ.get("ENVBUILD_UPDATE_FIXTURES") == "1"

# FETCH keys conda-lock reads (conda_solver.solve_conda, models.dry_run_install.FetchAction)
FETCH_KEYS = {"name", "version", "url", "fn", "channel", "md5", "sha256", "depends", "constrains", "subdir", "timestamp"}
# LINK keys conda-lock keeps for unchanged packages (models.dry_run_install.LinkAction)
LINK_KEYS = {"base_url", "channel", "dist_name", "name", "platform", "version"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    root = make_channel(tmp_path / "channel", small_world())
    with serve_directory(root) as url:
        yield root, url


# ---------------------------------------------------------------- running conda-lock and the shim


def _recorder(tmp: Path) -> Path:
    """An executable named like micromamba (conda-lock checks the name) that records, then forwards."""
    script = tmp / "bin" / "recording-micromamba"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FIXTURES / "recorder.py"}" "$@"\n')
    script.chmod(0o755)
    return script


# ---------------------------------------------------------------- recorded calls: placeholders


_RANDOM_NAME = r"/([A-Za-z-]*?)[a-z0-9_]{8}(?=[/\"'\s]|$)"


def _sanitize(value: Any, tmp: Path, channel_url: str) -> Any:
    """Recorded calls without this run's paths: conda-lock's temporary names keep their prefix."""
    text = json.dumps(value)
    text = text.replace(channel_url, "<CHANNEL>")
    text = re.sub(re.escape(str(tmp / "tmp")) + _RANDOM_NAME, r"<TMP>/\1XXXXXXXX", text)
    text = text.replace(str(tmp), "<TEST>").replace(sys.prefix, "<VENV>")
    leftovers = [p for p in (str(REPO), "/tmp/", str(Path.home()) + "/") if p in text]
    assert not leftovers, f"recorded calls still name local paths {leftovers}"
    return json.loads(text)


def _recorded(folder: Path, tmp: Path, channel_url: str) -> list[dict[str, Any]]:
    calls = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    keep = ("argv", "env", "channels", "prefix_conda_meta", "file", "returncode")
    return [_sanitize({k: call[k] for k in keep}, tmp, channel_url) for call in calls]


def _contract(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What conda-lock decides in a call (argv, variables, virtual-package channel); the package
    hashes inside conda-meta and explicit files depend on the channel build and are left out."""
    return [{k: c[k] for k in ("argv", "env", "channels", "returncode")} for c in calls]


def _check_against_fixture(name: str, calls: list[dict[str, Any]]) -> None:
    path = FIXTURES / f"{name}.json"
    if UPDATE_FIXTURES:
        path.write_text(json.dumps(calls, indent=1, sort_keys=True) + "\n")
    saved = json.loads(path.read_text())
    assert _contract(calls) == _contract(saved), (
        f"conda-lock's calls differ from {path.name}: re-record with ENVBUILD_UPDATE_FIXTURES=1 and review"
    )


# ---------------------------------------------------------------- end to end with conda-lock


@pytest.mark.world
def test_lock_two_platforms_with_cuda_matches_the_recorded_calls(tmp_path: Path, served) -> None:
    _, url = served
    started = time.monotonic()
    done, lockfile = lock_with_conda_lock(tmp_path, url, "-p", "linux-64", "-p", "osx-arm64", "--with-cuda", "11.8",
                           conda=_recorder(tmp_path), record=tmp_path / "calls")  # fmt: skip
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    locked = locked_packages(lockfile)
    assert {n for p, n in locked if p == "linux-64"} == {"python", "numpy", "pytorch", "filelock"}
    assert build_of(locked["linux-64", "pytorch"]) == "cuda118_py311_1"
    assert build_of(locked["osx-arm64", "pytorch"]) == "cpu_py311_0"
    for entry in locked.values():
        assert entry["url"].startswith(url + "/") and len(entry["hash"]["sha256"]) == 64 and entry["hash"]["md5"]
        assert not entry["name"].startswith("__")
    calls = _recorded(tmp_path / "calls", tmp_path, url)
    assert [c["argv"][0] for c in calls] == ["--version", "--version", "create", "create"]
    _check_against_fixture("lock", calls)
    print(f"conda-lock lock, 2 platforms, through the shim: {seconds:.2f} s")


@pytest.mark.world
def test_without_cuda_picks_the_cpu_build(tmp_path: Path, served) -> None:
    _, url = served
    done, lockfile = lock_with_conda_lock(tmp_path, url, "-p", "linux-64", "--without-cuda")
    assert done.returncode == 0, done.stderr[-3000:]
    assert build_of(locked_packages(lockfile)["linux-64", "pytorch"]) == "cpu_py311_0"


@pytest.mark.world
def test_update_moves_only_the_named_package(tmp_path: Path) -> None:
    root = make_channel(tmp_path / "channel", small_world())
    with serve_directory(root) as url:
        first, lockfile = lock_with_conda_lock(tmp_path, url, "-p", "linux-64", "-p", "osx-arm64", "--with-cuda", "11.8")
        assert first.returncode == 0, first.stderr[-3000:]
        before = locked_packages(lockfile)
        for package in small_world(newer=True)[len(small_world()) :]:
            write_package(root, package)
        index_in_child(root)
        args = ("-p", "linux-64", "-p", "osx-arm64", "--with-cuda", "11.8", "--lockfile", "conda-lock.yml", "--update", "numpy")
        done, _ = lock_with_conda_lock(tmp_path, url, *args, conda=_recorder(tmp_path), record=tmp_path / "calls")
        assert done.returncode == 0, done.stderr[-3000:]
        after = locked_packages(lockfile)
        # control: a fresh lock against the same channel does take the newer filelock
        fresh, fresh_lock = lock_with_conda_lock(tmp_path, url, "-p", "linux-64", "--with-cuda", "11.8", name="fresh")
        assert fresh.returncode == 0 and locked_packages(fresh_lock)["linux-64", "filelock"]["version"] == "3.13.0"
        calls = _recorded(tmp_path / "calls", tmp_path, url)
    for platform in SUBDIRS:
        assert after[platform, "numpy"]["version"] == "1.26.4"
        assert before[platform, "numpy"]["version"] == "1.26.0"
        for name in ("filelock", "python", "pytorch"):
            assert after[platform, name] == before[platform, name], f"{name} moved on {platform}"
    assert [c["argv"][0] for c in calls] == ["--version", "--version", "list", "update", "list", "update"]
    _check_against_fixture("update", calls)


@pytest.mark.world
def test_update_moves_a_locked_package_only_when_the_named_one_needs_it(tmp_path: Path) -> None:
    root = make_channel(tmp_path / "channel", small_world())
    with serve_directory(root) as url:
        first, lockfile = lock_with_conda_lock(tmp_path, url, "-p", "linux-64", "--without-cuda")
        assert first.returncode == 0, first.stderr[-3000:]
        before = locked_packages(lockfile)
        py311 = "python >=3.11,<3.12.0a0"
        for package in (
            small_package("filelock", "3.13.0", "pyhd8ed1ab_0", "noarch", ("python >=3.8",), noarch="generic"),
            small_package("numpy", "1.27.0", "py311_0", "linux-64", (py311, "filelock >=3.13")),
        ):
            write_package(root, package)
        index_in_child(root)
        done, _ = lock_with_conda_lock(tmp_path, url, "-p", "linux-64", "--without-cuda", "--lockfile", "conda-lock.yml",
                        "--update", "numpy")
        assert done.returncode == 0, done.stderr[-3000:]
        after = locked_packages(lockfile)
    assert after["linux-64", "numpy"]["version"] == "1.27.0"
    assert after["linux-64", "filelock"]["version"] == "3.13.0"  # pinned at 3.12.0 it cannot solve
    for name in ("python", "pytorch"):
        assert after["linux-64", name] == before["linux-64", name], f"{name} moved"


@pytest.mark.world
def test_an_unsatisfiable_env_fails_with_the_short_explanation(tmp_path: Path, served) -> None:
    _, url = served
    done, lockfile = lock_with_conda_lock(tmp_path, url, "-p", "linux-64", "--without-cuda", build=" *cuda*")
    assert done.returncode != 0 and not lockfile.exists()
    output = done.stdout + done.stderr
    # conda-lock prints our message right after its own line, before its dump of the command
    head = output.split("Could not lock the environment for platform linux-64", 1)[1].split("Command:", 1)[0]
    assert "Cannot solve for linux-64" in head
    assert "__cuda >=11.8" in head and "virtual packages: __archspec 1 x86_64" in head
    assert "no __cuda" in head
    assert len(head.strip().splitlines()) <= 25


@pytest.mark.world
def test_conda_lock_install_through_the_shim_matches_the_recorded_calls(tmp_path: Path, served) -> None:
    _, url = served
    done, lockfile = lock_with_conda_lock(tmp_path, url, "-p", "linux-64", "--with-cuda", "11.8")
    assert done.returncode == 0, done.stderr[-3000:]
    prefix = tmp_path / "prefix"
    env = clean_env(tmp_path, ENVBUILD_RECORD_DIR=str(tmp_path / "calls"), ENVBUILD_RECORD_FORWARD=str(SHIM))
    args = ["install", "--conda", str(_recorder(tmp_path)), "-p", str(prefix), str(lockfile)]
    installed = run_conda_lock(args, tmp_path / "run", env)
    assert installed.returncode == 0, installed.stderr[-3000:]
    metas = {json.loads(p.read_text())["name"]: json.loads(p.read_text()) for p in (prefix / "conda-meta").glob("*.json")}
    assert set(metas) == {"python", "numpy", "pytorch", "filelock"}
    assert metas["pytorch"]["build"] == "cuda118_py311_1" and metas["pytorch"]["url"].startswith(url)
    assert (prefix / "share/pytorch/2.1.0-cuda118_py311_1.txt").is_file()
    calls = _recorded(tmp_path / "calls", tmp_path, url)
    assert [c["argv"][:2] for c in calls] == [["--version"], ["create", "--quiet"]]
    _check_against_fixture("install", calls)


@pytest.mark.world
def test_conda_lock_install_runs_the_pip_step_in_the_prefix(tmp_path: Path) -> None:
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    if subprocess.run([str(base), "-m", "pip", "--version"], capture_output=True, check=False).returncode != 0:
        pytest.skip("this machine's base interpreter has no pip: the prefix's python borrows it")
    root = make_channel(tmp_path / "channel", small_world(real_python=True))
    wheel = _probe_wheel(tmp_path / "wheels")
    with serve_directory(root) as url:
        done, lockfile = lock_with_conda_lock(tmp_path, url, "-p", "linux-64", "--with-cuda", "11.8")
        assert done.returncode == 0, done.stderr[-3000:]
        document = yaml.safe_load(lockfile.read_text())
        document["package"].append({
            "name": "envbuild-probe", "version": "1.0", "manager": "pip", "platform": "linux-64", "dependencies": {},
            "url": wheel.as_uri(), "hash": {"sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()},
            "category": "main", "optional": False,
        })  # fmt: skip
        lockfile.write_text(yaml.safe_dump(document, sort_keys=False))
        prefix = tmp_path / "prefix"
        env = clean_env(tmp_path, ENVBUILD_RECORD_DIR=str(tmp_path / "calls"), ENVBUILD_RECORD_FORWARD=str(SHIM))
        args = ["install", "--conda", str(_recorder(tmp_path)), "-p", str(prefix), str(lockfile)]
        installed = run_conda_lock(args, tmp_path / "run", env)
        calls = _recorded(tmp_path / "calls", tmp_path, url)
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert list(prefix.glob("lib/python*/site-packages/envbuild_probe/__init__.py"))
    run = [c for c in calls if c["argv"][0] == "run"]
    assert len(run) == 1 and run[0]["argv"][:3] == ["run", "--prefix", "<TEST>/prefix"]
    assert run[0]["argv"][3:7] == ["pip", "install", "--no-deps", "-r"]
    assert "envbuild-probe @ file://<TEST>/wheels/envbuild_probe-1.0-py3-none-any.whl#sha256=" in run[0]["file"]


def _probe_wheel(folder: Path) -> Path:
    import base64
    import zipfile

    dist = "envbuild_probe-1.0.dist-info"
    files = {
        "envbuild_probe/__init__.py": b"VALUE = 42\n",
        f"{dist}/METADATA": b"Metadata-Version: 2.1\nName: envbuild-probe\nVersion: 1.0\n",
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: envbuild-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}"
        for p, d in files.items()
    ]
    files[f"{dist}/RECORD"] = ("\n".join([*record, f"{dist}/RECORD,,"]) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "envbuild_probe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(target, "w") as whl:
        for path, data in files.items():
            whl.writestr(path, data)
    return target


# ---------------------------------------------------------------- contract: replaying the recorded calls


def _fixture_calls() -> list[tuple[str, int]]:
    return [(name, i) for name in ("lock", "update", "install") for i, _ in enumerate(json.loads((FIXTURES / f"{name}.json").read_text()))]


def _materialize(call: dict[str, Any], tmp: Path, channel_url: str, channel_root: Path) -> dict[str, Any]:
    """Put back real paths, recreate conda-lock's fake channel, fake prefix and files on disk."""
    text = json.dumps(call).replace("<CHANNEL>", channel_url).replace("<TMP>", str(tmp / "tmp"))
    text = text.replace("<TEST>", str(tmp)).replace("<VENV>", sys.prefix)
    call = json.loads(text)
    for channel, subdirs in call["channels"].items():
        for subdir, repodata in subdirs.items():
            folder = Path(channel.removeprefix("file://")) / subdir
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "repodata.json").write_text(json.dumps(repodata))
    argv = call["argv"]
    if call["prefix_conda_meta"]:
        meta = Path(argv[argv.index("-p") + 1]) / "conda-meta"
        meta.mkdir(parents=True)
        for name, record in call["prefix_conda_meta"].items():
            (meta / name).write_text(json.dumps(record))
    if call["file"] is not None:
        flag = "--file" if "--file" in argv else "-r"
        target = Path(argv[argv.index(flag) + 1])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_rehash_explicit(call["file"], channel_url, channel_root))
    for value in argv:
        if "conda-lock-pkgs-" in value:
            Path(value).parent.mkdir(parents=True, exist_ok=True)
    return call


def _rehash_explicit(text: str, channel_url: str, channel_root: Path) -> str:
    """The recorded explicit file with each md5 taken from this run's channel build: the fixture
    pins the file's shape (header, @EXPLICIT, URL#md5 lines), not channel.py's archive bytes."""
    lines = []
    for line in text.splitlines():
        if line.startswith(channel_url + "/"):
            url = line.split("#", 1)[0]
            data = (channel_root / url.removeprefix(channel_url + "/")).read_bytes()
            line = f"{url}#{hashlib.md5(data).hexdigest()}"  # conda's md5
        lines.append(line)
    return "\n".join(lines) + "\n"


def _read_like_conda_lock(answer: dict[str, Any], platform: str) -> dict[str, Any]:
    """What conda_lock.conda_solver.solve_conda does with a dry-run answer (its own types)."""
    from conda_lock.conda_solver import _reconstruct_fetch_actions
    from conda_lock.interfaces.vendored_conda import MatchSpec
    from conda_lock.lockfile.v2prelim.models import HashModel, LockedDependency
    from conda_lock.models.channel import normalize_url_with_placeholders

    answer = _reconstruct_fetch_actions(str(SHIM), platform, answer)
    planned = {}
    for action in answer["actions"]["FETCH"]:
        assert action.keys() >= FETCH_KEYS, f"FETCH entry lacks {FETCH_KEYS - action.keys()}"
        depends = {MatchSpec(d).name: d for d in action.get("depends") or []}
        planned[action["name"]] = LockedDependency(
            name=action["name"], version=action["version"], manager="conda", platform=platform,
            dependencies={k: "" for k in depends}, url=normalize_url_with_placeholders(action["url"], channels=[]),
            hash=HashModel(md5=action["md5"], sha256=action.get("sha256")),
        )  # fmt: skip
    for link in answer["actions"]["LINK"]:
        assert link.keys() >= LINK_KEYS, f"LINK entry lacks {LINK_KEYS - link.keys()}"
    return planned


@pytest.fixture(scope="module")
def replay_channels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Path, str]]]:
    """One server for two channels at the same URL shape: the world before and after newer packages."""
    base = tmp_path_factory.mktemp("replay")
    roots = {"base": make_channel(base / "base", small_world()), "newer": make_channel(base / "newer", small_world(newer=True))}
    with serve_directory(base) as url:
        yield {name: (root, f"{url}/{name}") for name, root in roots.items()}


@pytest.mark.world
@pytest.mark.parametrize(("scenario", "index"), _fixture_calls())
def test_the_shim_answers_each_recorded_call(tmp_path: Path, scenario: str, index: int, replay_channels) -> None:
    recorded = json.loads((FIXTURES / f"{scenario}.json").read_text())[index]
    root, url = replay_channels["newer" if scenario == "update" else "base"]
    call = _materialize(recorded, tmp_path, url, root)
    env = {**clean_env(tmp_path), **call["env"]}
    argv = call["argv"]
    done = run_shim(argv, env, tmp_path)
    assert done.returncode == call["returncode"] == 0, done.stderr[-3000:]
    platform = env.get("CONDA_SUBDIR", "linux-64")
    if argv == ["--version"]:
        from ensureconda.api import determine_micromamba_version
        from packaging.version import Version

        assert determine_micromamba_version(str(SHIM)) >= Version("2.0.7")  # knows `list --no-pip`
    elif argv[0] == "create" and "--dry-run" in argv:
        planned = _read_like_conda_lock(json.loads(done.stdout), platform)
        assert set(planned) == {"python", "numpy", "pytorch", "filelock"}
        cuda = "cuda118_py311_1" if env.get("CONDA_OVERRIDE_CUDA") else "cpu_py311_0"
        assert planned["pytorch"].url.endswith(f"/pytorch-2.1.0-{cuda}.tar.bz2")
    elif argv[0] == "list":
        listed = json.loads(done.stdout)
        installed = {e["name"]: e for e in listed}  # conda_solver._get_installed_conda_packages
        assert set(installed) == {m["name"] for m in call["prefix_conda_meta"].values()}
        assert all(e.keys() >= LINK_KEYS for e in listed)
    elif argv[0] == "update":
        answer = json.loads(done.stdout)
        assert [e["name"] for e in answer["actions"]["LINK"]] == ["numpy"]
        assert _read_like_conda_lock(answer, platform)["numpy"].version == "1.26.4"
    elif argv[0] == "create" and "--file" in argv:
        prefix = Path(argv[argv.index("--prefix") + 1])
        names = {json.loads(p.read_text())["name"] for p in (prefix / "conda-meta").glob("*.json")}
        assert names == {"python", "numpy", "pytorch", "filelock"}
    else:
        pytest.fail(f"recorded call {argv[:2]} has no check here")


@pytest.mark.world
def test_the_fake_channel_records_become_virtual_packages_and_are_never_fetched(tmp_path: Path, served) -> None:
    _, url = served
    fake = tmp_path / "fake"
    for subdir, packages in (("linux-64", {"__cuda-12.0-0.tar.bz2": {"name": "__cuda", "version": "12.0", "build": "0",
                                                                      "build_number": 0, "depends": [], "subdir": "linux-64",
                                                                      "package_type": "virtual_system"}}),
                             ("noarch", {})):  # fmt: skip
        (fake / subdir).mkdir(parents=True)
        (fake / subdir / "repodata.json").write_text(json.dumps({"info": {"subdir": subdir}, "packages": packages}))
    env = clean_env(tmp_path, CONDA_SUBDIR="linux-64", CONDA_OVERRIDE_CUDA="", CONDA_OVERRIDE_GLIBC="2.28")
    args = ["create", "--prefix", str(tmp_path / "p"), "--dry-run", "--json", "--override-channels",
            "--channel", url, "--channel", fake.as_uri(), "pytorch"]  # fmt: skip
    done = run_shim(args, env, tmp_path)
    assert done.returncode == 0, done.stderr
    fetched = {e["name"]: e for e in json.loads(done.stdout)["actions"]["FETCH"]}
    assert fetched["pytorch"]["build"] == "cuda118_py311_1"
    assert not any(name.startswith("__") for name in fetched)
    # control: without the fake channel's __cuda (and no override) only the CPU build fits
    cpu = run_shim(args[:-3] + ["pytorch"], env, tmp_path)
    assert cpu.returncode == 0, cpu.stderr
    assert {e["name"]: e for e in json.loads(cpu.stdout)["actions"]["FETCH"]}["pytorch"]["build"] == "cpu_py311_0"


@pytest.mark.world
def test_a_long_conflict_is_trimmed_to_a_screen(tmp_path: Path) -> None:
    root = tmp_path / "channel"
    for n in range(40):
        write_package(root, small_package("pytorch", f"2.{n}.0", "cuda_0", "linux-64", (f"__cuda >={n + 12}",)))
    index_in_child(root)
    env = clean_env(tmp_path, CONDA_SUBDIR="linux-64", CONDA_OVERRIDE_CUDA="11.8")
    args = ["create", "--prefix", str(tmp_path / "p"), "--dry-run", "--json", "--channel", root.as_uri(), "pytorch"]
    done = run_shim(args, env, tmp_path)
    assert done.returncode == 1
    answer = json.loads(done.stdout)
    assert answer["success"] is False
    lines = answer["message"].splitlines()
    assert len(lines) <= 25 and lines[0] == "Cannot solve for linux-64: pytorch"
    assert "virtual packages: __cuda 11.8" in lines[1] and "more lines)" in lines[-1]


@pytest.mark.world
def test_a_solve_past_its_timeout_stops_with_a_clear_message(tmp_path: Path) -> None:
    from tests.world.channel.packages import write_repodata

    # 3,600 records in a chain of upper bounds: about 0.1 s of solving here, far beyond 1 ms
    records = {
        f"p{n}-{k}.0-0.tar.bz2": {"name": f"p{n}", "version": f"{k}.0", "build": "0", "build_number": 0,
                                  "depends": [f"p{(n + 1) % 60} <{k}"] if k else [], "subdir": "linux-64", "timestamp": 1}
        for n in range(60) for k in range(60)
    }  # fmt: skip
    write_repodata(tmp_path / "channel", "linux-64", records)
    write_repodata(tmp_path / "channel", "noarch", {})
    env = clean_env(tmp_path, CONDA_SUBDIR="linux-64", ENVBUILD_SOLVE_TIMEOUT="0.001")
    args = ["create", "-p", str(tmp_path / "p"), "--dry-run", "--json", "-c", (tmp_path / "channel").as_uri(), "p0 >=50", "p30 >=55"]
    done = run_shim(args, env, tmp_path)
    assert done.returncode == 1
    message = json.loads(done.stdout)["message"]
    assert "gave up after 0.001 s (ENVBUILD_SOLVE_TIMEOUT)" in message
    # control: with the default timeout the same request solves
    solved = run_shim(args, {k: v for k, v in env.items() if k != "ENVBUILD_SOLVE_TIMEOUT"}, tmp_path)
    assert solved.returncode == 0 and json.loads(solved.stdout)["success"] is True


# ---------------------------------------------------------------- calls the shim cannot answer


@pytest.mark.world
def test_an_unreachable_channel_is_reported_as_json_and_on_stderr(tmp_path: Path) -> None:
    with serve_directory(tmp_path) as url:  # serves an empty folder: no repodata anywhere
        env = clean_env(tmp_path, CONDA_SUBDIR="linux-64")
        done = run_shim(["create", "-p", str(tmp_path / "p"), "--dry-run", "--json", "-c", f"{url}/missing", "numpy"], env, tmp_path)
    assert done.returncode == 1
    assert json.loads(done.stdout)["success"] is False
    assert "cannot read the channels for linux-64" in json.loads(done.stdout)["message"]
    assert "cannot read the channels" in done.stderr


@pytest.mark.world
def test_the_installer_path_refuses_a_wrong_md5_and_installs_nothing(tmp_path: Path) -> None:
    root = make_channel(tmp_path / "channel", small_world())
    good = root / "linux-64" / "numpy-1.26.0-py311_0.tar.bz2"
    explicit = tmp_path / "explicit.lock"
    explicit.write_text(f"# platform: linux-64\n@EXPLICIT\n{good.as_uri()}#{'0' * 32}\n")
    prefix = tmp_path / "prefix"
    done = run_shim(["create", "--quiet", "--file", str(explicit), "--yes", "--prefix", str(prefix)], clean_env(tmp_path), tmp_path)
    assert done.returncode == 1 and "md5 mismatch" in done.stderr and "numpy" in done.stderr
    assert not prefix.exists()


@pytest.mark.world
def test_shim_leaves_no_temporary_cache_behind(tmp_path: Path) -> None:
    env = clean_env(tmp_path, CONDA_SUBDIR="linux-64")
    root = make_channel(tmp_path / "channel", small_world())
    done = run_shim(["create", "-p", str(tmp_path / "p"), "--dry-run", "--json", "-c", root.as_uri(), "numpy"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert not list((tmp_path / "tmp").glob("envbuild-micromamba-*"))


# ---------------------------------------------------------------- the solver service of one lock run


@pytest.mark.world
def test_the_service_answers_a_solve_with_the_bytes_the_shim_would_print(tmp_path: Path, served) -> None:
    _, url = served
    socket_path = tmp_path / "solver.sock"
    env = clean_env(tmp_path, ENVBUILD_RATTLER_CACHE=str(tmp_path / "service-cache"))
    service = subprocess.Popen([sys.executable, "-c", f"from builder.lock.solver_shim import serve; serve({str(socket_path)!r})"],
                               env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert socket_path.exists(), "the service did not start"
        for subdir in SUBDIRS:
            args, extra = dry_run_args(url, subdir)
            local = run_shim(args, clean_env(tmp_path, **extra), tmp_path)
            # twice: the second answer comes from the repodata the service already holds
            for _ in range(2):
                forwarded = run_shim(args, clean_env(tmp_path, ENVBUILD_SOLVER_SERVICE=str(socket_path), **extra), tmp_path)
                assert (forwarded.returncode, forwarded.stdout) == (local.returncode, local.stdout)
        unsolvable, extra = dry_run_args(url)
        unsolvable[-1] = "package-that-does-not-exist"
        local = run_shim(unsolvable, clean_env(tmp_path, **extra), tmp_path)
        forwarded = run_shim(unsolvable, clean_env(tmp_path, ENVBUILD_SOLVER_SERVICE=str(socket_path), **extra), tmp_path)
        assert local.returncode == forwarded.returncode == 1 and forwarded.stdout == local.stdout
        assert service.poll() is None  # a failed solve does not end the service
    finally:
        service.kill()
        service.wait()



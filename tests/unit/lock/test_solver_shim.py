"""envbuild-micromamba, conda-lock's solver calls answered by py-rattler: the calls it refuses, the
answers it gives without a channel, and its forwarding to the solver service of one lock run. Its
answers to conda-lock against a channel are tests/system/test_solver_shim_world.py.

The shim always runs in a child process (py-rattler can crash at interpreter exit); the tests judge
output, not only exit codes.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.lock.solver_shim_helpers import clean_env, dry_run_args, run_shim


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["install", "numpy"], "unsupported command 'install'"),
        (["create", "--prefix", "/nonexistent", "numpy"], "--dry-run --json"),
        (["create", "--prefix", "/nonexistent", "--dry-run", "--json", "--bogus", "x"], "unrecognized arguments"),
        (["config", "--json", "list", "channels"], "only `config --json list pkgs_dirs`"),
        (["run", "--prefix", "/nonexistent", "python", "-V"], "`run --prefix P pip ...`"),
        ([], "no command given"),
    ],
)
def test_unknown_calls_exit_2_with_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    done = run_shim(args, clean_env(tmp_path), tmp_path)
    assert done.returncode == 2 and expected in done.stderr and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.unit
def test_a_bad_solve_timeout_is_refused(tmp_path: Path) -> None:
    env = clean_env(tmp_path, ENVBUILD_SOLVE_TIMEOUT="soon", CONDA_SUBDIR="linux-64")
    done = run_shim(["create", "-p", str(tmp_path / "p"), "--dry-run", "--json", "-c", (tmp_path / "none").as_uri(), "x"], env, tmp_path)
    assert done.returncode == 2 and "ENVBUILD_SOLVE_TIMEOUT" in done.stderr


@pytest.mark.unit
def test_pkgs_dirs_answers_conda_locks_folder(tmp_path: Path) -> None:
    env = clean_env(tmp_path, CONDA_PKGS_DIRS=str(tmp_path / "pkgs"))
    done = run_shim(["config", "--json", "list", "pkgs_dirs"], env, tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout) == {"pkgs_dirs": [str(tmp_path / "pkgs")]}
    info = json.loads(run_shim(["info", "--json"], env, tmp_path).stdout)
    assert info["pkgs_dirs"] == [str(tmp_path / "pkgs")]


@pytest.mark.unit
def test_the_run_call_uses_the_prefix_python_with_pip(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    log = tmp_path / "args.txt"
    (prefix / "bin/python").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{log}"\n')
    (prefix / "bin/python").chmod(0o755)
    done = run_shim(["run", "--prefix", str(prefix), "pip", "install", "--no-deps", "-r", "req.txt"], clean_env(tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr
    assert log.read_text().split() == ["-m", "pip", "install", "--no-deps", "-r", "req.txt"]
    missing = run_shim(["run", "--prefix", str(tmp_path / "empty"), "pip", "list"], clean_env(tmp_path), tmp_path)
    assert missing.returncode == 1 and "no bin/python" in missing.stderr


@pytest.mark.unit
def test_the_shim_forwards_dry_runs_to_the_service_and_answers_itself_without_one(tmp_path: Path) -> None:
    import json
    import socket
    import threading

    socket_path = tmp_path / "fake.sock"
    seen: list[dict] = []
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(socket_path))
    listener.listen(1)

    def answer_once() -> None:
        connection, _ = listener.accept()
        with connection:
            seen.append(json.loads(b"".join(iter(lambda: connection.recv(65536), b"")).decode()))
            connection.sendall(json.dumps({"code": 3, "stdout": "from the service\n", "stderr": ""}).encode())

    thread = threading.Thread(target=answer_once)
    thread.start()
    args, extra = dry_run_args("file:///nowhere")
    done = run_shim(args, clean_env(tmp_path, ENVBUILD_SOLVER_SERVICE=str(socket_path), **extra), tmp_path)
    thread.join(timeout=30)
    listener.close()
    assert (done.returncode, done.stdout) == (3, "from the service\n")
    assert seen[0]["args"] == args and seen[0]["env"]["CONDA_SUBDIR"] == "linux-64"
    # no service at that path (the run ended): the shim answers itself
    version = run_shim(["--version"], clean_env(tmp_path, ENVBUILD_SOLVER_SERVICE=str(socket_path)), tmp_path)
    assert version.returncode == 0
    gone = run_shim(args, clean_env(tmp_path, ENVBUILD_SOLVER_SERVICE=str(tmp_path / "gone.sock"), **extra), tmp_path)
    assert gone.stdout != "from the service\n" and "envbuild-micromamba" in gone.stdout + gone.stderr


@pytest.mark.unit
def test_the_console_script_answers_version_and_forwards_without_loading_the_shim(tmp_path: Path) -> None:
    """The point of builder/lock/solver_client.py: conda-lock's per-lock calls never pay the shim's imports."""
    from builder.lock.solver_protocol import version_text
    from builder.lock.solver_shim import dispatch

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert dispatch(["--version"]) == 0
    assert out.getvalue() == version_text() and version_text().startswith("2.0.8\n")
    probe = ("import sys; import builder.lock.solver_client as client; "
             "sys.argv = ['envbuild-micromamba', '--version']; client.main(); "
             "client.forward_to_service(['create', '--dry-run']); "
             "print('shim loaded' if 'builder.lock.solver_shim' in sys.modules else 'shim not loaded')")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          env=clean_env(tmp_path, ENVBUILD_SOLVER_SERVICE=str(tmp_path / "gone.sock")))
    assert done.stdout == version_text() + "shim not loaded\n", done.stderr

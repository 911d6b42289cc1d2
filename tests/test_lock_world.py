"""envbuild lock against the offline world's conda-forge channel, through real conda-lock and the shim."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.world

ROOT = Path(__file__).resolve().parent.parent
CHANNEL = f"http://127.0.0.1:{os.environ.get('ENVBUILD_WORLD_PORT', '8765')}/conda/conda-forge"


def envbuild(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "builder", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CI": "true"})


@pytest.fixture(scope="module")
def world() -> None:
    if not os.environ.get("ENVBUILD_TEST_WORLD"):
        pytest.skip("the offline world is not up: run through `make test`")


def lock_args(locks: Path, *extra: str) -> list[str]:
    return ["lock", str(ROOT / "envs" / "pytorch.yaml"), "--channel", CHANNEL, "--locks", str(locks),
            "--platform", "linux-64", *extra]


def test_lock_picks_builds_per_target_then_noop_and_check(world, tmp_path: Path) -> None:
    from builder.lockfile import read_lock

    locks = tmp_path / "locks"
    first = envbuild(*lock_args(locks, "--cuda", "cpu", "--cuda", "12.9", "--json"), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    cpu = read_lock(locks / "cpu" / "conda-lock.yml").find("pytorch", "linux-64")
    cuda = read_lock(locks / "cuda12.9" / "conda-lock.yml").find("pytorch", "linux-64")
    assert cpu.build.startswith("cpu_") and cpu.version == "2.13.0"
    assert cuda.build.startswith("cuda") and cuda.version == "2.13.0"
    cuda_version = read_lock(locks / "cuda12.9" / "conda-lock.yml").find("cuda-version", "linux-64")
    assert cuda_version.version.startswith("12.9")
    again = envbuild(*lock_args(locks, "--cuda", "cpu", "--cuda", "12.9", "--json"), cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.count('"unchanged"') == 2
    check = envbuild(*lock_args(locks, "--cuda", "cpu", "--check"), cwd=tmp_path)
    assert check.returncode == 0
    stale = envbuild(*lock_args(locks, "--cuda", "cpu", "--platform", "osx-arm64", "--check"), cwd=tmp_path)
    assert stale.returncode == 1


def test_corrupted_lockfile_is_one_clear_line(world, tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    assert envbuild(*lock_args(locks, "--cuda", "cpu"), cwd=tmp_path).returncode == 0
    (locks / "cpu" / "conda-lock.yml").write_text("version: 1\npackage: [oops\n")
    broken = envbuild(*lock_args(locks, "--cuda", "cpu"), cwd=tmp_path)
    assert broken.returncode == 1
    assert "the lockfile is corrupted" in broken.stderr
    assert "Traceback" not in broken.stderr


def test_unsatisfiable_target_fails_with_explanation(world, tmp_path: Path) -> None:
    spec = tmp_path / "absent-pkg.yaml"
    spec.write_text(
        "name: vision-absent\npython: '3.11'\ntorch: '2.13.0'\ntargets: [{cuda: cpu}]\n"
        "images: {runtime: {image: 'local/debian:bookworm'}}\nconda: ['package-that-does-not-exist']\n")
    result = envbuild("lock", str(spec), "--channel", CHANNEL, "--locks", str(tmp_path / "locks"), cwd=tmp_path)
    assert result.returncode == 1
    assert "package-that-does-not-exist" in result.stderr
    assert not (tmp_path / "locks" / "cpu" / "conda-lock.yml").exists()

"""envbuild lock against the offline world's conda-forge channel, through real conda-lock and the shim."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builder.formats.conda_lock import CondaLock, read_lock
from tests.paths import REPO
from tests.world.offline import CHANNEL, PIP_INDEX, WORLD

pytestmark = pytest.mark.world

# The legacy route's three channels, each replaced by the world's copy as a team's mirror would be.
LEGACY_MIRRORS = [arg for name in ("pytorch", "nvidia", "conda-forge")
                  for arg in ("--mirror", f"{name}={WORLD}/conda/{name}")]


def envbuild(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(envbuild_command(*args), cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=envbuild_env())


def envbuild_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "builder", *args]


def envbuild_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "CI": "true", **extra}


def write_spec(folder: Path, name: str, body: str) -> Path:
    """A spec for the world: its runtime image is the world's Debian (glibc known to envbuild)."""
    spec = folder / f"{name}.yaml"
    spec.write_text(f"name: {name}\npython: '3.11'\nimages: {{runtime: {{image: 'local/debian:bookworm'}}}}\n{body}")
    return spec


def versions(lock: CondaLock, platform: str) -> dict[str, tuple[str, str]]:
    return {p.name: (p.version, p.url) for p in lock.for_platform(platform)}


@pytest.fixture(scope="module")
def world() -> None:
    if not os.environ.get("ENVBUILD_TEST_WORLD"):
        pytest.skip("the offline world is not up: run through `make test`")


def lock_args(locks: Path, *extra: str) -> list[str]:
    return ["lock", str(REPO / "envs" / "pytorch.yaml"), "--channel", CHANNEL, "--locks", str(locks),
            "--platform", "linux-64", *extra]


def test_lock_picks_builds_per_target_then_noop_and_check(world, tmp_path: Path) -> None:
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
    check = envbuild(*lock_args(locks, "--cuda", "cpu", "--check"), cwd=tmp_path)
    assert check.returncode == 1 and "the lockfile is corrupted" in check.stderr
    assert envbuild(*lock_args(locks, "--cuda", "cpu", "--force"), cwd=tmp_path).returncode == 0


def test_a_hand_edited_lockfile_is_stale_and_relocked(world, tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    assert envbuild(*lock_args(locks, "--cuda", "cpu"), cwd=tmp_path).returncode == 0
    lockfile = locks / "cpu" / "conda-lock.yml"
    made = lockfile.read_text()
    lockfile.write_text(made.replace("version: 2.4.6", "version: 2.4.7", 1))
    assert envbuild(*lock_args(locks, "--cuda", "cpu", "--check"), cwd=tmp_path).returncode == 1
    again = envbuild(*lock_args(locks, "--cuda", "cpu", "--json"), cwd=tmp_path)
    assert again.returncode == 0 and json.loads(again.stdout)["locks"][0]["status"] == "locked"
    assert lockfile.read_text() == made


def test_unsatisfiable_target_fails_with_explanation(world, tmp_path: Path) -> None:
    spec = tmp_path / "absent-pkg.yaml"
    spec.write_text(
        "name: vision-absent\npython: '3.11'\ntorch: '2.13.0'\ntargets: [{cuda: cpu}]\n"
        "images: {runtime: {image: 'local/debian:bookworm'}}\nconda: ['package-that-does-not-exist']\n")
    result = envbuild("lock", str(spec), "--channel", CHANNEL, "--locks", str(tmp_path / "locks"), cwd=tmp_path)
    assert result.returncode == 1
    assert "package-that-does-not-exist" in result.stderr
    assert "Cannot solve for linux-64" in result.stderr and "virtual packages: " in result.stderr
    assert len(result.stderr.splitlines()) <= 25 and "Traceback" not in result.stderr  # one screen
    assert not (tmp_path / "locks" / "cpu" / "conda-lock.yml").exists()


def test_each_cuda_target_gets_its_own_build_and_osx_gets_cpu_without_cuda(world, tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    done = envbuild("lock", str(REPO / "envs" / "pytorch.yaml"), "--channel", CHANNEL, "--locks", str(locks),
                    "--cuda", "12.9", "--cuda", "13.0", "--platform", "linux-64", "--platform", "osx-arm64",
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for target, flavour in (("cuda12.9", "cuda129_"), ("cuda13.0", "cuda130_")):
        lock = read_lock(locks / target / "conda-lock.yml")
        assert lock.metadata.platforms == ["linux-64", "osx-arm64"]
        assert lock.find("pytorch", "linux-64").build.startswith(flavour)
        assert lock.find("cuda-version", "linux-64").version == target.removeprefix("cuda")
        # the world also has a cuda126 build whose cuda-version range admits 12.9; it must not win
        assert lock.find("pytorch", "osx-arm64").build.startswith("cpu_")
        assert lock.find("cuda-version", "osx-arm64") is None
        virtual = json.loads((locks / target / "envbuild-lock.json").read_text())["virtual_packages"]
        assert virtual["linux-64"]["__cuda"] == target.removeprefix("cuda")
        assert virtual["linux-64"]["__glibc"] == "2.39"  # the spec's runtime image, ubuntu:24.04
        assert "__cuda" not in virtual["osx-arm64"] and "__glibc" not in virtual["osx-arm64"]
        assert virtual["osx-arm64"]["__osx"]


def test_update_moves_the_named_package_and_keeps_the_rest(world, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "upd", "torch: '2.13.0'\nplatforms: [linux-64]\ntargets: [{cuda: cpu}]\n"
                                       "conda: ['numpy<2.4']\n")
    args = ["lock", str(spec), "--channel", CHANNEL]
    assert envbuild(*args, cwd=tmp_path).returncode == 0
    lockfile = tmp_path / "upd" / "locks" / "cpu" / "conda-lock.yml"
    before = versions(read_lock(lockfile), "linux-64")
    assert before["numpy"][0] == "2.3.5"
    spec.write_text(spec.read_text().replace("'numpy<2.4'", "numpy"))
    assert envbuild(*args, "--check", cwd=tmp_path).returncode == 1
    updated = envbuild(*args, "--update", "numpy", cwd=tmp_path)
    assert updated.returncode == 0, updated.stderr
    after = versions(read_lock(lockfile), "linux-64")
    assert after["numpy"][0] == "2.4.6"
    # everything else is the very same file: python stays 3.11 (the newest numpy build is py313)
    assert {k: v for k, v in after.items() if k != "numpy"} == {k: v for k, v in before.items() if k != "numpy"}
    assert envbuild(*args, "--check", cwd=tmp_path).returncode == 0


def test_update_of_a_name_the_spec_does_not_ask_for_is_one_clear_line(world, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "upd", "torch: '2.13.0'\nplatforms: [linux-64]\ntargets: [{cuda: cpu}]\n"
                                       "conda: [numpy]\n")
    assert envbuild("lock", str(spec), "--channel", CHANNEL, cwd=tmp_path).returncode == 0
    lockfile = tmp_path / "upd" / "locks" / "cpu" / "conda-lock.yml"
    before = lockfile.read_bytes()
    done = envbuild("lock", str(spec), "--channel", CHANNEL, "--update", "mpmath", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "Error: --update mpmath: target cpu does not ask for mpmath by name (a dependency moves with the "
        "package that needs it); it can update: numpy, python, pytorch")
    assert lockfile.read_bytes() == before


def test_legacy_route_picks_pytorch_cuda_and_the_cuda118_build(world, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "legacy", "torch: '2.5.1'\ntorchvision: '0.20.1'\nroute: pytorch-channel\n"
                                          "platforms: [linux-64]\ntargets: [{cuda: '11.8'}, {cuda: cpu}]\n")
    done = envbuild("lock", str(spec), *LEGACY_MIRRORS, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    locks = tmp_path / "legacy" / "locks"
    cuda = read_lock(locks / "cuda11.8" / "conda-lock.yml")
    assert cuda.find("pytorch", "linux-64").build == "py3.11_cuda11.8_cudnn9.1.0_0"
    assert cuda.find("pytorch-cuda", "linux-64").version == "11.8"
    assert cuda.find("torchvision", "linux-64").build == "py311_cu118"
    assert cuda.find("cuda-cudart", "linux-64").url.startswith(f"{WORLD}/conda/nvidia/")
    cpu = read_lock(locks / "cpu" / "conda-lock.yml")
    assert cpu.find("pytorch", "linux-64").build == "py3.11_cpu_0"
    assert cpu.find("pytorch-cuda", "linux-64") is None and cpu.find("cpuonly", "linux-64")
    info = json.loads((locks / "cuda11.8" / "envbuild-lock.json").read_text())
    assert info["channels"] == [f"{WORLD}/conda/{name}" for name in ("pytorch", "nvidia", "conda-forge")]


def test_pip_route_locks_the_wheel_with_its_hash_from_the_given_index(world, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "wheels", "torch: '2.13.0'\nroute: pip\nplatforms: [linux-64]\n"
                                          "targets: [{cuda: cpu}, {cuda: '12.6'}]\nconda: [numpy]\n")
    done = envbuild("lock", str(spec), "--channel", CHANNEL, "--pip-index", PIP_INDEX, cwd=tmp_path)
    locks = tmp_path / "wheels" / "locks"
    cpu = read_lock(locks / "cpu" / "conda-lock.yml")
    torch = cpu.find("torch", "linux-64")
    assert torch.manager == "pip" and torch.version == "2.13.0+cpu"
    assert torch.url.startswith(f"{WORLD}/pypi/files/torch-2.13.0") and len(torch.hash.sha256 or "") == 64
    assert cpu.find("python", "linux-64").version.startswith("3.11")
    assert json.loads((locks / "cpu" / "envbuild-lock.json").read_text())["pip_repositories"] == [PIP_INDEX]
    # the world's index has no cu126 wheel: that target fails with the reason and where it looked
    assert done.returncode == 1
    assert "there is no version of torch==2.13.0+cu126" in done.stderr
    assert f"come from {PIP_INDEX}" in done.stderr and "Traceback" not in done.stderr
    # --update of a pip name re-resolves the pip part only: every conda entry stays as locked
    before = (locks / "cpu" / "conda-lock.yml").read_text()
    updated = envbuild("lock", str(spec), "--cuda", "cpu", "--channel", CHANNEL, "--pip-index", PIP_INDEX,
                       "--update", "torch", cwd=tmp_path)
    assert updated.returncode == 0, updated.stderr[-2000:]
    after = read_lock(locks / "cpu" / "conda-lock.yml")
    assert [p for p in after.package if p.manager == "conda"] == [p for p in cpu.package if p.manager == "conda"]
    assert {(p.name, p.version) for p in after.package} == {(p.name, p.version) for p in cpu.package}
    assert (locks / "cpu" / "conda-lock.yml").read_text() == before
    assert not (locks / "cuda12.6" / "conda-lock.yml").exists()


def test_two_concurrent_locks_leave_one_valid_lockfile(world, tmp_path: Path) -> None:
    args = envbuild_command(*lock_args(tmp_path / "locks", "--cuda", "cpu", "--json"))
    runs = [subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=envbuild_env()) for _ in range(2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    statuses = sorted(json.loads(out)["locks"][0]["status"] for out, _ in outputs)
    # the second waited on the file lock, then found the first one's lock fresh
    assert statuses == ["locked", "unchanged"]
    folder = tmp_path / "locks" / "cpu"
    assert read_lock(folder / "conda-lock.yml").find("pytorch", "linux-64")
    assert sorted(p.name for p in folder.iterdir()) == ["conda-lock.yml", "envbuild-lock.json"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_lock_leaves_the_previous_lockfile_intact(world, tmp_path: Path, signum: int) -> None:
    locks = tmp_path / "locks"
    assert envbuild(*lock_args(locks, "--cuda", "cpu"), cwd=tmp_path).returncode == 0
    previous = (locks / "cpu" / "conda-lock.yml").read_bytes()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    run = subprocess.Popen(envbuild_command(*lock_args(locks, "--cuda", "cpu", "--force")), cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=envbuild_env(TMPDIR=str(scratch)))
    # interrupt once conda-lock runs for the target (its log exists in envbuild's scratch folder)
    deadline = time.monotonic() + 120
    while not list(scratch.glob("envbuild-lock-*/cpu/conda-lock.log")) and run.poll() is None:
        assert time.monotonic() < deadline, "conda-lock never started"
        time.sleep(0.01)
    run.send_signal(signum)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode != 0, stderr
    assert (locks / "cpu" / "conda-lock.yml").read_bytes() == previous
    assert sorted(p.name for p in (locks / "cpu").iterdir()) == ["conda-lock.yml", "envbuild-lock.json"]
    # envbuild stopped conda-lock and its solver and removed its scratch folder
    assert list(scratch.iterdir()) == []


def _check_json(spec: Path, locks: Path, *extra: str, python_prefix: tuple[str, ...] = ()) -> tuple[int, dict]:
    command = [*(python_prefix or envbuild_command()), "lock", str(spec), "--channel", CHANNEL, "--locks", str(locks),
               "--check", "--json", *extra]
    done = subprocess.run(command, cwd=spec.parent, capture_output=True, text=True, timeout=300, env=envbuild_env())
    assert done.stdout, done.stderr
    return done.returncode, {r["target"]: r for r in json.loads(done.stdout)["locks"]}


def test_lock_stays_fresh_for_edits_the_solve_does_not_read_and_says_why_it_is_stale(world, tmp_path: Path) -> None:
    body = ("description: first\ntorch: '2.13.0'\nplatforms: [linux-64]\n"
            "targets: [{cuda: '12.9'}, {cuda: cpu}]\nconda: [numpy]\n")
    spec = write_spec(tmp_path, "why-stale", body)
    locks = tmp_path / "locks"
    done = envbuild("lock", str(spec), "--channel", CHANNEL, "--locks", str(locks), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # another description, the CPU target gone, envbuild 0.1.0 -> 0.1.1: nothing the solve reads
    spec.write_text(spec.read_text().replace("description: first", "description: second")
                    .replace(", {cuda: cpu}", ""))
    bumped = (sys.executable, "-c", "import builder, sys; builder.__version__ = '0.1.1'; "
              "from builder.cli.commands import cli; sys.argv[0] = 'envbuild'; cli()")
    for prefix in ((), bumped):
        code, results = _check_json(spec, locks, python_prefix=prefix)
        assert code == 0 and results["cuda12.9"]["status"] == "fresh", results
    code, results = _check_json(spec, locks, "--base-image", "ubuntu:24.04")
    assert code == 1 and results["cuda12.9"]["reasons"] == ["virtual packages changed: linux-64 __glibc 2.36 -> 2.39"]
    code, results = _check_json(spec, locks, "--channel", f"{WORLD}/conda/pytorch")
    assert code == 1 and results["cuda12.9"]["reasons"] == [
        f"channels changed: {CHANNEL} -> {CHANNEL}, {WORLD}/conda/pytorch"]
    spec.write_text(spec.read_text().replace("conda: [numpy]", "conda: ['numpy=2.3.5']"))
    code, results = _check_json(spec, locks)
    assert code == 1 and results["cuda12.9"]["reasons"] == ["dependencies changed: removed numpy; added numpy=2.3.5"]
    human = envbuild("lock", str(spec), "--channel", CHANNEL, "--locks", str(locks), "--check", cwd=tmp_path)
    assert human.returncode == 1
    assert "cuda12.9: stale: dependencies changed: removed numpy; added numpy=2.3.5" in human.stderr


def test_torchvision_gets_torchs_cuda_build_and_a_mixed_lock_is_refused(world, tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    done = envbuild(*lock_args(locks, "--cuda", "12.9"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lock = read_lock(locks / "cuda12.9" / "conda-lock.yml")
    # the world's cuda126 torchvision also accepts cuda-version 12.9 and used to win
    assert lock.find("torchvision", "linux-64").build.startswith("cuda129_")
    assert lock.find("pytorch", "linux-64").build.startswith("cuda129_")
    # a spec that names another CUDA build for torchvision itself: the solve works, the lock is refused
    spec = write_spec(tmp_path, "mixed-cuda", "torch: '2.13.0'\nplatforms: [linux-64]\ntargets: [{cuda: '12.9'}]\n"
                      "conda: ['torchvision=0.28.0=cuda126*']\n")
    mixed = envbuild("lock", str(spec), "--channel", CHANNEL, "--locks", str(tmp_path / "mixed"), cwd=tmp_path)
    assert mixed.returncode == 1
    assert "not one CUDA build, so no lockfile was written" in mixed.stderr
    assert "torchvision 0.28.0 cuda126_py311_" in mixed.stderr and "(CUDA 12.6)" in mixed.stderr
    assert "Traceback" not in mixed.stderr
    assert not (tmp_path / "mixed" / "cuda12.9" / "conda-lock.yml").exists()

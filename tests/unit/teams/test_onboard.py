"""envbuild onboard: the target chosen from recorded host facts, prefix rules and kernelspecs on real
files, and end to end on the offline world: a real python 3.11 + CPU torch env installed into a tmp
prefix (envbuild's installer, and conda-lock install through a micromamba-compatible executable),
the smoke suite run by that env's python, a kernel.json for an env with ipykernel, a foreign prefix
refused, and --image --pull through the world's registry."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from builder.errors import EnvbuildError, UsageError
from builder.host.doctor import MINOR_COMPAT, NEEDS_NEWER_DRIVER, NO_GPU, RUNS
from builder.spec.model import load_spec
from builder.spec.target import resolve_targets
from builder.teams.onboard import (
    MARKER,
    EnvMarker,
    choose_prefix,
    choose_target,
    docker_run_line,
    install_environment,
    kernels_dir,
    prefix_status,
    register_kernel,
)
from tests.conftest import ROOT, WORLD_CHANNEL, envbuild
from tests.unit.host.test_doctor import A100_PAIR, H100, host

SPEC = ROOT / "envs" / "pytorch.yaml"
unit = pytest.mark.unit


def targets(*keys: str):
    resolved = resolve_targets(load_spec(SPEC))
    return [t for t in resolved if not keys or t.key in keys]


# --- choosing the target (recorded host facts) ---------------------------------------------------

@unit
@pytest.mark.parametrize(("driver", "cuda", "gpus", "chosen", "verdict"), [
    ("580.95.05", (13, 0), H100, "cuda13.0", RUNS),
    ("575.57.08", (12, 9), H100, "cuda12.9", RUNS),
    # 12.2: 11.8 runs fully, 12.x only under minor-version compatibility; a full run wins.
    ("535.54.03", (12, 2), A100_PAIR, "cuda11.8", RUNS),
    (None, None, (), "cpu", RUNS),
])
def test_the_newest_target_this_host_runs(driver, cuda, gpus, chosen: str, verdict: str) -> None:
    choice = choose_target(targets(), host(driver, cuda, gpus), asked=False, platform="linux-64")
    assert (choice.target.key, choice.verdict) == (chosen, verdict)
    if chosen == "cpu":
        assert choice.reason == ("no CUDA target runs here (cuda13.0, cuda12.9, cuda12.6, cuda11.8: no GPU here; "
                                 "`envbuild doctor` says why), so the CPU target")
    else:
        assert choice.reason.startswith(f"the newest CUDA target this host runs: {RUNS} (driver")


@unit
def test_minor_version_compatibility_when_nothing_runs_fully() -> None:
    choice = choose_target(targets("cuda13.0", "cuda12.9", "cuda12.6", "cpu"), host("535.54.03", (12, 2), A100_PAIR),
                           asked=False, platform="linux-64")
    assert (choice.target.key, choice.verdict) == ("cuda12.9", MINOR_COMPAT)
    assert "minor-version compatibility" in choice.reason


@unit
def test_an_asked_target_keeps_its_verdict_in_the_reason() -> None:
    choice = choose_target(targets("cuda13.0"), host("535.54.03", (12, 2), A100_PAIR), asked=True,
                           platform="linux-64")
    assert (choice.target.key, choice.verdict) == ("cuda13.0", NEEDS_NEWER_DRIVER)
    assert choice.reason.startswith("asked for with --cuda; on this host: needs a newer driver (the driver supports "
                                    "CUDA 12.2, so CUDA 13.0 builds cannot run")
    here = choose_target(targets("cuda12.9"), host(None, None), asked=True, platform="linux-64")
    assert here.verdict == NO_GPU


@unit
def test_only_targets_made_for_this_platform() -> None:
    # 12.6 and 11.8 are linux-64 only; a Mac with no driver gets the CPU target of the other three.
    choice = choose_target(targets(), host(None, None), asked=False, platform="osx-arm64")
    assert choice.target.key == "cpu" and "cuda12.6" not in choice.reason
    with pytest.raises(UsageError, match=r"no target of pytorch is made for win-64: cuda12\.6 \(linux-64\)"):
        choose_target(targets("cuda12.6"), host(None, None), asked=True, platform="win-64")
    with pytest.raises(EnvbuildError, match="has no CPU target"):
        choose_target(targets("cuda13.0"), host(None, None), asked=False, platform="linux-64")


# --- prefixes and kernelspecs (real files) -------------------------------------------------------

@unit
def test_prefix_from_name_under_the_envs_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [cpu] = targets("cpu")
    monkeypatch.setenv("ENVBUILD_ENVS_DIR", str(tmp_path / "envs"))
    assert choose_prefix(cpu, None, "team") == tmp_path / "envs" / "team"
    assert choose_prefix(cpu, None, None) == tmp_path / "envs" / "pytorch-cpu"
    monkeypatch.delenv("ENVBUILD_ENVS_DIR")
    assert choose_prefix(cpu, None, None) == Path.home() / ".envbuild" / "envs" / "pytorch-cpu"
    with pytest.raises(UsageError, match="not both"):
        choose_prefix(cpu, tmp_path, "team")
    with pytest.raises(UsageError, match="a plain folder name"):
        choose_prefix(cpu, None, "../up")


@unit
def test_prefix_status_refuses_what_envbuild_did_not_make(tmp_path: Path) -> None:
    [cpu] = targets("cpu")
    assert prefix_status(tmp_path / "absent", cpu, "a" * 64) == "new"
    (tmp_path / "empty").mkdir()
    assert prefix_status(tmp_path / "empty", cpu, "a" * 64) == "new"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(EnvbuildError, match="is not empty and is not an envbuild environment: refusing"):
        prefix_status(foreign, cpu, "a" * 64)
    (tmp_path / "file").write_text("x")
    with pytest.raises(EnvbuildError, match="is a file"):
        prefix_status(tmp_path / "file", cpu, "a" * 64)
    ours = tmp_path / "ours"
    (ours / "conda-meta").mkdir(parents=True)
    EnvMarker("pytorch", "cpu", "2.13.0", None, "a" * 64, "envbuild").write(ours)
    assert prefix_status(ours, cpu, "a" * 64) == "unchanged"
    assert prefix_status(ours, cpu, "b" * 64) == "replace"
    [cuda] = targets("cuda12.9")
    with pytest.raises(EnvbuildError, match=r"holds envbuild environment pytorch \(cpu\), not pytorch \(cuda12\.9\)"):
        prefix_status(ours, cuda, "a" * 64)
    (ours / MARKER).write_text("{broken")
    with pytest.raises(EnvbuildError, match="not an envbuild environment"):
        prefix_status(ours, cpu, "a" * 64)


@unit
def test_a_prefix_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    prefix = tmp_path / "a-file" / "env"
    [cpu] = targets("cpu")
    assert prefix_status(prefix, cpu, "a" * 64) == "new"
    marker = EnvMarker("pytorch", "cpu", "2.13.0", None, "a" * 64, "envbuild")
    with pytest.raises(EnvbuildError, match=f"cannot create the environment at {prefix}: .*choose another --prefix"):
        install_environment(tmp_path / "conda-lock.yml", "linux-64", prefix, None, marker)


@unit
def test_kernelspec_only_with_ipykernel_in_conda_meta(tmp_path: Path) -> None:
    [cuda] = targets("cuda12.9")
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    absent = register_kernel(prefix, cuda, "pytorch-cuda12.9", tmp_path / "kernels", SPEC)
    assert absent.path is None and not (tmp_path / "kernels").exists()
    assert absent.hint == (f"no ipykernel in this environment: add `ipykernel` to the conda list of {SPEC} and "
                           "onboard again to get a Jupyter kernel")
    (prefix / "conda-meta" / "ipykernel-6.29.5-pyhd8ed1ab_0.json").write_text("{}")
    kernel = register_kernel(prefix, cuda, "Team Env!", tmp_path / "kernels")
    assert kernel.name == "team-env" and kernel.path == tmp_path / "kernels" / "team-env" / "kernel.json"
    spec = json.loads(kernel.path.read_text())
    assert spec["display_name"] == "pytorch (CUDA 12.9, torch 2.13.0)"
    assert spec["argv"] == [str(prefix / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"]


@unit
def test_an_unwritable_kernels_folder_is_a_hint_and_leaves_nothing(tmp_path: Path) -> None:
    [cpu] = targets("cpu")
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "ipykernel-6.29.5-pyhd8ed1ab_0.json").write_text("{}")
    blocked = tmp_path / "kernels"
    blocked.write_text("a file where the kernels folder should be")
    kernel = register_kernel(prefix, cpu, "team", blocked)
    assert kernel.path is None and kernel.hint.startswith(f"could not write the Jupyter kernel into {blocked}/team")
    assert blocked.read_text() == "a file where the kernels folder should be"


@unit
def test_kernels_folder_follows_jupyter_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # jupyter_core is not a dependency of envbuild; without it the documented default applies.
    try:
        import jupyter_core  # noqa: F401
    except ImportError:
        monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
        assert kernels_dir() == tmp_path / "data" / "kernels"
        monkeypatch.delenv("JUPYTER_DATA_DIR")
        assert kernels_dir() == Path.home() / ".local" / "share" / "jupyter" / "kernels"
    else:
        from jupyter_core.paths import jupyter_data_dir

        assert kernels_dir() == Path(jupyter_data_dir()) / "kernels"
    assert kernels_dir(tmp_path / "k") == tmp_path / "k"


@unit
def test_docker_run_line_asks_for_gpus_only_for_cuda_builds() -> None:
    assert docker_run_line("reg/pytorch:2.13.0-cuda12.9", "12.9") == (
        'docker run --rm -it --gpus all --shm-size 1g -v "$PWD":/work -w /work reg/pytorch:2.13.0-cuda12.9')
    assert "--gpus" not in docker_run_line("pytorch:2.13.0-cpu", None)


# --- end to end on the offline world -------------------------------------------------------------

@pytest.fixture(scope="module")
def world() -> None:
    if not os.environ.get("ENVBUILD_TEST_WORLD"):
        pytest.skip("the offline world is not up: run inside tests/world/with-world.sh")


def world_spec(folder: Path, *extra_conda: str) -> Path:
    data = yaml.safe_load(SPEC.read_text())
    data["name"] = f"onboard-{uuid.uuid4().hex[:8]}"
    data["conda"] = [*data.get("conda", []), *extra_conda]
    spec = folder / f"{data['name']}.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


def onboard(spec: Path, folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return envbuild("onboard", str(spec), "--channel", WORLD_CHANNEL, "--locks", str(folder / "locks"),
                    "--kernel-dir", str(folder / "kernels"), *args, env={"ENVBUILD_ENVS_DIR": str(folder / "envs"),
                                                                        **(env or {})})


def env_python(prefix: Path, code: str) -> str:
    done = subprocess.run([str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ["PATH"]}, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.world
@pytest.mark.torch
def test_onboard_cpu_env_end_to_end_then_unchanged_then_forced(world, tmp_path: Path) -> None:
    spec = world_spec(tmp_path)
    prefix = tmp_path / "team env"
    done = onboard(spec, tmp_path, "--cuda", "cpu", "--prefix", str(prefix), "--installer", "envbuild", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert (result["target"], result["status"], result["installer"]) == ("cpu", "created", "envbuild")
    assert result["reason"].startswith("asked for with --cuda; on this host: runs")
    assert result["kernel"]["path"] is None and "add `ipykernel` to the conda list" in result["kernel"]["hint"]
    smoke = result["smoke"]
    statuses = {check["name"]: check["status"] for check in smoke["checks"]}
    assert smoke["summary"]["failed"] == 0 and smoke["summary"]["passed"] >= 8
    for name in ("env.import_torch", "env.torch_version", "env.cuda_build", "dp.passthrough", "amp.cpu_bf16"):
        assert statuses[name] == "passed", name
    assert env_python(prefix, "import sys, torch; print(sys.prefix, torch.__version__)") == f"{prefix} 2.13.0+cpu"
    assert EnvMarker.read(prefix).target == "cpu"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["locks", "team env", spec.name])
    assert any(step.startswith(f"use it: export PATH={prefix}/bin") for step in result["next_steps"])

    again = onboard(spec, tmp_path, "--cuda", "cpu", "--prefix", str(prefix), "--no-smoke")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"environment: {prefix} (unchanged, installer: envbuild" in again.stdout
    assert "Jupyter kernel: none" in again.stdout and "next:" in again.stdout

    (prefix / "lib" / "stray-file").write_text("replaced with the env")
    forced = onboard(spec, tmp_path, "--cuda", "cpu", "--prefix", str(prefix), "--no-smoke", "--force", "--json")
    assert forced.returncode == 0 and json.loads(forced.stdout)["status"] == "replaced"
    assert not (prefix / "lib" / "stray-file").exists()
    assert env_python(prefix, "import torch; print(torch.__version__)") == "2.13.0+cpu"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["locks", "team env", spec.name])

    # A lock whose package does not match its hash: the install fails before anything is linked,
    # and the env that was there stays, whole.
    lock = tmp_path / "locks" / "cpu" / "conda-lock.yml"
    text = lock.read_text()
    torch_hash = text.split("linux-64/pytorch-2.13.0-cpu", 1)[1].split("sha256: ", 1)[1][:64]
    lock.write_text(text.replace(torch_hash, "0" * 64))
    broken = onboard(spec, tmp_path, "--cuda", "cpu", "--prefix", str(prefix), "--no-smoke")
    assert broken.returncode == 1 and "Traceback" not in broken.stderr
    assert "sha256" in broken.stderr.strip().splitlines()[-1]
    assert EnvMarker.read(prefix).lock_sha256 != hashlib.sha256(lock.read_bytes()).hexdigest()
    assert env_python(prefix, "import torch; print(torch.__version__)") == "2.13.0+cpu"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["locks", "team env", spec.name])


@pytest.mark.world
def test_kernel_registered_for_an_env_with_ipykernel(world, tmp_path: Path) -> None:
    spec = world_spec(tmp_path, "ipykernel")
    done = onboard(spec, tmp_path, "--cuda", "cpu", "--name", "lab", "--no-smoke", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    prefix = tmp_path / "envs" / "lab"
    assert result["prefix"] == str(prefix)
    assert list((prefix / "conda-meta").glob("ipykernel-6.29.5-*.json"))
    kernel_json = tmp_path / "kernels" / "lab" / "kernel.json"
    assert result["kernel"]["path"] == str(kernel_json)
    kernel = json.loads(kernel_json.read_text())
    assert kernel["argv"][0] == str(prefix / "bin" / "python") and Path(kernel["argv"][0]).exists()
    assert kernel["argv"][1:] == ["-m", "ipykernel_launcher", "-f", "{connection_file}"]
    assert kernel["display_name"] == f"{spec.stem} (CPU, torch 2.13.0)"
    assert kernel["language"] == "python" and kernel["metadata"]["envbuild"]["prefix"] == str(prefix)
    assert f'Jupyter: pick the kernel "{spec.stem} (CPU, torch 2.13.0)" (lab)' in result["next_steps"]


@pytest.mark.world
def test_a_foreign_prefix_is_refused_and_left_alone(world, tmp_path: Path) -> None:
    spec = world_spec(tmp_path)
    prefix = tmp_path / "somebody"
    prefix.mkdir()
    (prefix / "thesis.tex").write_text("do not touch")
    done = onboard(spec, tmp_path, "--cuda", "cpu", "--prefix", str(prefix))
    assert done.returncode == 1
    error = done.stderr.strip().splitlines()[-1]
    assert error == (f"Error: {prefix} is not empty and is not an envbuild environment: refusing to overwrite it; "
                     "choose another --prefix or --name, or remove the folder yourself")
    assert [p.name for p in prefix.iterdir()] == ["thesis.tex"]
    assert "Traceback" not in done.stderr


@pytest.mark.world
def test_installs_with_a_micromamba_on_path_through_conda_lock(world, tmp_path: Path) -> None:
    """envbuild's micromamba-compatible executable stands where a real micromamba would be: conda-lock
    install drives it with micromamba's calls (create --file EXPLICIT, run pip install)."""
    shim = shutil.which("envbuild-micromamba") or str(Path(sys.executable).parent / "envbuild-micromamba")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "micromamba").symlink_to(shim)
    spec = world_spec(tmp_path)
    prefix = tmp_path / "mm"
    done = onboard(spec, tmp_path, "--cuda", "cpu", "--prefix", str(prefix), "--no-smoke", "--json",
                   env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["installer"] == "micromamba"
    assert result["next_steps"][0] == f"activate it: micromamba activate {prefix}"
    assert env_python(prefix, "import torch; print(torch.__version__)") == "2.13.0+cpu"
    assert EnvMarker.read(prefix).installer == "micromamba"


@pytest.mark.world
@pytest.mark.docker
def test_image_pulled_from_a_registry_gives_the_docker_run_line(world, tmp_path: Path) -> None:
    import docker

    registry = os.environ.get("ENVBUILD_TEST_REGISTRY")
    small = os.environ.get("ENVBUILD_TEST_BUSYBOX_IMAGE")
    if not registry or not small:
        pytest.skip("the world's registry and busybox image are not up")
    spec = world_spec(tmp_path)
    name = spec.stem
    client = docker.from_env()
    remote = f"{registry}/{name}"
    try:
        # What `envbuild image --push` leaves in the registry, made from a 2 MB image.
        client.api.tag(small, remote, "2.13.0-cpu")
        for chunk in client.api.push(remote, tag="2.13.0-cpu", stream=True, decode=True):
            assert "error" not in chunk, chunk
        client.api.remove_image(f"{remote}:2.13.0-cpu")
        local_only = onboard(spec, tmp_path, "--cuda", "cpu", "--image", "--pull", registry)
        assert local_only.returncode == 2 and "--kernel-dir: for a local environment" in local_only.stderr
        done = envbuild("onboard", str(spec), "--channel", WORLD_CHANNEL, "--locks", str(tmp_path / "locks"),
                        "--cuda", "cpu", "--image", "--pull", registry, "--json")
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout)
        assert (result["image"], result["how"]) == (f"{remote}:2.13.0-cpu", "pulled")
        assert result["run_command"] == docker_run_line(f"{remote}:2.13.0-cpu", None)
        assert client.images.get(f"{remote}:2.13.0-cpu")
        missing = envbuild("onboard", str(spec), "--channel", WORLD_CHANNEL, "--locks", str(tmp_path / "locks"),
                           "--cuda", "12.9", "--pull", registry)
        assert missing.returncode == 1
        assert missing.stderr.strip().splitlines()[-1].startswith(f"Error: pull of {remote}:2.13.0-cuda12.9 failed: ")
        assert not (tmp_path / "locks").exists()  # pulling needs no lock
    finally:
        for reference in (f"{remote}:2.13.0-cpu",):
            try:
                client.api.remove_image(reference)
            except docker.errors.ImageNotFound:
                pass
        client.close()


@pytest.mark.docker
def test_image_built_for_a_newcomer_on_the_world_bases(built, world_env) -> None:
    from tests.conftest import BUILDER_BASE, RUNTIME_BASE

    done = envbuild("onboard", str(world_env.spec), *world_env.world_args(), "--cuda", "cpu", "--image",
                    "--base-image", RUNTIME_BASE, "--builder-image", BUILDER_BASE, "--network", "host", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert (result["image"], result["how"]) == (f"{world_env.name}:2.13.0-cpu", "built")
    assert result["run_command"] == docker_run_line(f"{world_env.name}:2.13.0-cpu", None)
    assert "--gpus" not in result["run_command"]


@unit
def test_image_build_options_without_image_are_one_usage_line(tmp_path: Path) -> None:
    done = envbuild("onboard", str(SPEC), "--cuda", "cpu", "--prefix", str(tmp_path / "env"), "--network", "host")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == "Error: --network: for --image builds"
    assert not (tmp_path / "env").exists()

"""envbuild onboard end to end on the offline world: a real python 3.11 + CPU torch env installed into a tmp
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

from builder.teams.onboard import EnvMarker, docker_run_line
from tests.envbuild_cli import envbuild
from tests.paths import REPO
from tests.world.offline import BUILDER_BASE, NO_CPU_TORCHVISION, RUNTIME_BASE
from tests.world.offline import CHANNEL as WORLD_CHANNEL

SPEC = REPO / "envs" / "pytorch.yaml"


@pytest.fixture(scope="module")
def world() -> None:
    if not os.environ.get("ENVBUILD_TEST_WORLD"):
        pytest.skip("the offline world is not up: run inside tests/world/with-world.sh")


def world_spec(folder: Path, *extra_conda: str) -> Path:
    data = yaml.safe_load(SPEC.read_text())
    data["name"] = f"onboard-{uuid.uuid4().hex[:8]}"
    data["conda"] = [*data.get("conda", []), *extra_conda]
    for key in NO_CPU_TORCHVISION:
        data.pop(key, None)
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
    # No space in the prefix: inductor writes its g++ line unquoted, so torch.compile fails in an env under a
    # path with a space (-L".../team env/..." splits), which the smoke suite rightly reports.
    prefix = tmp_path / "team-env"
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
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["locks", "team-env", spec.name])
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
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["locks", "team-env", spec.name])

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
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["locks", "team-env", spec.name])


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
    done = envbuild("onboard", str(world_env.spec), *world_env.world_args(), "--cuda", "cpu", "--image",
                    "--base-image", RUNTIME_BASE, "--builder-image", BUILDER_BASE, "--network", "host", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert (result["image"], result["how"]) == (f"{world_env.name}:2.13.0-cpu", "built")
    assert result["run_command"] == docker_run_line(f"{world_env.name}:2.13.0-cpu", None)
    assert "--gpus" not in result["run_command"]

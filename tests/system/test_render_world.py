"""`envbuild render --out DIR` writes a real build context: the plain docker CLI builds it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.envbuild_cli import envbuild
from tests.world.offline import BUILDER_BASE, RUNTIME_BASE, remove_env_images
from tests.world.offline import CHANNEL as WORLD_CHANNEL

pytestmark = [pytest.mark.docker, pytest.mark.world]


def docker_cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker CLI on PATH")
    # the legacy builder: the newer CLI has no buildx here, and BuildKit would need it
    return subprocess.run([docker, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "DOCKER_BUILDKIT": "0"})


def test_docker_build_of_the_rendered_folder_works(docker_world, tmp_path: Path) -> None:
    name = f"render-ctx-{uuid.uuid4().hex[:8]}"
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(f"name: {name}\npython: '3.11'\ntorch: '2.13.0'\nplatforms: [linux-64]\n"
                    f"targets: [{{cuda: '12.9'}}]\nconda: [numpy]\n"
                    f"images: {{runtime: {{image: '{RUNTIME_BASE}'}}, builder: {{image: '{BUILDER_BASE}'}}}}\n")
    world = ["--channel", WORLD_CHANNEL, "--locks", str(tmp_path / "locks")]
    before = envbuild("render", str(spec), *world, "--out", str(tmp_path / "ctx"), "--json", cwd=tmp_path)
    assert before.returncode == 0, before.stderr
    unlocked = json.loads(before.stdout)["contexts"][0]
    assert unlocked["buildable"] is False and "the lock is missing: run `envbuild lock`" in unlocked["note"]
    assert envbuild("lock", str(spec), *world, cwd=tmp_path).returncode == 0
    done = envbuild("render", str(spec), *world, "--out", str(tmp_path / "ctx"), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["contexts"][0]["buildable"] is True
    context = tmp_path / "ctx"
    installer = "envbuild/layers/installer/opt/envbuild/installer"
    for part in ("Dockerfile", ".dockerignore", "envbuild/plan.json", f"{installer}/builder/lock/install.py",
                 f"{installer}/rattler.zip", "envbuild/layers/rest/opt/envbuild/plans/rest.json"):
        assert (context / part).is_file(), part
    tag = f"{name}:rendered"
    try:
        built = docker_cli("build", "--network", "host", "--rm", "--force-rm", "-t", tag, str(context))
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
        ran = docker_cli("run", "--rm", tag, "python", "-c", "import sys, numpy; print(sys.prefix, numpy.__version__)")
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.split()[0] == "/opt/env"
        # a plain build has the lock's hash from the context, and no label left empty
        inspected = docker_cli("inspect", "--format", "{{json .Config.Labels}}", tag)
        labels = json.loads(inspected.stdout)
        lock_hash = json.loads((tmp_path / "locks" / "cuda12.9" / "envbuild-lock.json").read_text())["lockfile_sha256"]
        assert labels["io.envbuild.lock-hash"] == lock_hash and all(labels.values()), labels
        assert "org.opencontainers.image.created" not in labels
    finally:
        remove_env_images(name)  # the image and its builder stage (labelled with the env's name)
    # rendering again replaces envbuild's own folder; a file of the user's in it stops that
    (context / "notes.txt").write_text("mine")
    again = envbuild("render", str(spec), *world, "--out", str(context), cwd=tmp_path)
    assert again.returncode == 2 and "notes.txt was not written by envbuild" in again.stderr
    assert (context / "notes.txt").read_text() == "mine"

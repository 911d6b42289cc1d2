"""Provenance labels on a real image: from the spec's git checkout, overridden on the command line."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

import docker
from tests.envbuild_cli import envbuild
from tests.world.offline import BUILDER_BASE, RUNTIME_BASE, remove_env_images
from tests.world.offline import CHANNEL as WORLD_CHANNEL

pytestmark = [pytest.mark.docker, pytest.mark.world]


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.org",
                           "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_image_labels_name_the_specs_checkout_or_the_given_source(docker_world, tmp_path: Path) -> None:
    name = f"labels-{uuid.uuid4().hex[:8]}"
    repo = tmp_path / "team"
    repo.mkdir()
    spec = repo / f"{name}.yaml"
    spec.write_text(f"name: {name}\npython: '3.11'\ntorch: '2.13.0'\nplatforms: [linux-64]\n"
                    "targets: [{cuda: '12.9'}]\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "spec")
    git(repo, "remote", "add", "origin", "https://ci-bot:glpat-secret@git.example.org/team/vision.git")
    head = git(repo, "rev-parse", "HEAD")
    common = ["image", str(spec), "--cuda", "12.9", "--channel", WORLD_CHANNEL, "--locks", str(tmp_path / "locks"),
              "--base-image", RUNTIME_BASE, "--builder-image", BUILDER_BASE, "--network", "host"]
    client = docker.from_env(timeout=300)
    try:
        done = envbuild(*common, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        labels = client.api.inspect_image(f"{name}:2.13.0-cuda12.9")["Config"]["Labels"]
        assert labels["org.opencontainers.image.source"] == "https://git.example.org/team/vision.git"
        assert labels["org.opencontainers.image.revision"] == head
        assert labels["io.envbuild.source-dirty"] == "false"
        assert not [key for key, value in labels.items() if value == ""]  # no label is written empty
        assert "glpat-secret" not in str(labels)
        given = envbuild(*common, "--source", "https://mirror.example/vision", "--revision", "v1.2.3", cwd=tmp_path)
        assert given.returncode == 0, given.stderr[-3000:]
        labels = client.api.inspect_image(f"{name}:2.13.0-cuda12.9")["Config"]["Labels"]
        assert labels["org.opencontainers.image.source"] == "https://mirror.example/vision"
        assert labels["org.opencontainers.image.revision"] == "v1.2.3"
        assert "io.envbuild.source-dirty" not in labels
    finally:
        remove_env_images(name)
        client.close()

"""The real CUDA torch of the offline world: torch 2.14.1 + torchvision 0.29.1 (CUDA 13.0 builds) and
their nvidia-* wheels on the world's pip index, locked (conda part by conda-lock, pip part by uv), built
into an image of the pip-route CUDA 13.0 target (tests/fixtures/specs/torch-cuda-pip.yaml) and smoke
tested inside it, as a user would. No GPU needed: cuDNN loads, the compiled arch list and
torchvision's CUDA build are read from the libraries. About 2.5 minutes, and about 8 GB of the
engine's disk at the peak of the build, all of it given back after (marker `cuda_torch`); on a disk
with less free the build test skips and says so.

"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.formats.conda_lock import read_lock
from builder.specs.model import load_spec
from builder.specs.target import resolve_targets
from tests.envbuild_cli import envbuild
from tests.system.outside_run import run_outside_check
from tests.world.offline import (
    BUILDER_BASE,
    CHANNEL,
    CUDA_TORCH_SPEC,
    PIP_INDEX,
    RUNTIME_BASE,
    WORLD,
    cuda_torch_build_fits,
    remove_env_images,
    unique_spec_copy,
)

pytestmark = pytest.mark.world


@pytest.fixture(scope="module")
def world() -> None:
    if not os.environ.get("ENVBUILD_TEST_WORLD"):
        pytest.skip("the offline world is not up: run through `make test`")


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read()


@pytest.mark.parametrize(("project", "filename", "requires"), [
    ("torch", "torch-2.14.1%2Bcu130-cp311-cp311-manylinux_2_28_x86_64.whl", "nvidia-cudnn-cu13==9.24.0.43"),
    ("torchvision", "torchvision-0.29.1%2Bcu130-cp311-cp311-manylinux_2_28_x86_64.whl", "torch (>=2.14.0)"),
])
def test_index_serves_the_cuda_builds_under_their_local_version(world, project: str, filename: str,
                                                                  requires: str) -> None:
    page = _fetch(f"{PIP_INDEX}/{project}/").decode()
    assert f"../../files/{filename}#sha256=" in page, page
    metadata = _fetch(f"{WORLD}/pypi/files/{filename}.metadata").decode()
    version = filename.split("-")[1].replace("%2B", "+")
    assert f"\nVersion: {version}\n" in metadata
    assert f"Requires-Dist: {requires}" in metadata


@pytest.fixture
def cuda_env(tmp_path: Path) -> Iterator[Path]:
    """A uniquely named copy of the spec; its images and builder stage (about 6 GB each) removed after."""
    fits, why_not = cuda_torch_build_fits()
    if not fits:
        pytest.skip(why_not)
    spec = unique_spec_copy(tmp_path, "cuda-torch", CUDA_TORCH_SPEC)
    yield spec
    remove_env_images(spec.stem)


@pytest.mark.cuda_torch
@pytest.mark.docker
def test_real_cuda_torch_image_passes_the_smoke_suite_without_a_gpu(world, cuda_env: Path, tmp_path: Path) -> None:
    sources = ("--channel", CHANNEL, "--pip-index", PIP_INDEX)
    locked = envbuild("lock", str(cuda_env), *sources, "--json", cwd=tmp_path)
    assert locked.returncode == 0, locked.stderr[-3000:]
    lock = read_lock(tmp_path / cuda_env.stem / "locks" / "cuda13.0" / "conda-lock.yml")
    pip = {p.name: p.version for p in lock.package if p.manager == "pip"}
    assert pip["torch"] == "2.14.1+cu130" and pip["torchvision"] == "0.29.1+cu130"
    assert pip["nvidia-cudnn-cu13"] == "9.24.0.43" and "numpy" not in pip  # numpy comes from conda
    built = envbuild("image", str(cuda_env), "--cuda", "13.0", *sources, "--base-image", RUNTIME_BASE, "--builder-image",
                     BUILDER_BASE, "--network", "host", "--json", cwd=tmp_path, timeout=1500)
    assert built.returncode == 0, built.stderr[-4000:]
    image = json.loads(built.stdout)["images"][0]
    assert image["size"] > 4e9 and image["env_layer_size"] > 0.9 * image["size"]
    smoke = envbuild("smoke", image["tags"][0], "--junit", str(tmp_path / "smoke.xml"), "--json", cwd=tmp_path)
    checks = {c["name"]: c for c in json.loads(smoke.stdout)["checks"]}
    must_pass = ["env.import_torch", "env.torch_version", "env.cuda_build", "env.cudnn", "env.arch_flags",
                 "torchvision.version", "torchvision.cuda_build", "torchvision.ops", "torchvision.resnet18_amp",
                 "amp.cpu_bf16", "dataloader.fork", "dataloader.spawn", "checkpoint.dataparallel_prefix",
                 "compile.inductor", "env.expected_packages"]  # gcc/g++ layer; torchvision=0.29.1 baked in
    shown = {name: (checks[name]["status"], checks[name]["reason"]) for name in must_pass if name in checks}
    assert all(checks.get(name, {}).get("status") == "passed" for name in must_pass), shown
    assert checks["env.cudnn"]["details"]["cudnn"] == "9.24.0"
    assert checks["torchvision.cuda_build"]["details"]["torchvision_cuda"] == "13.0"
    # the arch list compiled into the wheel, read without a GPU, is the one the compatibility data lists
    target = resolve_targets(load_spec(CUDA_TORCH_SPEC))[0]
    assert all(arch in checks["env.arch_flags"]["reason"] for arch in target.archs)
    assert checks["env.cuda_available"]["status"] == "skipped"  # no GPU here: skipped with a reason
    assert smoke.returncode == 0, smoke.stderr[-3000:]
    # PyTorch's release-smoke operations on CPU (tests/system/outside_check.py), outside envbuild's suite
    status, results = run_outside_check(image["tags"][0])
    (tmp_path / "outside.json").write_text(json.dumps(results, indent=1))
    assert status == 0 and all(result["ok"] for result in results.values()), results
    assert len(results) == 9

"""The real CUDA torch of the offline world: torch 2.14.1 + torchvision 0.29.1 (CUDA 13.0 builds) and
their nvidia-* wheels on the world's pip index, installed into a fresh venv from that index alone, and
the smoke suite run in it with the expectations envbuild ships into an image of the pip-route CUDA 13.0
target (tests/fixtures/specs/torch-cuda-pip.yaml). No GPU needed: cuDNN loads, the compiled arch list
and torchvision's CUDA build are read from the libraries.

Why not an image: conda-lock's pip solver does not finish a lock of this target in 10 minutes (its
vendored poetry is CPU-bound in marker algebra on cuda-toolkit's extras; see tests/world/CHANNEL.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.smoke_data import write_smoke_data
from builder.spec import load_spec
from builder.target import resolve_targets
from tests.world.offline import ROOT

pytestmark = pytest.mark.world

WORLD = f"http://127.0.0.1:{os.environ.get('ENVBUILD_WORLD_PORT', '8765')}"
PIP_INDEX = f"{WORLD}/pypi/simple"
SPEC = ROOT / "tests" / "fixtures" / "specs" / "torch-cuda-pip.yaml"
# What this machine's pip configuration adds (extra indexes, find-links, constraints) must not help:
# the world's index alone has to be complete.
ISOLATED_PIP = {"PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "", "PIP_EXTRA_INDEX_URL": "",
                "PIP_CONSTRAINT": "", "PIP_NO_CACHE_DIR": "1"}


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


def _suite_copy(folder: Path) -> Path:
    """The suite with the data envbuild writes into the image of the pip-route CUDA 13.0 target."""
    from builder.render import smoke_dir

    target = resolve_targets(load_spec(SPEC))[0]
    suite = folder / "suite" / "smoke"
    shutil.copytree(smoke_dir(), suite, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    write_smoke_data(suite, target)
    return suite.parent


@pytest.fixture
def venv(tmp_path: Path) -> Iterator[Path]:
    """A fresh venv, removed after the test: pytest keeps old temp folders, and this one is 5.5 GB."""
    folder = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=120)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.cuda_torch
def test_real_cuda_torch_from_the_world_index_passes_the_smoke_suite(world, venv: Path, tmp_path: Path) -> None:
    python = venv / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--index-url", PIP_INDEX,
         "torch==2.14.1+cu130", "torchvision==0.29.1+cu130", "numpy"],
        capture_output=True, text=True, timeout=900, env={**os.environ, **ISOLATED_PIP})
    assert install.returncode == 0, install.stderr[-3000:]
    report = tmp_path / "report.json"
    target = resolve_targets(load_spec(SPEC))[0]
    done = subprocess.run(
        [str(python), "-m", "smoke", "--no-collect-env", "--expect-torch", "2.14.1", "--expect-cuda", "13.0",
         "--expect-archs", ",".join(target.archs), "--json", str(report)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(_suite_copy(tmp_path)), "PYTHONNOUSERSITE": "1"})
    assert report.is_file(), done.stdout[-2000:] + done.stderr[-2000:]
    checks = {c["name"]: c for c in json.loads(report.read_text())["checks"]}
    must_pass = ["env.import_torch", "env.torch_version", "env.cuda_build", "env.cudnn", "env.arch_flags",
                 "torchvision.version", "torchvision.cuda_build", "torchvision.ops", "torchvision.resnet18_amp",
                 "amp.cpu_bf16"]
    shown = {name: (checks[name]["status"], checks[name]["reason"]) for name in must_pass if name in checks}
    assert all(checks.get(name, {}).get("status") == "passed" for name in must_pass), shown
    assert checks["env.cudnn"]["details"]["cudnn"] == "9.24.0"
    assert checks["torchvision.cuda_build"]["details"]["torchvision_cuda"] == "13.0"
    assert done.returncode == 0, done.stdout[-3000:]  # nothing failed; the GPU checks skip with reasons

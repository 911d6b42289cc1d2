"""uv locks the pyproject.toml `envbuild export uv` writes, against the offline world's pip index (issue 26).

The world's index serves torch 2.13.0+cpu and the CUDA 13.0 wheels of torch 2.14.1 with their dependencies
(tests/world/offline.py); the export points every extra at it, and uv resolves the project with it as its
default index (the world has no PyPI).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from builder.specs.model import load_spec
from builder.specs.target import Sources, resolve_targets
from builder.teams.export import write_export
from tests.world.offline import PIP_INDEX, WORLD

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.world


@pytest.fixture(scope="module")
def world() -> None:
    if not os.environ.get("ENVBUILD_TEST_WORLD"):
        pytest.skip("the offline world is not up: run through `make test`")


def test_uv_locks_the_exported_project_from_the_worlds_index(world, tmp_path: Path) -> None:
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    spec_path = tmp_path / "wheels.yaml"
    spec_path.write_text(f"name: wheels\npython: '{python}'\ntorch: '2.13.0'\nroute: pip\nplatforms: [linux-64]\n"
                         "targets:\n  - cuda: cpu\n  - {cuda: '13.0', torch: '2.14.1', torchvision: '0.29.1'}\n"
                         "pip: []\n")
    spec = load_spec(spec_path)
    written = write_export("uv", spec, spec_path, resolve_targets(spec, sources=Sources(pip_index=PIP_INDEX)),
                           tmp_path / "project" / "pyproject.toml")
    from uv import find_uv_bin

    done = subprocess.run([find_uv_bin(), "lock", "--no-progress"], cwd=written.path.parent, capture_output=True,
                          text=True, timeout=600,
                          env={**os.environ, "UV_DEFAULT_INDEX": PIP_INDEX, "UV_CACHE_DIR": str(tmp_path / "cache"),
                               "UV_PYTHON": sys.executable, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    lock = tomllib.loads((written.path.parent / "uv.lock").read_text(encoding="utf-8"))
    torches = {p["version"]: p for p in lock["package"] if p["name"] == "torch"}
    assert set(torches) == {"2.13.0+cpu", "2.14.1+cu130"}
    assert all(wheel["url"].startswith(WORLD) for p in torches.values() for wheel in p["wheels"])

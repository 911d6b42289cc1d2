"""The offline world built from tests/world/channel/packages.py: the world under ENVBUILD_WORLD_DIR (default
.world/; built here when missing, cached otherwise) served over http on a free port, solved and installed
from with rattler in child processes (tests/world/channel/rattler_ops.py)."""

from __future__ import annotations

import hashlib
import html.parser
import os
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.paths import REPO
from tests.unit.world.channel_helpers import rattler_install, rattler_solve
from tests.world.channel.packages import serve_directory


@pytest.fixture(scope="module")
def world() -> Path:
    root = Path(os.environ.get("ENVBUILD_WORLD_DIR", REPO / ".world"))
    done = subprocess.run([sys.executable, "-m", "tests.world.channel", "build", "--world", str(root)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert "world at" in done.stdout, done.stderr[-2000:]
    return root


@pytest.fixture(scope="module")
def served(world: Path):
    with serve_directory(world) as base:
        yield base


@pytest.mark.world
@pytest.mark.parametrize(("cuda", "flavour"), [("11.8", "cuda118_"), (None, "cpu_")])
def test_solve_picks_the_build_the_driver_allows(world: Path, cuda: str | None, flavour: str) -> None:
    solved = rattler_solve([str(world / "conda" / "conda-forge")], "pytorch 2.7.*", "cuda-version 11.8.*", "python 3.11.*",
                    cuda=cuda)
    assert solved["pytorch"]["version"] == "2.7.1"
    assert solved["pytorch"]["build"].startswith(flavour)


@pytest.mark.world
def test_legacy_pytorch_channel_uses_the_mutex(world: Path) -> None:
    channels = [str(world / "conda" / c) for c in ("pytorch", "nvidia", "conda-forge")]
    cpu = rattler_solve(channels, "pytorch 2.5.*", "cpuonly", "python 3.11.*")
    assert cpu["pytorch"]["build"] == "py3.11_cpu_0" and cpu["pytorch-mutex"]["build"] == "cpu"
    gpu = rattler_solve(channels, "pytorch 2.5.*", "pytorch-cuda 12.4.*", "python 3.11.*", cuda="12.4")
    assert gpu["pytorch"]["build"].startswith("py3.11_cuda12.4_") and gpu["pytorch-mutex"]["build"] == "cuda"
    assert gpu["cuda-runtime"]["channel"].rstrip("/").endswith("nvidia")


@pytest.mark.world
def test_real_python_runs_and_pip_installs_from_the_local_index(served: str, tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    records = rattler_install(f"{served}/conda/conda-forge", prefix, "python 3.11.*", "pip")  # over http: hashes checked
    assert {r["name"] for r in records} >= {"python", "pip", "python_abi"}
    python = prefix / "bin" / "python"
    probe = subprocess.run([python, "-c", "import ssl, sqlite3, json; print(1)"], capture_output=True, text=True)
    assert probe.stdout.strip() == "1", probe.stderr
    pip = [python, "-m", "pip", "--isolated", "--disable-pip-version-check"]
    version = subprocess.run([*pip, "--version"], capture_output=True, text=True)
    assert str(prefix) in version.stdout, version.stderr
    install = subprocess.run([*pip, "install", "--no-cache-dir", "--root-user-action=ignore",
                              "--index-url", f"{served}/pypi/simple", "mpmath"], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-2000:]
    assert (prefix / "lib" / "python3.11" / "site-packages" / "mpmath" / "__init__.py").is_file()
    imported = subprocess.run([python, "-c", "import mpmath; print(mpmath.__file__)"], capture_output=True, text=True)
    assert imported.stdout.startswith(str(prefix)), imported.stderr


@pytest.mark.world
@pytest.mark.torch
def test_cpu_torch_package_imports_with_the_world_python(served: str, tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    records = rattler_install(f"{served}/conda/conda-forge", prefix, "pytorch 2.13.*", "python 3.11.*", "numpy")
    assert next(r for r in records if r["name"] == "pytorch")["build"].startswith("cpu_py311_")
    run = subprocess.run(
        [prefix / "bin" / "python", "-c", "import torch, numpy; print(torch.__version__, torch.ones(3).sum().item())"],
        capture_output=True, text=True, timeout=300)
    assert run.stdout.split() == ["2.13.0+cpu", "3.0"], run.stderr[-2000:]


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.append(dict(attrs))


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url) as response:
        return response.read()


@pytest.mark.world
@pytest.mark.parametrize("project", ["torch", "fsspec", "numpy"])
def test_pip_index_serves_hashes_and_metadata(served: str, project: str) -> None:
    page_url = f"{served}/pypi/simple/{project}/"
    parser = _Links()
    parser.feed(_fetch(page_url).decode())
    assert parser.links, f"no links on {page_url}"
    for link in parser.links:
        href = link["href"] or ""
        url, _, fragment = urllib.parse.urljoin(page_url, href).partition("#")
        assert fragment.startswith("sha256=")
        metadata = _fetch(url + ".metadata")
        assert link["data-core-metadata"] == link["data-dist-info-metadata"] == f"sha256={hashlib.sha256(metadata).hexdigest()}"
        assert b"Name: " in metadata and b"Version: " in metadata
        if project != "torch":  # hashing the 190 MB torch wheel over http adds nothing
            assert hashlib.sha256(_fetch(url)).hexdigest() == fragment.removeprefix("sha256=")


@pytest.mark.world
def test_second_build_is_served_from_the_cache(world: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tests.world.channel", "build", "--world", str(world)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert "is up to date" in done.stdout, done.stdout + done.stderr

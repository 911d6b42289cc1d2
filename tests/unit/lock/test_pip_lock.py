"""The pip part of a lock: uv's platform names, its pylock.toml and `# via` graph read into
conda-lock's pip entries, and the conda part handed to conda-lock without the pip section.
The resolution itself runs against the world's index in tests/system/test_lock_world.py."""

from __future__ import annotations

import pytest

from builder.errors import EnvbuildError
from builder.lock.inputs import lock_inputs
from builder.lock.pip_part import (
    PipPart,
    PipResolveError,
    provided_by_conda,
    pylock_packages,
    requirers,
    uv_explanation,
    uv_platform,
)
from builder.specs.model import parse_spec
from builder.specs.target import Sources, resolve_targets

pytestmark = pytest.mark.unit

PYLOCK = '''lock-version = "1.0"
created-by = "uv"

[[packages]]
name = "torch"
version = "2.14.1+cu130"
wheels = [{ url = "http://index.example/files/torch-2.14.1%2Bcu130-cp311-cp311-manylinux_2_28_x86_64.whl", hashes = { sha256 = "aa" } }]

[[packages]]
name = "Cuda_Toolkit"
version = "13.0.3.0"
wheels = [{ url = "http://index.example/files/cuda_toolkit-13.0.3.0-py2.py3-none-manylinux_2_28_x86_64.whl", hashes = { sha256 = "bb" } }]

[[packages]]
name = "nvidia-cublas"
version = "13.1.1.3"
wheels = [{ url = "http://index.example/files/nvidia_cublas-13.1.1.3-py3-none-manylinux_2_27_x86_64.whl", hashes = { sha256 = "cc" } }]
'''

GRAPH = '''cuda-toolkit==13.0.3.0
    # via torch
nvidia-cublas==13.1.1.3
    # via
    #   cuda-toolkit
    #   nvidia-cudnn-cu13
torch==2.14.1+cu130
    # via -r requirements.in
'''


def test_uv_platform_follows_the_targets_glibc_and_macos_versions() -> None:
    assert uv_platform("linux-64", {"__glibc": "2.28"}) == ("x86_64-manylinux_2_28", {})
    assert uv_platform("linux-aarch64", {"__glibc": "2.5"}) == ("aarch64-manylinux_2_17", {})
    assert uv_platform("linux-64", {"__glibc": "2.99"})[0] == "x86_64-manylinux_2_40"
    assert uv_platform("osx-arm64", {"__osx": "13.0"}) == ("aarch64-apple-darwin", {"MACOSX_DEPLOYMENT_TARGET": "13.0"})
    with pytest.raises(EnvbuildError, match="cannot lock pip packages for this platform"):
        uv_platform("linux-ppc64le", {})


def test_pylock_entries_take_their_one_wheel_and_dependencies_from_the_via_graph() -> None:
    packages = {p.name: p for p in pylock_packages(PYLOCK, requirers(GRAPH))}
    assert set(packages) == {"torch", "cuda-toolkit", "nvidia-cublas"}
    torch = packages["torch"]
    assert torch.version == "2.14.1+cu130" and torch.sha256 == "aa" and torch.url.endswith(".whl")
    assert torch.dependencies == ("cuda-toolkit",)
    assert packages["cuda-toolkit"].dependencies == ("nvidia-cublas",)
    assert packages["nvidia-cublas"].dependencies == ()


def test_a_package_without_exactly_one_hashed_wheel_is_refused() -> None:
    two = PYLOCK.replace('hashes = { sha256 = "cc" } }]', 'hashes = { sha256 = "cc" } }, { url = "x", hashes = {} }]')
    with pytest.raises(PipResolveError, match="nvidia-cublas 13.1.1.3: uv chose 2 wheels"):
        pylock_packages(two, {})


def test_uv_explanation_is_its_because_sentence_on_one_line() -> None:
    stderr = ("  × No solution found when resolving dependencies:\n"
              "  ╰─▶ Because there is no version of torch==2.13.0+cu126 and you require\n"
              "      torch==2.13.0+cu126, we can conclude that your requirements are unsatisfiable.\n")
    assert uv_explanation(stderr) == ("Because there is no version of torch==2.13.0+cu126 and you require "
                                      "torch==2.13.0+cu126, we can conclude that your requirements are unsatisfiable.")
    assert uv_explanation("error: Failed to fetch: `http://x/simple/torch/`\n") == "Failed to fetch: `http://x/simple/torch/`"


def test_conda_packages_are_excluded_by_their_pypi_names() -> None:
    assert provided_by_conda(["python", "numpy", "pytorch", "typing_extensions", "libzlib"]) == [
        "libzlib", "numpy", "torch", "typing-extensions"]


def _pip_target():
    spec = parse_spec({"name": "wheels", "python": "3.11", "torch": "2.13.0", "route": "pip",
                       "platforms": ["linux-64"], "targets": [{"cuda": "cpu"}], "conda": ["numpy"],
                       "pip": ["einops==0.8.1"]})
    return resolve_targets(spec, sources=Sources(pip_index="http://index.example/simple"))[0]


def test_conda_lock_reads_the_conda_part_only_and_the_pip_part_goes_to_uv() -> None:
    inputs = lock_inputs(_pip_target())
    conda_yml = inputs.conda_environment_yml
    assert "- pip:" not in conda_yml and "pip-repositories" not in conda_yml and '- "pip"' in conda_yml
    assert inputs.pip_part == PipPart(("torch==2.13.0+cpu", "einops==0.8.1"), "http://index.example/simple", False)
    assert inputs.pip_part.index_args() == ["--index-url", "http://index.example/simple"]
    assert inputs.pip_names() == {"torch", "einops"}
    assert "uv" in inputs.material["solver"]


def test_an_index_beside_pypi_is_asked_first() -> None:
    assert PipPart(("torch",), "http://index.example/simple", True).index_args() == [
        "--extra-index-url", "http://index.example/simple"]
    assert PipPart(("torch",), None, True).index_args() == []


def test_a_missing_uv_is_one_line_that_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    import uv

    from builder.lock import pip_part as pip_lock

    def not_found() -> str:
        raise FileNotFoundError("uv not found")  # what uv's UvNotFound is

    monkeypatch.setattr(uv, "find_uv_bin", not_found)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(PipResolveError, match="uv, which resolves the pip packages of a lock, is not installed"):
        pip_lock._uv()
    monkeypatch.setattr(shutil, "which", lambda name: "/somewhere/bin/uv")
    assert pip_lock._uv() == "/somewhere/bin/uv"


def _conda_lock_model():
    from conda_lock.lockfile.v1.models import HashModel
    from conda_lock.lockfile.v2prelim.models import LockedDependency, Lockfile, LockMeta

    def entry(name: str, version: str, manager: str) -> LockedDependency:
        return LockedDependency(name=name, version=version, manager=manager, platform="linux-64", dependencies={},
                                url=f"http://index.example/{name}-{version}",
                                hash=HashModel(md5="0" * 32, sha256="0" * 64) if manager == "conda" else HashModel(sha256="0" * 64),
                                categories={"main"})

    meta = LockMeta(content_hash={"linux-64": "h"}, channels=[], platforms=["linux-64"], sources=["environment.yml"])
    return Lockfile(package=[entry("python", "3.11.9", "conda"), entry("torch", "2.14.1", "pip"),
                             entry("filelock", "3.16.1", "pip")], metadata=meta)


def test_an_update_keeps_the_pip_packages_it_does_not_name_and_hands_conda_lock_the_conda_part(tmp_path) -> None:
    from conda_lock.lockfile import parse_conda_lock_file

    from builder.lock.pip_part import previous_pins, without_pip_entries
    from builder.lock.run import _write_lock

    lock = _conda_lock_model()
    assert previous_pins(lock, ["Torch"]) == {"linux-64": ["filelock==3.16.1"]}
    conda_only = without_pip_entries(lock)
    assert [p.name for p in conda_only.package] == ["python"]
    assert len(lock.package) == 3  # the model in hand is not changed
    path = tmp_path / "conda-lock.yml"
    _write_lock(conda_only, path)
    assert [p.name for p in parse_conda_lock_file(path).package] == ["python"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conda-lock.yml"]  # no partial file left

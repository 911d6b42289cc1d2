"""`lock --check` reads what the lock holds: a refreshed sidecar sha does not make an edited lock fresh."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from builder.lock.inputs import lock_inputs
from builder.lock.targets import INFO_FILE, LOCK_FILE, LockInfo, check_targets, lock_status
from tests.unit.lock.test_lock_inputs import record_lock, target

pytestmark = pytest.mark.unit

CF = "https://conda.anaconda.org/conda-forge"


def _package(name: str, version: str, build: str, platform: str = "linux-64", manager: str = "conda") -> dict:
    return {"name": name, "version": version, "manager": manager, "platform": platform,
            "url": f"{CF}/{platform}/{name}-{version}-{build}.conda", "hash": {"sha256": "0" * 64}, "dependencies": {}}


def _lock_with(folder: Path, packages: list[dict]) -> None:
    """A lock as a tamperer leaves it: lockfile edited and the sidecar's sha refreshed to match."""
    record_lock(folder, lock_inputs(target()))
    (folder / LOCK_FILE).write_text(yaml.safe_dump(
        {"version": 1, "metadata": {"platforms": ["linux-64"]}, "package": packages}))
    info = LockInfo.model_validate_json((folder / INFO_FILE).read_text())
    refreshed = info.model_copy(update={"lockfile_sha256": hashlib.sha256((folder / LOCK_FILE).read_bytes()).hexdigest()})
    (folder / INFO_FILE).write_text(refreshed.model_dump_json())


GOOD = [_package("python", "3.11.9", "h1_0_cpython"), _package("pytorch", "2.13.0", "cuda129_py311_h1_0"),
        _package("numpy", "2.1.0", "py311_h1_0")]


def test_a_lock_the_inputs_allow_is_fresh(tmp_path: Path) -> None:
    _lock_with(tmp_path / "cuda12.9", GOOD)
    assert lock_status(lock_inputs(target()), tmp_path / "cuda12.9") == ("fresh", [])


def test_a_second_torch_entry_is_stale_though_the_sha_was_refreshed(tmp_path: Path) -> None:
    _lock_with(tmp_path / "cuda12.9", [*GOOD, _package("pytorch", "2.13.0", "cuda129_py311_h2_0")])
    status, reasons = lock_status(lock_inputs(target()), tmp_path / "cuda12.9")
    assert status == "stale"
    assert reasons == ["pytorch is locked 2 times on linux-64"]


def test_a_swapped_torch_version_is_stale(tmp_path: Path) -> None:
    swapped = [GOOD[0], _package("pytorch", "2.5.0", "cuda129_py311_h1_0"), GOOD[2]]
    _lock_with(tmp_path / "cuda12.9", swapped)
    result = check_targets([target()], lock_root=tmp_path)[0]
    assert result.status == "stale"
    assert result.reasons == ["pytorch 2.5.0 on linux-64 is not ==2.13.0 as the inputs ask"]


def test_a_torch_of_another_cuda_build_is_stale(tmp_path: Path) -> None:
    _lock_with(tmp_path / "cuda12.9", [GOOD[0], _package("pytorch", "2.13.0", "cuda126_py311_h1_0")])
    status, reasons = lock_status(lock_inputs(target()), tmp_path / "cuda12.9")
    assert status == "stale"
    assert reasons == ["pytorch build cuda126_py311_h1_0 on linux-64 is not cuda129* as the inputs ask"]


def test_a_python_of_another_line_is_stale(tmp_path: Path) -> None:
    _lock_with(tmp_path / "cuda12.9", [_package("python", "3.12.1", "h1_0_cpython")])
    status, reasons = lock_status(lock_inputs(target()), tmp_path / "cuda12.9")
    assert status == "stale" and reasons == ["python 3.12.1 on linux-64 is not 3.11.* as the inputs ask"]


def test_packages_for_a_platform_the_target_does_not_lock_are_stale(tmp_path: Path) -> None:
    _lock_with(tmp_path / "cuda12.9", [*GOOD, _package("numpy", "2.1.0", "py311_h1_0", platform="win-64")])
    status, reasons = lock_status(lock_inputs(target()), tmp_path / "cuda12.9")
    assert status == "stale" and reasons == ["packages for win-64, which this target does not lock"]


def _lock(packages: list[dict]):
    from builder.formats.conda_lock import CondaLock

    return CondaLock.model_validate({"version": 1, "metadata": {"platforms": ["linux-64"]}, "package": packages})


def _at(package: dict, url: str) -> dict:
    return {**package, "url": url}


def test_a_package_from_outside_the_targets_channels_is_named(tmp_path: Path) -> None:
    planted = _at(GOOD[1], "https://evil.example/conda-forge/linux-64/pytorch-2.13.0-cuda129_py311_h1_0.conda")
    _lock_with(tmp_path / "cuda12.9", [GOOD[0], planted, GOOD[2]])
    status, reasons = lock_status(lock_inputs(target()), tmp_path / "cuda12.9")
    assert status == "stale" and len(reasons) == 1
    assert reasons[0].startswith("pytorch 2.13.0 on linux-64: its URL https://evil.example/") and "channels" in reasons[0]


@pytest.mark.parametrize("name", ["..%2F..%2F.bashrc", "a%2Fb.conda", "%2E%2E", "x%5Cy.conda"])
def test_a_file_name_of_more_than_one_path_component_is_named(name: str) -> None:
    from builder.lock.content_check import url_problems

    bad = _at(GOOD[2], f"{CF}/linux-64/{name}")
    [problem] = url_problems(_lock([GOOD[0], bad]), lock_inputs(target()))
    assert problem.startswith("numpy 2.1.0 on linux-64: its file name") and "single file name" in problem


def test_a_package_in_another_platforms_folder_is_named() -> None:
    from builder.lock.content_check import url_problems

    elsewhere = _at(GOOD[2], f"{CF}/win-64/numpy-2.1.0-py311_h1_0.conda")
    noarch = _at(GOOD[0], f"{CF}/noarch/python-3.11.9-h1_0_cpython.conda")
    [problem] = url_problems(_lock([noarch, elsewhere]), lock_inputs(target()))
    assert "numpy 2.1.0 on linux-64" in problem and "linux-64/ or noarch/" in problem


def test_a_lock_made_through_a_mirror_is_checked_against_the_mirror() -> None:
    from builder.lock.content_check import url_problems
    from builder.specs.target import Sources

    mirror = "http://127.0.0.1:8765/conda/conda-forge"
    mirrored = target(sources=Sources.parse((), (f"conda-forge={mirror}",)))
    assert mirrored.channels == (mirror,)
    through_mirror = [_at(p, p["url"].replace(CF, mirror)) for p in GOOD]
    assert url_problems(_lock(through_mirror), lock_inputs(mirrored)) == []
    # the public channel's URLs are not what a solve through the mirror gives, and the mirror's not the public one's
    assert len(url_problems(_lock(GOOD), lock_inputs(mirrored))) == len(GOOD)
    assert len(url_problems(_lock(through_mirror), lock_inputs(target()))) == len(GOOD)


def test_a_pip_wheel_with_an_encoded_plus_is_one_file_name() -> None:
    from builder.lock.content_check import url_problems

    wheel = {"name": "torch", "version": "2.13.0+cu129", "manager": "pip", "platform": "linux-64",
             "url": "https://download.pytorch.org/whl/cu129/torch-2.13.0%2Bcu129-cp311-cp311-linux_x86_64.whl",
             "hash": {"sha256": "0" * 64}, "dependencies": {}}
    assert url_problems(_lock([wheel]), lock_inputs(target())) == []
    escaping = _at(wheel, "https://download.pytorch.org/whl/cu129/..%2F..%2Ftorch.whl")
    assert len(url_problems(_lock([escaping]), lock_inputs(target()))) == 1

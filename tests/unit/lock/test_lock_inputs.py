"""A lock's input hash covers only what its target's solve reads, and a stale lock says which input changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import builder
import builder.formats.environment_yml
from builder.lock.inputs import lock_inputs, stale_reasons
from builder.lock.targets import INFO_FILE, LOCK_FILE, LockInfo, check_targets, lock_status
from builder.specs.model import parse_spec
from builder.specs.target import Sources, resolve_targets, with_images

pytestmark = pytest.mark.unit

BASE = {
    "name": "vision", "description": "a team's env", "python": "3.11", "torch": "2.13.0",
    "torchvision": "0.28.0", "platforms": ["linux-64", "osx-arm64"],
    "targets": [{"cuda": "12.9"}, {"cuda": "13.0"}, {"cuda": "cpu"}],
    "conda": ["numpy"], "images": {"runtime": {"image": "local/debian:bookworm"}},
}


def target(key: str = "cuda12.9", sources: Sources = Sources(), base_image: str | None = None, **changes):
    spec = parse_spec({**BASE, **changes}, "envs/vision.yaml")
    spec = with_images(spec, base_image)
    return next(t for t in resolve_targets(spec, sources=sources) if t.key == key)


def record_lock(folder: Path, inputs) -> None:
    """What `envbuild lock` leaves beside a lock: the lockfile and its info with the inputs."""
    folder.mkdir(parents=True)
    (folder / LOCK_FILE).write_text("version: 1\nmetadata: {platforms: [linux-64]}\npackage: []\n")
    import hashlib

    info = LockInfo(
        envbuild_version=builder.__version__, input_hash=inputs.input_hash, env="vision", target="cuda12.9",
        torch="2.13.0", cuda="12.9", platforms=["linux-64"], channels=["conda-forge"], pip_repositories=[],
        virtual_packages=inputs.virtual_packages, solver="envbuild-micromamba",
        lockfile_sha256=hashlib.sha256((folder / LOCK_FILE).read_bytes()).hexdigest(),
        torch_builds={}, package_counts={}, inputs=inputs.material,
    )
    (folder / INFO_FILE).write_text(info.model_dump_json())


def test_description_edit_keeps_the_hash() -> None:
    assert lock_inputs(target()).input_hash == lock_inputs(target(description="another text")).input_hash


def test_removing_another_target_keeps_the_hash() -> None:
    fewer = target(targets=[{"cuda": "12.9"}])
    assert lock_inputs(target()).input_hash == lock_inputs(fewer).input_hash


def test_envbuild_version_bump_keeps_the_hash(monkeypatch) -> None:
    before = lock_inputs(target())
    header_before = before.conda_environment_yml
    monkeypatch.setattr(builder, "__version__", "0.1.1")
    monkeypatch.setattr(builder.formats.environment_yml, "__version__", "0.1.1")  # the writer stamps it
    after = lock_inputs(target())
    assert "0.1.1" in after.conda_environment_yml and "0.1.1" not in header_before  # the header moved
    assert before.input_hash == after.input_hash


def test_image_only_fields_keep_the_hash() -> None:
    other = target(user={"name": "trainer", "uid": 1234}, labels={"team": "vision"},
                   images={"runtime": {"image": "local/debian:bookworm"}, "builder": {"image": "python:3.13-slim"}})
    assert lock_inputs(target()).input_hash == lock_inputs(other).input_hash


@pytest.mark.parametrize(
    ("changed", "reason"),
    [
        (lambda: target(conda=["numpy=2.3.5"]), "dependencies changed: removed numpy; added numpy=2.3.5"),
        (lambda: target(sources=Sources(channels=("https://mirror.example/conda-forge",))),
         "channels changed: conda-forge -> https://mirror.example/conda-forge"),
        (lambda: target(base_image="ubuntu:24.04"), "virtual packages changed: linux-64 __glibc 2.36 -> 2.39"),
        (lambda: target(platforms=["linux-64"]), "platforms changed: linux-64, osx-arm64 -> linux-64"),
    ],
    ids=["pin", "channel", "glibc", "platforms"],
)
def test_a_solve_input_change_is_stale_with_its_reason(tmp_path: Path, changed, reason: str) -> None:
    folder = tmp_path / "locks" / "cuda12.9"
    record_lock(folder, lock_inputs(target()))
    assert lock_status(lock_inputs(target()), folder) == ("fresh", [])
    status, reasons = lock_status(lock_inputs(changed()), folder)
    assert status == "stale"
    assert any(r.startswith(reason) for r in reasons), reasons


def test_a_pip_index_change_is_stale_with_its_reason(tmp_path: Path) -> None:
    wheels = {"key": "cuda12.6", "route": "pip", "platforms": ["linux-64"], "targets": [{"cuda": "12.6"}]}
    record_lock(tmp_path / "cuda12.6", lock_inputs(target(**wheels)))
    mirror = target(sources=Sources(pip_index="http://wheels.example/{tag}"), **wheels)
    status, reasons = lock_status(lock_inputs(mirror), tmp_path / "cuda12.6")
    assert status == "stale"
    assert reasons == ["pip index changed: repositories https://download.pytorch.org/whl/cu126, "
                       "allow_pypi_requests True -> repositories http://wheels.example/cu126, allow_pypi_requests False"]


def test_a_lock_of_an_older_envbuild_is_stale_with_that_reason(tmp_path: Path) -> None:
    folder = tmp_path / "cuda12.9"
    record_lock(folder, lock_inputs(target()))
    info = json.loads((folder / INFO_FILE).read_text())
    info.pop("inputs")
    info["input_hash"] = "0" * 64
    (folder / INFO_FILE).write_text(json.dumps(info))
    status, reasons = lock_status(lock_inputs(target()), folder)
    assert status == "stale" and "older envbuild" in reasons[0]


def test_an_edited_lockfile_is_stale_with_that_reason(tmp_path: Path) -> None:
    folder = tmp_path / "cuda12.9"
    record_lock(folder, lock_inputs(target()))
    (folder / LOCK_FILE).write_text("version: 1\nmetadata: {platforms: [linux-64]}\npackage: []\n# edited\n")
    assert lock_status(lock_inputs(target()), folder) == ("stale", [f"{LOCK_FILE} was edited since envbuild wrote it"])


def test_check_reports_reasons_in_its_result(tmp_path: Path) -> None:
    record_lock(tmp_path / "cuda12.9", lock_inputs(target()))
    result = check_targets([target(conda=["numpy", "scipy"])], lock_root=tmp_path)[0]
    assert result.status == "stale"
    assert result.reasons == ["dependencies changed: added scipy"]
    assert result.as_dict()["reasons"] == result.reasons
    assert result.message == "stale: dependencies changed: added scipy"


def test_solver_kind_is_an_input() -> None:
    own = lock_inputs(target()).material["solver"]
    real = lock_inputs(target(), solver_name="micromamba").material["solver"]
    assert own["solver"] == "envbuild-micromamba" and "rattler" in own and "conda_lock" in own
    assert stale_reasons(lock_inputs(target()).material, lock_inputs(target(), solver_name="micromamba").material) \
        == [f"solver changed: conda_lock {own['conda_lock']}, solver envbuild-micromamba, rattler {own['rattler']} "
            f"-> conda_lock {real['conda_lock']}, solver micromamba"]

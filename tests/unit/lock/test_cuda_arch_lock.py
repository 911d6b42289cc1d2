"""`__cuda_arch` (conda CEP 46): a spec with a fleet locks with the fleet's lowest compute capability.

These tests check the lock inputs; tests/system/test_cuda_arch_lock_world.py runs conda-lock through
envbuild's solver on a small channel where a newer pytorch build needs `__cuda_arch >=8.0`, and shows the
solve change.
"""

from __future__ import annotations

import pytest

from builder.lock.inputs import lock_inputs, stale_reasons, virtual_packages
from builder.specs.model import parse_spec
from builder.specs.target import resolve_targets

SPEC = {"name": "team-vision", "python": "3.12", "torch": "2.11", "route": "pip",
        "targets": [{"cuda": "12.9", "route": "conda-forge", "platforms": ["linux-64", "osx-arm64"]}, {"cuda": "cpu"}]}


def _targets(**extra):
    return {t.key: t for t in resolve_targets(parse_spec({**SPEC, **extra}))}


@pytest.mark.unit
def test_the_fleets_lowest_capability_is_a_virtual_package_of_cuda_platforms_only() -> None:
    targets = _targets(fleet=["H100", {"gpu": "V100", "count": 4}, "sm_120"])
    cuda = targets["cuda12.9"]
    assert cuda.cuda_arch == "7.0"
    assert virtual_packages(cuda, "linux-64")["__cuda_arch"] == "7.0"
    assert "__cuda_arch" not in virtual_packages(cuda, "osx-arm64")  # no __cuda there, so no __cuda_arch (CEP 46)
    assert targets["cpu"].cuda_arch is None and "__cuda_arch" not in virtual_packages(targets["cpu"], "linux-64")
    assert "__cuda_arch: '7.0'" in lock_inputs(cuda).virtual_packages_yml()


@pytest.mark.unit
def test_a_spec_without_fleet_keeps_its_lock_inputs() -> None:
    plain, with_fleet = _targets()["cuda12.9"], _targets(fleet=["V100"])["cuda12.9"]
    assert "__cuda_arch" not in virtual_packages(plain, "linux-64")
    before, after = lock_inputs(plain), lock_inputs(with_fleet)
    assert before.input_hash != after.input_hash
    assert any("virtual packages" in reason for reason in stale_reasons(before.material, after.material))
    # the same fleet in other words is the same lock
    assert lock_inputs(_targets(fleet=["sm_70", "A100"])["cuda12.9"]).input_hash == after.input_hash


VISION = {"name": "vision", "python": "3.11", "torch": "2.8.0", "targets": [{"cuda": "12.9"}], "platforms": ["linux-64"]}


@pytest.mark.unit
def test_virtual_packages_are_explicit_per_platform() -> None:
    target = resolve_targets(parse_spec({**VISION, "platforms": ["linux-64", "osx-arm64"]}, "envs/vision.yaml"))[0]
    assert virtual_packages(target, "linux-64")["__cuda"] == "12.9"
    assert virtual_packages(target, "linux-64")["__glibc"] == "2.39"
    assert "__cuda" not in virtual_packages(target, "osx-arm64")
    assert "__glibc" not in virtual_packages(target, "osx-arm64")
    cpu = resolve_targets(parse_spec({**VISION, "targets": [{"cuda": "cpu"}]}, "envs/vision.yaml"))[0]
    assert "__cuda" not in virtual_packages(cpu, "linux-64")

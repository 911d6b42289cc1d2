"""Every row of the compatibility data, checked for consistency (table-driven)."""

from __future__ import annotations

import re

import pytest

from builder.specs.compat import load_compat, parse_version, release_line
from builder.specs.cuda import CudaVersion
from builder.specs.model import Route

pytestmark = pytest.mark.unit

DATA = load_compat()
ROWS = DATA.releases()


@pytest.mark.parametrize("release", ROWS, ids=lambda r: r.line)
def test_release_row(release) -> None:
    assert release_line(release.latest) == release.line
    minor = int(release.line.split(".")[1])
    assert release.torchvision == f"0.{minor + 15}", "torchvision pairs as 0.(minor+15)"
    if release.torchvision_latest:
        assert release_line(release.torchvision_latest) == release.torchvision
    assert parse_version(release.python.min) <= parse_version(release.python.max)
    for route in Route:
        for cuda in release.cuda_variants(route):
            assert cuda in DATA.cuda, f"CUDA {cuda} has no toolkit row"
            assert DATA.min_driver(cuda), f"no minor-version driver for CUDA {cuda}"
    for cuda, archs in release.archs.items():
        assert archs == sorted(archs, key=lambda a: int(re.sub(r"\D", "", a))), "arch lists ascend"
        assert all(re.fullmatch(r"(sm|compute)_\d{2,3}", a) for a in archs)
        if cuda.major == 13:
            assert not {"sm_50", "sm_60", "sm_70"} & set(archs), "CUDA 13 dropped Maxwell, Pascal, Volta"
    assert release.confidence in ("verified", "partly", "projected")
    assert release.source


def test_legacy_channel_ends_at_25() -> None:
    legacy = [r.line for r in ROWS if r.cuda_variants(Route.PYTORCH_CHANNEL)]
    assert legacy[-1] == "2.5"


def test_last_pip_release_with_118_is_27() -> None:
    with_118 = [r.line for r in ROWS if CudaVersion(11, 8) in r.cuda_variants(Route.PIP)]
    assert with_118[-1] == "2.7"


@pytest.mark.parametrize("cuda", sorted(DATA.cuda), ids=str)
def test_toolkit_row(cuda: CudaVersion) -> None:
    toolkit = DATA.cuda[cuda]
    assert toolkit.pip_tag == "cu" + cuda.digits
    assert toolkit.nvidia_cuda_image.startswith(f"nvidia/cuda:{cuda}.")
    minimum = DATA.min_driver(cuda)
    assert parse_version(minimum) <= parse_version(toolkit.full_compat_driver)


@pytest.mark.parametrize(("major", "driver"), [("11", "450.80.02"), ("12", "525.60.13"), ("13", "580")])
def test_minor_version_compat_drivers(major: str, driver: str) -> None:
    assert DATA.minor_version_compat[major].min_driver.startswith(driver)


@pytest.mark.parametrize(("image", "glibc"), [
    ("ubuntu:22.04", "2.35"), ("ubuntu:24.04", "2.39"), ("local/debian:bookworm", "2.36"),
    ("nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04", "2.39"), ("acme/unknown:1", None),
])
def test_glibc_of_images(image: str, glibc: str | None) -> None:
    assert DATA.glibc_of(image) == glibc


@pytest.mark.parametrize("release", ROWS, ids=lambda r: r.line)
def test_every_build_has_an_arch_list_with_a_source(release) -> None:
    for route, cuda, archs in release.builds():
        assert archs, f"torch {release.line} {route.value} CUDA {cuda}: no arch list"
        assert archs == sorted(archs, key=lambda a: (int(re.sub(r"\D", "", a)), a.startswith("compute")))
        assert any(a.startswith("sm_") for a in archs)
        if route is Route.CONDA_FORGE:
            entry = DATA.conda_forge_archs[cuda]
            assert entry.source and re.fullmatch(r"20\d\d-\d\d-\d\d", entry.checked)
        else:
            assert re.fullmatch(r"20\d\d-\d\d-\d\d", release.archs_checked)


@pytest.mark.parametrize(("line", "route", "cuda", "present", "absent"), [
    # conda-forge builds its own list: its 12.9 keeps Maxwell..Volta that the 12.8+ wheels dropped
    ("2.11", Route.CONDA_FORGE, "12.9", {"sm_50", "sm_70", "sm_120"}, {"sm_61"}),
    ("2.11", Route.PIP, "12.9", {"sm_75", "sm_120"}, {"sm_70"}),
    # conda-forge's 11.8 has sm_89 but no Hopper kernels; the 11.8 wheels have sm_90
    ("2.5", Route.CONDA_FORGE, "11.8", {"sm_35", "sm_89"}, {"sm_90"}),
    ("2.5", Route.PIP, "11.8", {"sm_37", "sm_90"}, set()),
    ("2.10", Route.CONDA_FORGE, "13.0", {"sm_75", "sm_110", "compute_120"}, {"sm_70"}),
])
def test_route_arch_lists_differ(line, route, cuda, present, absent) -> None:
    archs = set(DATA.torch[line].archs_for(route, CudaVersion.parse(cuda)))
    assert present <= archs and not absent & archs


def test_versions_are_read_as_packaging_reads_them() -> None:
    from packaging.version import InvalidVersion, Version

    assert parse_version("2.7.1+cu118") == Version("2.7.1") < parse_version("2.10.0")
    assert parse_version("12.6") == parse_version("12.6.0")  # a tuple of numbers would put 12.6 below 12.6.0
    assert parse_version("535.104.05").release == (535, 104, 5)
    assert parse_version("20.10.21-ce") == Version("20.10.21")  # not PEP 440: its first dotted numbers
    assert parse_version("cuda12.1").release == (12, 1)
    with pytest.raises(InvalidVersion):
        parse_version("unknown")


def test_ga_drivers_come_before_their_update_drivers_and_rise_with_cuda() -> None:
    """A toolkit's GA driver is the first that reports its CUDA: never after its update release's driver, never
    before an older CUDA's GA driver, and at least the minor-version floor of its major."""
    with_ga = sorted((cuda, kit) for cuda, kit in DATA.cuda.items() if kit.ga_driver)
    assert len(with_ga) >= 8
    for cuda, kit in with_ga:
        assert kit.ga_driver is not None
        assert parse_version(kit.ga_driver) <= parse_version(kit.full_compat_driver), cuda
        floor = DATA.min_driver(cuda)
        assert floor is None or parse_version(kit.ga_driver) >= parse_version(floor), cuda
    drivers = [parse_version(kit.ga_driver or "") for _, kit in with_ga]
    assert drivers == sorted(drivers)

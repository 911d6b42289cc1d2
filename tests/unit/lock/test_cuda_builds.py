"""One CUDA build per target: companions pinned to the target's build, mixed locks recognised."""

from __future__ import annotations

import pytest

from builder.image.render import render_target
from builder.lock.lockfile import CondaLock, LockedPackage
from builder.lock.mixed_cuda import cuda_of, mixed_cuda_builds
from builder.specs.cuda import CudaVersion
from builder.specs.model import parse_spec
from builder.specs.target import resolve_targets

pytestmark = pytest.mark.unit


def rendered(conda: list[str], key: str = "cuda12.9", **changes) -> list:
    spec = parse_spec({"name": "vision", "python": "3.11", "torch": "2.13.0", "torchvision": "0.28.0",
                       "platforms": ["linux-64", "osx-arm64"], "targets": [{"cuda": "12.9"}, {"cuda": "cpu"}],
                       "conda": conda, **changes}, "envs/vision.yaml")
    target = next(t for t in resolve_targets(spec) if t.key == key)
    text = render_target(target).environment_yml
    return [line.strip() for line in text.splitlines() if line.strip().startswith("- ")]


def test_torchvision_is_pinned_to_torchs_cuda_build_per_platform() -> None:
    lines = rendered(["numpy"])
    assert '- "torchvision=0.28.0=cuda129*"  # [linux64]' in lines
    assert '- "torchvision=0.28.0=cpu*"  # [arm64]' in lines
    assert '- "numpy"' in lines


def test_companions_the_spec_lists_get_the_targets_cuda_build() -> None:
    lines = rendered(["numpy", "torchaudio>=2.5", "torchcodec=0.2.1=cuda126*"])
    assert '- "torchaudio>=2.5[build=cuda129*]"  # [linux64]' in lines
    assert '- "torchaudio>=2.5"  # [arm64]' in lines
    # a build the spec names itself is its own choice (the lock check still catches a mix)
    assert '- "torchcodec=0.2.1=cuda126*"  # [linux64]' in lines
    assert lines.count('- "numpy"') == 1
    cpu = rendered(["torchaudio"], key="cpu")
    assert '- "torchaudio"' in cpu and not any("cuda" in line for line in cpu)


@pytest.mark.parametrize(
    ("name", "manager", "version", "filename", "cuda"),
    [
        ("pytorch", "conda", "2.13.0", "pytorch-2.13.0-cuda129_py311_h1a2b3c4_300.conda", "129"),
        ("torchvision", "conda", "0.28.0", "torchvision-0.28.0-cuda126_py311_h9025a42_300.conda", "126"),
        ("torchaudio", "conda", "2.5.1", "torchaudio-2.5.1-cuda_126py310ha9f3ce5_0.conda", "126"),
        ("pytorch", "conda", "2.13.0", "pytorch-2.13.0-cpu_py311_h1a2b3c4_100.conda", None),
        ("pytorch", "conda", "2.5.1", "pytorch-2.5.1-py3.11_cuda12.1_cudnn9.1.0_0.tar.bz2", "121"),
        ("torchvision", "conda", "0.20.1", "torchvision-0.20.1-py311_cu121.tar.bz2", "121"),
        ("pytorch-cuda", "conda", "12.4", "pytorch-cuda-12.4-h1a2b3c4_0.tar.bz2", "124"),
        ("cuda-version", "conda", "12.9", "cuda-version-12.9-h1a2b3c4_3.conda", "129"),
        ("torch", "pip", "2.13.0+cu126", "torch-2.13.0+cu126-cp311-cp311-linux_x86_64.whl", "126"),
        ("torch", "pip", "2.13.0+cpu", "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl", None),
        # not one of the packages built per CUDA: its build string is its own business
        ("jaxlib", "conda", "0.4.30", "jaxlib-0.4.30-cuda120py311h1a2b3c4_200.conda", None),
    ],
)
def test_cuda_of_reads_the_build(name, manager, version, filename, cuda) -> None:
    package = LockedPackage(name=name, version=version, manager=manager, platform="linux-64",
                            url=f"http://channel.example/linux-64/{filename}")
    assert cuda_of(package) == cuda


def _lock(*packages: tuple[str, str, str]) -> CondaLock:
    return CondaLock(version=1, metadata={"platforms": ["linux-64", "osx-arm64"]}, package=[
        LockedPackage(name=name, version=version, manager="conda", platform=platform,
                      url=f"http://channel.example/{platform}/{name}-{version}-{build}.conda")
        for name, version, build, platform in packages])


def test_a_lock_with_two_cuda_builds_is_named() -> None:
    lock = _lock(("pytorch", "2.13.0", "cuda129_py311_h1_300", "linux-64"),
                 ("torchvision", "0.28.0", "cuda126_py311_h2_300", "linux-64"),
                 ("cuda-version", "12.9", "h3_3", "linux-64"),
                 ("pytorch", "2.13.0", "cpu_py311_h4_100", "osx-arm64"))
    problems = mixed_cuda_builds(lock, {"linux-64": CudaVersion(12, 9), "osx-arm64": None})
    assert problems == ["linux-64: the target needs CUDA 12.9, but locked "
                        "torchvision 0.28.0 cuda126_py311_h2_300 (CUDA 12.6)"]


def test_one_cuda_build_passes_and_a_cuda_build_on_a_cpu_platform_does_not() -> None:
    lock = _lock(("pytorch", "2.13.0", "cuda129_py311_h1_300", "linux-64"),
                 ("torchvision", "0.28.0", "cuda129_py311_h2_300", "linux-64"),
                 ("pytorch", "2.13.0", "cuda129_py311_h1_300", "osx-arm64"))
    problems = mixed_cuda_builds(lock, {"linux-64": CudaVersion(12, 9), "osx-arm64": None})
    assert problems == ["osx-arm64: the target needs no CUDA build, but locked pytorch 2.13.0 "
                        "cuda129_py311_h1_300 (CUDA 12.9)"]


def test_the_data_names_every_companion_the_checks_know() -> None:
    from builder.lock.cuda_builds import load_cuda_builds

    data = load_cuda_builds()
    for route, pins in data.routes.items():
        assert set(pins.companions) <= set(data.checked.packages), route


def test_a_two_digit_cuda_minor_is_named_as_its_version() -> None:
    # 12.10's build string writes `cuda1210`: named CUDA 12.10, not 121.0
    lock = _lock(("pytorch", "2.13.0", "cuda129_py311_h1_300", "linux-64"),
                 ("torchvision", "0.28.0", "cuda1210_py311_h2_300", "linux-64"),
                 ("torchaudio", "2.13.0", "cuda92_py311_h3_300", "linux-64"))
    problems = mixed_cuda_builds(lock, {"linux-64": CudaVersion(12, 9)})
    assert problems == ["linux-64: the target needs CUDA 12.9, but locked "
                        "torchvision 0.28.0 cuda1210_py311_h2_300 (CUDA 12.10), "
                        "torchaudio 2.13.0 cuda92_py311_h3_300 (CUDA 9.2)"]

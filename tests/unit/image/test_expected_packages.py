"""What the spec pins with torch becomes ENVBUILD_EXPECT_PACKAGES in the image: its torchvision, the
conda or pip lines of packages built with torch (torchaudio, ...), and its `expect:` list (issue 34 item 2)."""

from __future__ import annotations

import pytest

from builder.errors import UsageError
from builder.image.render import expected_packages_env, render_target
from builder.specs.model import parse_spec
from builder.specs.target import resolve_targets

pytestmark = pytest.mark.unit

BASE = {"name": "audio", "python": "3.11", "torch": "2.9.0", "torchvision": "0.24.0", "targets": [{"cuda": "cpu"}]}


def expectations(**extra) -> str:
    target = resolve_targets(parse_spec({**BASE, **extra}))[0]
    return expected_packages_env(target).get("ENVBUILD_EXPECT_PACKAGES", "")


def test_torchvision_alone() -> None:
    assert expectations() == "torchvision=0.24.0"
    assert expectations(torchvision=None) == ""


@pytest.mark.parametrize(("route", "key", "line", "expected"), [
    ("conda-forge", "conda", "torchaudio=2.9", "torchaudio=2.9"),
    ("conda-forge", "conda", "torchaudio==2.9.0", "torchaudio=2.9.0"),
    ("conda-forge", "conda", "torchaudio=2.9.0=cuda129*", "torchaudio=2.9.0"),
    ("conda-forge", "conda", "torchaudio", "torchaudio"),
    ("conda-forge", "conda", "torchaudio>=2.8", "torchaudio"),
    ("pip", "pip", "torchaudio==2.9.0", "torchaudio=2.9.0"),
    ("pip", "pip", "torchaudio>=2.8,<3", "torchaudio"),
    ("pip", "pip", "torchcodec", "torchcodec"),
])
def test_a_package_built_with_torch_in_the_spec_is_expected(route: str, key: str, line: str, expected: str) -> None:
    assert expectations(route=route, **{key: [line, "numpy"]}) == f"torchvision=0.24.0 {expected}"


def test_other_packages_are_expected_only_when_the_spec_says_so() -> None:
    assert expectations(conda=["numpy=2.1", "pillow"]) == "torchvision=0.24.0"
    assert expectations(expect=["pillow==11.0", "scikit_learn"]) == "torchvision=0.24.0 pillow=11.0 scikit-learn"


def test_the_expectations_come_after_the_environment_layers() -> None:
    """A new `expect:` entry must not be in the cache key of the CUDA and torch layers."""
    dockerfile = render_target(resolve_targets(parse_spec({**BASE, "expect": ["pillow"]}))[0]).dockerfile
    last_group = dockerfile.rindex("python -m builder.lock.install --add")
    for name in ("ENVBUILD_EXPECT_PACKAGES=", "ENVBUILD_EXPECT_TORCH=", "ENVBUILD_EXPECT_CUDA="):
        assert dockerfile.index(name) > last_group, name


@pytest.mark.parametrize(("expect", "message"), [
    (["pillow>=10"], "expect.0: 'pillow>=10' Value error, write NAME or NAME==VERSION"),
    (["pillow=10"], "expect.0: 'pillow=10' Value error, write NAME or NAME==VERSION"),
    (["x==1 && id"], "write NAME or NAME==VERSION"),
    (["torch==2.9.0"], "torch is expected already (the spec's `torch:`)"),
    (["pillow", "Pillow==11"], "each package may be listed once; repeated: pillow"),
    ("pillow", "expect: 'pillow' Input should be a valid tuple"),
])
def test_a_bad_expect_entry_is_one_clear_line(expect, message: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_spec({**BASE, "expect": expect})
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)

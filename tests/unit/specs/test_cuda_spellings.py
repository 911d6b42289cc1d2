"""CUDA's foreign spellings are constructors of the one CudaVersion: each reads back what the type writes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builder.errors import UsageError
from builder.specs.cuda import CudaVersion

pytestmark = pytest.mark.unit

# CUDA majors from 10 on take minors up to 99 in this spelling; before 10 no minor had two digits.
versions = st.one_of(
    st.builds(CudaVersion, st.integers(1, 9), st.integers(0, 9)),
    st.builds(CudaVersion, st.integers(10, 99), st.integers(0, 99)),
)


@given(versions)
def test_digits_round_trip(version: CudaVersion) -> None:
    assert CudaVersion.from_digits(version.digits) == version


@given(versions)
def test_tag_round_trip(version: CudaVersion) -> None:
    assert CudaVersion.from_tag(version.tag) == version


@given(versions, st.sampled_from(["2.13.0", "1.8.1", "2.1.0.post1"]))
def test_wheel_local_round_trip(version: CudaVersion, torch: str) -> None:
    assert CudaVersion.from_wheel_local(f"{torch}+{version.tag}") == version


@given(versions)
def test_text_round_trip(version: CudaVersion) -> None:
    assert CudaVersion.parse(str(version)) == version
    assert CudaVersion.from_release(f"{version}.105") == version


@given(versions, st.sampled_from(["_py311_h1a2b3c4_300", "py311h1a2b3c4_0", "_h1a2b3c4_1"]))
def test_build_round_trip(version: CudaVersion, tail: str) -> None:
    assert CudaVersion.from_build(f"{version.build_prefix}{tail}") == version
    assert CudaVersion.from_build(f"py3.11_cuda{version}_cudnn9.1.0_0") == version


@pytest.mark.parametrize(("spelling", "read", "expected"), [
    ("cu121", CudaVersion.from_tag, "12.1"),
    ("cu1210", CudaVersion.from_tag, "12.10"),
    ("cu92", CudaVersion.from_tag, "9.2"),
    ("2.7.1+cu118", CudaVersion.from_wheel_local, "11.8"),
    ("cuda126_py312h0000000_300", CudaVersion.from_build, "12.6"),
    ("cuda118py311h0000000_0", CudaVersion.from_build, "11.8"),
    ("py3.10_cuda11.8_cudnn8.7.0_0", CudaVersion.from_build, "11.8"),
    ("py311cuda118h0000000_0", CudaVersion.from_build, "11.8"),
    ("12.1.105", CudaVersion.from_release, "12.1"),
    ("12.10.0", CudaVersion.from_release, "12.10"),
])
def test_the_spellings_users_paste(spelling, read, expected) -> None:
    assert read(spelling) == CudaVersion.parse(expected)


@pytest.mark.parametrize("build", ["cpu_py311_h0000000_100", "cuda_py311h0", "py311_0", "h0000000_cuda"])
def test_a_build_without_a_cuda_reads_as_none(build: str) -> None:
    assert CudaVersion.from_build(build) is None


@pytest.mark.parametrize("local", ["2.13.0+cpu", "2.13.0", "2.13.0+rocm6.2"])
def test_a_local_version_without_a_cuda_reads_as_none(local: str) -> None:
    assert CudaVersion.from_wheel_local(local) is None


@pytest.mark.parametrize(("read", "text"), [
    (CudaVersion.from_tag, "cuda121"), (CudaVersion.from_tag, "cu1"), (CudaVersion.from_tag, "cu12100"),
    (CudaVersion.from_digits, "1206"), (CudaVersion.from_digits, "012"), (CudaVersion.from_release, "v12.1"),
])
def test_what_is_no_cuda_spelling_is_one_usage_error(read, text: str) -> None:
    with pytest.raises(UsageError):
        read(text)

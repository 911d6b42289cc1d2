"""A target's CUDA version, parsed once where it enters (a spec's `targets:`, `--cuda`, the compatibility
data) and carried as one value: each stage asks it for the form it writes (`12.9`, `129`, `cuda12.9`).

`12.10` is CUDA 12.10, not 12.1: the minor is a number of its own, never a decimal fraction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from builder.errors import UsageError

CPU = "cpu"  # how the spec, `--cuda` and image labels name the target without CUDA
# Major and minor as CUDA numbers them, without leading zeros (`12.06` names no CUDA release).
_VERSION = re.compile(r"([1-9][0-9]?)\.(0|[1-9][0-9]?)")
# The foreign spellings, each read in one place below: a wheel index or tag (`cu121`), a wheel's local
# version (`+cu118`), a conda build string (`cuda126_...`, `cuda118py311...`, cupy's `py311cuda118...`,
# legacy `py3.10_cuda11.8_...`), a CUDA component's release (`12.1.105`).
_DIGITS = re.compile(r"[1-9][0-9]{1,3}")
_TAG = re.compile(r"cu([1-9][0-9]{1,3})")
_WHEEL_LOCAL = re.compile(r"(?:.*\+)?cu([1-9][0-9]{1,3})(?:\.[A-Za-z0-9.]*)?")
_BUILD = re.compile(r"(?<![A-Za-z])cuda(?:([1-9][0-9]?\.(?:0|[1-9][0-9]?))|([1-9][0-9]{1,3}))(?![0-9])")
_RELEASE = re.compile(r"([1-9][0-9]?)\.(0|[1-9][0-9]?)(?:\.[0-9]+)*")


@dataclass(frozen=True, order=True)
class CudaVersion:
    """CUDA X.Y; ordered as versions (12.10 after 12.9)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> CudaVersion:
        found = _VERSION.fullmatch(text)
        if found is None:
            raise UsageError(f"{text!r} is not a CUDA version like 12.6")
        return cls(int(found[1]), int(found[2]))

    @classmethod
    def from_digits(cls, digits: str) -> CudaVersion:
        """`121` -> 12.1, `92` -> 9.2, `1210` -> 12.10: CUDA majors from 10 on have two digits, and no CUDA
        before 10 had a two-digit minor, so the number of digits decides where the major ends."""
        if _DIGITS.fullmatch(digits) is None:
            raise UsageError(f"{digits!r} is not a CUDA version written without its dot, like 121")
        split = 1 if len(digits) == 2 else 2
        minor = digits[split:]
        if len(minor) > 1 and minor.startswith("0"):
            raise UsageError(f"{digits!r} is not a CUDA version written without its dot, like 121")
        return cls(int(digits[:split]), int(minor))

    @classmethod
    def from_tag(cls, tag: str) -> CudaVersion:
        """`cu121` (a PyTorch wheel index's last path part, a wheel tag) -> 12.1."""
        found = _TAG.fullmatch(tag)
        if found is None:
            raise UsageError(f"{tag!r} is not a CUDA tag like cu121")
        return cls.from_digits(found[1])

    @classmethod
    def from_wheel_local(cls, version: str) -> CudaVersion | None:
        """`2.1.0+cu118` or `+cu118` -> 11.8; None when the local version names no CUDA (`+cpu`, none)."""
        found = _WHEEL_LOCAL.fullmatch(version if "+" in version else "+" + version.lstrip("+"))
        if found is None or "+" not in found[0]:
            return None
        return cls.from_digits(found[1])

    @classmethod
    def from_build(cls, build: str) -> CudaVersion | None:
        """A conda build string's CUDA: `cuda126_py312h...` -> 12.6, `cuda118py311h...` -> 11.8,
        `py3.10_cuda11.8_cudnn8.7.0_0` -> 11.8; None for a build that names no CUDA (`cpu_...`, `cuda_...`)."""
        found = _BUILD.search(build)
        if found is None:
            return None
        return cls.parse(found[1]) if found[1] else cls.from_digits(found[2])

    @classmethod
    def from_release(cls, release: str) -> CudaVersion:
        """`12.1.105` (a CUDA component's version, nvcc's `release 12.1, V12.1.105`) -> 12.1."""
        found = _RELEASE.fullmatch(release)
        if found is None:
            raise UsageError(f"{release!r} is not a CUDA release like 12.1.105")
        return cls(int(found[1]), int(found[2]))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def tag(self) -> str:
        """`cu129`: how PyTorch's wheel indexes and local versions write it."""
        return f"cu{self.digits}"

    @property
    def build_prefix(self) -> str:
        """`cuda129`: how conda-forge's CUDA build strings start (`cuda129_py312h..._300`); `from_build` reads it."""
        return f"cuda{self.digits}"

    @property
    def digits(self) -> str:
        """`129`: how conda build strings and wheel tags write it."""
        return f"{self.major}{self.minor}"

    @property
    def key(self) -> str:
        """`cuda12.9`: the target's name in paths, tags and lock folders."""
        return f"cuda{self}"

    @property
    def major_floor(self) -> CudaVersion:
        """`12.0` for 12.9: minor-version compatibility runs an X.Y build on any driver of CUDA X.0 or newer."""
        return CudaVersion(self.major, 0)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        # Data files write a CUDA version as text (compat.yaml's keys and lists); models hold it typed
        # and write it back as the same text.
        return core_schema.no_info_plain_validator_function(cls._validate,
                                                            serialization=core_schema.to_string_ser_schema())

    @classmethod
    def _validate(cls, value: Any) -> CudaVersion:
        if isinstance(value, CudaVersion):
            return value
        if not isinstance(value, str):
            raise ValueError(f"{value!r} is not a CUDA version like 12.6")
        try:
            return cls.parse(value)
        except UsageError as exc:
            raise ValueError(exc.message) from None


def cuda_or_cpu(cuda: CudaVersion | None) -> str:
    """`12.9`, or `cpu` for the CPU target: how `--cuda`, image labels and the smoke suite name a target."""
    return str(cuda) if cuda else CPU


def cuda_json(cuda: CudaVersion | None) -> str | None:
    """`12.9`, or None (JSON null) for the CPU target: how envbuild's JSON records write a target's CUDA."""
    return str(cuda) if cuda else None


def target_key(cuda: CudaVersion | None) -> str:
    """`cuda12.9`, or `cpu`: a target's name in paths, tags and lock folders."""
    return cuda.key if cuda else CPU


@dataclass(frozen=True)
class TargetId:
    """A target as the command line names it (`--cuda 12.9`, `--cuda cpu`): a CUDA version, or None for CPU."""

    cuda: CudaVersion | None

    @classmethod
    def parse(cls, text: str) -> TargetId:
        if text == CPU:
            return cls(None)
        if _VERSION.fullmatch(text) is None:
            raise UsageError(f"{text!r} names no target: write a CUDA version like 12.6, or cpu")
        return cls(CudaVersion.parse(text))

    def __str__(self) -> str:
        return cuda_or_cpu(self.cuda)

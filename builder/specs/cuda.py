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

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

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

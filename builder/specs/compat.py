"""The torch / CUDA / driver / GPU-architecture / base-image compatibility data.

The facts live in `builder/data/compat.yaml` (sources in docs/compatibility.md); this module only
types them and answers questions about them.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field

from builder.specs.cuda import CudaVersion
from builder.specs.model import Route
from builder.yamlio import data_text, load_yaml

Confidence = Literal["verified", "partly", "projected"]


class _Data(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class PythonRange(_Data):
    min: str
    max: str

    def contains(self, python: str) -> bool:
        return parse_version(self.min) <= parse_version(python) <= parse_version(self.max)


class CudaToolkit(_Data):
    full_compat_driver: str
    full_compat_driver_windows: str | None = None  # NVIDIA's Windows number, where the data has it
    ga_driver: str | None = None  # the GA release's Linux driver: the oldest whose own libcuda reports this CUDA
    nvidia_cuda_image: str
    pip_tag: str
    source: str = ""


class TorchRelease(_Data):
    line: str = ""  # filled from the mapping key, e.g. "2.7"
    latest: str
    torchvision: str
    torchvision_latest: str = ""
    python: PythonRange
    released: str = ""
    routes: dict[Route, list[CudaVersion]]
    cudnn: dict[CudaVersion, str] = Field(default_factory=dict)
    archs: dict[CudaVersion, list[str]] = Field(default_factory=dict)  # the official wheels (pip, pytorch-channel)
    archs_checked: str = ""  # the day the wheel lists were last checked against their sources
    conda_forge_archs: dict[CudaVersion, list[str]] = Field(default_factory=dict)  # filled from the top-level table
    confidence: Confidence = "projected"
    source: str = ""

    def cuda_variants(self, route: Route) -> list[CudaVersion]:
        return sorted(self.routes.get(route, []))

    def archs_for(self, route: Route, cuda: CudaVersion) -> list[str]:
        """The GPU architectures the build of this route and CUDA has kernels for (empty when unknown).

        conda-forge compiles its own list (the feedstock's TORCH_CUDA_ARCH_LIST), so its builds can run
        where the wheels of the same CUDA cannot (conda-forge 12.9 keeps sm_50..sm_70) and vice versa.
        """
        if route is Route.CONDA_FORGE:
            return self.conda_forge_archs.get(cuda, [])
        return self.archs.get(cuda, [])

    def builds(self) -> list[tuple[Route, CudaVersion, list[str]]]:
        """Every (route, CUDA, arch list) this release was built for, oldest CUDA first."""
        return [(route, cuda, self.archs_for(route, cuda)) for route in Route for cuda in self.cuda_variants(route)]


class BaseImage(_Data):
    glibc: str
    os: str = ""


class MinorCompat(_Data):
    min_driver: str
    min_driver_windows: str | None = None


class ArchList(_Data):
    archs: list[str]
    source: str
    checked: str  # ISO date the list was read from `source`


class CompatData(_Data):
    schema_: int = Field(alias="schema")
    minor_version_compat: dict[str, MinorCompat]  # by CUDA major
    cuda: dict[CudaVersion, CudaToolkit]
    torch: dict[str, TorchRelease]
    conda_forge_archs: dict[CudaVersion, ArchList] = Field(default_factory=dict)
    base_images: dict[str, BaseImage]

    def release(self, torch_version: str) -> TorchRelease | None:
        return self.torch.get(release_line(torch_version))

    def releases(self) -> list[TorchRelease]:
        return sorted(self.torch.values(), key=lambda r: parse_version(r.line))

    def toolkit(self, cuda: CudaVersion) -> CudaToolkit | None:
        return self.cuda.get(cuda)

    def min_driver(self, cuda: CudaVersion) -> str | None:
        """The oldest Linux driver that runs this CUDA runtime under minor-version compatibility."""
        entry = self.minor_version_compat.get(str(cuda.major))
        return entry.min_driver if entry else None

    def min_windows_driver(self, cuda: CudaVersion) -> str | None:
        """The same floor for NVIDIA's Windows driver (Windows, WSL2); None where the data lacks it."""
        entry = self.minor_version_compat.get(str(cuda.major))
        return entry.min_driver_windows if entry else None

    def glibc_of(self, image: str) -> str | None:
        """glibc of a known base image, by exact name or by the distribution suffix of a tag."""
        name = image.split("@")[0]
        if name in self.base_images:
            return self.base_images[name].glibc
        for suffix, entry in self.base_images.items():
            if suffix.startswith("*") and name.endswith(suffix[1:]):
                return entry.glibc
        return None


_DOTTED_NUMBERS = re.compile(r"\d+(?:\.\d+)*")


def parse_version(text: str) -> Version:
    """`text` as packaging reads a version (`12.6`, `535.104.05`), less a local label (`2.7.1+cu118` is 2.7.1:
    the build tag never decides compatibility here). What is not PEP 440 (Docker's `20.10.21-ce`, a log's
    `cuda12.1`) is read by its first run of dotted numbers; InvalidVersion when it has none."""
    try:
        version = Version(text)
    except InvalidVersion:
        numbers = _DOTTED_NUMBERS.search(text)
        if numbers is None:
            raise
        version = Version(numbers.group())
    return Version(version.public) if version.local else version


def release_line(torch_version: str) -> str:
    """`2.7.1` -> `2.7`: the row of the compatibility data a torch version belongs to."""
    parts = torch_version.split("+")[0].split(".")
    return ".".join(parts[:2])


def paired_torchvision(release: TorchRelease, torchvision: str) -> bool:
    return release_line(torchvision) == release.torchvision


@lru_cache(maxsize=1)
def load_compat() -> CompatData:
    text = data_text("compat.yaml")
    raw = load_yaml(text)
    conda_forge = raw.get("conda_forge_archs") or {}
    for line, row in raw.get("torch", {}).items():
        row["line"] = str(line)
        row["conda_forge_archs"] = {cuda: conda_forge[cuda]["archs"]
                                    for cuda in (row.get("routes") or {}).get("conda-forge", []) if cuda in conda_forge}
    return CompatData.model_validate(raw)


@lru_cache(maxsize=1)
def load_platforms() -> dict[str, PlatformInfo]:
    text = data_text("platforms.yaml")
    raw = load_yaml(text)
    return {name: PlatformInfo.model_validate(row) for name, row in raw["platforms"].items()}


class PlatformInfo(_Data):
    selector: str
    cuda: bool
    glibc: bool
    virtual: dict[str, str] = Field(default_factory=dict)
    oci: list[str] = Field(default_factory=list)


def conda_platform(name: str) -> str:
    """A platform as conda names it (`linux-64`), from that name or its OCI one (`linux/amd64`,
    data/platforms.yaml's `oci:`); other names pass unchanged for the lock to judge."""
    platforms = load_platforms()
    if name in platforms:
        return name
    return next((conda for conda, info in platforms.items() if name in info.oci), name)


def oci_platform(name: str) -> str:
    """A platform as Docker names it (`linux/amd64`), from that name or its conda one (`linux-64`)."""
    info = load_platforms().get(name)
    return info.oci[0] if info and info.oci else name

"""One CUDA build per target: the companions pinned to the target's CUDA build (the lock checks it).

What counts as a CUDA-bearing package, how its build names its CUDA and how to pin one to a CUDA
build are data (`builder/data/cuda_builds.yaml`); this module only applies them.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from builder.specs.cuda import CudaVersion
from builder.specs.model import Route
from builder.yamlio import data_text, load_yaml


class _Data(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class RoutePins(_Data):
    companions: tuple[str, ...] = ()
    cuda_build: str = ""  # a build-string glob with {digits}, e.g. "cuda{digits}*"


class CheckedPackages(_Data):
    packages: tuple[str, ...]
    conda_build_patterns: tuple[str, ...]
    pip_version_patterns: tuple[str, ...]
    version_packages: tuple[str, ...]


class CudaBuilds(_Data):
    routes: dict[Route, RoutePins]
    checked: CheckedPackages


@lru_cache(maxsize=1)
def load_cuda_builds() -> CudaBuilds:
    text = data_text("cuda_builds.yaml")
    return CudaBuilds.model_validate(load_yaml(text))


def companion_names(route: Route) -> tuple[str, ...]:
    pins = load_cuda_builds().routes.get(route)
    return pins.companions if pins and pins.cuda_build else ()


def pin_to_cuda_build(spec_line: str, route: Route, cuda: CudaVersion) -> str:
    """A conda spec line of a companion, its build pinned to this CUDA's (`torchaudio` ->
    `torchaudio[build=cuda129*]`); a line that already names a build is the spec's own choice."""
    from rattler import MatchSpec

    pins = load_cuda_builds().routes[route]
    if MatchSpec(spec_line, strict=False).build is not None:
        return spec_line
    return f"{spec_line}[build={pins.cuda_build.format(digits=cuda.digits)}]"


# `[channel::]name...`: only the name is read here, for every conda line the spec has; rattler's
# full MatchSpec parser (a tenth of a second to import) is kept for the companion lines it pins.
_SPEC_NAME = re.compile(r"^\s*(?:[^\s:]+::)?([A-Za-z0-9_][A-Za-z0-9_.\-]*)")


def package_name(spec_line: str) -> str | None:
    found = _SPEC_NAME.match(spec_line)
    return found.group(1).lower() if found else None

"""A spec's fleet as compute capabilities: the GPUs its `fleet:` names and those its host files recorded.

The fleet's lowest capability is an input of every CUDA lock (`__cuda_arch`), so it is read here, at the
spec; builder.host.fleet reads the rest of a host file (driver, engine) to judge targets on those machines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from builder.errors import UsageError
from builder.safe_io.reading import read_bounded
from builder.specs.gpus import capability_of, capability_of_model, parse_capability
from builder.specs.model import EnvSpec

HOST_FILE_VERSION = 1
MAX_HOST_FILE_BYTES = 4 * 1024 * 1024  # doctor --save writes a few kB, even for a host with many GPUs


def fleet_folder(spec: EnvSpec) -> Path:
    """Where the spec's host files are: paths in `fleet:` are relative to the spec's folder."""
    return spec.source.parent if spec.source else Path.cwd()


def read_host_file(path: Path) -> dict[str, Any]:
    """What `envbuild doctor --save` wrote on a machine, or one UsageError line saying why it is not that."""
    try:
        data = json.loads(read_bounded(path, MAX_HOST_FILE_BYTES, "host file"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise UsageError(f"{path}: not a host file (not JSON); write one with "
                         f"`envbuild doctor --save {path}`") from None
    if not isinstance(data, dict) or data.get("envbuild_host") != HOST_FILE_VERSION:
        raise UsageError(f"{path}: not an envbuild host file (version {HOST_FILE_VERSION}); "
                         f"write one with `envbuild doctor --save {path.name}` on that machine")
    return data


def damaged_host_file(path: Path, exc: Exception) -> UsageError:
    return UsageError(f"{path}: the host file is damaged ({type(exc).__name__}: {exc})")


def recorded_gpu(gpu: dict[str, Any]) -> tuple[int, str, tuple[int, int] | None]:
    """Index, name and compute capability of a GPU in a host file; KeyError, TypeError or ValueError when the
    record is damaged."""
    capability = gpu.get("capability")
    name = str(gpu.get("name") or "")
    # nvidia-smi's table shows no capability; the model name often tells it
    return int(gpu["index"]), name, parse_capability(capability) if capability else capability_of_model(name)


def _host_file_capabilities(path: Path) -> list[tuple[int, int]]:
    data = read_host_file(path)
    try:
        gpus = [recorded_gpu(gpu) for gpu in data.get("gpus") or ()]
    except (KeyError, TypeError, ValueError) as exc:
        raise damaged_host_file(path, exc) from None
    return [capability for _, _, capability in gpus if capability is not None]


def lowest_capability(spec: EnvSpec) -> tuple[int, int] | None:
    """The oldest GPU architecture among the spec's fleet (None when no entry has a known one)."""
    capabilities: list[tuple[int, int]] = []
    for entry in spec.fleet:
        if entry.host is not None:
            capabilities += _host_file_capabilities(fleet_folder(spec) / entry.host)
            continue
        capability = capability_of(entry.gpu or "")
        assert capability is not None  # the spec model refused unknown GPUs
        capabilities.append(capability)
    return min(capabilities) if capabilities else None

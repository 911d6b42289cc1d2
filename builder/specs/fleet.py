"""A spec's fleet as compute capabilities: the GPUs its `fleet:` names and those its host files recorded.

The fleet's lowest capability is an input of every CUDA lock (`__cuda_arch`), so it is read here, at the
spec; builder.host.fleet reads the rest of a host file (driver, engine) to judge targets on those machines.
"""

from __future__ import annotations

from pathlib import Path

from builder.formats.host_file import RecordedGpu, damaged_host_file, read_host_file
from builder.specs.gpus import capability_of, capability_of_model, parse_capability
from builder.specs.model import EnvSpec


def fleet_folder(spec: EnvSpec) -> Path:
    """Where the spec's host files are: paths in `fleet:` are relative to the spec's folder."""
    return spec.source.parent if spec.source else Path.cwd()


def recorded_gpu(gpu: RecordedGpu) -> tuple[int, str, tuple[int, int] | None]:
    """Index, name and compute capability of a GPU in a host file; ValueError when its capability is damaged."""
    # nvidia-smi's table shows no capability; the model name often tells it
    capability = parse_capability(gpu.capability) if gpu.capability else capability_of_model(gpu.name)
    return gpu.index, gpu.name, capability


def _host_file_capabilities(path: Path) -> list[tuple[int, int]]:
    record = read_host_file(path)
    try:
        gpus = [recorded_gpu(gpu) for gpu in record.gpus]
    except ValueError as exc:
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

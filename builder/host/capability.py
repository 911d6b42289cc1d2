"""A GPU's compute capability when the driver did not state it: from the model name (builder/data/gpus.yaml:
NVIDIA's list, a cut name's prefix, a generation's naming), else from its architecture (`nvidia-smi -q`'s
Product Architecture, NVML's architecture number), else unknown.
An architecture with several capabilities (Ampere: 8.0, 8.6, 8.7) gives them all, never one picked."""

from __future__ import annotations

from typing import NamedTuple

from builder.specs.gpus import capabilities_of_architecture, model_capability

# What tells an unknown capability, in the words of the command that asks for it (driver 510 and newer).
WHAT_WOULD_TELL = "`nvidia-smi --query-gpu=compute_cap --format=csv` (driver 510 and newer)"


class CapabilityReading(NamedTuple):
    capability: tuple[int, int] | None
    candidates: tuple[tuple[int, int], ...]  # every capability it may be, when only the architecture is known
    source: str | None  # "driver", "model name", "name prefix", "generation G", "architecture NAME"; None: unknown


def read_capability(stated: tuple[int, int] | None, name: str, architecture: str | int | None) -> CapabilityReading:
    if stated is not None:
        return CapabilityReading(stated, (stated,), "driver")
    by_name = model_capability(name) if name else None
    if by_name is not None and by_name.capability is not None:
        return CapabilityReading(by_name.capability, by_name.candidates, by_name.how)
    candidates = capabilities_of_architecture(architecture) if architecture is not None else ()
    if not candidates and by_name is not None and by_name.candidates:
        # A cut or ambiguous name still rules out every board it cannot be.
        return CapabilityReading(None, by_name.candidates, "model name (several boards fit)")
    if len(candidates) == 1:
        return CapabilityReading(candidates[0], candidates, f"architecture {architecture}")
    if candidates:
        return CapabilityReading(None, candidates, f"architecture {architecture}")
    return CapabilityReading(None, (), None)

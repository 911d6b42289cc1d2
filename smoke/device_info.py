"""Who each visible CUDA device is: name, UUID, memory. Also run as a child process:
`python -m smoke.device_info` prints the devices the child sees as JSON, which is how
CUDA_VISIBLE_DEVICES remapping is checked (the variable is read once, when CUDA initialises).
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

# How a MIG instance shows inside a process: torch names it "<board> MIG 1g.5gb", and a runtime that hands out
# instances sets CUDA_VISIBLE_DEVICES to their MIG-<uuid> (or MIG-GPU-<uuid>/<gi>/<ci>) names.
_MIG_NAME = re.compile(r"\bMIG \d+g\.\d+gb\b")


def device_identity(index: int) -> dict[str, Any]:
    import torch

    props = torch.cuda.get_device_properties(index)
    free, total = torch.cuda.mem_get_info(index)
    uuid = getattr(props, "uuid", None)  # torch >= 2.0; identical GPUs share a name, never a UUID
    return {
        "index": index,
        "name": props.name,
        "uuid": None if uuid is None else str(uuid),
        "pci_bus_id": _pci_bus_id(props),
        "capability": f"{props.major}.{props.minor}",
        "total_memory_bytes": int(total),
        "free_memory_bytes": int(free),
    }


def identity_key(device: dict[str, Any]) -> str:
    """What tells two devices apart: the UUID, else the PCI bus id, else name and size (weak)."""
    if device.get("uuid"):
        return str(device["uuid"])
    if device.get("pci_bus_id"):
        return str(device["pci_bus_id"])
    return f"{device['name']}/{device['total_memory_bytes']}"


def visible_devices() -> list[dict[str, Any]]:
    import torch

    if not torch.cuda.is_available():
        return []
    return [device_identity(i) for i in range(torch.cuda.device_count())]


def mig_in_view(devices: list[dict[str, Any]], cuda_visible_devices: str | None) -> str | None:
    """What shows that this process runs on a MIG instance (None: nothing does). CUDA enumerates one MIG
    instance per process, so a MIG host never shows a process more than one device."""
    named = next((d["name"] for d in devices if _MIG_NAME.search(str(d.get("name", "")))), None)
    if named:
        return f"device name {named!r}"
    tokens = [t.strip() for t in (cuda_visible_devices or "").split(",") if t.strip()]
    mig = [t for t in tokens if t.startswith("MIG-")]
    if mig:
        return f"CUDA_VISIBLE_DEVICES lists {len(mig)} MIG instance(s)"
    return None


def _pci_bus_id(props: Any) -> str | None:
    parts = [getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if any(part is None for part in parts):
        return None
    domain, bus, device = parts
    return f"{domain:08x}:{bus:02x}:{device:02x}"


def main() -> None:
    json.dump({"devices": visible_devices()}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

"""Parse the default `nvidia-smi` table: driver version, the driver's CUDA version, and the GPUs.

Two header styles exist: the classic `Driver Version: 535.54.03    CUDA Version: 12.2` and, from
driver 610 on, `KMD Version: 610.43.02     CUDA UMD Version: 13.3`. Very old drivers print no CUDA
version at all. `nvidia-smi -q` uses the same labels with padded colons, which these patterns accept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Both labels in one pattern each: old headers say "CUDA Version", new ones "CUDA UMD Version".
_CUDA_VERSION = re.compile(r"CUDA(?: UMD)? Version\s*:\s*(\d+)\.(\d+)")
_DRIVER_VERSION = re.compile(r"(?:KMD|Driver) Version\s*:\s*(\d+(?:\.\d+)*)")
# A GPU's first table row: "|   0  NVIDIA H200   On  |   00000000:19:00.0 Off |  0 |"
_GPU_ROW = re.compile(
    r"^\|\s*(?P<index>\d+)\s+(?P<name>.+?)\s+(?P<persistence>On|Off|N/A)\s*\|"
    r"\s*(?P<bus>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f])\b"
)
_MEMORY = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")
# GPU-Util opens the third column of the same row; old drivers print N/A there.
_UTILIZATION = re.compile(r"MiB\s*\|\s*(\d+)%")


@dataclass(frozen=True)
class SmiGpu:
    index: int
    name: str
    bus_id: str
    memory_used_mib: int | None
    memory_total_mib: int | None
    utilization_percent: int | None = None


@dataclass(frozen=True)
class SmiReading:
    driver_version: str | None
    cuda_version: tuple[int, int] | None
    gpus: list[SmiGpu] = field(default_factory=list)

    @property
    def cuda_version_text(self) -> str | None:
        return None if self.cuda_version is None else f"{self.cuda_version[0]}.{self.cuda_version[1]}"


def parse_nvidia_smi(text: str) -> SmiReading:
    """Read what the table says; fields it lacks come back as None (never guessed)."""
    cuda = _CUDA_VERSION.search(text)
    driver = _DRIVER_VERSION.search(text)
    return SmiReading(
        driver_version=driver.group(1) if driver else None,
        cuda_version=(int(cuda.group(1)), int(cuda.group(2))) if cuda else None,
        gpus=_parse_gpu_rows(text.splitlines()),
    )


def _parse_gpu_rows(lines: list[str]) -> list[SmiGpu]:
    gpus: list[SmiGpu] = []
    for number, line in enumerate(lines):
        row = _GPU_ROW.match(line.strip())
        if row is None:
            continue
        # Memory sits on the GPU's second row, in the middle column.
        following = lines[number + 1] if number + 1 < len(lines) else ""
        memory = _MEMORY.search(following)
        utilization = _UTILIZATION.search(following)
        gpus.append(
            SmiGpu(
                index=int(row.group("index")),
                name=row.group("name").strip(),
                bus_id=row.group("bus"),
                memory_used_mib=int(memory.group(1)) if memory else None,
                memory_total_mib=int(memory.group(2)) if memory else None,
                utilization_percent=int(utilization.group(1)) if utilization else None,
            )
        )
    return gpus

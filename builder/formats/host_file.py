"""The host file (`envbuild doctor --save host.json`) as one typed value, written and read in one place.

doctor writes what it read of a machine (driver, GPUs, engine, the host's kind and markers); the spec's
`fleet:` reads the GPUs' compute capabilities for the lock's `__cuda_arch`, and `doctor --fleet` reads the rest
to judge targets on that machine. Both take a `HostFile` from `read_host_file`. Values stay as doctor wrote
them (a capability "8.0", a CUDA "12.10"): what they mean is for the stages above to parse. Fields doctor adds
later are kept (`extra="allow"`), so an older envbuild reads a newer file's known parts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from builder.errors import UsageError
from builder.formats.problems import first_problem
from builder.generated_files import write_new_file
from builder.safe_io.reading import read_bounded
from builder.safe_io.writing import check_output

HOST_FILE_VERSION = 1
MAX_HOST_FILE_BYTES = 4 * 1024 * 1024  # doctor --save writes a few kB, even for a host with many GPUs


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class RecordedGpu(_Record):
    index: int = Field(strict=True)
    name: str = ""
    uuid: str | None = None
    bus_id: str | None = None
    capability: str | None = None  # "8.0"; None: the model name may tell it
    memory_free: int | None = None
    memory_total: int | None = None
    utilization: int | None = None


class RecordedDriver(_Record):
    source: str | None = None
    version: str | None = None
    cuda: str | None = None
    notes: list[str] = Field(default_factory=list)


class RecordedEngine(_Record):
    address: str = ""
    reachable: bool = False
    version: str | None = None
    api_version: str | None = None
    runtimes: list[str] = Field(default_factory=list)


class RecordedToolkit(_Record):
    executables: dict[str, str] = Field(default_factory=dict)


class RecordedProbe(_Record):
    """What the machine said of itself (builder.host.hostkind.HostProbe); None: not read."""

    system: str | None = None
    machine: str | None = None
    kernel_release: str | None = None
    container: str | None = None
    wsl: str | None = None
    proc_driver_version: str | None = None
    device_nodes: list[str] | None = None
    container_checked: bool = False  # the container markers were looked for (files before it: not recorded)


class HostFile(_Record):
    envbuild_host: Literal[1]
    name: str | None = None
    saved: str | None = None
    os: str = ""
    python: str = ""
    engine: RecordedEngine = RecordedEngine()
    container_toolkit: RecordedToolkit = RecordedToolkit()
    driver: RecordedDriver = RecordedDriver()
    probe: RecordedProbe = RecordedProbe()
    gpus: list[RecordedGpu] = Field(default_factory=list)
    cuda_visible_devices: str | None = None
    cuda_device_order: str | None = None


def read_host_file(path: Path) -> HostFile:
    """What `envbuild doctor --save` wrote on a machine, or one UsageError line saying why it is not that."""
    try:
        data: Any = json.loads(read_bounded(path, MAX_HOST_FILE_BYTES, "host file"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise UsageError(f"{path}: not a host file (not JSON); write one with "
                         f"`envbuild doctor --save {path}`") from None
    except (ValueError, RecursionError):  # an int over Python's 4300 digits, or arrays nested past the stack
        raise UsageError(f"{path}: not an envbuild host file (a number too long or values nested too deeply); "
                         f"write one with `envbuild doctor --save {path.name}` on that machine") from None
    if not isinstance(data, dict) or data.get("envbuild_host") != HOST_FILE_VERSION:
        raise UsageError(f"{path}: not an envbuild host file (version {HOST_FILE_VERSION}); "
                         f"write one with `envbuild doctor --save {path.name}` on that machine")
    try:
        return HostFile.model_validate(data)
    except ValidationError as exc:
        raise damaged_host_file(path, exc) from None


def damaged_host_file(path: Path, exc: Exception) -> UsageError:
    if isinstance(exc, ValidationError):
        return UsageError(f"{path}: the host file is damaged ({first_problem(exc, with_count=False)})")
    return UsageError(f"{path}: the host file is damaged ({type(exc).__name__}: {exc})")


def is_host_file(head: bytes) -> bool:
    """Whether a file's first bytes are a host file's (`doctor --save` writes the version key first)."""
    return head.lstrip().startswith(b"{") and b'"envbuild_host"' in head


def check_host_file_path(path: Path, force: bool = False) -> None:
    """Whether `doctor --save` may write `path`, asked before doctor's work (write_host_file's rules)."""
    check_output(path, force=force, owned=is_host_file, what="the host file")


def write_host_file(path: Path, record: dict[str, Any], force: bool = False) -> None:
    """doctor's record, checked against the model before it is written: a file envbuild cannot read back is
    never written. An old host file is replaced whole (re-recording after a driver update is the normal case);
    any other file only with `force`, and never through a symbolic link."""
    checked = HostFile.model_validate({"envbuild_host": HOST_FILE_VERSION, **record})
    write_new_file(path, json.dumps(checked.model_dump(mode="json"), indent=2) + "\n", force=force,
                   owned=is_host_file, what="the host file")

"""How GPUs reach a container on this Docker engine: CDI device names where the engine reads CDI specs
that list NVIDIA's GPUs, else the `gpu` capability request that `docker run --gpus` sends (the NVIDIA
runtime hook). Decided from what the engine itself reports (`docker info`), with the reason; the facts
and the engine's own refusals are data (builder/data/gpu_access.yaml).

smoke (its device requests), onboard (its `docker run` line) and doctor (its "GPU access" line) share
this, so the three take the same path on the same host.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from builder.engine import engine_address, engine_error, engine_failures
from builder.errors import EnvbuildError
from builder.safe_io.reading import read_bounded
from builder.yamlio import data_text, load_yaml

CDI = "cdi"
GPU_CAPABILITY = "gpu-capability"
SPEC_LIMIT = 8 * 1024 * 1024  # NVIDIA's spec of an 8-GPU host is about 100 kB
SPEC_SUFFIXES = (".yaml", ".yml", ".json")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineVersions(_Frozen):
    device_requests_api: str
    cdi_spec_dirs_api: str
    discovered_devices_api: str
    cdi_first_engine: str
    cdi_default_engine: str


class CdiFacts(_Frozen):
    driver: str
    kind: str
    all: str
    default_spec_dirs: tuple[str, ...]
    generate: str
    list: str


class StartError(_Frozen):
    id: str
    marker: str
    cause: str
    note: str | None = None
    fix: str


class GpuAccessData(_Frozen):
    engine: EngineVersions
    cdi: CdiFacts
    reasons: dict[str, str]
    fixes: dict[str, str]
    start_errors: tuple[StartError, ...]


@lru_cache(maxsize=1)
def load_gpu_access_data() -> GpuAccessData:
    text = data_text("gpu_access.yaml")
    return GpuAccessData.model_validate(load_yaml(text))


def _major_minor(version: str | None) -> tuple[int, int] | None:
    found = re.match(r"\s*v?(\d+)\.(\d+)", version or "")
    return (int(found[1]), int(found[2])) if found else None


@dataclass(frozen=True)
class EngineGpuFacts:
    """What an engine says about GPU access, parsed once from its /version and /info answers."""

    version: str | None
    api_version: str | None
    cdi_spec_dirs: tuple[str, ...] | None  # None: the engine does not report it (before API 1.44)
    discovered: tuple[str, ...] | None  # CDI device names it found; None: not reported (before API 1.50)

    @classmethod
    def from_engine(cls, version: Mapping[str, Any], info: Mapping[str, Any]) -> EngineGpuFacts:
        dirs = info.get("CDISpecDirs")
        devices = info.get("DiscoveredDevices")
        return cls(
            version=str(version.get("Version") or info.get("ServerVersion") or "") or None,
            api_version=str(version.get("ApiVersion") or "") or None,
            cdi_spec_dirs=None if dirs is None else tuple(str(entry) for entry in dirs),
            discovered=None if devices is None else tuple(
                str(device.get("ID")) for device in devices
                if isinstance(device, Mapping) and device.get("Source", CDI) == CDI and device.get("ID")),
        )


@dataclass(frozen=True)
class GpuAccess:
    """The path GPUs take into this engine's containers, and why (one line doctor prints)."""

    path: str  # CDI or GPU_CAPABILITY
    reason: str
    devices: tuple[str, ...] = ()  # the nvidia.com/gpu names the engine resolves (CDI path only)
    spec_dirs: tuple[str, ...] = ()
    level: str = "info"  # doctor's level of the line: ok, info or warning
    fix: str | None = None

    @property
    def uses_cdi(self) -> bool:
        return self.path == CDI

    def as_check(self) -> tuple[str, str, str, str | None]:
        """doctor's HostCheck fields: level, subject, message, fix."""
        return self.level, "GPU access", self.reason, self.fix


def _texts(key: str, **values: str) -> tuple[str, str | None]:
    data = load_gpu_access_data()
    values = {"generate": data.cdi.generate, "list": data.cdi.list, **values}
    fix = data.fixes.get(key)
    return " ".join(data.reasons[key].format(**values).split()), fix and " ".join(fix.format(**values).split())


def decide_gpu_access(facts: EngineGpuFacts, local_devices: tuple[str, ...] | None = None) -> GpuAccess:
    """CDI when the engine reads CDI specs and they list NVIDIA GPUs, the `gpu` capability otherwise.
    `local_devices`: the CDI names read from the engine's spec folders on this machine, for engines
    that do not list them themselves (API 1.44 to 1.49); None when not read."""
    data = load_gpu_access_data()
    version = facts.version or "?"
    if not facts.cdi_spec_dirs:
        key = "no_cdi_engine" if facts.cdi_spec_dirs is None else "cdi_disabled"
        reason, fix = _texts(key, version=version)
        return GpuAccess(GPU_CAPABILITY, reason, fix=fix)
    dirs = facts.cdi_spec_dirs
    known = facts.discovered if facts.discovered is not None else local_devices
    if known is None:
        reason, fix = _texts("specs_not_visible", dirs=", ".join(dirs))
        return GpuAccess(GPU_CAPABILITY, reason, spec_dirs=dirs, fix=fix)
    nvidia = tuple(sorted({name for name in known if name.startswith(data.cdi.kind + "=")}))
    if not nvidia:
        reason, fix = _texts("no_nvidia_spec", dirs=", ".join(dirs))
        return GpuAccess(GPU_CAPABILITY, reason, spec_dirs=dirs, level="warning", fix=fix)
    reason, _ = _texts("cdi", dirs=", ".join(dirs), devices=", ".join(nvidia))
    return GpuAccess(CDI, reason, devices=nvidia, spec_dirs=dirs, level="ok")


def cdi_device_names(count: int | None, device_ids: Sequence[str] = ()) -> list[str]:
    """`--gpus` in CDI names, meaning kept: all -> nvidia.com/gpu=all; N -> the first N by index (what the
    engine's nvidia driver does with a count); device IDs (index, GPU-/MIG- UUID, gpu:mig) -> one name each."""
    cdi = load_gpu_access_data().cdi
    if device_ids:
        return [f"{cdi.kind}={device}" for device in device_ids]
    if count == -1:
        return [f"{cdi.kind}={cdi.all}"]
    return [f"{cdi.kind}={index}" for index in range(count or 0)]


def docker_run_gpu_flag(access: GpuAccess | None) -> str:
    """What a person types for all GPUs on this engine."""
    cdi = load_gpu_access_data().cdi
    return f"--device {cdi.kind}={cdi.all}" if access is not None and access.uses_cdi else "--gpus all"


@dataclass(frozen=True)
class GpuRefusal:
    """An engine's refusal of a GPU request at container start, in envbuild's words."""

    id: str
    cause: str
    fix: str
    said: str  # how a CPU-only run after it names it

    @property
    def note(self) -> str:
        return f"{self.said}: ran the CPU checks only"

    def required(self, gpus: int) -> str:
        return f"{gpus} GPU(s) required but {self.cause} ({self.fix})"


def gpu_refusal(message: str, devices: Sequence[str] = ()) -> GpuRefusal | None:
    """The cause of an engine's refusal of a GPU request, or None when the message is about something else."""
    data = load_gpu_access_data()
    for known in data.start_errors:
        if known.marker in message:
            values = {"devices": ", ".join(devices) or "the devices asked for", "generate": data.cdi.generate,
                      "list": data.cdi.list}
            cause = known.cause.format(**values)
            return GpuRefusal(known.id, cause, known.fix.format(**values), known.note or cause)
    return None


# --- the engine and its spec folders (the only part that touches the host) ----------------------------

def read_cdi_devices(folders: Sequence[str]) -> tuple[str, ...]:
    """The CDI device names (`kind=name`) the spec files in `folders` declare, as an engine on this
    machine would read them; unreadable or malformed files are skipped, as the engine does."""
    names: list[str] = []
    for folder in folders:
        try:
            files = sorted(path for path in Path(folder).iterdir() if path.suffix in SPEC_SUFFIXES)
        except OSError:
            continue
        for path in files:
            try:
                text = read_bounded(path, SPEC_LIMIT, "CDI spec", error=EnvbuildError).decode("utf-8")
                names += _spec_devices(json.loads(text) if path.suffix == ".json" else load_yaml(text))
            except (EnvbuildError, UnicodeDecodeError, ValueError, TypeError, yaml.YAMLError):
                continue
    return tuple(dict.fromkeys(names))


def _spec_devices(document: Any) -> list[str]:
    if not isinstance(document, Mapping) or not isinstance(document.get("kind"), str):
        return []
    devices = document.get("devices") or []
    return [f"{document['kind']}={device['name']}" for device in devices
            if isinstance(device, Mapping) and device.get("name") not in (None, "")]


def engine_gpu_access(version: Mapping[str, Any], info: Mapping[str, Any],
                      local_engine: bool | None = None) -> GpuAccess:
    """The decision for an engine's answers; its spec folders are read here only when the engine does not
    list its CDI devices and runs on this machine (a unix socket, unless `local_engine` says)."""
    facts = EngineGpuFacts.from_engine(version, info)
    local = None
    if local_engine is None:
        local_engine = engine_address().startswith("unix://")
    if facts.cdi_spec_dirs and facts.discovered is None and local_engine:
        local = read_cdi_devices(facts.cdi_spec_dirs)
    return decide_gpu_access(facts, local)


def client_gpu_access(client) -> GpuAccess:
    """The decision for the engine `client` talks to (two small API calls)."""
    try:
        version, info = client.version(), client.info()
    except engine_failures() as exc:
        raise engine_error(exc, "reading the engine's GPU access") from None
    return engine_gpu_access(version, info)

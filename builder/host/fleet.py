"""A team's fleet: which targets run on which of its GPU machines, and the fewest targets that cover all.

A fleet is a list of hosts. A host is either recorded on the machine itself (`envbuild doctor --save
host.json`: driver, GPUs and their compute capabilities) or named in the spec's `fleet:` (a GPU model
or a compute capability, no driver). Recorded hosts get doctor's full verdict (driver and
architecture); named GPUs get the architecture verdict alone, since nothing is known of their driver.

Everything below `load_host` is pure: recorded host files of eight GPU generations test every verdict
on machines without a GPU.
"""

from __future__ import annotations

import itertools
import socket
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from builder.errors import UsageError
from builder.formats.host_file import HostFile, RecordedGpu, damaged_host_file, read_host_file, write_host_file
from builder.host.doctor import (
    ARCH_NOT_IN_BUILD,
    MINOR_COMPAT,
    NEEDS_NEWER_DRIVER,
    NO_DRIVER,
    NO_GPU,
    RUNS,
    EngineFacts,
    HostFacts,
    judge_targets,
)
from builder.host.gpuinfo import GpuInfo
from builder.host.hostkind import HostProbe
from builder.specs.compat import CompatData, load_compat, parse_version
from builder.specs.cuda import CudaVersion
from builder.specs.fleet import fleet_folder, recorded_gpu
from builder.specs.gpus import capability_of, sm_name
from builder.specs.model import EnvSpec, Route
from builder.specs.target import Target
from smoke.driver import DriverReading
from smoke.gpu_compat import arch_coverage

RUNNABLE = (RUNS, MINOR_COMPAT)
# How a runnable cell runs its kernels: machine code for the GPU, or PTX compiled on first use.
NATIVE, PTX_JIT = "native", "ptx-jit"


@dataclass(frozen=True)
class FleetHost:
    name: str
    gpus: tuple[GpuInfo, ...]
    facts: HostFacts | None = None  # None for a GPU named in the spec: its driver is not known
    count: int = 1  # machines of this kind

    @property
    def capabilities(self) -> list[tuple[int, int]]:
        return sorted({gpu.capability for gpu in self.gpus if gpu.capability is not None})

    def as_dict(self) -> dict[str, Any]:
        driver = self.facts.driver if self.facts else None
        return {"name": self.name, "count": self.count, "recorded": self.facts is not None,
                "driver": driver.driver_version if driver else None, "cuda": driver.cuda_text if driver else None,
                "gpus": sorted({f"{gpu.name} ({gpu.sm or '?'})" for gpu in self.gpus})}


# --- host files ---------------------------------------------------------------------------------

def host_record(facts: HostFacts, name: str | None = None) -> dict[str, Any]:
    """What `doctor --save` writes: doctor's host facts plus a name and the time they were read."""
    return {"name": name or socket.gethostname(), "saved": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            **facts.as_dict()}


def save_host(facts: HostFacts, path: Path, name: str | None = None, force: bool = False) -> None:
    write_host_file(path, host_record(facts, name), force=force)


def load_host(path: Path) -> FleetHost:
    record = read_host_file(path)
    try:
        facts = facts_from_record(record)
    except ValueError as exc:
        raise damaged_host_file(path, exc) from None
    return FleetHost(name=record.name or path.stem, gpus=facts.gpus, facts=facts)


def facts_from_record(record: HostFile) -> HostFacts:
    """The inverse of `HostFacts.as_dict()` for the parts verdicts read (driver, GPUs, engine, toolkit, and the
    host's own markers, so a saved WSL2 or container host is judged as one)."""
    driver, engine = record.driver, record.engine
    probe = record.probe
    return HostFacts(
        os=record.os,
        python=record.python,
        engine=EngineFacts(address=engine.address, reachable=engine.reachable, version=engine.version,
                           api_version=engine.api_version, runtimes=tuple(engine.runtimes)),
        container_toolkit=dict(record.container_toolkit.executables),
        driver=DriverReading(source=driver.source, cuda=_recorded_cuda(driver.cuda) if driver.cuda else None,
                             driver_version=driver.version, notes=list(driver.notes)),
        gpus=tuple(_gpu_from_record(gpu) for gpu in record.gpus),
        cuda_visible_devices=record.cuda_visible_devices,
        cuda_device_order=record.cuda_device_order,
        probe=HostProbe(system=probe.system, machine=probe.machine, kernel_release=probe.kernel_release,
                        container=probe.container, wsl=probe.wsl, proc_driver_version=probe.proc_driver_version,
                        device_nodes=None if probe.device_nodes is None else tuple(probe.device_nodes),
                        container_checked=probe.container_checked),
    )


def _recorded_cuda(text: str) -> tuple[int, int]:
    """The CUDA version a host file recorded for its driver (`12.10` is not 12.1); ValueError when damaged."""
    try:
        cuda = CudaVersion.parse(text)
    except UsageError as exc:
        raise ValueError(exc.message) from None
    return cuda.major, cuda.minor


def _gpu_from_record(gpu: RecordedGpu) -> GpuInfo:
    index, name, capability = recorded_gpu(gpu)
    return GpuInfo(index=index, name=name, uuid=gpu.uuid, bus_id=gpu.bus_id, capability=capability,
                   memory_free=gpu.memory_free, memory_total=gpu.memory_total, utilization=gpu.utilization)


def host_paths(paths: tuple[Path, ...] | list[Path]) -> list[Path]:
    """Files as given; a folder stands for the *.json files in it."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(path.glob("*.json"))
            if not inside:
                raise UsageError(f"{path}: no host files (*.json) in this folder")
            found.extend(inside)
        else:
            found.append(path)
    return found


def spec_hosts(spec: EnvSpec) -> list[FleetHost]:
    """The spec's `fleet:` entries as hosts; host files are read relative to the spec's folder."""
    base = fleet_folder(spec)
    hosts = []
    for entry in spec.fleet:
        if entry.host is not None:
            host = load_host(base / entry.host)
            hosts.append(FleetHost(entry.name or host.name, host.gpus, host.facts, entry.count))
            continue
        capability = capability_of(entry.gpu or "")
        assert capability is not None  # the spec model refused unknown GPUs
        gpu = GpuInfo(index=0, name=entry.gpu or "", capability=capability)
        hosts.append(FleetHost(entry.label, (gpu,), None, entry.count))
    return hosts


# --- verdicts (pure) ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Cell:
    target: str
    host: str
    verdict: str  # doctor's words: runs / minor-version / needs a newer driver / arch not in build / no GPU
    how: str | None = None  # NATIVE or PTX_JIT when it runs
    fix: str | None = None
    why: str = ""

    @property
    def runs(self) -> bool:
        return self.verdict in RUNNABLE

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "host": self.host, "verdict": self.verdict, "runs": self.runs,
                "how": self.how, "why": self.why, "fix": self.fix}


@dataclass(frozen=True)
class FleetMatrix:
    targets: tuple[Target, ...]
    hosts: tuple[FleetHost, ...]
    cells: tuple[Cell, ...]
    cover: tuple[str, ...]  # the fewest targets that run on every host with a GPU
    uncovered: dict[str, str] = field(default_factory=dict)  # host -> what would cover it

    def cell(self, target: str, host: str) -> Cell:
        return next(c for c in self.cells if c.target == target and c.host == host)

    def as_dict(self) -> dict[str, Any]:
        return {"targets": [t.key for t in self.targets], "hosts": [h.as_dict() for h in self.hosts],
                "cells": [c.as_dict() for c in self.cells], "cover": list(self.cover),
                "uncovered": dict(self.uncovered)}

    def table_rows(self) -> list[list[str]]:
        """One row per target (`*` marks the smallest cover), one column per host, short verdict words."""
        rows = []
        for target in self.targets:
            row = [target.key + (" *" if target.key in self.cover else "")]
            for host in self.hosts:
                cell = self.cell(target.key, host.name)
                row.append(SHORT.get(cell.verdict, cell.verdict) + (" (PTX JIT)" if cell.how == PTX_JIT else ""))
            rows.append(row)
        return rows

    def host_rows(self) -> list[list[str]]:
        """table_rows turned: one row per host, one column per target (a wide fleet's grid then grows
        downwards instead of folding its verdicts inside words)."""
        by_target = self.table_rows()
        return [[host.name, *(row[index + 1] for row in by_target)] for index, host in enumerate(self.hosts)]

    def fix_rows(self) -> list[list[str]]:
        """Each (target, host) that does not run, with why and the fix; hosts no target covers come last."""
        rows = [[c.target, c.host, c.why, c.fix or ""] for c in self.cells
                if not c.runs and c.verdict not in (NO_GPU, NO_DRIVER)]
        rows += [["(none)", host, "no target of the spec runs here", fix] for host, fix in self.uncovered.items()]
        return rows


SHORT = {RUNS: "runs", MINOR_COMPAT: "runs (minor-version)", NEEDS_NEWER_DRIVER: "needs newer driver",
         ARCH_NOT_IN_BUILD: "no kernels", NO_GPU: "no GPU", NO_DRIVER: "no driver"}


def fleet_matrix(targets: list[Target], hosts: list[FleetHost], compat: CompatData | None = None) -> FleetMatrix:
    compat = compat or load_compat()
    cells = []
    for host in hosts:
        judged = {v.target: v for v in judge_targets(host.facts, targets, compat)} if host.facts else {}
        for target in targets:
            cells.append(_cell(target, host, judged.get(target.key), compat))
    gpu_hosts = [host for host in hosts if host.gpus]
    cover = _smallest_cover([t for t in targets if t.cuda], gpu_hosts, cells)
    covered = {c.host for c in cells if c.runs and c.target in cover}
    uncovered = {host.name: _nearest_builds_text(host, targets, compat) for host in gpu_hosts
                 if host.name not in covered}
    return FleetMatrix(tuple(targets), tuple(hosts), tuple(cells), tuple(cover), uncovered)


def _cell(target: Target, host: FleetHost, judged: Any, compat: CompatData) -> Cell:
    def cell(verdict: str, how: str | None = None, fix: str | None = None, why: str = "") -> Cell:
        return Cell(target.key, host.name, verdict, how, fix, why)

    if target.cuda is None:
        return cell(RUNS, NATIVE, why="CPU build")
    coverages = {capability: arch_coverage(target.archs, capability) for capability in host.capabilities}
    how = PTX_JIT if any(c.how == "ptx-jit" for c in coverages.values()) else NATIVE
    missing = [capability for capability, coverage in coverages.items() if not coverage.covered]
    if judged is not None:  # a recorded host: doctor's verdict, driver included (architecture when known)
        problems = [f for f in judged.findings if f.level in ("fail", "warning")]
        why = "; ".join(f.message for f in problems) or "; ".join(f.message for f in judged.findings)
        fix = "; ".join(dict.fromkeys(f.fix for f in problems if f.fix)) or None
        if judged.verdict == ARCH_NOT_IN_BUILD and missing:
            fix = _nearest_builds_text(host, [target], compat, missing)
        return cell(judged.verdict, how if judged.verdict in RUNNABLE else None, fix, why)
    if not host.capabilities:
        return cell(NO_GPU, why="no GPU with a known compute capability")
    if not target.archs:
        return cell(RUNS, None, why="no arch list for this build in envbuild's data: the smoke suite checks it")
    if missing:
        names = ", ".join(sm_name(c) for c in missing)
        return cell(ARCH_NOT_IN_BUILD, None, _nearest_builds_text(host, [target], compat, missing),
                    f"{names} not in torch {target.torch}'s {target.route.value} CUDA {target.cuda} build "
                    f"({' '.join(target.archs)})")
    return cell(RUNS, how, why="; ".join(c.message for c in coverages.values()) + " (driver not recorded)")


def _smallest_cover(targets: list[Target], hosts: list[FleetHost], cells: list[Cell]) -> list[str]:
    """The fewest targets with every coverable host running one of them; ties go to native kernels, then
    newer CUDA. Spec target lists are short (a handful), so trying every combination is cheap and exact."""
    runs = {(c.target, c.host): c for c in cells if c.runs}
    coverable = {h.name for h in hosts if any((t.key, h.name) in runs for t in targets)}
    if not coverable:
        return []

    def rank(combo: tuple[Target, ...]) -> tuple[int, tuple[int, ...]]:
        native = sum(1 for t in combo for h in coverable if (cell := runs.get((t.key, h))) and cell.how == NATIVE)
        return native, tuple(sorted((n for t in combo if t.cuda for n in (t.cuda.major, t.cuda.minor)), reverse=True))

    for size in range(1, len(targets) + 1):
        combos = [combo for combo in itertools.combinations(targets, size)
                  if all(any((t.key, h) in runs for t in combo) for h in coverable)]
        if combos:
            return [t.key for t in max(combos, key=rank)]
    return []  # unreachable: all targets together cover every coverable host


def nearest_builds(capability: tuple[int, int], compat: CompatData, routes: tuple[Route, ...] = tuple(Route),
                   driver_cuda: tuple[int, int] | None = None) -> list[tuple[str, CudaVersion, Route]]:
    """Per route, the newest released torch (projections only when nothing released fits) and its newest
    CUDA whose build has kernels for `capability` (and a CUDA major the driver runs, when known)."""
    found = []
    for route in routes:
        candidates = [(release, cuda) for release in compat.releases()
                      for cuda in release.cuda_variants(route)
                      if arch_coverage(release.archs_for(route, cuda), capability).covered
                      and (driver_cuda is None or cuda.major <= driver_cuda[0])]
        released = [c for c in candidates if c[0].confidence != "projected"] or candidates
        if released:
            release, cuda = max(released, key=lambda c: (parse_version(c[0].line), c[1]))
            found.append((release.line, cuda, route))
    return found


def _nearest_builds_text(host: FleetHost, targets: list[Target], compat: CompatData,
                         capabilities: list[tuple[int, int]] | None = None) -> str:
    driver_cuda = host.facts.driver.cuda if host.facts else None
    routes = tuple(dict.fromkeys([*(t.route for t in targets), *Route]))
    parts = []
    for capability in capabilities or host.capabilities:
        builds = nearest_builds(capability, compat, routes, driver_cuda)
        sm = sm_name(capability)
        if not builds:
            parts.append(f"{sm}: no torch build in envbuild's data has {sm} kernels (build torch from source)")
            continue
        listed = ", ".join(f"torch {line} with CUDA {cuda} ({route.value})" for line, cuda, route in builds[:2])
        parts.append(f"{sm}: the newest builds with {sm} kernels are {listed}")
    return "; ".join(parts)


def fleet_problems(targets: list[Target], hosts: list[FleetHost],
                   compat: CompatData | None = None) -> list[tuple[str, str | None]]:
    """(message, fix) for each target with no kernels for a fleet GPU (the fix names the nearest build that
    has them), a driver too old on a recorded host, kernels only through PTX JIT, a GPU no target runs on."""
    if not hosts:
        return []
    matrix = fleet_matrix(targets, hosts, compat)
    problems: list[tuple[str, str | None]] = []
    for cell in matrix.cells:
        if cell.verdict == ARCH_NOT_IN_BUILD:
            problems.append((f"target {cell.target} does not run on fleet GPU {cell.host}: {cell.why}", cell.fix))
        elif cell.verdict == NEEDS_NEWER_DRIVER:
            problems.append((f"target {cell.target} needs a newer driver on fleet host {cell.host}", cell.fix))
        elif cell.runs and cell.how == PTX_JIT:
            problems.append((f"target {cell.target} runs on fleet GPU {cell.host} only through PTX JIT (slow first "
                             "start, none under minor-version compatibility)", None))
    for host, fix in matrix.uncovered.items():
        problems.append((f"no target of the spec runs on fleet GPU {host}", fix))
    return problems


def fleet_warnings(targets: list[Target], hosts: list[FleetHost], compat: CompatData | None = None) -> list[str]:
    """`fleet_problems` as the one-line warnings `envbuild targets` prints."""
    return [f"{message}; {fix}" if fix else message for message, fix in fleet_problems(targets, hosts, compat)]

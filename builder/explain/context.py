"""What a verdict reads: the log with its facts and hits, the machine it ran on (the log's driver and GPUs
first, this host's second), this host's readings and the spec's targets."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from builder.explain.facts import LogFacts, extract_facts
from builder.explain.log_text import LogText
from builder.explain.machine import Machine
from builder.explain.matching import Hit, find_hits
from builder.specs.compat import CompatData, load_compat
from builder.specs.cuda import CudaVersion
from builder.specs.gpus import sm_name
from builder.specs.target import Target
from smoke.driver import DriverReading
from smoke.nvsmi import SmiProcess


class HostGpu(Protocol):
    """What explain reads of one of this host's GPUs (host/'s GpuInfo has it): explain sits below host,
    which reads explain's catalogue, so it names the fields rather than the type."""

    @property
    def index(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def sm(self) -> str | None: ...

    @property
    def capability(self) -> tuple[int, int] | None: ...


@dataclass(frozen=True)
class ExplainContext:
    """What a rule may read: the log and its facts, and what is known about the host and the spec."""

    text: str  # normalised (normalise.py): as the program printed it
    source: str = "-"
    origin: tuple[int, ...] = ()  # the pasted log's line of each line of `text`
    ranks: tuple[int | None, ...] = ()  # the torchrun rank each line of `text` was prefixed with
    driver: DriverReading | None = None  # this host's driver, None when not read (--no-host)
    gpus: tuple[HostGpu, ...] = ()
    processes: tuple[SmiProcess, ...] = ()  # this host's GPU compute processes
    targets: tuple[Target, ...] = ()
    compat: CompatData = field(default_factory=load_compat)

    @property
    def driver_cuda(self) -> CudaVersion | None:
        """The newest CUDA this host's driver runs."""
        return CudaVersion(*self.driver.cuda) if self.driver and self.driver.cuda is not None else None

    @cached_property
    def log(self) -> LogText:
        return LogText(self.text, self.origin)

    @cached_property
    def facts(self) -> LogFacts:
        return extract_facts(self.log)

    @cached_property
    def hits(self) -> dict[str, Hit]:
        return find_hits(self.log)

    @cached_property
    def machine(self) -> Machine:
        return machine_of(self)


def machine_of(context: ExplainContext) -> Machine:
    """The machine a verdict is about: the driver and GPUs the log states, else this host's."""
    facts = context.facts
    driver_from: str | None = "from the log"
    driver_version, driver_cuda = facts.get("driver"), facts.cuda("driver_cuda")
    if driver_version is None and driver_cuda is None and context.driver is not None:
        driver_version, driver_cuda = context.driver.driver_version, context.driver_cuda
        driver_from = "this host"
    if driver_version is None and driver_cuda is None:
        driver_from = None
    capabilities: list[tuple[str, str, tuple[int, int]]] = []
    gpus_from = None
    capability = facts.capability
    if capability is not None:
        capabilities.append((facts.get("gpu") or "the GPU", sm_name(capability), capability))
        gpus_from = "from the log"
    else:
        capabilities.extend((gpu.name, gpu.sm or "", gpu.capability) for gpu in context.gpus if gpu.capability)
        gpus_from = "this host" if capabilities else None
    return Machine(driver_version, driver_cuda, driver_from, tuple(capabilities), gpus_from)

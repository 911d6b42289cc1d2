"""`envbuild explain`: a pasted error log to findings (what happened, why, and the fix in envbuild's terms).

The rules are data (builder/data/explain_rules.yaml: id, regexes, message and fix templates); a few
need judgement the data cannot hold (which torch build has kernels for this GPU, which targets this
driver runs, which way a `module.` prefix points) and get a refining function here, registered with
`@refines(rule_id)`. Every rule lands in one `RuleRegistry` (builder/findings.py), so the output is the
same `Finding` type lint and doctor use.

`explain_text()` is a pure function of the log and the context (this host's driver and GPUs when
known, the spec's targets when given, the compatibility data), so recorded logs test every rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from builder.findings import Finding, Location, RuleRegistry, Severity
from builder.host.gpuinfo import GpuInfo
from builder.spec.compat import CompatData, load_compat, version_tuple
from builder.spec.cuda import CudaVersion
from builder.spec.target import Target, default_pip_index
from smoke.compat import arch_coverage, driver_cuda_from_nvml
from smoke.driver import DriverReading
from smoke.nvsmi import SmiProcess

EVIDENCE_CHARS = 300
# A CI job's whole log is a few MB; far more is not a log (`explain /dev/zero`, an endless pipe) and is
# refused at the cap instead of being read until memory runs out.
MAX_LOG_BYTES = 32 * 1024 * 1024
# Rules with needles look at this many lines around each occurrence of a needle.
WINDOW_LINES_BEFORE, WINDOW_LINES_AFTER = 3, 12


@dataclass(frozen=True)
class ExplainContext:
    """What a rule may read: the log, and what is known about the host and the spec."""

    text: str
    source: str = "-"
    driver: DriverReading | None = None  # this host's driver, None when not read (--no-host)
    gpus: tuple[GpuInfo, ...] = ()
    processes: tuple[SmiProcess, ...] = ()  # this host's GPU compute processes
    targets: tuple[Target, ...] = ()
    compat: CompatData = field(default_factory=load_compat)

    @property
    def driver_cuda(self) -> CudaVersion | None:
        """The newest CUDA this host's driver runs."""
        return CudaVersion(*self.driver.cuda) if self.driver and self.driver.cuda is not None else None


@dataclass(frozen=True)
class PatternRule:
    id: str
    severity: Severity
    match: tuple[re.Pattern[str], ...]
    extra: tuple[re.Pattern[str], ...]
    message: str
    fix: str
    refine: bool = False
    needles: tuple[str, ...] = ()  # literal text one of which must be in the log (see `_windows`)


@dataclass(frozen=True)
class Hit:
    """One rule's match in the log: the named groups (placeholders), where it is, and the line itself."""

    rule: PatternRule
    fields: dict[str, str]
    line: int
    evidence: str

    def text(self, template: str) -> str:
        return template.format_map(_Placeholders(self.fields))


class _Placeholders(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "?"


Refiner = Callable[[Hit, ExplainContext], tuple[str, str]]
REFINERS: dict[str, Refiner] = {}


def refines(rule_id: str) -> Callable[[Refiner], Refiner]:
    """Register `fn(hit, context) -> (message, fix)` for the data rule `rule_id` (which says `refine: true`)."""

    def register(fn: Refiner) -> Refiner:
        if rule_id in REFINERS:
            raise ValueError(f"{rule_id} is refined twice")
        REFINERS[rule_id] = fn
        return fn

    return register


@dataclass(frozen=True)
class ExplainReport:
    source: str
    findings: tuple[Finding, ...]

    @property
    def recognised(self) -> bool:
        return bool(self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "recognised": self.recognised,
                "findings": [finding.as_dict() for finding in self.findings]}

    def text_lines(self) -> list[str]:
        if not self.recognised:
            return ["nothing recognised in this log (envbuild explain knows pip/conda solver errors, CUDA driver and "
                    "arch errors, checkpoints, DataParallel, DataLoader, NCCL, out of memory, nvidia-smi failures)"]
        lines = []
        for finding in self.findings:
            where = f" (line {finding.location.line})" if finding.location and finding.location.line else ""
            lines.append(f"{finding.severity}: {finding.rule}{where}")
            lines.append(f"  what: {finding.message}")
            if finding.fix:
                lines.append(f"  fix:  {finding.fix}")
            if finding.evidence:
                lines.append(f"  log:  {finding.evidence}")
        return lines


def explain_text(text: str | bytes, source: str = "-", *, driver: DriverReading | None = None,
                 gpus: Iterable[GpuInfo] = (), processes: Iterable[SmiProcess] = (),
                 targets: Iterable[Target] = (), compat: CompatData | None = None) -> ExplainReport:
    """Every rule that recognises something in `text`, in the data file's order (most specific first)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    context = ExplainContext(text=text.replace("\r\n", "\n"), source=source, driver=driver, gpus=tuple(gpus),
                             processes=tuple(processes), targets=tuple(targets), compat=compat or load_compat())
    return ExplainReport(source, tuple(rule_registry().run(context)))


# --- loading the rules ---------------------------------------------------------------------------

@lru_cache(maxsize=1)
def load_rules() -> tuple[PatternRule, ...]:
    raw = yaml.safe_load(resources.files("builder").joinpath("data/explain_rules.yaml").read_text(encoding="utf-8"))
    rules = []
    for entry in raw["rules"]:
        rules.append(PatternRule(
            id=entry["id"],
            severity=Severity(entry.get("severity", "error")),
            match=tuple(re.compile(pattern) for pattern in entry["match"]),
            extra=tuple(re.compile(pattern) for pattern in (entry.get("extra") or {}).values()),
            message=entry["message"],
            fix=entry["fix"],
            refine=bool(entry.get("refine", False)),
            needles=tuple(entry.get("needles") or ()),
        ))
    return tuple(rules)


@lru_cache(maxsize=1)
def rule_registry() -> RuleRegistry[ExplainContext]:
    registry: RuleRegistry[ExplainContext] = RuleRegistry("explain")
    rules = load_rules()
    for rule in rules:
        if rule.refine and rule.id not in REFINERS:
            raise ValueError(f"{rule.id} says refine: true but builder/host/explain.py has no @refines for it")
        registry.add(rule.id, _pattern_rule(rule), rule.message)
    stray = set(REFINERS) - {rule.id for rule in rules if rule.refine}
    if stray:
        raise ValueError(f"@refines for rules without `refine: true` in the data: {', '.join(sorted(stray))}")
    return registry


def _pattern_rule(rule: PatternRule) -> Callable[[ExplainContext], list[Finding]]:
    def run(context: ExplainContext) -> list[Finding]:
        hit = _hit(rule, context.text)
        if hit is None:
            return []
        if rule.refine:
            message, fix = REFINERS[rule.id](hit, context)
        else:
            message, fix = hit.text(rule.message), hit.text(rule.fix)
        location = Location(None if context.source == "-" else context.source, hit.line)
        return [Finding(rule.id, rule.severity, message, fix, location, hit.evidence,
                        {key: value for key, value in hit.fields.items()})]

    return run


def _hit(rule: PatternRule, text: str) -> Hit | None:
    for start, end in _windows(text, rule.needles):
        chunk = text[start:end]
        for pattern in rule.match:
            found = pattern.search(chunk)
            if found is None:
                continue
            fields: dict[str, str] = {}
            _merge_groups(fields, found)
            for extra in rule.extra:
                more = extra.search(chunk)
                if more is not None:
                    _merge_groups(fields, more)
            at = start + found.start()
            line_start = text.rfind("\n", 0, at) + 1
            line_end = text.find("\n", at)
            evidence = text[line_start:line_end if line_end != -1 else len(text)].strip()
            return Hit(rule, fields, text.count("\n", 0, at) + 1, evidence[:EVIDENCE_CHARS])
    return None


def _windows(text: str, needles: tuple[str, ...]) -> list[tuple[int, int]]:
    """Where a rule's regexes run: the whole log, or, for a rule with needles, a few lines around each
    occurrence (a regex that scans every line of a 100 MB training log would take minutes)."""
    if not needles:
        return [(0, len(text))]
    windows = []
    for needle in needles:
        at = text.find(needle)
        while at != -1:
            start = at
            for _ in range(WINDOW_LINES_BEFORE):
                start = text.rfind("\n", 0, max(start - 1, 0)) + 1 if start > 0 else 0
            end = at
            for _ in range(WINDOW_LINES_AFTER):
                next_end = text.find("\n", end + 1)
                end = len(text) if next_end == -1 else next_end
            windows.append((start, end))
            at = text.find(needle, end)
    return sorted(windows)


def _merge_groups(fields: dict[str, str], found: re.Match[str]) -> None:
    # `needed2` in a second alternative fills `needed`: one placeholder, several ways to say it.
    for name, value in found.groupdict().items():
        if value:
            base = name.rstrip("0123456789")
            fields.setdefault(base, value.strip())


# --- helpers the refiners share ------------------------------------------------------------------

def capability_of(sm: str) -> tuple[int, int] | None:
    """`sm_120` -> (12, 0), `sm_86` -> (8, 6)."""
    digits = re.fullmatch(r"sm_(\d+)(\d)", sm)
    return (int(digits.group(1)), int(digits.group(2))) if digits else None


def _driver_runs(driver_cuda: CudaVersion | None, cuda: CudaVersion) -> str | None:
    """'runs', 'minor' (minor-version compatibility) or None, for a CUDA build on a driver of this CUDA."""
    if driver_cuda is None:
        return "runs"
    if cuda <= driver_cuda:
        return "runs"
    if cuda.major == driver_cuda.major:
        return "minor"
    return None


def _released_builds(compat: CompatData) -> list[tuple[str, str, CudaVersion, list[str]]]:
    """(release line, latest version, CUDA, arch list) of every released (not projected) torch build."""
    return [(release.line, release.latest, cuda, archs) for release in compat.releases()
            if release.confidence != "projected" for cuda, archs in release.archs.items()]


def _builds_with_kernels(capability: tuple[int, int],
                         context: ExplainContext) -> tuple[list[Target], tuple[str, CudaVersion] | None]:
    """Targets of the spec whose build covers this GPU; else the best released build, as (torch, CUDA): the
    newest torch, the oldest CUDA of it with kernels, one this host's driver runs when the driver is known."""
    targets = [t for t in context.targets if t.cuda and t.archs and arch_coverage(t.archs, capability).covered
               and _driver_runs(context.driver_cuda, t.cuda)]
    if targets:
        return targets, None
    builds = [(line, latest, cuda) for line, latest, cuda, archs in _released_builds(context.compat)
              if arch_coverage(archs, capability).covered and _driver_runs(context.driver_cuda, cuda)]
    if not builds:
        return [], None
    line, latest, cuda = max(builds, key=lambda b: (version_tuple(b[0]), (-b[2].major, -b[2].minor)))
    return [], (latest, cuda)


def _host_gpu_words(context: ExplainContext) -> str:
    known = [gpu for gpu in context.gpus if gpu.capability]
    if not known:
        return ""
    return "; this host: " + ", ".join(f"GPU {gpu.index} {gpu.name} ({gpu.sm})" for gpu in known)


# --- refiners ------------------------------------------------------------------------------------

@refines("explain.cuda.arch-not-in-build")
def _arch_not_in_build(hit: Hit, context: ExplainContext) -> tuple[str, str]:
    sm = hit.fields.get("sm", "")
    capability = capability_of(sm)
    message = hit.text(hit.rule.message)
    if capability is None:
        return message, hit.text(hit.rule.fix)
    targets, build = _builds_with_kernels(capability, context)
    if targets:
        fix = (f"use target {targets[0].key} (its build has {sm} kernels): "
               f"`envbuild image SPEC --cuda {targets[0].cuda}`")
    elif build:
        torch, cuda = build
        fix = (f"use torch {torch} with CUDA {cuda}, the newest released build with {sm} kernels: a target "
               f"`cuda: \"{cuda}\"` with that torch in the spec, then `envbuild doctor SPEC` on this host to confirm")
    else:
        fix = (f"no released torch build in envbuild's data has {sm} kernels: "
               "build torch from source with TORCH_CUDA_ARCH_LIST")
    return message, fix


@refines("explain.cuda.no-kernel-image")
def _no_kernel_image(hit: Hit, context: ExplainContext) -> tuple[str, str]:
    message = hit.text(hit.rule.message) + _host_gpu_words(context)
    # Which GPU: this host's (when read), else the one torch's sm_XX warning in the same log names.
    named: list[tuple[str, str, tuple[int, int] | None]] = [
        (gpu.name, gpu.sm or "", gpu.capability) for gpu in context.gpus if gpu.capability]
    arch_rule = next(rule for rule in load_rules() if rule.id == "explain.cuda.arch-not-in-build")
    warned = None if named else _hit(arch_rule, context.text)
    if warned and warned.fields.get("sm"):
        named = [(warned.fields.get("gpu", "this GPU"), warned.fields["sm"], capability_of(warned.fields["sm"]))]
    for name, sm, capability in named[:1]:
        if capability is None:
            break
        targets, build = _builds_with_kernels(capability, context)
        if targets:
            return message, f"use target {targets[0].key} (its build has {sm} kernels for {name})"
        if build:
            return message, f"use torch {build[0]} with CUDA {build[1]} (it has {sm} kernels for {name})"
    return message, hit.text(hit.rule.fix)


@refines("explain.cuda.driver-too-old")
def _driver_too_old(hit: Hit, context: ExplainContext) -> tuple[str, str]:
    found = hit.fields.get("found")
    if not found or not found.isdigit():
        return hit.text(hit.rule.message), hit.text(hit.rule.fix)
    driver_cuda = CudaVersion(*driver_cuda_from_nvml(int(found)))
    cuda_text = str(driver_cuda)
    message = hit.text(hit.rule.message.replace("{driver_cuda}", cuda_text))
    runnable = _runnable_on(driver_cuda, context)
    next_major = CudaVersion(driver_cuda.major + 1, 0)
    newer = context.compat.min_driver(next_major)
    update = f"update the NVIDIA driver (>= {newer} runs CUDA {next_major.major}.x builds)" if newer \
        else "update the NVIDIA driver"
    if runnable:
        fix = f"use a target this driver runs: {runnable}; or {update}"
    else:
        fix = f"no torch build in envbuild's data runs on a CUDA {cuda_text} driver: {update}"
    return message, fix


def _runnable_on(driver_cuda: CudaVersion, context: ExplainContext) -> str:
    """The spec's targets (else released builds) a driver of this CUDA runs: fully first, then minor-version."""
    if context.targets:
        words = []
        for target in context.targets:
            if target.cuda:
                how = _driver_runs(driver_cuda, target.cuda)
                if how:
                    words.append(target.key + (" (minor-version compatibility)" if how == "minor" else ""))
        return ", ".join(words)
    full = [(line, latest, cuda) for line, latest, cuda, _ in _released_builds(context.compat)
            if _driver_runs(driver_cuda, cuda) == "runs"]
    minor = [(line, latest, cuda) for line, latest, cuda, _ in _released_builds(context.compat)
             if _driver_runs(driver_cuda, cuda) == "minor"]
    words = []
    if full:
        line, latest, cuda = max(full, key=lambda b: (version_tuple(b[0]), b[2]))
        words.append(f"torch {latest} with CUDA {cuda}")
    if minor:
        line, latest, cuda = max(minor, key=lambda b: (version_tuple(b[0]), b[2]))
        words.append(f"torch {latest} with CUDA {cuda} (minor-version compatibility: no PTX JIT)")
    return ", or ".join(words)


@refines("explain.cuda.driver-insufficient")
def _driver_insufficient(hit: Hit, context: ExplainContext) -> tuple[str, str]:
    message = hit.text(hit.rule.message)
    if context.driver is not None and context.driver.cuda is None and context.driver.driver_version is None:
        message += "; on this host no driver answered at all"
    elif context.driver_cuda is not None:
        runnable = _runnable_on(context.driver_cuda, context)
        return f"{message}; this host's driver supports CUDA {context.driver_cuda}", \
            f"use a target this driver runs: {runnable or 'none in the data'}; or update the NVIDIA driver"
    return message, hit.text(hit.rule.fix)


@refines("explain.checkpoint.module-prefix")
def _module_prefix(hit: Hit, context: ExplainContext) -> tuple[str, str]:
    text = context.text
    checkpoint_prefixed = re.search(r'(?i)unexpected keys?(?:\(s\))? in state_dict: ?[\'"]module\.', text) or \
        re.search(r'unexpected key "module\.', text)
    if checkpoint_prefixed:
        return ("the checkpoint was saved from nn.DataParallel / DistributedDataParallel (its keys start with "
                "`module.`), the model loading it is not wrapped",
                "strip the prefix: `torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state_dict, "
                "\"module.\")` before `model.load_state_dict(state_dict)`; when saving a wrapped model save "
                "`model.module.state_dict()`")
    return ("the model is wrapped in nn.DataParallel / DistributedDataParallel (it expects `module.` keys), the "
            "checkpoint was saved from a plain model",
            "load into the inner model: `model.module.load_state_dict(state_dict)` (or load before wrapping); "
            "`torch.nn.modules.utils.consume_prefix_in_state_dict_if_present` strips a prefix the other way")


# NCCL's own words for the usual causes, each with its remedy.
NCCL_CAUSES = (
    (re.compile(r"No route to host|Connection refused|socketStartConnect|Connection timed out"),
     "the ranks cannot reach each other over the network interface NCCL picked",
     "set NCCL_SOCKET_IFNAME to the interface the hosts share (e.g. `export NCCL_SOCKET_IFNAME=eth0`) and open "
     "the ports between them"),
    (re.compile(r"(?i)unhandled cuda error"),
     "a CUDA call inside NCCL failed (often a GPU or driver fault, or a CUDA build the driver cannot run)",
     "check `envbuild doctor SPEC` on every host"),
    (re.compile(r"(?i)/dev/shm|shared memory|Bus error"),
     "NCCL's shared-memory transport ran out of /dev/shm",
     "start the container with `--ipc=host` or `--shm-size 8g`"),
    (re.compile(r"(?i)Watchdog caught collective operation timeout|timed out"),
     "a collective timed out: one rank stopped early or runs different code",
     "look at the first rank that failed; make every rank run the same collectives in the same order"),
)


@refines("explain.nccl.error")
def _nccl(hit: Hit, context: ExplainContext) -> tuple[str, str]:
    message, fix = hit.text(hit.rule.message), hit.text(hit.rule.fix)
    for pattern, why, remedy in NCCL_CAUSES:
        if pattern.search(context.text):
            return f"{message}: {why}", f"{remedy}; {fix}"
    return f"{message} (the log does not say why)", f"{fix}; in containers also try `--ipc=host`"


_SIZE = re.compile(r"([\d.]+) ([GMK])iB")


def _bytes(size: str | None) -> float | None:
    found = _SIZE.fullmatch(size or "")
    if not found:
        return 0.0 if size == "0 bytes" else None
    return float(found.group(1)) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[found.group(2)]


@refines("explain.cuda.out-of-memory")
def _out_of_memory(hit: Hit, context: ExplainContext) -> tuple[str, str]:
    wanted, total, free = (hit.fields.get(key) for key in ("wanted", "total", "free"))
    parts = [f"asked for {wanted}" if wanted else None, f"total {total}" if total else None,
             f"free {free}" if free else None]
    said = "; ".join(part for part in parts if part)
    message = "the GPU ran out of memory" + (f" ({said})" if said else "")
    wanted_bytes, total_bytes = _bytes(wanted), _bytes(total)
    if wanted_bytes is not None and total_bytes and wanted_bytes > total_bytes:
        return (f"{message}: one allocation is larger than the whole GPU",
                "the batch, resolution or sequence length is far too big for this GPU: reduce it (gradient "
                "accumulation keeps the effective batch) or move to a GPU with more memory; no allocator "
                "setting helps here")
    holders = sorted((p for p in context.processes if p.memory_mib), key=lambda p: -(p.memory_mib or 0))
    if holders:
        listed = ", ".join(f"pid {p.pid} {p.name or '?'} {p.memory_mib} MiB" for p in holders[:3])
        message += f"; on this host now: {listed}"
    return message, hit.text(hit.rule.fix)


@refines("explain.conda.cuda-virtual-package")
def _cuda_virtual_package(hit: Hit, context: ExplainContext) -> tuple[str, str]:
    needed, host = hit.fields.get("needed"), hit.fields.get("host")
    said = [f"the packages need __cuda {needed}" if needed else None,
            f"the solving machine says __cuda {host}" if host else None]
    detail = "; ".join(part for part in said if part)
    message = ("the solver's __cuda virtual package (the CUDA of this machine's driver, or CONDA_OVERRIDE_CUDA) "
               "does not fit the CUDA packages asked for" + (f" ({detail})" if detail else ""))
    return message, hit.text(hit.rule.fix)


@refines("explain.system.glibc-too-old")
def _glibc_too_old(hit: Hit, context: ExplainContext) -> tuple[str, str]:
    needed = hit.fields.get("needed", "?")
    library = hit.fields.get("library")
    message = f"a binary needs glibc >= {needed}" + (f" ({library})" if library else "") + \
        ", newer than the glibc of this system"
    return message, hit.text(hit.rule.fix)


@refines("explain.pip.cuda-wheel-index")
def _pip_index(hit: Hit, context: ExplainContext) -> tuple[str, str]:
    requirement = hit.fields.get("req", "torch")
    tag = hit.fields.get("tag")
    version = re.search(r"==([\d.]+)", requirement)
    offered = re.search(r"from versions:? ([^)\n]*)", context.text)
    if version and offered and version.group(1) not in re.split(r"[,\s]+", offered.group(1)):
        return (f"pip found no {requirement}: the index offers no torch {version.group(1)} for this Python and "
                f"platform at all (only: {offered.group(1).strip()[:80]})",
                "torch wheels exist only for the Python versions of their release: use a Python that torch "
                f"{version.group(1)} supports, or a newer torch; envbuild checks the spec's Python against its "
                "compatibility data (`envbuild targets SPEC`)")
    if tag:
        index = default_pip_index().format(tag=tag)
        return (f"pip found no {requirement}: +{tag} builds are not on the Python package index",
                f"install it from the PyTorch wheel index: `pip install {requirement.split('+')[0]} --index-url "
                f"{index}`; envbuild's pip route picks that index for each target")
    return hit.text(hit.rule.message), "check the Python version and the index; envbuild's pip route picks the " \
                                       "index for each target"


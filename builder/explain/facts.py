"""The facts a log states (driver and its CUDA, toolkit, torch and its CUDA, GPUs and their compute
capability, Python, OS, where it ran), read with the data's fact patterns, and the facts that follow
from them."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion

from builder.errors import UsageError
from builder.explain.boards import first_board
from builder.explain.families import FactPattern, load_explain_data
from builder.explain.log_text import LogText
from builder.specs.compat import parse_version
from builder.specs.cuda import CudaVersion
from builder.specs.gpus import capability_of_model, sm_name
from smoke.gpu_compat import driver_cuda_from_nvml

# Lines one fact pattern looks at: facts sit in a log's first lines or its pasted reports.
MAX_FACT_WINDOWS = 2_000


@dataclass(frozen=True)
class Fact:
    value: str
    line: int
    how: str  # which kind of line said it ("nvidia-smi header", "from +cu118", ...)

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "line": self.line, "how": self.how}


FACT_ORDER = ("driver", "driver_cuda", "toolkit", "torch", "torch_cuda", "python", "gpu", "sm", "archs", "nccl",
              "os", "platform", "container", "sdist", "installing")
FACT_WORDS = {"driver": "driver", "driver_cuda": "driver's CUDA", "toolkit": "CUDA toolkit", "torch": "torch",
              "torch_cuda": "torch's CUDA", "python": "Python", "gpu": "GPU", "sm": "compute capability",
              "archs": "torch arch list", "nccl": "NCCL", "os": "OS", "platform": "platform",
              "container": "runs in", "sdist": "pip builds from source", "installing": "pip was installing"}


@dataclass(frozen=True)
class LogFacts:
    facts: dict[str, Fact] = field(default_factory=dict)

    def get(self, name: str) -> str | None:
        fact = self.facts.get(name)
        return fact.value if fact else None

    def __bool__(self) -> bool:
        return bool(self.facts)

    def as_dict(self) -> dict[str, Any]:
        return {name: self.facts[name].as_dict() for name in FACT_ORDER if name in self.facts}

    def text(self) -> str:
        return ", ".join(f"{FACT_WORDS[name]} {self.facts[name].value} (line {self.facts[name].line})"
                         for name in FACT_ORDER if name in self.facts)

    @property
    def capability(self) -> tuple[int, int] | None:
        sm = self.get("sm")
        return capability_of(sm) if sm else None

    def cuda(self, name: str) -> CudaVersion | None:
        """A CUDA fact (driver_cuda, toolkit, torch_cuda) as a version."""
        said = self.get(name)
        return cuda_from_text(said) if said else None


def cuda_from_text(text: str) -> CudaVersion | None:
    """The CUDA X.Y a log's text names (`11.8`, `12.1.105`, `12.06`), or None when it names none; logs write
    versions loosely, so this reads the numbers rather than requiring the data files' exact form."""
    try:
        parts = parse_version(text).release
    except InvalidVersion:
        return None
    return CudaVersion(parts[0], parts[1] if len(parts) > 1 else 0)


_FACT_CONVERTERS: dict[str, Callable[[re.Match[str]], str | None]] = {
    "nvml_cuda": lambda m: "{}.{}".format(*driver_cuda_from_nvml(int(m.group(1)))),
    "cpython": lambda m: f"3.{m.group(1)}",
    "capability": lambda m: f"sm_{m.group(1)}{m.group(2)}",
    "capability_dot": lambda m: "sm_{}{}".format(*m.group(1).split(".")),
    "strip": lambda m: m.group(1).strip(" _*.,;'\"`"),
}


def extract_facts(log: LogText, patterns: Iterable[FactPattern] | None = None) -> LogFacts:
    """The facts a log states; per fact the first pattern in the data's order that matches wins (the
    order puts the most reliable kind of line first), at its first occurrence in the log."""
    found: dict[str, Fact] = {}
    found_at: dict[str, int] = {}  # the line each fact was first read on (a longer value may come later)
    for pattern in patterns if patterns is not None else load_explain_data().facts:
        if pattern.fact in found:
            continue
        near = found_at.get(pattern.near) if pattern.near else None
        if pattern.near and near is None:
            continue
        fact = _first_fact(pattern, log, near)
        if fact is not None:
            found[pattern.fact] = fact
            found_at[pattern.fact] = fact.line
            if pattern.fact in EXTENDED_FACTS and "+" not in fact.value:
                _extend(found, pattern, log, fact.value)
    if "gpu" not in found:
        board = first_board(log.text)
        if board is not None:
            found["gpu"] = Fact(board.name, log.line_of(board.at), f"a board named in the text (`{board.written}`)")
    _derive_facts(found)
    return LogFacts(found)


def _first_fact(pattern: FactPattern, log: LogText, near: int | None) -> Fact | None:
    """The pattern's first match with a value (within a few lines of `near`, the line of the fact it must be
    near, when it has one)."""
    for start, end in log.windows(pattern.needle, pattern.ignore_case, before=0, after=pattern.lines + 1,
                                  limit=MAX_FACT_WINDOWS):
        matched = pattern.regex.search(log.text, start, end)
        if matched is None:
            continue
        line = log.line_of(matched.start())
        if near is not None and abs(line - near) > 8:
            continue
        value = _fact_value(pattern, matched)
        if value:
            return Fact(value, line, pattern.how)
    return None


def _fact_value(pattern: FactPattern, matched: re.Match[str]) -> str | None:
    if pattern.value:
        return pattern.value
    if pattern.convert:
        return _FACT_CONVERTERS[pattern.convert](matched)
    return matched.group(1).strip()


# Facts whose value may say more elsewhere: `torch 1.8.1` on one line, `torch 1.8.1+cu102` on the next.
EXTENDED_FACTS = {"torch"}


def _extend(found: dict[str, Fact], pattern: FactPattern, log: LogText, value: str) -> None:
    for start, end in log.windows(pattern.needle, pattern.ignore_case, before=0, after=pattern.lines + 1, limit=200):
        for matched in pattern.regex.finditer(log.text, start, end):
            longer = matched.group(1).strip()
            if longer.startswith(value + "+"):
                found[pattern.fact] = Fact(longer, log.line_of(matched.start()), pattern.how)
                return


def _derive_facts(found: dict[str, Fact]) -> None:
    """Facts that follow from others: torch's CUDA from `+cu118`, a capability from a GPU's model name."""
    torch = found.get("torch")
    if torch and "torch_cuda" not in found:
        cuda = _wheel_cuda(torch.value)
        if cuda is not None:
            found["torch_cuda"] = Fact(str(cuda), torch.line, f"from {torch.value}")
    gpu = found.get("gpu")
    if gpu and "sm" not in found:
        capability = capability_of_model(gpu.value)
        written = first_board(gpu.value) if capability is None else None  # `GPU: my 5080`: the board in the words
        if written is not None:
            capability = capability_of_model(written.name)
            found["gpu"] = gpu = Fact(written.name, gpu.line, f"{gpu.how} (`{gpu.value}`)")
        if capability:
            found["sm"] = Fact(sm_name(capability), gpu.line, f"from the model name {gpu.value}")


def _wheel_cuda(version: str) -> CudaVersion | None:
    """The CUDA of a wheel's local version (`2.1.0+cu118` -> 11.8); None for `+cpu`, none, or a tag no CUDA
    release could have (a log's text is not checked at the edge, so a bad tag is no fact rather than an error).
    A tag that is not `cu` and digits (`+cu10.1`, as people type it) names no wheel: no fact."""
    if "+cu" in version and not re.search(r"\+cu\d+$", version):
        return None
    try:
        return CudaVersion.from_wheel_local(version)
    except UsageError:
        return None


def capability_of(sm: str) -> tuple[int, int] | None:
    """`sm_120` -> (12, 0), `sm_86` -> (8, 6)."""
    digits = re.fullmatch(r"sm_(\d+)(\d)[a-z]?", sm)
    return (int(digits.group(1)), int(digits.group(2))) if digits else None

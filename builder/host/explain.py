"""`envbuild explain`: a pasted error log to findings (what happened, why, and the fix in envbuild's terms).

What explain knows is data. `builder/data/explain_rules.yaml` holds the message families: each is a
message template from a named upstream source (PyTorch, CUDA, NVML, NCCL, the dynamic loader, conda,
pip ...) whose variable parts are placeholders captured by name (`CUDA error: {error}`), with the
finding's message and fix. `builder/data/error_codes.yaml` holds the enumerations those placeholders
resolve to (every cudaError_t, nvmlReturn_t, ncclResult_t: number, name, printed text, meaning), so
`CUDA error: no kernel image ...`, `error=209`, `cudaErrorNoKernelImageForDevice` and
`CUDA_ERROR_NO_BINARY_FOR_GPU` all land on one family. A few families need judgement the data cannot
hold (which build runs on this driver and GPU) and get a refining function here (`@refines`).

Besides families, explain reads the facts a log states (driver and its CUDA, toolkit, torch and its
CUDA, GPUs and their compute capability, Python, OS, container) and decides with the compatibility
data (builder/data/compat.yaml) and the log's facts before this host's, so a fix never names a build
the stated driver or GPU cannot run. A log with no known family still gets its facts and a next step.

Input is bounded (`read_log`): a huge file is read as its head and tail, an endless stdin is cut,
binary data and UTF-16 are recognised, so any input costs bounded memory and answers in one line.
`explain_text()` is a pure function of the text and the context, so recorded logs test everything.
"""

from __future__ import annotations

import codecs
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from importlib import resources
from typing import IO, Any

import yaml

from builder.findings import Finding, Location, RuleRegistry, Severity
from builder.host.gpuinfo import GpuInfo
from builder.spec.compat import CompatData, load_compat, version_tuple
from builder.spec.cuda import CudaVersion
from builder.spec.gpus import capability_of_model, sm_name
from builder.spec.target import Target, default_pip_index
from smoke.compat import arch_coverage, driver_cuda_from_nvml
from smoke.driver import DriverReading
from smoke.nvsmi import SmiProcess

EVIDENCE_CHARS = 300
# A template's regex runs on a few lines around each occurrence of its needle (its longest literal
# part): a regex that scanned every line of a 20 MB training log would take minutes.
WINDOW_LINES_BEFORE, WINDOW_LINES_AFTER = 3, 12
# Occurrences of one needle looked at: enough for any real log, bounded for a pathological one.
MAX_WINDOWS = 20_000
# Distinct codes one code-carrying family reports (each becomes at most one finding anyway).
MAX_CODE_HITS = 50
# Lines one fact pattern looks at: facts sit in a log's first lines or its pasted reports.
MAX_FACT_WINDOWS = 2_000
# Occurrences of a template's fallback word looked at (the word is shorter, so more common).
MAX_WORD_WINDOWS = 2_000
# Pasted excerpts (issue threads, chat) wrap long messages; a program's own log does not. Only texts up
# to this size are searched for a template's fallback word when its needle is missing.
WRAPPED_TEXT_CHARS = 2 << 20

# --- input: bounded reading, encodings, binary data ---------------------------------------------

HEAD_BYTES = 8 << 20  # facts (versions, nvidia-smi) sit at the start of a log
TAIL_BYTES = 24 << 20  # the error sits at its end
MAX_READ_BYTES = 256 << 20  # an endless stdin stops here
CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class LogInput:
    """What was read of a log: the text explain looks at, and how it was cut and decoded."""

    text: str
    size: int  # bytes of the input seen (the whole file, or what was read of a stream)
    encoding: str = "utf-8"
    skipped: int = 0  # bytes between head and tail that were not looked at
    stopped: bool = False  # a stream was cut at MAX_READ_BYTES
    binary: str | None = None  # why this is not a text log, when it is not

    def note(self) -> str | None:
        """One phrase on what was not read, for the output line; None when all was read."""
        if self.stopped:
            return (f"stopped reading after {_mib(self.size)}; looked at the first {_mib(HEAD_BYTES)} "
                    f"and the last {_mib(TAIL_BYTES)} read")
        if self.skipped:
            return (f"looked at the first {_mib(HEAD_BYTES)} and the last {_mib(TAIL_BYTES)} of "
                    f"{_mib(self.size)}")
        return None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"bytes": self.size, "encoding": self.encoding}
        if self.skipped:
            data["skipped_bytes"] = self.skipped
        if self.stopped:
            data["stopped"] = True
        if self.binary:
            data["binary"] = self.binary
        return data


def _mib(size: int) -> str:
    if size >= 1 << 30:
        return f"{size / (1 << 30):.1f} GiB"
    return f"{size / (1 << 20):.0f} MiB" if size >= 1 << 20 else f"{max(size, 1) / 1024:.0f} KiB"


def read_log(stream: IO[bytes]) -> LogInput:
    """Read a log from a binary stream in bounded memory: all of it up to HEAD+TAIL bytes, else its head
    and tail (a seekable file jumps to the tail; a pipe is read through, up to MAX_READ_BYTES)."""
    head = stream.read(HEAD_BYTES)
    size, skipped, stopped = len(head), 0, False
    tail = bytearray()
    if _binary_reason(head):
        return decode_log(head, size=_seekable_size(stream) or len(head))
    if len(head) == HEAD_BYTES:
        total = _seekable_size(stream)
        if total is not None and total > HEAD_BYTES + TAIL_BYTES:
            stream.seek(total - TAIL_BYTES)
            tail = bytearray(stream.read(TAIL_BYTES))
            size, skipped = total, total - HEAD_BYTES - TAIL_BYTES
        else:
            while chunk := stream.read(CHUNK_BYTES):
                tail += chunk
                size += len(chunk)
                if len(tail) > TAIL_BYTES + CHUNK_BYTES:
                    skipped += len(tail) - TAIL_BYTES
                    del tail[:len(tail) - TAIL_BYTES]
                if size >= MAX_READ_BYTES:
                    stopped = True
                    break
    return decode_log(bytes(head), bytes(tail), size=size, skipped=skipped, stopped=stopped)


def _seekable_size(stream: IO[bytes]) -> int | None:
    try:
        if not stream.seekable():
            return None
        at = stream.tell()
        end = stream.seek(0, 2)
        stream.seek(at)
        return end
    except (OSError, ValueError):
        return None


_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


def decode_log(head: bytes, tail: bytes = b"", *, size: int | None = None, skipped: int = 0,
               stopped: bool = False) -> LogInput:
    """Bytes to text: a byte-order mark or UTF-16's NUL pattern decides the codec (Windows' PowerShell
    writes UTF-16), else UTF-8 with the undecodable bytes replaced (a GBK or Latin-1 log keeps its ASCII
    messages); compressed or binary data is named instead of decoded."""
    size = len(head) + len(tail) if size is None else size
    binary = _binary_reason(head)
    if binary:
        return LogInput("", size, binary=binary)
    encoding, bom = _encoding_of(head)
    text = head[bom:].decode(encoding, errors="replace")
    if tail:
        # A cut may fall inside a character (UTF-16 pairs, UTF-8 sequences): drop what does not decode whole.
        width = 4 if "32" in encoding else 2 if "16" in encoding else 1
        cut = len(tail) % width if width > 1 else 0
        text += "\n" + tail[cut:].decode(encoding, errors="replace").split("\n", 1)[-1]
    if "\r" in text:  # Windows line ends, and carriage returns of progress bars, end lines too
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return LogInput(text, size, encoding, skipped, stopped)


def _encoding_of(head: bytes) -> tuple[str, int]:
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding, len(bom)
    sample = head[:4096]
    if len(sample) >= 16:
        even, odd = sample[0::2], sample[1::2]
        if odd.count(0) > 0.4 * len(odd) and even.count(0) < 0.1 * len(even):
            return "utf-16-le", 0
        if even.count(0) > 0.4 * len(even) and odd.count(0) < 0.1 * len(odd):
            return "utf-16-be", 0
    return "utf-8", 0


_MAGIC = ((b"\x1f\x8b", "gzip-compressed data (unpack it: `zcat FILE | envbuild explain -`)"),
          (b"PK\x03\x04", "a zip archive"), (b"\x7fELF", "an ELF binary"), (b"\x28\xb5\x2f\xfd", "zstd data"),
          (b"BZh", "bzip2 data"), (b"\xfd7zXZ", "xz data"))


def _binary_reason(head: bytes) -> str | None:
    """Why the start of an input is no text log (compressed, an executable, noise), or None; judged on a
    small sample, before megabytes of it are read or decoded."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    encoding, bom = _encoding_of(head)
    sample = head[bom:bom + 4096].decode(encoding, errors="replace")
    if sample and _unprintable_share(sample) > 0.3:
        return "mostly unprintable bytes"
    return None


def _unprintable_share(sample: str) -> float:
    bad = sum(1 for char in sample if char == "\ufffd" or (ord(char) < 32 and char not in "\t\n\r\x1b\x0c"))
    return bad / len(sample)


# --- the log as searchable text ------------------------------------------------------------------

# Words most needles contain: in a big log each is looked for once, and every needle holding a word the
# log lacks is known absent without a scan of its own (a training log of 20 MB without `nccl` skips
# every NCCL template).
PROBE_WORDS = ("cuda", "nccl", "nvml", "nvidia", "torch", "driver", "version", "symbol", "librar", "conda",
               "mamba", "python", "gpu", "device", "error", "fail", "cannot", "could not", "load")
PROBE_TEXT_CHARS = 1 << 20


class LogText:
    """A log with what every search needs: the text, its lower-case twin, and line numbers on demand."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._first: dict[tuple[str, bool], int] = {}
        self._absent: list[str] = []  # lower-case words the log does not hold in any case
        if len(text) > PROBE_TEXT_CHARS:
            for word in PROBE_WORDS:
                self.first_at(word, ignore_case=True)

    @cached_property
    def lower(self) -> str:
        return self.text.lower()

    def first_at(self, needle: str, ignore_case: bool = False) -> int:
        """Where `needle` first occurs (-1: nowhere); remembered, as templates and facts share needles."""
        key = (needle, ignore_case)
        if key not in self._first:
            folded = needle.lower()
            if any(word in folded for word in self._absent):
                self._first[key] = -1
            else:
                self._first[key] = (self.lower if ignore_case else self.text).find(needle)
                if ignore_case and self._first[key] == -1:
                    self._absent.append(folded)
        return self._first[key]

    def line_of(self, at: int) -> int:
        return self.text.count("\n", 0, at) + 1

    def line_text(self, at: int) -> str:
        start = self.text.rfind("\n", 0, at) + 1
        end = self.text.find("\n", at)
        return self.text[start:end if end != -1 else len(self.text)].strip()

    def windows(self, needle: str, ignore_case: bool = False, before: int = WINDOW_LINES_BEFORE,
                after: int = WINDOW_LINES_AFTER, limit: int = MAX_WINDOWS) -> Iterator[tuple[int, int]]:
        """(start, end) of a few lines around each occurrence of `needle`, in order, not overlapping."""
        haystack = self.lower if ignore_case else self.text
        text = self.text
        at = self.first_at(needle, ignore_case)
        count = 0
        while at != -1 and count < limit:
            start = at
            for _ in range(before + 1):
                start = text.rfind("\n", 0, start - 1) + 1 if start > 0 else 0
            end = at
            for _ in range(after):
                next_end = text.find("\n", end + 1)
                if next_end == -1:
                    end = len(text)
                    break
                end = next_end
            yield start, max(end, at + len(needle))
            count += 1
            at = haystack.find(needle, max(end, at + 1))


# --- templates: a message with named placeholders -----------------------------------------------

# {name} or {name:type}; {{ and }} are literal braces; a name starting with _ is matched, not kept.
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{(\w+)(?::(\w+))?\}")
# type -> (regex, needle when a template has no literal part to search for)
PLACEHOLDER_TYPES: dict[str, tuple[str, str | None]] = {
    "int": (r"-?\d+", None),
    "num": (r"\d+(?:\.\d+)*", None),
    "cap": (r"\d+\.\d+", None),
    "version": (r"\d+(?:\.\d+)+(?:[a-z]+\d*)?(?:\+[\w.]+)?", None),
    "sm": (r"sm_\d+[a-z]?", None),
    "size": (r"[\d.]+ ?[KMGT]i?B|0 bytes", None),
    "token": (r"\S+", None),
    "quoted": (r"'[^'\n]*'|\"[^\"\n]*\"|[^\s'\"]+", None),
    "word": (r"\w+", None),
    "spec": (r"[<>=!~]=?\s*[\d.*]+", None),
    "gpu": (r"[A-Za-z][^\n:]*?", None),
    "symbol": (r"[A-Za-z_][\w@.$]*", None),
    "torchreq": (r"(?:py)?torch\w*\S*", "torch"),
    "rest": (r"[^\n]*", None),
    "cudaname": (r"\bcudaError[A-Z]\w*", "cudaError"),
    "cuname": (r"\bCUDA_ERROR_[A-Z_]+", "CUDA_ERROR_"),
    "ncclname": (r"\bnccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError"
                 r"|InProgress|Timeout)\b", "nccl"),
    "nvmlname": (r"\bNVML_ERROR_[A-Z_]+|\bNVMLError_\w+", "NVML"),
}


@dataclass(frozen=True)
class Template:
    text: str
    regex: re.Pattern[str]
    needle: str  # literal text the log must contain (lower-case when ignore_case)
    ignore_case: bool
    names: tuple[str, ...]
    # The template's most distinctive single word: searched when the needle is not in the log at all,
    # since a pasted log may wrap a long message anywhere (`... to compile\nPyTorch (11.3)`).
    word: str | None = None

    def matches(self, log: LogText) -> Iterator[re.Match[str]]:
        """Every match in the log, in order (at most one per window)."""
        if log.first_at(self.needle, self.ignore_case) != -1:
            windows = log.windows(self.needle, self.ignore_case)
        elif self.word and len(log.text) <= WRAPPED_TEXT_CHARS:
            windows = log.windows(self.word, self.ignore_case, limit=MAX_WORD_WINDOWS)
        else:
            return
        for start, end in windows:
            found = self.regex.search(log.text, start, end)
            if found is not None:
                yield found

    def first(self, log: LogText) -> re.Match[str] | None:
        return next(self.matches(log), None)


def compile_template(text: str, ignore_case: bool = False) -> Template:
    pieces: list[str] = []
    literals: list[str] = []
    names: list[str] = []
    type_needles: list[str] = []
    matches = list(_PLACEHOLDER.finditer(text))
    position = 0
    literal = ""
    for index, found in enumerate(matches):
        literal += text[position:found.start()]
        position = found.end()
        if found.group(0) in ("{{", "}}"):
            literal += found.group(0)[0]
            continue
        pieces.append(_literal_regex(literal))
        literals.append(literal)
        literal = ""
        name = found.group(1)
        last = index == len(matches) - 1 and not text[position:].strip()
        pattern, type_needle = _placeholder_regex(text, found.group(2), last)
        if type_needle:
            type_needles.append(type_needle)
        if name.startswith("_"):
            pieces.append(f"(?:{pattern})")
        else:
            if name in names:
                raise ValueError(f"template {text!r}: placeholder {name} twice")
            names.append(name)
            pieces.append(f"(?P<{name}>{pattern})")
    literal += text[position:]
    pieces.append(_literal_regex(literal))
    literals.append(literal)
    needle, word = _needle_and_word(text, literals, type_needles)
    flags = re.IGNORECASE if ignore_case else 0
    return Template(text, re.compile("".join(pieces), flags), needle.lower() if ignore_case else needle,
                    ignore_case, tuple(names), (word.lower() if ignore_case else word) if word else None)


def _placeholder_regex(text: str, kind: str | None, last: bool) -> tuple[str, str | None]:
    """A placeholder's regex, and the needle its type gives a template with too little literal text. An
    untyped one takes the rest of its line when it ends the template, else as little as fits."""
    if not kind:
        return (r"[^\n]*" if last else r"[^\n]*?"), None
    if kind not in PLACEHOLDER_TYPES:
        raise ValueError(f"template {text!r}: unknown placeholder type {kind!r}")
    return PLACEHOLDER_TYPES[kind]


def _needle_and_word(text: str, literals: list[str], type_needles: list[str]) -> tuple[str, str | None]:
    """The longest literal part (whitespace as one space) as the needle, else a placeholder type's; and
    the most distinctive other word, for a log that wraps the needle."""
    needle = max((" ".join(part.split()) for part in literals), key=len, default="")
    if len(needle) < 3 and type_needles:
        needle = type_needles[0]
    if not needle:
        raise ValueError(f"template {text!r} has nothing literal to search for")
    word = max((word for part in literals for word in part.split() if len(word) >= 5), key=_distinctive, default=None)
    return needle, None if word == needle else word


def _distinctive(word: str) -> tuple[int, int]:
    # Mixed case, digits or punctuation (PyTorch, CUDA_HOME, device_count()) are rarer in a log than a
    # plain word of the same length.
    marked = sum(1 for char in word if char.isdigit() or char in "_.()[]/:=")
    marked += 1 if any(char.isupper() for char in word[1:]) and any(char.islower() for char in word) else 0
    return (min(marked, 3) * 4 + len(word), len(word))


def _literal_regex(literal: str) -> str:
    # Any run of whitespace matches any run (a wrapped line, two spaces, a tab); none at the edges.
    words = literal.split()
    if not words:
        return r"\s*" if literal else ""
    body = r"\s+".join(re.escape(word) for word in words)
    before = r"\s*" if literal[:1].isspace() else ""
    after = r"\s*" if literal[-1:].isspace() else ""
    return before + body + after


# --- error-code tables ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ErrorCode:
    enum: str
    code: int
    name: str
    meaning: str
    says: str | None = None
    driver: str | None = None  # the CUresult of the same number
    legacy: int | None = None  # cudaError_t's number before CUDA 10.1
    family: str | None = None
    fix: str | None = None
    bare: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in (("enum", self.enum), ("code", self.code), ("name", self.name),
                                              ("says", self.says), ("meaning", self.meaning)) if value is not None}


@dataclass(frozen=True)
class CodeTable:
    enum: str
    family: str  # the generic family codes without one of their own are reported under
    source: dict[str, str]
    codes: tuple[ErrorCode, ...]

    @cached_property
    def _by_name(self) -> dict[str, ErrorCode]:
        names: dict[str, ErrorCode] = {}
        for entry in self.codes:
            names[entry.name.lower()] = entry
            if entry.driver:
                names[entry.driver.lower()] = entry
            if entry.name.startswith("NVML_ERROR_"):  # pynvml's exception classes: NVMLError_DriverNotLoaded
                camel = "".join(word.capitalize() for word in entry.name[len("NVML_ERROR_"):].split("_"))
                names[f"nvmlerror_{camel.lower()}"] = entry
        return names

    @cached_property
    def _by_says(self) -> list[tuple[str, ErrorCode]]:
        said = [(entry.says.lower().rstrip("."), entry) for entry in self.codes if entry.says]
        return sorted(said, key=lambda pair: -len(pair[0]))

    def by_name(self, name: str) -> ErrorCode | None:
        return self._by_name.get(name.lower())

    def by_number(self, number: int) -> ErrorCode | None:
        """The code of this number; else (cudaError_t) the code it was before CUDA 10.1 renumbered the enum
        (`cuda runtime error (59)`, the device-side assert of CUDA 9)."""
        for entry in self.codes:
            if entry.code == number:
                return entry
        for entry in self.codes:
            if entry.legacy == number:
                return entry
        return None

    def by_text(self, text: str) -> ErrorCode | None:
        """The code whose printed text starts `text` (or, for texts of 3+ words, appears in it)."""
        said = " ".join(text.lower().split()).strip(" .'\"`*")
        if not said:
            return None
        for says, entry in self._by_says:
            if said.startswith(says):
                return entry
        for says, entry in self._by_says:
            if len(says.split()) >= 3 and says in said:
                return entry
        return None


@lru_cache(maxsize=1)
def load_code_tables() -> dict[str, CodeTable]:
    raw = yaml.safe_load(resources.files("builder").joinpath("data/error_codes.yaml").read_text(encoding="utf-8"))
    tables = {}
    for enum, body in raw["enums"].items():
        codes = tuple(ErrorCode(enum=enum, code=int(row["code"]), name=row["name"], meaning=row["meaning"],
                                says=row.get("says"), driver=row.get("driver"), legacy=row.get("legacy"),
                                family=row.get("family"), fix=row.get("fix"), bare=bool(row.get("bare")))
                      for row in body["codes"])
        tables[enum] = CodeTable(enum, body["family"], dict(body["source"]), codes)
    return tables


# --- message families ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Cause:
    """A known cause of a family's message, told apart by what else the log says (`when`, any template
    matching; none: the default)."""

    when: tuple[Template, ...]
    why: str
    fix: str | None


@dataclass(frozen=True)
class Family:
    id: str
    severity: Severity
    source: dict[str, str]
    templates: tuple[Template, ...]
    message: str
    fix: str
    extras: tuple[tuple[Template, ...], ...] = ()  # more templates that fill placeholders, never fire
    codes: str | None = None  # an enumeration {code} {error} {name} {driver} resolve in
    causes: tuple[Cause, ...] = ()
    refine: bool = False

    def catalogue_row(self) -> dict[str, Any]:
        row: dict[str, Any] = {"id": self.id, "severity": self.severity.value, "source": self.source,
                               "templates": [template.text for template in self.templates]}
        tables = load_code_tables()
        if self.codes:
            row["codes"] = f"every {self.codes} without a family of its own"
        own = [f"{table.enum} {entry.code} {entry.name}" for table in tables.values() for entry in table.codes
               if entry.family == self.id]
        if own:
            row["codes_of_its_own"] = own
        return row


@dataclass(frozen=True)
class FactPattern:
    fact: str
    regex: re.Pattern[str]
    needle: str
    ignore_case: bool
    how: str
    convert: str | None = None
    value: str | None = None  # the fact's value when the pattern matches (`windows` for a C:\ path)
    near: str | None = None  # only within a few lines of this fact's line
    lines: int = 1  # lines the regex may span, from the needle's line on


@dataclass(frozen=True)
class ExplainData:
    sources: dict[str, dict[str, str]]
    families: tuple[Family, ...]
    facts: tuple[FactPattern, ...]


def _source(sources: dict[str, dict[str, str]], key: str, where: str) -> dict[str, str]:
    if key not in sources:
        raise ValueError(f"{where}: source {key!r} is not in the sources table")
    return {"id": key, **sources[key]}


@lru_cache(maxsize=1)
def load_explain_data() -> ExplainData:
    raw = yaml.safe_load(resources.files("builder").joinpath("data/explain_rules.yaml").read_text(encoding="utf-8"))
    sources = {key: {k: str(v) for k, v in value.items()} for key, value in raw["sources"].items()}
    families = []
    for entry in raw["families"]:
        ignore_case = bool(entry.get("ignore_case", False))
        extras = tuple(tuple(compile_template(text, ignore_case) for text in _listed(value))
                       for value in (entry.get("extra") or {}).values())
        causes = tuple(Cause(tuple(compile_template(text, True) for text in _listed(cause.get("when"))),
                             cause["why"], cause.get("fix"))
                       for cause in entry.get("causes") or ())
        families.append(Family(
            id=entry["id"], severity=Severity(entry.get("severity", "error")),
            source=_source(sources, entry["source"], entry["id"]),
            templates=tuple(compile_template(text, ignore_case) for text in entry.get("templates") or ()),
            message=entry["message"], fix=entry["fix"], extras=extras, codes=entry.get("codes"),
            causes=causes, refine=bool(entry.get("refine", False))))
    facts = []
    for fact, patterns in raw["facts"].items():
        for pattern in patterns:
            ignore_case = bool(pattern.get("ignore_case", False))
            flags = re.MULTILINE | (re.IGNORECASE if ignore_case else 0)
            facts.append(FactPattern(fact, re.compile(pattern["re"], flags),
                                     pattern["needle"].lower() if ignore_case else pattern["needle"],
                                     ignore_case, pattern["how"], pattern.get("convert"), pattern.get("value"),
                                     pattern.get("near"), int(pattern.get("lines", 1))))
    return ExplainData(sources, tuple(families), tuple(facts))


def _listed(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def load_rules() -> tuple[Family, ...]:
    """Every message family, in the data file's order (most specific first)."""
    return load_explain_data().families


# --- facts a log states --------------------------------------------------------------------------

@dataclass(frozen=True)
class Fact:
    value: str
    line: int
    how: str  # which kind of line said it ("nvidia-smi header", "from +cu118", ...)

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "line": self.line, "how": self.how}


FACT_ORDER = ("driver", "driver_cuda", "toolkit", "torch", "torch_cuda", "python", "gpu", "sm", "archs", "nccl",
              "os", "platform", "container")
FACT_WORDS = {"driver": "driver", "driver_cuda": "driver's CUDA", "toolkit": "CUDA toolkit", "torch": "torch",
              "torch_cuda": "torch's CUDA", "python": "Python", "gpu": "GPU", "sm": "compute capability",
              "archs": "torch arch list", "nccl": "NCCL", "os": "OS", "platform": "platform",
              "container": "runs in"}


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
    parts = version_tuple(text)
    return CudaVersion(parts[0], parts[1] if len(parts) > 1 else 0) if parts else None


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
        tag = re.search(r"\+cu(\d+)(\d)$", torch.value)
        if tag:
            found["torch_cuda"] = Fact(f"{int(tag.group(1))}.{tag.group(2)}", torch.line, f"from {torch.value}")
    gpu = found.get("gpu")
    if gpu and "sm" not in found:
        capability = capability_of_model(gpu.value)
        if capability:
            found["sm"] = Fact(sm_name(capability), gpu.line, f"from the model name {gpu.value}")


# --- context, hits, findings ---------------------------------------------------------------------

@dataclass(frozen=True)
class ExplainContext:
    """What a rule may read: the log and its facts, and what is known about the host and the spec."""

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

    @cached_property
    def log(self) -> LogText:
        return LogText(self.text)

    @cached_property
    def facts(self) -> LogFacts:
        return extract_facts(self.log)

    @cached_property
    def hits(self) -> dict[str, Hit]:
        return find_hits(self)

    @cached_property
    def machine(self) -> Machine:
        return machine_of(self)


@dataclass(frozen=True)
class Hit:
    """A family's match in the log: the named groups (placeholders), where it is, and the line itself."""

    family: Family
    fields: dict[str, str]
    at: int
    line: int
    evidence: str
    code: ErrorCode | None = None
    cause: Cause | None = None

    def text(self, template: str) -> str:
        # [[...]]: said only when the hit has every field inside; {a|b}: the first field the hit has.
        template = _OPTIONAL.sub(lambda m: m.group(1) if all(self.fields.get(name) for name in
                                                             _FIELD.findall(m.group(1))) else "", template)
        template = _ALTERNATIVES.sub(lambda m: self._first_field(m.group(1).split("|")), template)
        return template.format_map(_Placeholders(self.fields))

    def _first_field(self, names: list[str]) -> str:
        for name in names:
            if self.fields.get(name):
                return "{" + name + "}"
        return "?"


_ALTERNATIVES = re.compile(r"\{(\w+(?:\|\w+)+)\}")
_OPTIONAL = re.compile(r"\[\[(.*?)\]\]")
_FIELD = re.compile(r"\{(\w+)\}")


class _Placeholders(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "?"


@dataclass(frozen=True)
class Refined:
    message: str
    fix: str
    severity: Severity | None = None


Refiner = Callable[[Hit, ExplainContext], Refined]
REFINERS: dict[str, Refiner] = {}


def refines(family_id: str) -> Callable[[Refiner], Refiner]:
    """Register `fn(hit, context) -> Refined` for the data family `family_id` (which says `refine: true`)."""

    def register(fn: Refiner) -> Refiner:
        if family_id in REFINERS:
            raise ValueError(f"{family_id} is refined twice")
        REFINERS[family_id] = fn
        return fn

    return register


def find_hits(context: ExplainContext) -> dict[str, Hit]:
    """The first hit of every family in the log. A code-carrying family's hits resolve to a code, and a
    code with a family of its own is reported there (a family's own templates win over a redirect)."""
    log = context.log
    families = load_rules()
    by_id = {family.id: family for family in families}
    hits: dict[str, Hit] = {}
    redirected: dict[str, Hit] = {}
    for family in families:
        if family.codes:
            _redirect_code_hits(family, load_code_tables()[family.codes], by_id, log, redirected)
            continue
        found = _first_match(family, log)
        if found is not None:
            hits[family.id] = _hit(family, found, log)
    _redirect_bare_code_texts(by_id, log, hits, redirected)
    for family_id, hit in redirected.items():
        hits.setdefault(family_id, hit)
    return _one_per_line(families, hits, log)


def _first_match(family: Family, log: LogText) -> re.Match[str] | None:
    """The first match of the family's first template that matches (templates in the data's order)."""
    for template in family.templates:
        found = template.first(log)
        if found is not None:
            return found
    return None


def _redirect_code_hits(family: Family, table: CodeTable, by_id: dict[str, Family], log: LogText,
                        redirected: dict[str, Hit]) -> None:
    """A code-carrying family's matches, each under its code's own family (else this one), the earliest
    in the log kept per family."""
    for matched in _code_matches(family, log):
        code = _resolve_code(table, matched)
        if code is None:
            continue
        target = by_id[code.family] if code.family else family
        if target.id not in redirected or matched.start() < redirected[target.id].at:
            redirected[target.id] = _hit(target, matched, log, code)


def _redirect_bare_code_texts(by_id: dict[str, Family], log: LogText, hits: dict[str, Hit],
                              redirected: dict[str, Hit]) -> None:
    """A code's printed text on its own (`device-side assert triggered`), for a family not hit otherwise."""
    for table in load_code_tables().values():
        for code in table.codes:
            if code.family in by_id and code.says and (code.bare or len(code.says.split()) >= 4):
                if code.family in hits or code.family in redirected:
                    continue
                said = _bare_template(code.says).first(log)
                if said is not None:
                    redirected[code.family] = _hit(by_id[code.family], said, log, code)


def _one_per_line(families: tuple[Family, ...], hits: dict[str, Hit], log: LogText) -> dict[str, Hit]:
    """Where families read the same log line, the earlier (more specific) one tells it; in the data's order,
    with each hit's extras and cause."""
    ordered: dict[str, Hit] = {}
    lines_told: set[int] = set()
    for family in families:
        told = hits.get(family.id)
        if told is not None and told.line not in lines_told:
            ordered[family.id] = _with_extras_and_cause(told, log)
            lines_told.add(told.line)
    return ordered


@lru_cache(maxsize=512)
def _bare_template(says: str) -> Template:
    return compile_template(says.rstrip(".").replace("{", "{{").replace("}", "}}"), ignore_case=True)


def _code_matches(family: Family, log: LogText) -> Iterator[re.Match[str]]:
    for template in family.templates:
        yield from itertools.islice(template.matches(log), MAX_CODE_HITS)


def _resolve_code(table: CodeTable, found: re.Match[str]) -> ErrorCode | None:
    """The code a match names: its printed text first (numbers changed meaning in CUDA 10.1), then its
    enumerator name, then its number (today's numbering, else the one before CUDA 10.1)."""
    groups = {key: value for key, value in found.groupdict().items() if value}
    if "error" in groups:
        code = table.by_text(groups["error"])
        if code is not None:
            return code
        name_in_text = re.search(r"\b(?:cudaError\w+|CUDA_ERROR_[A-Z_]+|NVML_ERROR_[A-Z_]+|nccl[A-Z]\w+)",
                                 groups["error"])
        if name_in_text:
            return table.by_name(name_in_text.group(0))
    for key in ("name", "driver"):
        if key in groups:
            code = table.by_name(groups[key])
            if code is not None:
                return code
    if "code" in groups:  # a number the template ties to this enumeration
        return table.by_number(int(groups["code"]))
    return None


def _hit(family: Family, found: re.Match[str], log: LogText, code: ErrorCode | None = None) -> Hit:
    fields: dict[str, str] = {}
    _merge_groups(fields, found)
    if code is not None:
        fields.setdefault("code", str(code.code))
        fields["name"] = code.name
        fields["meaning"] = code.meaning
        if code.says:
            fields.setdefault("error", code.says)
    return Hit(family, fields, found.start(), log.line_of(found.start()), log.line_text(found.start())[:EVIDENCE_CHARS],
               code)


def _with_extras_and_cause(hit: Hit, log: LogText) -> Hit:
    fields = dict(hit.fields)
    for extra in hit.family.extras:
        for template in extra:
            more = template.first(log)
            if more is not None:
                _merge_groups(fields, more)
                break
    cause = None
    for candidate in hit.family.causes:
        if not candidate.when:
            cause = candidate
            break
        for template in candidate.when:
            # The hit's own line first (`undefined symbol: _ZN3c10` says which library), then the log.
            matched = template.regex.search(hit.evidence) or template.first(log)
            if matched is not None:
                _merge_groups(fields, matched)
                cause = candidate
                break
        if cause is not None:
            break
    return Hit(hit.family, fields, hit.at, hit.line, hit.evidence, hit.code, cause)


def _merge_groups(fields: dict[str, str], found: re.Match[str]) -> None:
    for name, value in found.groupdict().items():
        if value:
            fields.setdefault(name, value.strip().rstrip(".").strip())


@dataclass(frozen=True)
class ExplainReport:
    source: str
    findings: tuple[Finding, ...]
    facts: LogFacts = field(default_factory=LogFacts)
    next_step: str | None = None
    input: LogInput | None = None

    @property
    def recognised(self) -> bool:
        return bool(self.findings)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"source": self.source, "recognised": self.recognised,
                                "findings": [finding.as_dict() for finding in self.findings],
                                "facts": self.facts.as_dict()}
        if self.next_step:
            data["next"] = self.next_step
        if self.input is not None and (self.input.note() or self.input.binary or self.input.encoding != "utf-8"):
            data["input"] = self.input.as_dict()
        return data

    def text_lines(self) -> list[str]:
        note = self.input.note() if self.input else None
        if self.input is not None and self.input.binary:
            return [f"not a text log ({_mib(self.input.size)}, {self.input.binary}): envbuild explain reads "
                    "error logs and tracebacks"]
        lines = []
        if not self.recognised:
            said = f"nothing recognised in this log ({note})" if note else "nothing recognised in this log"
            lines.append(f"{said}; next: {self.next_step}")
        elif note:
            lines.append(f"note: {note}")
        if self.facts:
            lines.append(f"facts: {self.facts.text()}")
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
                 targets: Iterable[Target] = (), compat: CompatData | None = None,
                 log_input: LogInput | None = None) -> ExplainReport:
    """Every family recognised in `text`, in the data file's order (most specific first), with the facts."""
    if isinstance(text, bytes):
        log_input = decode_log(text)
        text = log_input.text
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    context = ExplainContext(text=text, source=source, driver=driver, gpus=tuple(gpus),
                             processes=tuple(processes), targets=tuple(targets), compat=compat or load_compat())
    if log_input is not None and log_input.binary:
        return ExplainReport(source, (), LogFacts(), None, log_input)
    findings = tuple(rule_registry().run(context))
    next_step = None if findings else next_step_from_facts(context)
    return ExplainReport(source, findings, context.facts, next_step, log_input)


def explain_stream(stream: IO[bytes], source: str = "-", **context: Any) -> ExplainReport:
    """`explain_text` of what `read_log` takes from a stream (bounded memory for any input)."""
    log_input = read_log(stream)
    return explain_text(log_input.text, source, log_input=log_input, **context)


@lru_cache(maxsize=1)
def rule_registry() -> RuleRegistry[ExplainContext]:
    registry: RuleRegistry[ExplainContext] = RuleRegistry("explain")
    families = load_rules()
    for family in families:
        if family.refine and family.id not in REFINERS:
            raise ValueError(f"{family.id} says refine: true but builder/host/explain.py has no @refines for it")
        registry.add(family.id, _family_rule(family), family.message)
    stray = set(REFINERS) - {family.id for family in families if family.refine}
    if stray:
        raise ValueError(f"@refines for families without `refine: true` in the data: {', '.join(sorted(stray))}")
    return registry


def _family_rule(family: Family) -> Callable[[ExplainContext], list[Finding]]:
    def run(context: ExplainContext) -> list[Finding]:
        hit = context.hits.get(family.id)
        if hit is None:
            return []
        refined = REFINERS[family.id](hit, context) if family.refine else default_said(hit)
        location = Location(None if context.source == "-" else context.source, hit.line)
        details: dict[str, Any] = dict(hit.fields)
        if hit.code is not None:
            details["code"] = hit.code.as_dict()
        return [Finding(family.id, refined.severity or family.severity, refined.message, refined.fix, location,
                        hit.evidence, details)]

    return run


def default_said(hit: Hit) -> Refined:
    """The data's message and fix with the placeholders filled, the cause's why and fix, the code's fix."""
    message, fix = hit.text(hit.family.message), hit.text(hit.family.fix)
    if hit.code is not None and hit.code.family != hit.family.id and hit.code.fix:
        fix = hit.code.fix
    if hit.cause is not None:
        message = f"{message}: {hit.text(hit.cause.why)}"
        if hit.cause.fix and (hit.cause.when or not (hit.code and hit.code.fix)):
            fix = hit.text(hit.cause.fix)
    return Refined(message, fix)


# --- catalogue -----------------------------------------------------------------------------------

def catalogue() -> dict[str, Any]:
    """Every family with its source and templates, and every error-code table with its source."""
    tables = load_code_tables()
    return {"families": [family.catalogue_row() for family in load_rules()],
            "code_tables": [{"enum": table.enum, "family": table.family, "source": table.source,
                             "codes": len(table.codes)} for table in tables.values()],
            "facts": sorted({pattern.fact for pattern in load_explain_data().facts})}


def catalogue_lines() -> list[str]:
    data = catalogue()
    lines = [f"{len(data['families'])} message families; error codes: "
             + ", ".join(f"{row['enum']} ({row['codes']})" for row in data["code_tables"])]
    for row in data["families"]:
        source = row["source"]
        lines.append(f"{row['id']}  [{source['project']}: {source['file']}, {source['version']}]")
        for template in row["templates"]:
            lines.append(f"    {template}")
        if row.get("codes"):
            lines.append(f"    {row['codes']}")
        if row.get("codes_of_its_own"):
            lines.append(f"    codes: {', '.join(row['codes_of_its_own'])}")
    return lines


# --- the machine a log ran on: the log's facts first, this host second --------------------------

@dataclass(frozen=True)
class Machine:
    """The driver and GPUs a verdict is about, and where each came from ("log" or "this host")."""

    driver_version: str | None = None
    driver_cuda: CudaVersion | None = None
    driver_from: str | None = None
    capabilities: tuple[tuple[str, str, tuple[int, int]], ...] = ()  # (name, sm, capability)
    gpus_from: str | None = None

    @property
    def knows_driver(self) -> bool:
        return self.driver_version is not None or self.driver_cuda is not None

    def driver_words(self) -> str:
        """`the log's driver 450.119.03 (CUDA 11.0)`, `this host's driver (CUDA 12.2)`."""
        whose = "the log's driver" if self.driver_from == "from the log" else "this host's driver"
        cuda = f"CUDA {self.driver_cuda}" if self.driver_cuda else None
        if self.driver_version:
            return f"{whose} {self.driver_version}" + (f" ({cuda})" if cuda else "")
        return f"{whose} ({cuda})"


def machine_of(context: ExplainContext) -> Machine:
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


def driver_runs(machine: Machine, cuda: CudaVersion, compat: CompatData) -> str | None:
    """'runs', 'minor' (minor-version compatibility) or None: can this machine's driver run a CUDA build?

    The driver's version decides when the log states it (a forward-compatibility package makes
    nvidia-smi report a newer CUDA than the driver itself runs); else the CUDA the driver reports.
    The same rules as doctor's driver verdict: at or above the toolkit's driver, fully; at or above the
    oldest driver of that CUDA major, under minor-version compatibility; else not at all.
    """
    if machine.driver_version:
        toolkit = compat.toolkit(cuda)
        full = toolkit.full_compat_driver if toolkit else None
        minimum = compat.min_driver(cuda)
        version = version_tuple(machine.driver_version)
        if full and version >= version_tuple(full):
            return "runs"
        trusted = trusted_driver_cuda(machine, compat)
        if trusted is not None and trusted >= cuda and (minimum is None or version >= version_tuple(minimum)):
            return "runs"
        if minimum and version >= version_tuple(minimum):
            return "minor"
        if minimum or full:
            return None
    if machine.driver_cuda is None:
        return "runs"  # nothing known about the driver: no reason to rule a build out
    if cuda <= machine.driver_cuda:
        return "runs"
    if cuda.major == machine.driver_cuda.major:
        return "minor"
    return None


def trusted_driver_cuda(machine: Machine, compat: CompatData) -> CudaVersion | None:
    """The driver's CUDA, unless its version says it cannot be the driver's own: a forward-compatibility
    package (cuda-compat) makes nvidia-smi report the package's CUDA, newer than any CUDA whose toolkit
    needs a newer driver than this one."""
    if machine.driver_cuda is None or not machine.driver_version:
        return machine.driver_cuda
    version = version_tuple(machine.driver_version)
    needs_newer = [cuda for cuda, toolkit in compat.cuda.items()
                   if version < version_tuple(toolkit.full_compat_driver)]
    if needs_newer and machine.driver_cuda >= min(needs_newer):
        return None
    return machine.driver_cuda


def gpus_covered(machine: Machine, archs: list[str]) -> bool:
    return all(arch_coverage(archs, capability).covered for _, _, capability in machine.capabilities)


@dataclass(frozen=True)
class Build:
    line: str
    torch: str
    cuda: CudaVersion
    how: str  # "runs" or "minor"

    def words(self) -> str:
        minor = " (minor-version compatibility: no PTX JIT)" if self.how == "minor" else ""
        return f"torch {self.torch} with CUDA {self.cuda}{minor}"


def released_builds(compat: CompatData) -> list[tuple[str, str, CudaVersion, list[str]]]:
    """(release line, latest version, CUDA, arch list) of every released (not projected) torch build."""
    return [(release.line, release.latest, cuda, archs) for release in compat.releases()
            if release.confidence != "projected" for cuda, archs in release.archs.items()]


def runnable_builds(context: ExplainContext, capability: tuple[int, int] | None = None) -> list[Build]:
    """Released builds the machine runs (driver) with kernels for its GPUs (and `capability`), newest
    torch first and, within one torch, the oldest CUDA (the widest driver range)."""
    machine = context.machine
    builds = []
    for line, latest, cuda, archs in released_builds(context.compat):
        how = driver_runs(machine, cuda, context.compat)
        if how is None or not gpus_covered(machine, archs):
            continue
        if capability is not None and not arch_coverage(archs, capability).covered:
            continue
        builds.append(Build(line, latest, cuda, how))
    return sorted(builds, key=lambda b: (tuple(-p for p in version_tuple(b.line)), b.cuda))


def runnable_targets(context: ExplainContext, capability: tuple[int, int] | None = None) -> list[tuple[Target, str]]:
    """The spec's targets the machine runs, with 'runs' or 'minor'."""
    chosen = []
    for target in context.targets:
        if not target.cuda:
            continue
        how = driver_runs(context.machine, target.cuda, context.compat)
        if how is None:
            continue
        if target.archs and not gpus_covered(context.machine, target.archs):
            continue
        if capability is not None and (not target.archs or not arch_coverage(target.archs, capability).covered):
            continue
        chosen.append((target, how))
    return chosen


def best_build_words(context: ExplainContext, capability: tuple[int, int] | None = None) -> str | None:
    """The spec's target, else the released build, to recommend; words for a fix, or None."""
    targets = runnable_targets(context, capability)
    if targets:
        fully = [target for target, how in targets if how == "runs"]
        return f"target {(fully or [targets[0][0]])[0].key}"
    builds = runnable_builds(context, capability)
    if not builds:
        return None
    full = [build for build in builds if build.how == "runs" and build.line == builds[0].line]
    return (full[0] if full else builds[0]).words()


def next_step_from_facts(context: ExplainContext) -> str:
    """For a log without a known family: a verdict the facts allow, else where to look."""
    facts = context.facts
    torch_cuda = facts.cuda("torch_cuda")
    machine = context.machine
    if torch_cuda and machine.knows_driver and driver_runs(machine, torch_cuda, context.compat) is None:
        better = best_build_words(context)
        return (f"torch {facts.get('torch') or ''} is built for CUDA {torch_cuda}, which {machine.driver_words()} "
                f"cannot run: use {better or 'a build for the driver'}, or update the NVIDIA driver to >= "
                f"{context.compat.min_driver(torch_cuda) or 'a newer one'}").replace("torch  is", "torch is")
    archs = facts.get("archs")
    capability = facts.capability
    if archs and capability and not arch_coverage(archs.split(), capability).covered:
        better = best_build_words(context, capability) or "a build with its kernels"
        return f"the GPU ({sm_name(capability)}) is not in torch's arch list ({archs}): use {better}"
    if facts:
        return ("find the first error line of the log (the first Traceback or `error`, not the last) and run "
                "`envbuild explain` on it; `envbuild doctor SPEC` where it ran checks driver, GPUs and build")
    return ("paste the full error output (the first Traceback, not only its last line); `envbuild explain "
            "--catalogue` lists the messages explain knows")


# --- helpers the refiners share ------------------------------------------------------------------

def capability_of(sm: str) -> tuple[int, int] | None:
    """`sm_120` -> (12, 0), `sm_86` -> (8, 6)."""
    digits = re.fullmatch(r"sm_(\d+)(\d)[a-z]?", sm)
    return (int(digits.group(1)), int(digits.group(2))) if digits else None


def _major_minor(version: str) -> tuple[int, int]:
    """`9.0` -> (9, 0): a compute capability as the log writes it."""
    parts = version_tuple(version)
    return parts[0], parts[1] if len(parts) > 1 else 0


def _with_facts(message: str, context: ExplainContext, *names: str) -> str:
    said = [f"{FACT_WORDS[name]} {context.facts.get(name)}" for name in names if context.facts.get(name)]
    return message + (f" (the log: {', '.join(said)})" if said else "")


def _host_gpu_words(context: ExplainContext) -> str:
    known = [gpu for gpu in context.gpus if gpu.capability]
    if not known:
        return ""
    return "; this host: " + ", ".join(f"GPU {gpu.index} {gpu.name} ({gpu.sm})" for gpu in known)


def _update_driver_words(context: ExplainContext, cuda: CudaVersion | None = None) -> str:
    """'update the NVIDIA driver to >= X (runs CUDA Y builds)' for the newest CUDA of the data, or `cuda`."""
    cuda = cuda or max(c for _, _, c, _ in released_builds(context.compat))
    minimum = context.compat.min_driver(cuda)
    return f"update the NVIDIA driver to >= {minimum} (runs CUDA {cuda.major}.x builds)" if minimum \
        else "update the NVIDIA driver"


# --- refiners ------------------------------------------------------------------------------------

@refines("explain.cuda.arch-not-in-build")
def _arch_not_in_build(hit: Hit, context: ExplainContext) -> Refined:
    sm = hit.fields.get("sm", "")
    capability = capability_of(sm)
    message = hit.text(hit.family.message)
    if context.machine.driver_from == "from the log":
        message += f"; {context.machine.driver_words()}"
    if capability is None:
        return Refined(message, hit.text(hit.family.fix))
    targets = runnable_targets(context, capability)
    if targets:
        target = targets[0][0]
        return Refined(message, f"use target {target.key} (its build has {sm} kernels): "
                                f"`envbuild image SPEC --cuda {target.cuda}`")
    builds = runnable_builds(context, capability)
    if builds:
        same_line = [b for b in builds if b.line == builds[0].line]
        build = next((b for b in same_line if b.how == "runs"), same_line[0])
        runs = "this driver runs" if context.machine.knows_driver else \
            f"(it needs driver >= {context.compat.min_driver(build.cuda)})"
        fix = (f"use {build.words()}, the newest released build with {sm} kernels {runs}: a target "
               f"`cuda: \"{build.cuda}\"` with that torch in the spec, then `envbuild doctor SPEC` on this host to "
               "confirm")
        if build.how == "minor":
            toolkit = context.compat.toolkit(build.cuda)
            if toolkit:
                fix += f"; or update the driver: >= {toolkit.full_compat_driver} runs it without minor-version limits"
        return Refined(message, fix)
    if context.machine.knows_driver and any(arch_coverage(archs, capability).covered
                                            for *_, archs in released_builds(context.compat)):
        return Refined(message, f"every released build with {sm} kernels needs a newer driver than "
                                f"{context.machine.driver_words()}: {_update_driver_words(context)}")
    return Refined(message, f"no released torch build in envbuild's data has {sm} kernels: "
                            "build torch from source with TORCH_CUDA_ARCH_LIST")


@refines("explain.cuda.arch-too-old")
def _arch_too_old(hit: Hit, context: ExplainContext) -> Refined:
    cap = hit.fields.get("cap", "")
    capability = capability_of(f"sm_{cap.replace('.', '')}") if cap else None
    message = hit.text(hit.family.message)
    maximum = hit.fields.get("max")
    if capability and maximum and capability > _major_minor(maximum):
        return Refined(f"{hit.fields.get('gpu', 'the GPU')} is compute capability {cap}, newer than the newest this "
                       f"torch build compiled kernels for ({maximum}): it runs through PTX compiled at first use",
                       "nothing to fix (the first steps are slower while kernels compile); a build with "
                       f"sm_{cap.replace('.', '')} kernels starts faster", Severity.WARNING)
    if capability is None:
        return Refined(message, hit.text(hit.family.fix))
    builds = runnable_builds(context, capability)
    if builds:
        return Refined(message, f"use {builds[0].words()}, the newest released build with kernels for "
                                f"compute capability {cap}; later builds dropped it")
    last = [(line, latest, cuda) for line, latest, cuda, archs in released_builds(context.compat)
            if arch_coverage(archs, capability).covered]
    if last:
        line, latest, cuda = max(last, key=lambda b: (version_tuple(b[0]), (-b[2].major, -b[2].minor)))
        return Refined(message, f"the last release in envbuild's data with kernels for {cap} is torch {latest} with "
                                f"CUDA {cuda}; newer torch needs a newer GPU")
    return Refined(message, f"no torch build in envbuild's data supports compute capability {cap} (the oldest "
                            "supported there is 3.7): the GPU is too old for current PyTorch; build an old torch "
                            "from source or use the CPU")


@refines("explain.cuda.no-kernel-image")
def _no_kernel_image(hit: Hit, context: ExplainContext) -> Refined:
    message = hit.text(hit.family.message) + _host_gpu_words(context)
    named: list[tuple[str, str, tuple[int, int] | None]] = [
        (gpu.name, gpu.sm or "", gpu.capability) for gpu in context.gpus if gpu.capability]
    if not named:
        named = [(name, sm, capability) for name, sm, capability in context.machine.capabilities]
    for name, sm, capability in named[:1]:
        if capability is None:
            break
        targets = runnable_targets(context, capability)
        if targets:
            return Refined(message, f"use target {targets[0][0].key} (its build has {sm} kernels for {name})")
        build = best_build_words(context, capability)
        if build:
            return Refined(message, f"use {build} (it has {sm} kernels for {name})")
    return Refined(message, hit.text(hit.family.fix))


@refines("explain.cuda.driver-too-old")
def _driver_too_old(hit: Hit, context: ExplainContext) -> Refined:
    found = hit.fields.get("found")
    if not found or not found.lstrip("-").isdigit():
        return Refined(hit.text(hit.family.message), hit.text(hit.family.fix))
    driver_cuda = CudaVersion(*driver_cuda_from_nvml(int(found)))
    cuda_text = str(driver_cuda)
    message = hit.text(hit.family.message.replace("{driver_cuda}", cuda_text))
    message = _with_facts(message, context, "torch", "driver")
    runnable = _runnable_on(driver_cuda, context)
    majors = sorted(int(major) for major in context.compat.minor_version_compat if int(major) > driver_cuda.major)
    newer = context.compat.min_driver(CudaVersion(majors[0], 0)) if majors else None
    update = f"update the NVIDIA driver (>= {newer} runs CUDA {majors[0]}.x builds)" if newer \
        else "update the NVIDIA driver"
    if runnable:
        return Refined(message, f"use a target this driver runs: {runnable}; or {update}")
    return Refined(message, f"no torch build in envbuild's data runs on a CUDA {cuda_text} driver: {update}")


def _runnable_on(driver_cuda: CudaVersion, context: ExplainContext) -> str:
    """The spec's targets (else released builds) a driver of this CUDA runs: fully first, then minor-version."""
    machine = Machine(driver_version=None, driver_cuda=driver_cuda, capabilities=context.machine.capabilities)
    if context.targets:
        words = []
        for target in context.targets:
            if target.cuda:
                how = driver_runs(machine, target.cuda, context.compat)
                if how:
                    words.append(target.key + (" (minor-version compatibility)" if how == "minor" else ""))
        return ", ".join(words)
    builds = [(line, latest, cuda, driver_runs(machine, cuda, context.compat))
              for line, latest, cuda, archs in released_builds(context.compat) if gpus_covered(machine, archs)]
    words = []
    for how, note in (("runs", ""), ("minor", " (minor-version compatibility: no PTX JIT)")):
        fitting = [(line, latest, cuda) for line, latest, cuda, said in builds if said == how]
        if fitting:
            line, latest, cuda = max(fitting, key=lambda b: (version_tuple(b[0]), b[2]))
            words.append(f"torch {latest} with CUDA {cuda}{note}")
    return ", or ".join(words)


@refines("explain.cuda.driver-insufficient")
def _driver_insufficient(hit: Hit, context: ExplainContext) -> Refined:
    message = _with_facts(hit.text(hit.family.message), context, "torch", "toolkit")
    machine = context.machine
    if context.driver is not None and context.driver.cuda is None and context.driver.driver_version is None \
            and machine.driver_from != "from the log":
        return Refined(message + "; on this host no driver answered at all", hit.text(hit.family.fix))
    if machine.driver_cuda is not None or machine.driver_version is not None:
        whose = "the log's driver" if machine.driver_from == "from the log" else "this host's driver"
        said = f"{message}; {whose} supports CUDA {machine.driver_cuda}" \
            if machine.driver_cuda else f"{message}; {machine.driver_words()}"
        better = best_build_words(context)
        return Refined(said, f"use {better or 'a build this driver runs'}; or update the NVIDIA driver")
    return Refined(message, hit.text(hit.family.fix))


@refines("explain.cuda.forward-compat-unsupported")
def _forward_compat(hit: Hit, context: ExplainContext) -> Refined:
    message = hit.text(hit.family.message)
    machine = context.machine
    fix = hit.text(hit.family.fix)
    if machine.driver_version:
        message += f"; {machine.driver_words()}"
        if machine.driver_cuda and trusted_driver_cuda(machine, context.compat) is None:
            message += (f": nvidia-smi reports the compatibility package's CUDA {machine.driver_cuda}, "
                        "not the driver's own")
        better = best_build_words(context)
        if better:
            fix += f"; a build this driver runs without the compatibility package: {better}"
    return Refined(message, fix)


@refines("explain.cuda.ptx-toolchain")
def _ptx_toolchain(hit: Hit, context: ExplainContext) -> Refined:
    message = hit.text(hit.family.message)
    toolkit, machine = context.facts.cuda("toolkit"), context.machine
    said = []
    if toolkit:
        said.append(f"the log's nvcc is CUDA {toolkit}")
    if machine.knows_driver:
        said.append(machine.driver_words())
    if said:
        message += f" ({'; '.join(said)})"
    fix = hit.text(hit.family.fix)
    if toolkit and machine.knows_driver and driver_runs(machine, toolkit, context.compat) is None:
        fix = (f"{_update_driver_words(context, toolkit)} so it understands CUDA {toolkit} PTX, or build with a "
               f"CUDA toolkit the driver supports (<= {machine.driver_cuda})"
               if machine.driver_cuda else f"{_update_driver_words(context, toolkit)}; {fix}")
    return Refined(message, fix)


# nvcc's first release that knows each compute_XY (CUDA toolkit release notes).
NVCC_FIRST = {"35": "5.0", "37": "6.5", "50": "6.0", "52": "6.5", "53": "7.0", "60": "8.0", "61": "8.0", "62": "8.0",
              "70": "9.0", "72": "9.2", "75": "10.0", "80": "11.0", "86": "11.1", "87": "11.4", "89": "11.8",
              "90": "11.8", "100": "12.8", "101": "12.8", "103": "12.9", "110": "13.0", "120": "12.8", "121": "12.9"}


@refines("explain.nvcc.unsupported-arch")
def _nvcc_arch(hit: Hit, context: ExplainContext) -> Refined:
    arch = hit.fields.get("arch", "")
    first = NVCC_FIRST.get(arch)
    toolkit = context.facts.get("toolkit")
    message = hit.text(hit.family.message)
    if first:
        message += f"; compute_{arch} needs nvcc from CUDA {first} on" + (f", the log's nvcc is {toolkit}" if toolkit
                                                                            else "")
    fix = hit.text(hit.family.fix)
    if first:
        older = _older_arch(arch, toolkit)
        fix = (f"build with a CUDA toolkit >= {first} (point CUDA_HOME at it; for torch extensions the same major "
               f"as torch's CUDA), or leave compute_{arch} out: TORCH_CUDA_ARCH_LIST=\"{older}+PTX\" "
               "builds PTX the driver compiles for this GPU at first use")
    return Refined(message, fix)


# Architectures of Jetson and other Tegra boards: never the one to build for a discrete GPU.
TEGRA_ARCHS = {"53", "62", "72", "87", "101", "110"}


def _older_arch(arch: str, toolkit: str | None) -> str:
    known = [a for a, first in NVCC_FIRST.items() if a not in TEGRA_ARCHS
             and (toolkit is None or version_tuple(first) <= version_tuple(toolkit))]
    below = [a for a in known if int(a) < int(arch or "0")]
    best = max(below, key=int) if below else "75"
    return f"{best[:-1]}.{best[-1]}"


@refines("explain.extension.cuda-mismatch")
def _extension_cuda_mismatch(hit: Hit, context: ExplainContext) -> Refined:
    message = hit.text(hit.family.message)
    found, torch_cuda = hit.fields.get("found"), hit.fields.get("torch_cuda")
    fix = hit.text(hit.family.fix)
    found_cuda = cuda_from_text(found) if found else None
    if found_cuda and torch_cuda and context.machine.knows_driver:
        how = driver_runs(context.machine, found_cuda, context.compat)
        if how is None:
            fix = (f"install a CUDA {torch_cuda} toolkit and point CUDA_HOME at it (`conda install -c nvidia "
                   f"cuda-nvcc={torch_cuda}` or NVIDIA's installer); a torch built for CUDA {found} would not run on "
                   f"{context.machine.driver_words()}")
    return Refined(message, fix)


# NCCL's own words for the usual causes live in the data (explain.nccl.error's causes).

_SIZE = re.compile(r"([\d.]+) ?([GMK])i?B")


def _bytes(size: str | None) -> float | None:
    found = _SIZE.fullmatch(size or "")
    if not found:
        return 0.0 if size == "0 bytes" else None
    return float(found.group(1)) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[found.group(2)]


@refines("explain.cuda.out-of-memory")
def _out_of_memory(hit: Hit, context: ExplainContext) -> Refined:
    wanted, total, free = (hit.fields.get(key) for key in ("wanted", "total", "free"))
    parts = [f"asked for {wanted}" if wanted else None, f"total {total}" if total else None,
             f"free {free}" if free else None]
    said = "; ".join(part for part in parts if part)
    message = "the GPU ran out of memory" + (f" ({said})" if said else "")
    wanted_bytes, total_bytes, free_bytes = _bytes(wanted), _bytes(total), _bytes(free)
    if wanted_bytes is not None and total_bytes and wanted_bytes > total_bytes:
        return Refined(f"{message}: one allocation is larger than the whole GPU",
                       "the batch, resolution or sequence length is far too big for this GPU: reduce it (gradient "
                       "accumulation keeps the effective batch) or move to a GPU with more memory; no allocator "
                       "setting helps here")
    if wanted_bytes and free_bytes and free_bytes > wanted_bytes:
        message += ": more is free than was asked for, but not in one piece (fragmentation), or another process " \
                   "took it meanwhile"
    holders = sorted((p for p in context.processes if p.memory_mib), key=lambda p: -(p.memory_mib or 0))
    if holders:
        listed = ", ".join(f"pid {p.pid} {p.name or '?'} {p.memory_mib} MiB" for p in holders[:3])
        message += f"; on this host now: {listed}"
    return Refined(message, hit.text(hit.family.fix))


@refines("explain.conda.cuda-virtual-package")
def _cuda_virtual_package(hit: Hit, context: ExplainContext) -> Refined:
    needed, host = hit.fields.get("needed"), hit.fields.get("host")
    said = [f"the packages need __cuda {needed}" if needed else None,
            f"the solving machine says __cuda {host}" if host else None]
    detail = "; ".join(part for part in said if part)
    message = ("the solver's __cuda virtual package (the CUDA of this machine's driver, or CONDA_OVERRIDE_CUDA) "
               "does not fit the CUDA packages asked for" + (f" ({detail})" if detail else ""))
    return Refined(message, hit.text(hit.family.fix))


@refines("explain.system.glibc-too-old")
def _glibc_too_old(hit: Hit, context: ExplainContext) -> Refined:
    needed = hit.fields.get("needed", "?")
    library = hit.fields.get("library")
    message = f"a binary needs glibc >= {needed}" + (f" ({library})" if library else "") + \
        ", newer than the glibc of this system"
    return Refined(message, hit.text(hit.family.fix))


@refines("explain.pip.cuda-wheel-index")
def _pip_index(hit: Hit, context: ExplainContext) -> Refined:
    requirement = hit.fields.get("req", "torch")
    tag_found = re.search(r"\+(cu\d+)", requirement)
    version = re.search(r"==([\d.]+)", requirement)
    offered = re.search(r"from versions:? ([^)\n]*)", context.text)
    if version and offered and version.group(1) not in re.split(r"[,\s]+", offered.group(1)):
        python = context.facts.get("python")
        python_said = f" ({python})" if python else ""
        return Refined(f"pip found no {requirement}: the index offers no torch {version.group(1)} for this Python"
                       f"{python_said} and platform at all (only: {offered.group(1).strip()[:80]})",
                       "torch wheels exist only for the Python versions of their release: use a Python that torch "
                       f"{version.group(1)} supports, or a newer torch; envbuild checks the spec's Python against its "
                       "compatibility data (`envbuild targets SPEC`)")
    if tag_found:
        tag = tag_found.group(1)
        index = default_pip_index().format(tag=tag)
        return Refined(f"pip found no {requirement}: +{tag} builds are not on the Python package index",
                       f"install it from the PyTorch wheel index: `pip install {requirement.split('+')[0]} --index-url "
                       f"{index}`; envbuild's pip route picks that index for each target")
    return Refined(hit.text(hit.family.message), "check the Python version and the index; envbuild's pip route picks "
                                                 "the index for each target")


@refines("explain.checkpoint.module-prefix")
def _module_prefix(hit: Hit, context: ExplainContext) -> Refined:
    text = context.text
    checkpoint_prefixed = re.search(r'(?i)unexpected keys?(?:\(s\))? in state_dict: ?[\'"]module\.', text) or \
        re.search(r'unexpected key "module\.', text)
    if checkpoint_prefixed:
        return Refined("the checkpoint was saved from nn.DataParallel / DistributedDataParallel (its keys start with "
                       "`module.`), the model loading it is not wrapped",
                       "strip the prefix: `torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state_dict, "
                       "\"module.\")` before `model.load_state_dict(state_dict)`; when saving a wrapped model save "
                       "`model.module.state_dict()`")
    return Refined("the model is wrapped in nn.DataParallel / DistributedDataParallel (it expects `module.` keys), "
                   "the checkpoint was saved from a plain model",
                   "load into the inner model: `model.module.load_state_dict(state_dict)` (or load before wrapping); "
                   "`torch.nn.modules.utils.consume_prefix_in_state_dict_if_present` strips a prefix the other way")


@refines("explain.xformers.built-for-other-torch")
def _xformers(hit: Hit, context: ExplainContext) -> Refined:
    built, have = hit.fields.get("built", "?"), hit.fields.get("have", "?")
    if have.endswith("+cpu"):
        return Refined(f"xFormers was built for torch {built}, and this environment has a CPU-only torch ({have})",
                       "install a CUDA build of torch (the +cuXYZ wheel from the PyTorch index, or a spec target with "
                       "`cuda: X.Y`), then the xformers built for it")
    return Refined(hit.text(hit.family.message), hit.text(hit.family.fix))


@refines("explain.distributed.child-failed")
def _child_failed(hit: Hit, context: ExplainContext) -> Refined:
    exitcode = hit.fields.get("exitcode", "")
    meanings = {
        "-9": ("the child was killed with SIGKILL, which is what the Linux out-of-memory killer sends: host RAM "
               "(not GPU memory) ran out, often while loading a checkpoint on every rank at once",
               "check `dmesg | grep -i -e killed -e oom` on the host; load with less host memory (fewer ranks "
               "loading at once, low_cpu_mem_usage=True, mmap=True in torch.load, fewer DataLoader workers) or "
               "raise the memory limit of the machine or container"),
        "-7": ("the child died of SIGBUS, usually shared memory (/dev/shm) running out",
               "give the container more shared memory (`--shm-size 8g` or `--ipc=host`), or fewer DataLoader workers"),
        "-11": ("the child crashed with SIGSEGV, inside native code (an extension built for another torch, a "
                "driver or library mismatch)", "rerun one rank alone with `python -X faulthandler` to see where"),
        "-6": ("the child aborted (SIGABRT), often NCCL's watchdog ending a process after a timeout or error",
               "read the rank's own log above for the NCCL or CUDA error that came first"),
    }
    if exitcode in meanings:
        why, fix = meanings[exitcode]
        return Refined(f"{hit.text(hit.family.message)}: {why}", fix)
    return Refined(hit.text(hit.family.message), hit.text(hit.family.fix))

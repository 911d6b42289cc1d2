"""A message as its source prints it, with named placeholders for the variable parts (`CUDA error:
{error}`), compiled to a regex and the literal text (its needle) a log must hold for the regex to run."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from builder.explain.log_text import LogText

# Occurrences of a template's fallback word looked at (the word is shorter, so more common).
MAX_WORD_WINDOWS = 2_000
# Pasted excerpts (issue threads, chat) wrap long messages; a program's own log does not. Only texts up
# to this size are searched for a template's fallback word when its needle is missing.
WRAPPED_TEXT_CHARS = 2 << 20

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
    # The template counts only in a log that also holds one of these (`Invalid device id` is DataParallel's
    # when its traceback passes through data_parallel.py).
    only_with: tuple[Template, ...] = ()
    # ... and none of these: a message another family tells better (`Missing key(s)` with a `module.` prefix).
    unless: tuple[Template, ...] = ()

    def matches(self, log: LogText) -> Iterator[re.Match[str]]:
        """Every match in the log, in order (at most one per window)."""
        if self.only_with and not any(other.first(log) is not None for other in self.only_with):
            return
        if any(other.first(log) is not None for other in self.unless):
            return
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
    # A space before an opening bracket may be missing in a retyped or pasted message (`too old(found`).
    body = re.escape(words[0]) + "".join((r"\s*" if word[0] in "([" else r"\s+") + re.escape(word)
                                         for word in words[1:])
    before = r"\s*" if literal[:1].isspace() else ""
    after = r"\s*" if literal[-1:].isspace() else ""
    return before + body + after

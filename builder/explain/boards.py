"""GPU boards as people write them in prose ("RTX 5070", "a 5080 GPU", "my 4090", "3060 Ti", "A100", "H100 80GB",
"L4", "GTX 1080Ti", "Jetson Orin"), read only as names the GPU table knows (builder/data/gpus.yaml: NVIDIA's list,
its generation rules, and `written`: the series word a bare number leaves out and the words that must stand next
to a bare number or a short name, so a port, a version or a date is not a board)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from builder.specs.gpus import model_capability, written_names

SCAN_CHARS = 64 * 1024  # boards are named in a log's head (the report) or its tail (the comment under it)
SHORT_NAME_CHARS = 3  # L4, T4, A30: names this short count only with a word beside them

_EDGE_BEFORE = r"(?<![\w.:/@#-])"
_EDGE_AFTER = r"(?![\w.:/%-]|\.\d)"
_TIER = r"(?:[ \t]?(?P<tier>Ti|TI|SUPER|Super))?"
# A series word and its number (`RTX 5070`, `rtx5070`, `GTX 1080Ti`), NVIDIA's brand words before it allowed.
_PREFIXED = re.compile(rf"{_EDGE_BEFORE}(?:NVIDIA[ \t]+)?(?:GeForce[ \t]+)?(?P<series>RTX|GTX|GT|MX)[ \t-]?"
                       rf"(?P<number>\d{{3,4}}){_TIER}{_EDGE_AFTER}", re.IGNORECASE)
# A GeForce number alone (`a 5080 GPU`, `my 4090`, `3060 Ti`).
_BARE = re.compile(rf"{_EDGE_BEFORE}(?P<number>(?:10|16|20|30|40|50)[5-9]0){_TIER}{_EDGE_AFTER}")
# A data-centre or workstation name (`A100`, `H100 80GB`, `L4`, `A10G`, `GH200`), upper case as NVIDIA writes it.
_SHORT = re.compile(rf"{_EDGE_BEFORE}(?P<name>(?:GH|GB|[ABHLTPVK])\d{{1,3}}[GS]?)"
                    rf"(?P<suffix>(?:[ \t-]?(?:\d+GB|SXM\d?|PCIe|PCIE|NVL))*){_EDGE_AFTER}")
_JETSON = re.compile(r"\bJetson[ \t]+(?:AGX[ \t]+)?(?:Orin(?:[ \t]+(?:NX|Nano))?|Xavier(?:[ \t]+NX)?|Nano|TX2|Thor)\b",
                     re.IGNORECASE)
_WORD_BEFORE = re.compile(r"([\w]+)[^\w\n]{0,2}$")
_WORD_AFTER = re.compile(r"^[^\w\n]{0,2}([\w]+)")


@dataclass(frozen=True)
class WrittenBoard:
    name: str  # the board as the table names it (`RTX 5080`, `RTX 3060 Ti`, `H100 80GB`)
    written: str  # as the text wrote it
    at: int


def boards_in(text: str) -> Iterator[WrittenBoard]:
    """The boards `text` names, in order, each one the GPU table gives a compute capability."""
    found = sorted((match.start(), kind, match) for kind, pattern in
                   (("prefixed", _PREFIXED), ("bare", _BARE), ("short", _SHORT), ("jetson", _JETSON))
                   for match in pattern.finditer(text))
    for _, kind, match in found:
        name = _named(kind, match)
        if name is None or (_needs_context(kind, match) and not _has_context(text, match)):
            continue
        if model_capability(name).capability is not None:
            yield WrittenBoard(name, match.group(0).strip(), match.start())


def first_board(text: str) -> WrittenBoard | None:
    """The first board named in the text's head or tail (SCAN_CHARS each)."""
    head = next(boards_in(text[:SCAN_CHARS]), None)
    if head is not None or len(text) <= SCAN_CHARS:
        return head
    start = max(SCAN_CHARS, len(text) - SCAN_CHARS)
    tail = next(boards_in(text[start:]), None)
    return WrittenBoard(tail.name, tail.written, tail.at + start) if tail else None


def _named(kind: str, match: re.Match[str]) -> str | None:
    groups = match.groupdict()
    said = (groups.get("tier") or "").lower()
    tier = {"ti": " Ti", "super": " SUPER"}.get(said, "")
    if kind == "prefixed":
        return f"{groups['series'].upper()} {groups['number']}{tier}"
    if kind == "bare":
        series = written_names().series.get(groups["number"][:2])
        return f"{series} {groups['number']}{tier}" if series else None
    if kind == "short":
        return f"{groups['name']} {groups['suffix'].strip(' -')}" if groups.get("suffix") else groups["name"]
    return " ".join(match.group(0).split())


def _needs_context(kind: str, match: re.Match[str]) -> bool:
    if kind == "bare":
        return not match.group("tier")  # `3060 Ti` names a board by itself
    return kind == "short" and len(match.group("name")) <= SHORT_NAME_CHARS and not match.group("suffix")


def _has_context(text: str, match: re.Match[str]) -> bool:
    words = written_names()
    line_start = text.rfind("\n", 0, match.start()) + 1
    before = _WORD_BEFORE.search(text, line_start, match.start())
    line_end = text.find("\n", match.end())
    after = _WORD_AFTER.search(text[match.end():line_end if line_end != -1 else len(text)])
    return bool((before and before.group(1).casefold() in words.before)
                or (after and after.group(1).casefold() in words.after))

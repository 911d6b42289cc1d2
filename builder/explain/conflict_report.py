"""A resolver's conflict report read as facts: every requirement line it prints (who requires what), and the
pair of requirements on one package that no version meets.

The forms, as their sources print them (recorded in explain_judgements.yaml, `resolver_conflicts`):
- pip's resolver (src/pip/_internal/resolution/resolvelib/factory.py, get_installation_error): `Cannot install
  A and B because these package versions have conflicting dependencies.`, then under `The conflict is caused
  by:` one line per cause: `The user requested R`, `P V depends on R`, `The user requested (constraint) R`;
  a requirement's specifiers joined with ` and ` (requirements.py, format_for_error: `torch<2.5 and >=2.4`).
- uv's resolver (crates/uv-resolver/src/pubgrub/report.rs): `Because P==V depends on R and ..., we can conclude
  that ...`, `all versions of P depend on R`, `you require R`, wrapped at the terminal's width."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

USER = "the user"  # the parent of a requirement the user asked for (pip's `The user requested`, uv's `you require`)
REPORT_CHARS = 6000  # a report is read this far from its header
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]\s]*\])?"
_SPEC = r"(?:\s*(?:===|==|!=|~=|<=|>=|<|>)\s*[\w.*+!-]+(?:(?:,|\s+and\s+)\s*(?:===|==|!=|~=|<=|>=|<|>)\s*[\w.*+!-]+)*)?"
_PIP_HEADER = "The conflict is caused by:"
_PIP_USER = re.compile(rf"^[ \t]*The user requested (?:\(constraint\) )?(?P<req>{_NAME}{_SPEC})", re.MULTILINE)
_PIP_DEPENDS = re.compile(rf"^[ \t]*(?P<parent>{_NAME}) (?P<version>\d[\w.+!-]*) depends on (?P<req>{_NAME}{_SPEC})",
                          re.MULTILINE)
_UV_HEADERS = ("No solution found when resolving", "we can conclude that")
_UV_DEPENDS = re.compile(rf"(?:all versions of )?(?P<parent>{_NAME})(?P<range>{_SPEC}) depends? on "
                         rf"(?P<req>{_NAME}{_SPEC})")
_UV_REQUIRE = re.compile(r"you require (?P<reqs>.+?)(?:, we can conclude|, | and (?=[a-z])|$)")
_BOX = re.compile(r"[│╰─▶×]+")


@dataclass(frozen=True)
class Requirement:
    """One requirement line: `parent` (USER for the user's own) at `parent_version` needs `name` `spec`."""

    parent: str
    parent_version: str
    name: str
    spec: str  # as a specifier set's text (`==2.2.0`, `>=2.4,<2.5`); empty: any version
    line: int
    text: str  # the requirement as the report wrote it

    @property
    def who(self) -> str:
        if self.parent == USER:
            return "the user's requirement"
        return f"{self.parent} {self.parent_version}".strip()

    @property
    def wanted(self) -> str:
        return f"{self.name}{self.spec}"


@dataclass(frozen=True)
class Conflict:
    """Two requirements on one package that no version meets together (`apart`), or the report's first two on
    one package when no version could be shown to miss (`apart` False)."""

    first: Requirement
    second: Requirement
    apart: bool


LineOf = Callable[[int], int]  # a position in the text -> the pasted log's line number


def read_report(text: str, start: int, line_of: LineOf) -> list[Requirement]:
    """Every requirement line of the conflict report around `start` (pip's, else uv's)."""
    found = _pip_lines(text, start, line_of)
    return found if found else _uv_lines(text, start, line_of)


def _pip_lines(text: str, start: int, line_of: LineOf) -> list[Requirement]:
    header = text.find(_PIP_HEADER, max(0, start - REPORT_CHARS))
    if header == -1:
        return []
    block_end = _block_end(text, header + len(_PIP_HEADER))
    found: list[tuple[int, Requirement]] = []
    for match in _PIP_USER.finditer(text, header, block_end):
        found.append((match.start(), _requirement(USER, "", match.group("req"), line_of(match.start()))))
    for match in _PIP_DEPENDS.finditer(text, header, block_end):
        found.append((match.start(), _requirement(match.group("parent"), match.group("version"), match.group("req"),
                                                  line_of(match.start()))))
    return [requirement for _, requirement in sorted(found, key=lambda pair: pair[0])]


def _block_end(text: str, start: int) -> int:
    """The end of pip's cause list: its blank line, `To fix this`, or REPORT_CHARS on."""
    end = min(len(text), start + REPORT_CHARS)
    for marker in ("\n\n", "To fix this", "Additionally, some packages"):
        at = text.find(marker, start + 1, end)
        if at != -1:
            end = at
    return end


def _uv_lines(text: str, start: int, line_of: LineOf) -> list[Requirement]:
    """uv's `Because ...` sentences, their wrapped lines joined (each requirement keeps the line it starts on)."""
    header = next((at for head in _UV_HEADERS if (at := text.find(head, max(0, start - REPORT_CHARS))) != -1), -1)
    if header == -1:
        return []
    begin = text.rfind("\n", 0, header) + 1
    end = _block_end(text, header)
    joined, starts, at = "", [], begin
    for raw in text[begin:end].split("\n"):
        starts.append((len(joined), line_of(at)))
        joined += _BOX.sub(" ", raw).strip() + " "
        at += len(raw) + 1
    joined = re.sub(r"(?<=[<>=,]) (?=\d)", "", joined)  # a wrap inside `torch>= 2.4` closes up

    def line_at(at: int) -> int:
        return max(line for offset, line in starts if offset <= at)

    found: list[tuple[int, Requirement]] = []
    for match in _UV_DEPENDS.finditer(joined):
        version = match.group("range").strip().lstrip("=")
        found.append((match.start(), _requirement(match.group("parent"), version, match.group("req"),
                                                  line_at(match.start()))))
    for match in _UV_REQUIRE.finditer(joined):
        for each in re.split(r",\s*|\s+and\s+", match.group("reqs")):
            if re.fullmatch(rf"{_NAME}{_SPEC}", each.strip()):
                found.append((match.start(), _requirement(USER, "", each.strip(), line_at(match.start()))))
    return [requirement for _, requirement in sorted(found, key=lambda pair: pair[0])]


def _requirement(parent: str, version: str, text: str, line: int) -> Requirement:
    name = re.match(_NAME, text)
    assert name is not None  # the patterns above start every requirement with a name
    spec = re.sub(r"\s+and\s+", ",", text[name.end():]).replace(" ", "")
    return Requirement(_bare(parent) if parent != USER else USER, version, _bare(name.group(0)), spec, line,
                       text.strip())


def _bare(name: str) -> str:
    """A distribution's name without extras, as pip normalises it (`Unsloth_Zoo[x]` -> `unsloth-zoo`)."""
    return str(canonicalize_name(name.split("[", 1)[0]))


def specifiers(spec: str) -> SpecifierSet | None:
    try:
        return SpecifierSet(spec)
    except InvalidSpecifier:
        return None


def conflict(requirements: list[Requirement], known: dict[str, list[str]]) -> Conflict | None:
    """The first pair of requirements from different parents on one package that no version meets together;
    `known` lists releases per package besides those the specifiers name. None: no package is required twice."""
    first_pair: Conflict | None = None
    for index, one in enumerate(requirements):
        for other in requirements[index + 1:]:
            if other.name != one.name or other.parent == one.parent or one.spec == other.spec:
                continue
            if _apart(one.spec, other.spec, known.get(one.name, [])):
                return Conflict(one, other, True)
            first_pair = first_pair or Conflict(one, other, False)
    return first_pair


def _apart(first: str, second: str, known: list[str]) -> bool:
    """No version meets both specifier sets: tried on every version either names, one patch above each, and the
    known releases (a specifier that does not parse shows nothing)."""
    one, other = specifiers(first), specifiers(second)
    if one is None or other is None or not first or not second:
        return False
    return not any(version in one and version in other for version in _candidates(first + "," + second, known))


def _candidates(spec: str, known: list[str]) -> list[Version]:
    versions = []
    for text in [*re.findall(r"\d[\w.+!]*", spec), *known]:
        try:
            version = Version(text.rstrip(".*"))
        except InvalidVersion:
            continue
        versions.append(version)
        release = (*version.release, 0, 0)[:3]
        versions.append(Version(f"{release[0]}.{release[1]}.{release[2] + 1}"))
    return versions


@lru_cache(maxsize=256)
def newest_meeting(spec: str, releases: tuple[str, ...]) -> str | None:
    """The newest of `releases` that `spec` admits."""
    wanted = specifiers(spec)
    if wanted is None:
        return None
    fits = [release for release in releases if Version(release) in wanted]
    return max(fits, key=Version) if fits else None

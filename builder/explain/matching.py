"""The families a log holds, as hits: each family's first match; a code-carrying family's matches resolved
to their code and reported under the code's own family where it has one; one hit per log line; the
hit's fields filled into the family's words."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from builder.explain.error_codes import CodeTable, ErrorCode, load_code_tables
from builder.explain.families import Cause, Family, load_rules
from builder.explain.log_text import LogText
from builder.explain.message_templates import Template, compile_template
from builder.safe_io.text import terminal_safe

EVIDENCE_CHARS = 300  # characters of the log line a finding quotes
# Distinct codes one code-carrying family reports (each becomes at most one finding anyway).
MAX_CODE_HITS = 50


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


def find_hits(log: LogText) -> dict[str, Hit]:
    """The first hit of every family in the log. A code-carrying family's hits resolve to a code, and a
    code with a family of its own is reported there (a family's own templates win over a redirect)."""
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
    # What the log says is quoted on a terminal: its escape sequences (OSC 52 writes the clipboard) go.
    fields = {key: terminal_safe(value) for key, value in fields.items()}
    evidence = terminal_safe(log.line_text(found.start()))[:EVIDENCE_CHARS]
    return Hit(family, fields, found.start(), log.line_of(found.start()), evidence, code)


def _with_extras_and_cause(hit: Hit, log: LogText) -> Hit:
    fields = dict(hit.fields)
    for extra in hit.family.extras:
        more = next((found for found in (template.first(log) for template in extra) if found is not None), None)
        if more is not None:
            _merge_groups(fields, more)
    cause = _first_cause(hit, log, fields)
    return Hit(hit.family, fields, hit.at, hit.line, hit.evidence, hit.code, cause)


def _first_cause(hit: Hit, log: LogText, fields: dict[str, str]) -> Cause | None:
    """The family's first cause whose condition holds (or that has none); its groups join the fields."""
    for candidate in hit.family.causes:
        if not candidate.when:
            return candidate
        for template in candidate.when:
            # The hit's own line first (`undefined symbol: _ZN3c10` says which library), then the log.
            matched = template.regex.search(hit.evidence) or template.first(log)
            if matched is not None:
                _merge_groups(fields, matched)
                return candidate
    return None


def _merge_groups(fields: dict[str, str], found: re.Match[str]) -> None:
    for name, value in found.groupdict().items():
        if value:
            fields.setdefault(name, value.strip().rstrip(".").strip())

"""explain's data (`builder/data/explain_rules.yaml`) loaded and checked: the message families (templates
from a named source, message, fix, the causes told apart by what else the log says) and the patterns of
the facts a log states."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from builder.explain.error_codes import load_code_tables
from builder.explain.message_templates import Template, compile_template
from builder.findings import Severity
from builder.yamlio import load_data


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
                               "templates": [_said(template) for template in self.templates]}
        tables = load_code_tables()
        if self.codes:
            row["codes"] = f"every {self.codes} without a family of its own"
        own = [f"{table.enum} {entry.code} {entry.name}" for table in tables.values() for entry in table.codes
               if entry.family == self.id]
        if own:
            row["codes_of_its_own"] = own
        return row


def _said(template: Template) -> str:
    said = template.text
    if template.only_with:
        said += f" (only with: {' | '.join(other.text for other in template.only_with)})"
    if template.unless:
        said += f" (unless: {' | '.join(other.text for other in template.unless)})"
    return said


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
    raw = load_data("explain_rules.yaml")
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
            templates=tuple(_template(value, ignore_case) for value in entry.get("templates") or ()),
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


def _template(value: str | dict[str, Any], ignore_case: bool) -> Template:
    """A template as text, or as `{text: ..., only_with: [...], unless: [...]}`: counted only in a log holding
    one of `only_with`, and none of `unless`."""
    if isinstance(value, str):
        return compile_template(value, ignore_case)
    template = compile_template(value["text"], ignore_case)
    return replace(template,
                   only_with=tuple(compile_template(text, True) for text in _listed(value.get("only_with"))),
                   unless=tuple(compile_template(text, True) for text in _listed(value.get("unless"))))


def _listed(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def load_rules() -> tuple[Family, ...]:
    """Every message family, in the data file's order (most specific first)."""
    return load_explain_data().families

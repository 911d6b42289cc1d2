"""`envbuild explain`'s answer: every family recognised in a log as findings (`explain_text`,
`explain_stream`) with the log's facts and, when nothing is recognised, a next step; as lines or JSON;
and the catalogue of what explain knows."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import IO, Any

from builder.explain import compat_fixes, message_fixes
from builder.explain.compat_fixes import next_step_from_facts
from builder.explain.context import ExplainContext, HostGpu
from builder.explain.error_codes import load_code_tables
from builder.explain.facts import LogFacts
from builder.explain.families import Family, load_explain_data, load_rules
from builder.explain.judging import UsedFact, facts_of_hit, judge, phase_at
from builder.explain.log_input import LogInput, decode_log, read_log, size_text
from builder.explain.normalise import normalise_log
from builder.explain.refining import REFINERS, default_said
from builder.explain.unrecognised import ErrorLine, likely_error_lines, raised_in_lines
from builder.findings import Finding, Location, RuleRegistry
from builder.specs.compat import CompatData, load_compat
from builder.specs.target import Target
from smoke.driver import DriverReading
from smoke.nvsmi import SmiProcess

EVIDENCE_IN_CAUSE = 160  # characters of the log's line a cause quotes

# The refiners' modules, imported for their @refines: each fills REFINERS as it loads.
REFINER_MODULES = (compat_fixes, message_fixes)


@dataclass(frozen=True)
class ExplainReport:
    source: str
    findings: tuple[Finding, ...]
    facts: LogFacts = field(default_factory=LogFacts)
    next_step: str | None = None
    input: LogInput | None = None
    likely_error: tuple[ErrorLine, ...] = ()  # when nothing is recognised: the lines read as the error
    raised_in: tuple[ErrorLine, ...] = ()  # when nothing is recognised: the traceback's last frames

    @property
    def recognised(self) -> bool:
        return bool(self.findings)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"source": self.source, "recognised": self.recognised,
                                "findings": [finding.as_dict() for finding in self.findings],
                                "facts": self.facts.as_dict()}
        if self.next_step:
            data["next"] = self.next_step
        if self.likely_error:
            data["likely_error"] = [entry.as_dict() for entry in self.likely_error]
        if self.raised_in:
            data["raised_in"] = [entry.as_dict() for entry in self.raised_in]
        if self.input is not None and (self.input.note() or self.input.binary or self.input.encoding != "utf-8"):
            data["input"] = self.input.as_dict()
        return data

    def text_lines(self) -> list[str]:
        note = self.input.note() if self.input else None
        if self.input is not None and self.input.binary:
            return [f"not a text log ({size_text(self.input.size)}, {self.input.binary}): envbuild explain reads "
                    "error logs and tracebacks"]
        lines = []
        if not self.recognised:
            said = f"nothing recognised in this log ({note})" if note else "nothing recognised in this log"
            lines.append(f"{said}; next: {self.next_step}")
            lines.extend(f"read as the error (no family explain knows): line {entry.line}: `{entry.text}`"
                         for entry in self.likely_error)
            lines.extend(f"raised in (the traceback's last frames): line {entry.line}: `{entry.text}`"
                         for entry in self.raised_in)
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
                 gpus: Iterable[HostGpu] = (), processes: Iterable[SmiProcess] = (),
                 targets: Iterable[Target] = (), compat: CompatData | None = None,
                 log_input: LogInput | None = None) -> ExplainReport:
    """Every family recognised in `text`, in the data file's order (most specific first), with the facts."""
    if isinstance(text, bytes):
        log_input = decode_log(text)
        text = log_input.text
    normalised = normalise_log(text)
    context = ExplainContext(text=normalised.text, source=source, origin=normalised.origin, ranks=normalised.ranks,
                             driver=driver,
                             gpus=tuple(gpus), processes=tuple(processes), targets=tuple(targets),
                             compat=compat or load_compat())
    if log_input is not None and log_input.binary:
        return ExplainReport(source, (), LogFacts(), None, log_input)
    findings = tuple(rule_registry().run(context))
    next_step = None if findings else next_step_from_facts(context)
    likely_error = () if findings else likely_error_lines(normalised.text)
    raised_in = () if findings else raised_in_lines(normalised.text)
    return ExplainReport(source, findings, context.facts, next_step, log_input, likely_error, raised_in)


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
            raise ValueError(f"{family.id} says refine: true but builder/explain/ has no @refines for it")
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
        judged = judge(hit, context, refined)
        if judged is not None:
            message, fix, used, basis = judged.cause, judged.fix, judged.facts, "facts"
        else:
            message, fix, used = refined.message, refined.fix, facts_of_hit(hit)
            # The cause rests on the message the log printed: it is quoted with its line, and its phase.
            message = f"{message} (line {hit.line}: `{hit.evidence[:EVIDENCE_IN_CAUSE]}`)"
            phase = phase_at(context, hit.at)
            if phase is not None:
                message += f"; printed in a {phase.how} ({phase.detail}, line {phase.line})"
                used = (*used, UsedFact("phase", f"{phase.how}: {phase.detail}", phase.line))
            # A refiner chose its fix with the log's facts and the data, a fix with placeholders is filled with
            # the message's facts; else the data's fix is the family's own.
            # A cause told apart by what else the log says (`when`) is a fact that narrows the fix.
            told = hit.cause.fix if hit.cause is not None and hit.cause.fix else family.fix
            narrowed = hit.cause is not None and bool(hit.cause.when) and bool(hit.cause.fix)
            basis = "facts" if family.refine or narrowed or "{" in told else "family"
            if basis == "family" and fix:
                fix = f"{fix} (the family's general fix: no fact in this log narrows it)"
        details.update(cause=message, facts_used=[fact.as_dict() for fact in used], fix_from=basis)
        return [Finding(family.id, refined.severity or family.severity, message, fix, location, hit.evidence,
                        details)]

    return run


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

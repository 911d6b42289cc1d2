"""The answer rule of `make bench-realworld`: a case passes when explain's first finding states the cause its
thread settled on and gives the fix that worked, not merely when the family is right.

An expectation holds `cause_must` (each item must appear in the first finding's cause), `fix_must` (each in
its fix) and `fix_must_not` (none in its fix). Matching is case-insensitive with whitespace collapsed, and an
item `a | b` passes when any alternative appears. `recognised: false` marks a log of a family no rule can
know: the right answer is then "not recognised", with every `cause_must` item among the facts read or the
lines it quoted as the likely error and the traceback frames it quoted as where it was raised.
The same rule scores tests/corpus/realworld-blind (its schema says so)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builder.explain.report import ExplainReport

ANSWER_KEYS = ("cause_must", "fix_must", "fix_must_not")


def has_answer(expect: Mapping[str, Any]) -> bool:
    """The expectation says what the answer must state (else only the old family rule can score it)."""
    return any(expect.get(key) for key in ANSWER_KEYS) or expect.get("recognised") is False


def folded(text: str) -> str:
    return " ".join(text.casefold().split())


def item_found(item: str, text: str) -> bool:
    """`item` (alternatives split by ` | `) appears in `text`, in any case, whitespace collapsed."""
    haystack = folded(text)
    return any(folded(alternative) in haystack for alternative in item.split("|") if alternative.strip())


def cause_of(report: ExplainReport) -> str:
    finding = report.findings[0]
    return str(finding.details.get("cause") or finding.message)


def answer_problems(expect: Mapping[str, Any], report: ExplainReport) -> list[str]:
    """Why the report's answer misses the expectation; empty when it meets it."""
    if expect.get("recognised") is False:
        if report.findings:
            return [f"named {report.findings[0].rule} for a family no rule knows (expected: not recognised)"]
        # What it read: the facts and the lines it quoted as the likely error (never a family's fix).
        read = " ".join([report.facts.text(), *(entry.text for entry in (*report.likely_error, *report.raised_in))])
        return [f"facts read lack {item!r}" for item in expect.get("cause_must") or () if not item_found(item, read)]
    if not report.findings:
        return ["nothing recognised"]
    cause, fix = cause_of(report), report.findings[0].fix or ""
    problems = [f"cause lacks {item!r}" for item in expect.get("cause_must") or () if not item_found(item, cause)]
    problems += [f"fix lacks {item!r}" for item in expect.get("fix_must") or () if not item_found(item, fix)]
    problems += [f"fix names {item!r}" for item in expect.get("fix_must_not") or () if item_found(item, fix)]
    if problems:
        problems.append(f"[{report.findings[0].rule}] cause: {cause[:200]} | fix: {fix[:200]}")
    return problems

"""The first finding of `envbuild explain` on a text, as the answer tests read it: its family, its cause and its
fix. Shared by the tests that check a family on a line written from its upstream message."""

from __future__ import annotations

from builder.explain.report import explain_text


def answer(text: str) -> tuple[str, str, str]:
    report = explain_text(text)
    assert report.findings, f"nothing recognised in {text!r}"
    finding = report.findings[0]
    return finding.rule, str(finding.details["cause"]), finding.fix or ""

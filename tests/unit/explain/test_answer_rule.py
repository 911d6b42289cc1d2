"""The bench's answer rule (bench/answers.py): alternatives, case and whitespace, and "not recognised"."""

from __future__ import annotations

import pytest

from bench.answers import answer_problems, item_found
from builder.explain.report import explain_text

pytestmark = pytest.mark.unit

DEVICE_ORDINAL = "RuntimeError: CUDA error: invalid device ordinal\n"


def test_an_item_matches_any_alternative_in_any_case_with_whitespace_collapsed() -> None:
    assert item_found("cu118 | cu121", "install the  CU121\nbuild")
    assert not item_found("cu118 | cu121", "install the cu124 build")


def test_a_report_passes_only_when_cause_and_fix_hold_their_items() -> None:
    report = explain_text(DEVICE_ORDINAL)
    assert answer_problems({"cause_must": ["GPU index | ordinal"], "fix_must": ["device_count"]}, report) == []
    missed = answer_problems({"cause_must": ["sm_90"], "fix_must_not": ["CUDA_VISIBLE_DEVICES"]}, report)
    assert any("cause lacks 'sm_90'" in why for why in missed)
    assert any("fix names 'CUDA_VISIBLE_DEVICES'" in why for why in missed)


def test_an_unknown_family_passes_only_as_not_recognised_with_its_facts_read() -> None:
    unknown = "Python 3.11.4\nValueError: the frobnicator refused the widget\n"
    assert answer_problems({"recognised": False, "cause_must": ["3.11"]}, explain_text(unknown)) == []
    assert answer_problems({"recognised": False}, explain_text(DEVICE_ORDINAL))


def test_not_recognised_passes_on_the_error_line_it_quotes_and_never_on_a_fix() -> None:
    unknown = "step 3 ok\nfrom fairseq import libnat\nImportError: cannot import name 'libnat'\n"
    report = explain_text(unknown)
    assert not report.findings
    assert [(entry.line, entry.text) for entry in report.likely_error] == [
        (3, "ImportError: cannot import name 'libnat'")]
    assert answer_problems({"recognised": False, "cause_must": ["libnat"]}, report) == []
    # What it did not read cannot pass: the upstream answer is not among the lines it quoted.
    assert answer_problems({"recognised": False, "cause_must": ["build_ext"]}, report) == [
        "facts read lack 'build_ext'"]

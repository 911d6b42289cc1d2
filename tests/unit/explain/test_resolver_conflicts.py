"""A resolver's conflict report read as facts (builder/explain/conflict_report.py): every requirement line of
pip's `The conflict is caused by:` and of uv's `Because ...` explanation, and the judgement that names the pair
no release meets, with the fix for that pair."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bench.answers import cause_of
from builder.explain.conflict_report import USER, conflict, read_report
from builder.explain.report import explain_text

pytestmark = pytest.mark.unit

PIP_REPORT = """\
ERROR: Cannot install unsloth-zoo==2024.11.1 and xformers==0.0.24 because these package versions have conflicting dependencies.

The conflict is caused by:
    xformers 0.0.24 depends on torch==2.2.0
    unsloth-zoo 2024.11.1 depends on torch>=2.4.0

To fix this you could try to:
1. loosen the range of package versions you've specified
2. remove package versions to allow pip to attempt to solve the dependency conflict

ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/
"""

UV_REPORT = """\
  × No solution found when resolving dependencies:
  ╰─▶ Because xformers==0.0.24 depends on torch==2.2.0 and unsloth-zoo>=2024.11.1 depends on torch>=2.4.0, we
      can conclude that xformers==0.0.24 and unsloth-zoo>=2024.11.1 are incompatible.
      And because you require xformers==0.0.24 and unsloth-zoo>=2024.11.1, we can conclude that your
      requirements are unsatisfiable.
"""


def _line_of(text: str) -> Callable[[int], int]:
    return lambda at: text.count("\n", 0, at) + 1


def _first(log: str) -> tuple[str, str, str]:
    report = explain_text(log.encode(), "log")
    assert report.findings, report
    return report.findings[0].rule, cause_of(report), report.findings[0].fix or ""


def test_pip_requirement_lines_are_facts_with_their_lines() -> None:
    read = read_report(PIP_REPORT, 0, _line_of(PIP_REPORT))
    assert [(each.parent, each.parent_version, each.name, each.spec, each.line) for each in read] == [
        ("xformers", "0.0.24", "torch", "==2.2.0", 4), ("unsloth-zoo", "2024.11.1", "torch", ">=2.4.0", 5)]


def test_pip_joins_a_requirements_specifiers_with_and() -> None:
    text = "The conflict is caused by:\n    The user requested torch<2.5 and >=2.4\n    foo 1.0 depends on torch==2.1.0\n"
    read = read_report(text, 0, _line_of(text))
    assert read[0].parent == USER and read[0].spec == "<2.5,>=2.4"
    pair = conflict(read, {})
    assert pair is not None and pair.apart


def test_ranges_that_overlap_are_not_a_conflict_pair() -> None:
    text = "The conflict is caused by:\n    a 1.0 depends on torch>2.4\n    b 2.0 depends on torch<2.5\n"
    pair = conflict(read_report(text, 0, _line_of(text)), {})
    assert pair is not None and not pair.apart  # 2.4.1 meets both: these two lines are not the conflict


def test_uv_explanation_is_read_across_its_wrapped_lines() -> None:
    read = read_report(UV_REPORT, 0, _line_of(UV_REPORT))
    wanted = {(each.parent, each.wanted) for each in read}
    assert {("xformers", "torch==2.2.0"), ("unsloth-zoo", "torch>=2.4.0"), (USER, "xformers==0.0.24")} <= wanted


@pytest.mark.parametrize(("log", "rule"), [(PIP_REPORT, "explain.pip.resolution-impossible"),
                                           (UV_REPORT, "explain.uv.no-solution")])
def test_the_cause_names_the_pair_the_lines_state_and_the_fix_moves_the_side_behind(log: str, rule: str) -> None:
    fired, cause, fix = _first(log)
    assert fired == rule
    assert "xformers 0.0.24 needs torch==2.2.0" in cause and "torch>=2.4.0" in cause and "unsloth-zoo" in cause
    assert "torchvision" not in cause + fix  # no pair the lines do not name
    assert fix.startswith("upgrade xformers") and "torch>=2.4.0" in fix


def test_a_user_pin_behind_a_dependency_is_the_pin_to_change() -> None:
    log = ("ERROR: Cannot install torch==2.0.1 and xformers==0.0.24 because these package versions have conflicting "
           "dependencies.\n\nThe conflict is caused by:\n    The user requested torch==2.0.1\n"
           "    xformers 0.0.24 depends on torch==2.2.0\n")
    _, cause, fix = _first(log)
    assert "the user's requirement needs torch==2.0.1 (line 4)" in cause
    assert fix.startswith("change your requirement torch==2.0.1 to one that xformers 0.0.24 allows (torch==2.2.0)")


def test_a_companion_behind_gets_its_pair_from_the_compatibility_data() -> None:
    log = ("ERROR: Cannot install torchvision==0.17.0 and foo==1.0 because these package versions have conflicting "
           "dependencies.\n\nThe conflict is caused by:\n    torchvision 0.17.0 depends on torch==2.2.0\n"
           "    foo 1.0 depends on torch>=2.3,<2.4\n")
    _, _, fix = _first(log)
    assert "torchvision==0.18" in fix and "torch==2.3." in fix


def test_no_lines_read_keeps_the_general_fix_and_says_so() -> None:
    _, _, fix = _first("ERROR: Cannot install a and b because these package versions have conflicting dependencies.\n")
    assert "general fix" in fix

"""The fault catalogue (tests/faults/cases.py) as pytest parameters, and the judgement every case gets:
what the unit and the system fault tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.cases import CASES
from tests.faults.harness import Case, Unsupported, run_case, world_up

MARKS = {"unit": pytest.mark.unit, "world": pytest.mark.world, "docker": pytest.mark.docker}


def fault_cases(*needs: str) -> list:
    """The catalogue's cases that need one of `needs`, each marked with what it needs."""
    return [pytest.param(case, id=case.id, marks=MARKS[case.needs]) for case in CASES if case.needs in needs]


def judge_fault(case: Case, folder: Path) -> None:
    if case.needs != "unit" and not world_up():
        pytest.skip("the offline world is not up: run through `make test`")
    try:
        outcome = run_case(case, folder)
    except Unsupported as exc:
        pytest.skip(str(exc))
    if case.pending and not outcome.clean:
        pytest.xfail(f"{case.pending}: {outcome.report()}")
    assert outcome.clean, outcome.report()

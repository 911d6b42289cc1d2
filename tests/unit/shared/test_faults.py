"""The fault catalogue (tests/faults/cases.py) as tests: every bad input or broken surrounding ends
in its exit code and one `Error:` line with the cause and a fix, no traceback, nothing left behind
(files, $TMPDIR, processes, containers, tags) and nothing of the user's lost. The cases that need the
world or the engine run in tests/system/test_faults_world.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.cases import CASES
from tests.unit.shared.faults_helpers import fault_cases, judge_fault


def test_the_catalogue_covers_every_command() -> None:
    commands = {case.args[0] for case in CASES if case.args}
    assert commands >= {"targets", "render", "lint", "lock", "image", "images", "smoke", "doctor", "init", "ci",
                        "matrix", "onboard"}
    assert len(CASES) >= 60


test_the_catalogue_covers_every_command = pytest.mark.unit(test_the_catalogue_covers_every_command)


@pytest.mark.unit
def test_every_boundary_class_has_cases_a_unit_run_judges() -> None:
    from tests.faults.harness import BOUNDARIES

    unit = {case.boundary for case in CASES if case.needs == "unit"}
    assert unit == set(BOUNDARIES), set(BOUNDARIES) - unit


@pytest.mark.parametrize("case", fault_cases("unit"))
def test_fault(case, tmp_path: Path) -> None:
    judge_fault(case, tmp_path / "case")

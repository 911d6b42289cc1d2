"""The fault catalogue (tests/faults/cases.py) as tests: every bad input or broken surrounding ends
in its exit code and one `Error:` line with the cause and a fix, no traceback, nothing left behind
(files, $TMPDIR, processes, containers, tags) and nothing of the user's lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.cases import CASES
from tests.faults.harness import Unsupported, run_case, world_up

MARKS = {"unit": pytest.mark.unit, "world": pytest.mark.world, "docker": pytest.mark.docker}


def test_the_catalogue_covers_every_command() -> None:
    commands = {case.args[0] for case in CASES if case.args}
    assert commands >= {"targets", "render", "lint", "lock", "image", "images", "smoke", "doctor", "init", "ci",
                        "matrix", "onboard"}
    assert len(CASES) >= 60


test_the_catalogue_covers_every_command = pytest.mark.unit(test_the_catalogue_covers_every_command)


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id, marks=MARKS[case.needs]) for case in CASES])
def test_fault(case, tmp_path: Path) -> None:
    if case.needs != "unit" and not world_up():
        pytest.skip("the offline world is not up: run through `make test`")
    try:
        outcome = run_case(case, tmp_path / "case")
    except Unsupported as exc:
        pytest.skip(str(exc))
    if case.pending and not outcome.clean:
        pytest.xfail(f"{case.pending}: {outcome.report()}")
    assert outcome.clean, outcome.report()

"""The fault catalogue's cases that need the offline world or the engine (tests/faults/cases.py): each ends
in its exit code and one `Error:` line with the cause and a fix, no traceback, nothing left behind and
nothing of the user's lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.shared.faults_helpers import fault_cases, judge_fault


@pytest.mark.parametrize("case", fault_cases("world", "docker"))
def test_fault(case, tmp_path: Path) -> None:
    judge_fault(case, tmp_path / "case")

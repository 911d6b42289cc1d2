"""doctor's verdicts name the suite's failures and host marks (smoke/gpu_compat.json) by key: every key doctor uses
is one the data has, so a renamed or dropped entry fails here instead of silently changing a verdict."""

from __future__ import annotations

import pytest

from builder.host import driver_failures, hostkind
from smoke import gpu_compat

pytestmark = pytest.mark.unit


def test_the_failures_doctor_gives_a_verdict_are_the_suites() -> None:
    keys = {failure.key for failure in gpu_compat.driver_failures()}
    assert set(driver_failures._CAUSES) <= keys, sorted(set(driver_failures._CAUSES) - keys)


def test_the_host_kinds_marks_are_the_suites() -> None:
    signs = {sign.sign for sign in gpu_compat.host_signs()}
    assert hostkind.UNIX_SIGNS and set(hostkind.UNIX_SIGNS) <= signs
    assert hostkind.WSL_SIGNS and set(hostkind.WSL_SIGNS) <= signs
    assert not set(hostkind.UNIX_SIGNS) & set(hostkind.WSL_SIGNS)
    assert "driver-library-mismatch" in hostkind.UNIX_FAILURES
    assert set(hostkind.UNIX_FAILURES) <= {failure.key for failure in gpu_compat.driver_failures()}

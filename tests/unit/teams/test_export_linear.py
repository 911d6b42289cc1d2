"""`export pixi` of a big spec takes steps in proportion to its size: twice the packages, about twice the
Python lines run in envbuild and tomlkit (counted, not timed: a quadratic export of a 90k-line spec ran for
hours, and a timed test would only say so on a fast machine)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from builder.specs.model import parse_spec
from builder.specs.target import resolve_targets
from builder.teams.export import render_pixi, render_uv

pytestmark = pytest.mark.unit

WATCHED = ("/builder/", "/tomlkit/")


def _steps(action: Callable[[], object]) -> int:
    """Python lines run in envbuild's and tomlkit's code while `action` runs."""
    count = 0

    def trace(frame: FrameType, event: str, _arg: Any) -> Any:
        nonlocal count
        if not any(part in frame.f_code.co_filename for part in WATCHED):
            return None
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        action()
    finally:
        sys.settrace(None)
    return count


def _spec(packages: int, route: str = "conda-forge"):
    return parse_spec({"name": "big", "python": "3.11", "torch": "2.7.1", "route": route,
                       "targets": [{"cuda": "cpu"}, {"cuda": "12.6"}],
                       ("conda" if route != "pip" else "pip"): [f"pkg{i:06d}>=1.0" for i in range(packages)]},
                      "envs/big.yaml")


@pytest.mark.parametrize(("render", "route"), [(render_pixi, "conda-forge"), (render_uv, "pip")])
def test_twice_the_packages_is_about_twice_the_steps(render, route: str) -> None:
    def export(packages: int) -> int:
        spec = _spec(packages, route)
        targets = resolve_targets(spec)
        return _steps(lambda: render(spec, "big.yaml", targets))

    small, large = export(400), export(1600)
    # linear: 4x the packages -> about 4x the steps (fixed costs make it less); quadratic would be about 16x
    assert large < 5 * small, (small, large)

"""Collection rules for the whole suite: every test says what it needs, and sits in the folder of its kind.

tests/unit/<package>/ holds the tests that need neither the offline world nor a Docker engine (markers
`unit` or `torch`); tests/system/ holds the ones that do (`world` and/or `docker`). The markers select
what runs (`-m unit` must be exactly the fast ones); the folders let a reader see it. A test that breaks
either rule fails the collection.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.paths import TESTS

TEST_KINDS = ("unit", "world", "docker", "torch")
NEEDS_WORLD_OR_ENGINE = frozenset({"world", "docker"})
UNIT_TESTS = TESTS / "unit"
SYSTEM_TESTS = TESTS / "system"


def unmarked_tests(items: Iterable[pytest.Item]) -> list[str]:
    return [item.nodeid for item in items if not {m.name for m in item.iter_markers()} & set(TEST_KINDS)]


def misplaced_tests(items: Iterable[pytest.Item]) -> list[str]:
    """Tests whose folder contradicts their markers, each with what is wrong. Tests outside tests/
    (a pytester run's own files) are not this suite's to judge."""
    misplaced = []
    for item in items:
        path = Path(item.path)
        if not path.is_relative_to(TESTS):
            continue
        needs_world = bool({m.name for m in item.iter_markers()} & NEEDS_WORLD_OR_ENGINE)
        if path.is_relative_to(UNIT_TESTS):
            if needs_world:
                misplaced.append(f"{item.nodeid} (marked world or docker: it belongs in tests/system/)")
        elif path.is_relative_to(SYSTEM_TESTS):
            if not needs_world:
                misplaced.append(f"{item.nodeid} (marked neither world nor docker: it belongs in tests/unit/)")
        else:
            misplaced.append(f"{item.nodeid} (outside tests/unit/ and tests/system/)")
    return misplaced


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """One unmarked or misplaced test fails the collection."""
    unmarked = unmarked_tests(items)
    if unmarked:
        raise pytest.UsageError(f"tests without a marker ({', '.join(TEST_KINDS)}): {', '.join(unmarked)}")
    misplaced = misplaced_tests(items)
    if misplaced:
        raise pytest.UsageError(f"tests in the wrong folder: {', '.join(misplaced)}")

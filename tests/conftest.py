"""Collection rules for the whole suite: every test says what it needs (`-m unit` must select exactly the
fast ones); one unmarked test fails the collection."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

TEST_KINDS = ("unit", "world", "docker", "torch")


def unmarked_tests(items: Iterable[pytest.Item]) -> list[str]:
    return [item.nodeid for item in items if not {m.name for m in item.iter_markers()} & set(TEST_KINDS)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test says what it needs (`-m unit` must select exactly the fast ones): one unmarked test
    fails the collection."""
    unmarked = unmarked_tests(items)
    if unmarked:
        raise pytest.UsageError(f"tests without a marker ({', '.join(TEST_KINDS)}): {', '.join(unmarked)}")

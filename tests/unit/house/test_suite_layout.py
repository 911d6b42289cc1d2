"""The suite's collection rules (tests/conftest.py) can fail: a test whose folder contradicts its markers,
or one outside tests/unit/ and tests/system/, stops the run with a usage error naming it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest
from tests.paths import REPO, TESTS

pytestmark = pytest.mark.unit


def fake_item(path: Path, *marks: str) -> SimpleNamespace:
    """What the rules read of a collected test: its file, its node id and its markers."""
    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    return SimpleNamespace(path=path, nodeid=f"{where}::test_it",
                           iter_markers=lambda: iter(SimpleNamespace(name=name) for name in marks))


def item(where: str, *marks: str) -> SimpleNamespace:
    return fake_item(TESTS / where, *marks)


def test_tests_in_the_folder_of_their_kind_pass() -> None:
    placed = [item("unit/specs/test_a.py", "unit"), item("unit/smoke/test_b.py", "torch"),
              item("system/test_c.py", "world"), item("system/test_d.py", "docker", "torch"),
              item("system/test_e.py", "world", "docker", "cuda_torch")]
    assert conftest.misplaced_tests(placed) == []
    conftest.pytest_collection_modifyitems(None, placed)


@pytest.mark.parametrize(("test", "why"), [
    (item("unit/lock/test_a.py", "world"), "(marked world or docker: it belongs in tests/system/)"),
    (item("unit/lock/test_a.py", "unit", "docker"), "(marked world or docker: it belongs in tests/system/)"),
    (item("system/test_b.py", "unit"), "(marked neither world nor docker: it belongs in tests/unit/)"),
    (item("system/test_b.py", "torch"), "(marked neither world nor docker: it belongs in tests/unit/)"),
    (item("test_c.py", "unit"), "(outside tests/unit/ and tests/system/)"),
])
def test_a_misplaced_test_fails_the_collection(test: SimpleNamespace, why: str) -> None:
    assert conftest.misplaced_tests([item("unit/specs/test_ok.py", "unit"), test]) == [f"{test.nodeid} {why}"]
    with pytest.raises(pytest.UsageError, match=r"tests in the wrong folder: tests/.*::test_it \("):
        conftest.pytest_collection_modifyitems(None, [test])


def test_tests_outside_this_suite_are_not_judged(tmp_path: Path) -> None:
    # a pytester run's own test files live in a temporary folder
    assert conftest.misplaced_tests([fake_item(tmp_path / "test_x.py", "world")]) == []


def test_an_unmarked_test_fails_the_collection_first() -> None:
    with pytest.raises(pytest.UsageError, match=r"tests without a marker \(unit, world, docker, torch\): "
                                                r"tests/unit/specs/test_a.py::test_it"):
        conftest.pytest_collection_modifyitems(None, [item("unit/specs/test_a.py")])

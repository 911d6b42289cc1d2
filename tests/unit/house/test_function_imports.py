"""docs/architecture.md's rule for imports inside functions, held against the code: they exist only in the
places it names (start-up time) or for a third-party library that a module needs on one path only; an
import of the standard library or of envbuild inside a function elsewhere says why in a comment beside it;
none repeats a module-level import."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
# The places docs/architecture.md names, where loading late is the point of the module's design.
LAZY_BY_DESIGN = {
    "builder/cli/commands.py", "builder/cli/options.py", "builder/image/smoke_run.py",
    "builder/lock/solver_client.py", "builder/lock/solver_shim.py", "builder/lock/install.py",
}
OURS = {"builder", "smoke"}


def _function_imports(path: Path):
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.splitlines()
    top = {(getattr(node, "module", None), alias.name) for node in tree.body
           if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                commented = "#" in lines[node.lineno - 1] or lines[node.lineno - 2].strip().startswith("#")
                names = {(getattr(node, "module", None), alias.name) for alias in node.names}
                yield node.lineno, module or "", commented, bool(names & top)


def _places():
    for path in sorted((ROOT / "builder").rglob("*.py")):
        for line, module, commented, repeated in _function_imports(path):
            yield path.relative_to(ROOT).as_posix(), line, module, commented, repeated


def test_no_function_imports_a_module_twice() -> None:
    assert [f"{path}:{line} {module}" for path, line, module, _, repeated in _places() if repeated] == []


def test_function_imports_of_the_stdlib_or_envbuild_say_why_outside_the_named_places() -> None:
    unexplained = []
    for path, line, module, commented, _ in _places():
        root = module.split(".")[0]
        if path in LAZY_BY_DESIGN or commented:
            continue
        if root in sys.stdlib_module_names or root in OURS:
            unexplained.append(f"{path}:{line} {module}")
    assert unexplained == []

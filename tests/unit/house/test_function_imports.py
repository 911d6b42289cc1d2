"""docs/architecture.md's rule for imports inside functions, held against the code: they exist only in the
places it names (start-up time) or for a third-party library that a module needs on one path only; an
import of the standard library or of envbuild inside a function elsewhere says why in a comment beside it;
none repeats a module-level import."""

from __future__ import annotations

import ast
import re
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
# The third-party libraries a module may import inside a function without a comment (it needs them on one
# path alone), by import name, with the words docs/architecture.md uses for each.
ONE_PATH_LIBRARIES = {
    "rattler": "rattler", "docker": "docker", "requests": "requests", "urllib3": "urllib3",
    "conda_lock": "conda-lock", "uv": "uv", "rich": "rich", "jupyter_core": "jupyter_core",
    "packaging": "packaging", "pip": "pip's index names", "dockerfile": "the Dockerfile parser",
    "tomlkit": "tomlkit", "platformdirs": "platformdirs", "pydantic": "pydantic", "filelock": "filelock",
}


def _doc_paragraph() -> str:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = doc.index("Imports placed inside a function")
    return re.sub(r"\s+", " ", doc[start:doc.index("\n\n", start)])


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


def test_function_imports_of_other_libraries_are_the_ones_the_doc_lists() -> None:
    unlisted = []
    for path, line, module, commented, _ in _places():
        root = module.split(".")[0]
        if path in LAZY_BY_DESIGN or commented or root in sys.stdlib_module_names or root in OURS:
            continue
        if root not in ONE_PATH_LIBRARIES:
            unlisted.append(f"{path}:{line} {module}")
    assert unlisted == []


def test_the_doc_names_the_places_and_libraries_this_test_allows() -> None:
    paragraph = _doc_paragraph()
    assert [p for p in sorted(LAZY_BY_DESIGN) if f"`{p}`" not in paragraph] == []
    assert [w for w in ONE_PATH_LIBRARIES.values() if not re.search(rf"[ (,]{re.escape(w)}[ ,)]", paragraph)] == []

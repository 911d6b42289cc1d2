"""The shape of the house: which modules may import what (checked on the source, not by convention)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paths import REPO

pytestmark = pytest.mark.unit



def _imports(package: str) -> Iterator[tuple[Path, list[str]]]:
    """Every import statement of the package's modules: (module path, the names it imports)."""
    for path in sorted((REPO / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                yield path.relative_to(REPO), [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                yield path.relative_to(REPO), [node.module or ""]


def test_no_module_below_the_cli_imports_click() -> None:
    # The library raises builder.errors; only the command line (builder/cli*.py) knows click.
    offenders = [str(path) for package in ("builder", "smoke") for path, names in _imports(package)
                 if not (path.parts[0] == "builder" and path.parts[1].startswith("cli"))
                 and any(name.split(".")[0] == "click" for name in names)]
    assert offenders == []


def test_the_product_holds_no_test_world_code() -> None:
    # The offline channel builder and its http server live under tests/world/, outside the wheel
    # (the installer's downloads may use http.client, a client: its errors are what urlopen raises).
    offenders = [f"{path}: {names}" for package in ("builder", "smoke") for path, names in _imports(package)
                 if any(name.split(".")[0] in {"tests", "socketserver"} or name == "http"
                        or name.startswith("http.server") for name in names)]
    assert offenders == []


def test_one_jinja_environment() -> None:
    # Every rendered text shares builder/templates.py's environment: its filters and strict undefined.
    makers = [str(path.relative_to(REPO)) for path in sorted((REPO / "builder").rglob("*.py"))
              if "Environment(" in path.read_text()]
    assert makers == ["builder/templates.py"]

"""docs/architecture.md is held against the code: every path it names exists, every module of builder/ is in
its table, and its package table lists the stages in the order of the import-linter layers contract.
A claim that drifts from the code fails here instead of misleading the next reader."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "architecture.md"
# Backticked repository paths: `builder/specs/cuda.py`, `builder/safe_io/`, `data/gpus.yaml` (builder's data).
PATH = re.compile(r"`((?:builder|smoke|tests|docker|bench|envs|data)/[A-Za-z0-9_./-]*)`")


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _named_paths() -> set[str]:
    return set(PATH.findall(_doc()))


def _resolve(named: str) -> Path:
    return REPO / "builder" / named if named.startswith("data/") else REPO / named


def test_every_path_the_doc_names_exists() -> None:
    missing = sorted(p for p in _named_paths() if "<" not in p and not _resolve(p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_builder_module_is_in_the_doc() -> None:
    named = _named_paths()
    # A folder named in the module table (`builder/safe_io/`) describes its modules; the package table's
    # folders describe stages, not modules.
    module_table = _doc().split("## Modules", 1)[1].split("\n## ", 1)[0]
    folders = tuple(p for p in PATH.findall(module_table) if p.endswith("/"))
    modules = sorted(
        path.relative_to(REPO).as_posix()
        for path in (REPO / "builder").rglob("*.py")
        if path.name not in {"__init__.py", "__main__.py"}
    )
    unnamed = [
        m for m in modules
        if m not in named and not any(m.startswith(folder) for folder in folders)
    ]
    assert not unnamed, f"modules of builder/ that docs/architecture.md does not describe: {unnamed}"


def _layers() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layered = next(c for c in contracts if c["type"] == "layers" and c.get("containers") == ["builder"])
    return [layer for layer in layered["layers"] if ":" not in layer and layer != "__main__"]


def test_package_table_follows_the_layers_contract() -> None:
    section = _doc().split("## Packages", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `builder/([a-z_]+)/` \|", section, flags=re.MULTILINE)
    assert rows == _layers(), (
        f"the package table of docs/architecture.md lists {rows}; pyproject's layers contract says {_layers()}"
    )

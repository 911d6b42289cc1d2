"""docs/architecture.md is held against the code: every path and dotted name it names exists, every module of
builder/ is in its table, its package table lists the stages in the order of the import-linter layers contract,
the contracts it lists are pyproject's (both ways), and the gate settings it states are pyproject's.
A claim that drifts from the code fails here instead of misleading the next reader."""

from __future__ import annotations

import importlib
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
# The short form of a module of a builder package: `lock/run.py`, `formats/host_file.py`.
SHORT_PATH = re.compile(r"`([a-z_]+/[A-Za-z0-9_/]+\.py)`")
# A dotted name of the product: `builder.formats.conda_lock.read_lock`, `builder.teams.ci`.
DOTTED = re.compile(r"`((?:builder|smoke)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`")


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _named_paths() -> set[str]:
    return set(PATH.findall(_doc()))


def _resolve(named: str) -> Path:
    return REPO / "builder" / named if named.startswith("data/") else REPO / named


def test_every_path_the_doc_names_exists() -> None:
    missing = sorted(p for p in _named_paths() if "<" not in p and not _resolve(p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_short_module_path_names_a_module_of_a_builder_package() -> None:
    packages = {p.name for p in (REPO / "builder").iterdir() if (p / "__init__.py").is_file()}
    short = {p for p in SHORT_PATH.findall(_doc()) if p.split("/", 1)[0] in packages}
    assert short, "the doc's short module paths (`lock/run.py`) are no longer found: update SHORT_PATH"
    missing = sorted(p for p in short if not (REPO / "builder" / p).is_file())
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_every_dotted_name_the_doc_names_exists() -> None:
    names = set(DOTTED.findall(_doc()))
    assert names, "the doc names no dotted module or function any more: update DOTTED"
    missing = sorted(n for n in names if not _resolves(n))
    assert not missing, f"docs/architecture.md names modules or functions that do not exist: {missing}"


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


def _config() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _contracts() -> list[dict]:
    return _config()["tool"]["importlinter"]["contracts"]


def _layers() -> list[str]:
    layered = next(c for c in _contracts() if c["type"] == "layers" and c.get("containers") == ["builder"])
    # `lock | init | host`: independent siblings, listed in the table in that order
    layers = [layer for layer in layered["layers"] if ":" not in layer and layer != "__main__"]
    return [sibling.strip() for layer in layers for sibling in layer.split("|")]


def test_package_table_follows_the_layers_contract() -> None:
    section = _doc().split("## Packages", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `builder/([a-z_]+)/` \|", section, flags=re.MULTILINE)
    assert rows == _layers(), (
        f"the package table of docs/architecture.md lists {rows}; pyproject's layers contract says {_layers()}"
    )


def _contract_list() -> list[tuple[str, list[str]]]:
    """The doc's list of contracts: each `- **kind** ...` line (with its continuation lines) as its kind and
    the backticked names it gives, in order."""
    section = _doc().split("## Packages", 1)[1].split("| package |", 1)[0]
    items = re.findall(r"^- \*\*([a-z ]+)\*\*(.*?)(?=^- |\n\n|\Z)", section, flags=re.MULTILINE | re.DOTALL)
    stated = []
    for kind, text in items:
        if kind == "layers":
            assert "exhaustive" in text, "pyproject's layers contract is exhaustive; the doc's list says so"
        stated.append((kind, re.findall(r"`([^`]+)`", text)))
    return sorted(stated)


def _pyproject_contracts() -> list[tuple[str, list[str]]]:
    """pyproject's contracts in the doc's words: each contract's kind and the names it gives, in its order."""
    found = []
    for contract in _contracts():
        kind = contract["type"]
        if kind == "layers":
            assert contract["containers"] == ["builder"] and contract.get("exhaustive") is True
            layers = contract["layers"]
            assert ":" in layers[-1], "the last layer is the shared modules, `a : b : ...`"
            found.append(("layers", ["builder", *layers[:-1]]))
        elif kind == "acyclic_siblings":
            found.append(("acyclic siblings", list(contract["ancestors"])))
        elif kind == "forbidden":
            found.append(("forbidden", [*contract["source_modules"], *contract["forbidden_modules"]]))
        elif kind == "independence":
            found.append(("independence", list(contract["modules"])))
        else:
            raise AssertionError(f"pyproject has a {kind} contract the doc's list cannot state: add it to both")
    return sorted(found)


def test_the_contracts_the_doc_lists_are_pyprojects() -> None:
    assert _contract_list() == _pyproject_contracts()


def test_the_shared_row_names_the_shared_layer() -> None:
    layered = next(c for c in _contracts() if c["type"] == "layers")
    shared = {name.strip() for name in layered["layers"][-1].split(":")}
    section = _doc().split("## Packages", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| shared "))
    named = set(re.findall(r"`([a-z_]+)`", row.split("|")[2]))
    assert named == shared, f"the doc's shared row names {sorted(named)}; the layer is {sorted(shared)}"


def test_the_gates_the_doc_states_are_pyprojects() -> None:
    gates = _doc().split("## Gates", 1)[1].split("\n## ", 1)[0]
    ruff = _config()["tool"]["ruff"]["lint"]
    stated = re.search(r"max-complexity (\d+)", gates)
    assert stated and int(stated[1]) == ruff["mccabe"]["max-complexity"]
    assert ("RUF100" in gates) == ("RUF100" in ruff["select"])
    exempt = [pattern for pattern in ruff.get("per-file-ignores", {}) if pattern.startswith(("builder", "smoke"))]
    assert "no per-file\nexemption in `builder/` or `smoke/`" in gates and exempt == []

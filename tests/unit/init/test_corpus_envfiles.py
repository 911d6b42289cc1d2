"""`envbuild init --from` over real environment files collected from public projects (tests/corpus/envfiles).

Each file's expected reading is in the corpus MANIFEST.yaml beside it: the route, torch, CUDA target and
channels envbuild must find, the notes it must leave, or the one-line refusal it must give.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from builder.cli.commands import cli
from builder.errors import UsageError
from builder.init.importer import init_spec
from builder.specs.model import EnvSpec, load_spec
from tests import paths
from tests.unit.init.corpus_checks import check_spec

pytestmark = pytest.mark.unit

CORPUS = paths.CORPUS / "envfiles"
MANIFEST = yaml.safe_load((CORPUS / "MANIFEST.yaml").read_text(encoding="utf-8"))
ENTRIES = {entry["dir"]: entry for entry in MANIFEST["files"]}


def corpus_file(entry: dict[str, Any]) -> Path:
    return CORPUS / entry["dir"] / entry["file"]


def test_the_manifest_lists_every_corpus_file_with_its_source() -> None:
    folders = {p.name for p in CORPUS.iterdir() if p.is_dir()}
    assert folders == set(ENTRIES)
    assert len(ENTRIES) >= 25
    for entry in ENTRIES.values():
        assert [p.name for p in (CORPUS / entry["dir"]).iterdir()] == [entry["file"]]
        source = entry["source"]
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", source["repo"]) and source["path"]
        assert re.fullmatch(r"[0-9a-f]{40}", source["commit"])
        assert entry["kept"]
    kinds = {entry["file"].split(".")[-1] if "." in entry["file"] else entry["file"] for entry in ENTRIES.values()}
    assert {"Dockerfile", "txt", "yml", "yaml"} <= kinds


@pytest.mark.parametrize("folder", sorted(ENTRIES))
def test_init_reads_each_real_file_as_expected(tmp_path: Path, folder: str) -> None:
    entry = ENTRIES[folder]
    expect = entry["expect"]
    out = tmp_path / "envs" / "spec.yaml"
    if "error" in expect:
        with pytest.raises(UsageError) as error:
            init_spec(corpus_file(entry), out=out, upgrade=True)
        assert expect["error"] in error.value.message
        assert "\n" not in error.value.message
        assert not out.exists()
        return
    if expect.get("needs_upgrade"):
        with pytest.raises(UsageError) as refused:
            init_spec(corpus_file(entry), out=out)
        assert "--upgrade` to write that" in refused.value.message and "->" in refused.value.message
        assert not out.exists()
    result = init_spec(corpus_file(entry), out=out, upgrade=bool(expect.get("needs_upgrade")))
    spec = load_spec(out)
    assert spec == result.spec
    check_spec(spec, expect)
    _check_targets([t.key for t in result.targets], expect)
    _check_packages(spec, expect)
    notes = [(n.entry, n.outcome, n.reason) for n in result.notes]
    for entry_text, (outcome, reason) in (expect.get("notes") or {}).items():
        assert any(e == entry_text and o == outcome and reason in r for e, o, r in notes), (entry_text, notes)
    upgraded = [n for n in result.notes if n.outcome == "upgraded"]
    assert bool(upgraded) == bool(expect.get("needs_upgrade"))


def _check_targets(keys: list[str], expect: dict) -> None:
    if "targets" in expect:
        assert keys == expect["targets"]
    if expect.get("targets_cuda"):
        assert keys and all(k.startswith("cuda") for k in keys)


def _check_packages(spec: EnvSpec, expect: dict) -> None:
    """`name=pin` must be there; `!name=pin` not with this pin; `!name` not at all."""
    for section in ("conda", "pip"):
        have = set(getattr(spec, section))
        for package in expect.get(section, []):
            if package.startswith("!") and re.search(r"[=<>~]", package):
                assert package[1:] not in have, package
            elif package.startswith("!"):
                assert not any(re.split(r"[=<>~!\[]", p)[0] == package[1:] for p in have), package
            else:
                assert package in have, package


def test_init_cli_reads_a_dockerfile_and_reports_json(tmp_path: Path) -> None:
    out = tmp_path / "spec.yaml"
    result = CliRunner().invoke(cli, ["init", "--from", str(corpus_file(ENTRIES["ultralytics-docker"])),
                                      "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["route"], report["torch"], report["targets"]) == ("pip", "2.5.0", ["cuda12.4"])


def test_init_cli_upgrade_lists_each_change(tmp_path: Path) -> None:
    source = str(corpus_file(ENTRIES["gaussian-splatting-env"]))
    refused = CliRunner().invoke(cli, ["init", "--from", source, "--out", str(tmp_path / "a.yaml")])
    assert refused.exit_code != 0 and not (tmp_path / "a.yaml").exists()
    assert "--upgrade" in refused.output and len(refused.output.strip().splitlines()) == 1
    written = CliRunner().invoke(cli, ["init", "--from", source, "--upgrade", "--out", str(tmp_path / "b.yaml")])
    assert written.exit_code == 0, written.output
    assert "torch 1.12.1 -> 2.0.1" in written.output and "upgraded" in written.output
    assert "#   upgraded: pytorch=1.12.1 -> torch 1.12.1 -> 2.0.1" in (tmp_path / "b.yaml").read_text()


@pytest.mark.parametrize("name, text, message", [
    ("notes.md", "# My project\n\nSome text.\n", "not a file envbuild init reads"),
    ("spec-file.txt", "# platform: linux-64\n@EXPLICIT\nhttps://conda.anaconda.org/x/linux-64/a-1-0.conda\n",
     "an explicit conda package list"),
    ("Dockerfile", "FROM debian:bookworm\nRUN apt-get install -y python3\n", "no torch in it"),
    ("requirements.txt", "# nothing yet\n", "no requirements in it"),
])
def test_unknown_or_empty_inputs_get_one_clear_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    source = tmp_path / name
    source.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["init", "--from", str(source), "--out", str(tmp_path / "spec.yaml")])
    assert result.exit_code != 0
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "spec.yaml").exists()

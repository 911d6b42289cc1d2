"""Every `--json` output is one versioned object, and validates against the schema `envbuild schema REPORT`
publishes for it, as a reader's tooling would check it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from builder.cli.commands import cli
from builder.reports import json_reports, report_names
from tests.paths import REPO

pytestmark = pytest.mark.unit


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / "envs").mkdir()
    shutil.copy(REPO / "envs" / "pytorch.yaml", tmp_path / "envs" / "pytorch.yaml")
    (tmp_path / "train.log").write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def published_schema(report: str) -> dict:
    done = CliRunner().invoke(cli, ["schema", report])
    assert done.exit_code == 0, done.output
    schema = json.loads(done.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


@pytest.mark.parametrize("args, report, exit_code", [
    (["targets", "envs/pytorch.yaml"], "targets", 0),
    (["lint", "envs/pytorch.yaml"], "lint", 0),
    (["lint", "--rules"], "lint-rules", 0),
    (["lock", "envs/pytorch.yaml", "--check", "--cuda", "cpu"], "lock", 1),
    (["explain", "train.log", "--no-host"], "explain", 0),
    (["explain", "--catalogue"], "explain-catalogue", 0),
    (["export", "pixi", "envs/pytorch.yaml"], "export", 0),
    (["ci", "github", "envs/pytorch.yaml", "--install-from", "envbuild==0.1.0"], "ci", 0),
    (["ci", "k8s", "envs/pytorch.yaml", "--registry", "registry.example.org/team"], "k8s", 0),
    (["init", "--name", "demo"], "init", 0),
])
def test_json_output_is_versioned_and_matches_its_published_schema(project: Path, args: list[str], report: str,
                                                                   exit_code: int) -> None:
    done = CliRunner().invoke(cli, [*args, "--json"])
    assert done.exit_code == exit_code, done.output
    document = json.loads(done.stdout)
    assert document["schema_version"] == json_reports()["schema_version"] and document["report"] == report
    jsonschema.validate(document, published_schema(report))


def test_a_bare_list_the_old_output_fails_the_schema() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([{"target": "cpu", "status": "fresh"}], published_schema("lock"))
    with pytest.raises(jsonschema.ValidationError, match="'locks' is a required property"):
        jsonschema.validate({"schema_version": 1, "report": "lock"}, published_schema("lock"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"schema_version": 1, "report": "image", "locks": []}, published_schema("lock"))


def test_every_report_the_cli_prints_is_in_the_table_and_every_entry_is_printed() -> None:
    source = (REPO / "builder" / "cli" / "commands.py").read_text()
    printed = set(re.findall(r'print_json\("([a-z0-9-]+)"', source))
    assert printed == set(report_names())
    assert "print_json(" not in re.sub(r'print_json\("[a-z0-9-]+"', "", source)  # no call without a report name

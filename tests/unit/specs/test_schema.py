"""The spec's JSON Schema: generated from the model, committed beside the shipped spec, named by the
modeline that init writes, and it accepts what load_spec accepts and rejects what it rejects."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from builder.init.importer import init_spec
from builder.specs.schema import SPEC_MODELINE, SPEC_SCHEMA_FILE, schema_text, spec_schema
from tests.paths import REPO

pytestmark = pytest.mark.unit

SHIPPED = REPO / "envs" / "pytorch.yaml"


def _validate(schema: Path, document: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--schemafile", str(schema), str(document)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_committed_schema_is_the_generated_one() -> None:
    assert (REPO / "envs" / SPEC_SCHEMA_FILE).read_text(encoding="utf-8") == schema_text(spec_schema()), \
        "regenerate it: envbuild schema spec --out envs/envbuild-spec.schema.json"


def test_the_shipped_spec_names_its_schema_and_passes_it() -> None:
    assert SHIPPED.read_text(encoding="utf-8").splitlines()[0] == SPEC_MODELINE
    done = _validate(REPO / "envs" / SPEC_SCHEMA_FILE, SHIPPED)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_schema_rejects_a_spec_load_spec_rejects(tmp_path: Path) -> None:
    data = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    data["torch_version"] = data.pop("torch")  # a misspelt key: the model forbids unknown keys
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert _validate(REPO / "envs" / SPEC_SCHEMA_FILE, broken).returncode == 1


def test_init_writes_the_modeline_and_the_schema_beside_the_spec(tmp_path: Path) -> None:
    written = init_spec(name="team", out=tmp_path / "envs" / "team.yaml")
    assert written.path.read_text(encoding="utf-8").splitlines()[0] == SPEC_MODELINE
    done = _validate(tmp_path / "envs" / SPEC_SCHEMA_FILE, written.path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_committed_field_reference_is_the_generated_one_and_lists_every_field() -> None:
    from builder.specs.model import EnvSpec
    from builder.specs.schema import spec_reference

    committed = (REPO / "docs" / "spec-reference.md").read_text(encoding="utf-8")
    assert committed == spec_reference(), "regenerate: envbuild schema spec --markdown --out docs/spec-reference.md"
    assert all(f"| `{field}` |" in committed for field in EnvSpec.model_fields)

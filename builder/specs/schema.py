"""JSON Schemas generated from the pydantic models, so editors validate `envs/*.yaml` as they are typed
(yaml-language-server reads the `# yaml-language-server: $schema=` line that `envbuild init` writes)."""

from __future__ import annotations

import json
from typing import Any

from builder.specs.model import EnvSpec

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SPEC_SCHEMA_FILE = "envbuild-spec.schema.json"  # beside the specs: the modeline names it relative to them
SPEC_MODELINE = f"# yaml-language-server: $schema={SPEC_SCHEMA_FILE}"


def spec_schema() -> dict[str, Any]:
    """The spec's JSON Schema, from EnvSpec itself (what `load_spec` accepts)."""
    return {"$schema": JSON_SCHEMA_DIALECT, **EnvSpec.model_json_schema()}


def schema_text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"

"""`envbuild init`: an environment file users already have (environment.yml, requirements.txt,
conda-lock.yml, Dockerfile) to a spec.

The file says how torch gets its CUDA in one of the ways teams have used over the years:
the legacy pytorch channel with `pytorch-cuda=X.Y` (or `cpuonly`), the older `cudatoolkit=X.Y`,
conda-forge's `cuda-version`, `pytorch-gpu`/`pytorch-cpu` and `cudaXYZ_*` builds, or a pip section
with a cuXYZ wheel index or `torch==V+cuXYZ`. Those lines become the spec's torch, route and target;
the rest become extra packages. Every line that is not kept as written is reported with the reason,
and the result is checked like any spec (load, resolve against the compatibility data, lint) before
a byte is written.

The work is split along its seams: `builder.init.lines` reads single lines, `builder.init.read`
reads a whole file into a `Reading`, `builder.init.choose` decides the spec; this module checks the
result and writes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from builder.errors import UsageError
from builder.formats.conda_matchspec import parse_conda_line
from builder.generated_files import write_new_file
from builder.init.choose import SpecDraft, draft_from_environment, spec_name, starter_draft
from builder.init.lines import Note, cuda_from_build, cuda_from_tag
from builder.init.read import read_environment, read_environment_data, read_source
from builder.init.variants import draft_from_reading
from builder.specs.model import EnvSpec, parse_spec
from builder.specs.schema import SPEC_MODELINE, SPEC_SCHEMA_FILE, schema_text, spec_schema
from builder.specs.target import Target, resolve_targets
from builder.templates import render_template

__all__ = [
    "InitResult", "Note", "SpecDraft", "check_draft", "cuda_from_build", "cuda_from_tag", "draft_from_environment",
    "init_spec", "parse_conda_line", "read_environment", "read_environment_data", "read_source", "render_spec",
    "spec_name",
    "starter_draft",
]


@dataclass(frozen=True)
class InitResult:
    path: Path
    spec: EnvSpec
    targets: list[Target]
    notes: tuple[Note, ...]
    source: Path | None

    @property
    def unmapped(self) -> list[Note]:
        return [n for n in self.notes if n.outcome == "unmapped"]

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "source": str(self.source) if self.source else None,
            "name": self.spec.name,
            "python": self.spec.python,
            "torch": self.spec.torch,
            "torchvision": self.spec.torchvision,
            "route": self.spec.route.value,
            "targets": [t.key for t in self.targets],
            "conda": list(self.spec.conda),
            "pip": list(self.spec.pip),
            "notes": [n.as_dict() for n in self.notes],
            "unmapped": [n.as_dict() for n in self.unmapped],
        }



# ---------------------------------------------------------------------------------------------
# Checking and writing


def render_spec(draft: SpecDraft) -> str:
    return render_template("spec.yaml.j2", spec=draft.data, notes=draft.notes, modeline=SPEC_MODELINE,
                           source=draft.source.name if draft.source else None)


def check_draft(draft: SpecDraft, text: str) -> tuple[EnvSpec, list[Target]]:
    """The text must read back as the draft's data, load as a spec and resolve against the compat data."""
    source = str(draft.source) if draft.source else "envbuild init"
    if yaml.safe_load(text) != draft.data:
        raise RuntimeError("the spec template did not reproduce the spec's data")  # a bug, not an input
    spec = parse_spec(draft.data, source)
    spec._source = draft.source
    return spec, resolve_targets(spec)


def _write_spec_schema(folder: Path) -> None:
    """The schema the spec's modeline names, beside it; one already there (the team's own) stays."""
    if not (folder / SPEC_SCHEMA_FILE).exists():
        write_new_file(folder / SPEC_SCHEMA_FILE, schema_text(spec_schema()))


def init_spec(source: Path | None = None, name: str | None = None, out: Path | None = None,
              force: bool = False, upgrade: bool = False, allow_outside: bool = False) -> InitResult:
    """`envbuild init`: read, decide, check, then write atomically (nothing is written on any error).
    `upgrade` writes the nearest supported torch/CUDA/Python for a file older than the compat data;
    `allow_outside` lets a requirements file include one outside its folder."""
    if upgrade and source is None:
        raise UsageError("--upgrade moves an existing file's torch to one envbuild builds; give it --from FILE")
    reading = read_source(source, allow_outside) if source else None
    draft = draft_from_reading(reading, name, upgrade=upgrade) if reading is not None else starter_draft(name)
    text = render_spec(draft)
    spec, targets = check_draft(draft, text)
    path = out or Path("envs") / f"{spec.name}.yaml"
    write_new_file(path, text, force=force)
    _write_spec_schema(path.parent)
    spec._source = path
    return InitResult(path, spec, targets, draft.notes, source)

"""Where an env's locks live: `<spec folder>/<env>/locks/<target>` unless `--locks` names a root."""

from __future__ import annotations

from pathlib import Path

from builder.specs.target import Target


def default_lock_folder(spec_file: Path | None, env_name: str) -> Path:
    """An env's lock folder unless `--locks` says otherwise: `<spec folder>/<env>/locks`."""
    base = spec_file.parent if spec_file else Path.cwd()
    return base / env_name / "locks"


def default_lock_dir(target: Target, root: Path | None = None) -> Path:
    """One target's lock folder: under `root` (`--locks`) when given, else under the env's lock folder."""
    if root is not None:
        return root / target.key
    return default_lock_folder(target.spec.source, target.spec.name) / target.key

"""YAML reading for envbuild's own data files and specs: libyaml's loader where PyYAML has it.

PyYAML's pure-Python loader takes a few hundred milliseconds on compat.yaml alone, most of a no-op
`envbuild lock`; the C loader reads the same documents (safe subset) in a few milliseconds.
"""

from __future__ import annotations

from typing import Any

import yaml

SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=SafeLoader)  # noqa: S506 - a safe loader, C or Python

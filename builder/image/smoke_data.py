"""The compatibility facts the in-image smoke suite judges by, written as JSON into its data folder.

The suite runs with torch and the standard library only, so it cannot read builder/data/compat.yaml;
every build context (and `envbuild smoke --local`) gets this file made from that data instead, so
there is one source of truth for the torch -> torchvision pairing and a target's cuDNN (its arch list
travels as ENVBUILD_EXPECT_ARCHS).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from builder.specs.compat import load_compat
from builder.specs.cuda import cuda_json
from builder.specs.target import Target

# Where the suite looks for it, relative to the folder of the `smoke` package.
SMOKE_DATA_FILE = Path("data") / "compat.json"


def smoke_data(target: Target | None = None) -> dict[str, Any]:
    """The pairing table for every torch line, plus what this target's image must show (when given)."""
    compat = load_compat()
    data: dict[str, Any] = {
        "about": "Made by envbuild from builder/data/compat.yaml; the smoke suite's expectations.",
        "torchvision_pairs": {release.line: release.torchvision for release in compat.releases()},
    }
    if target is not None:
        data["target"] = {
            "key": target.key,
            "torch": target.torch,
            "torchvision": target.torchvision,
            "cuda": cuda_json(target.cuda),
            "cudnn": target.cudnn,
            "confidence": target.release.confidence,
        }
    return data


def write_smoke_data(suite_package: Path, target: Target | None = None) -> Path:
    """Write the file into a copy of the `smoke` package (never into the source tree)."""
    path = suite_package / SMOKE_DATA_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(smoke_data(target), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path

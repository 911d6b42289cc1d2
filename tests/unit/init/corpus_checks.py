"""What a corpus case expects of the spec `init` wrote, shared by the env-file and the pixi/uv corpora."""

from __future__ import annotations

from typing import Any

from builder.specs.compat import load_compat
from builder.specs.model import EnvSpec, Route


def check_spec(spec: EnvSpec, expect: dict[str, Any]) -> None:
    """route, torch, torchvision, python, `newest_torch`, channels and platforms, where the case names them."""
    assert spec.route.value == expect["route"]
    for key in ("torch", "torchvision", "python"):
        if key in expect:
            assert getattr(spec, key) == str(expect[key]), (key, getattr(spec, key))
    if expect.get("newest_torch"):
        newest = [r for r in load_compat().releases()
                  if r.confidence != "projected" and r.cuda_variants(Route(expect["route"]))][-1]
        assert spec.torch == newest.latest
    if "channels" in expect:
        assert (list(spec.channels) if spec.channels is not None else None) == expect["channels"]
    if "platforms" in expect:
        assert list(spec.platforms) == expect["platforms"]

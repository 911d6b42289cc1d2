"""The conda side of envbuild's offline test world: local conda channels and a local pip index.

`python -m tests.world.channel build` makes them under `.world/` (cached), `serve` serves `.world/`
on 127.0.0.1:$ENVBUILD_WORLD_PORT (8765). Channel URLs: `http://127.0.0.1:8765/conda/<channel>`,
pip index: `http://127.0.0.1:8765/pypi/simple`. See tests/world/CHANNEL.md.
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_WORLD = Path(".world")
CHANNEL_NAMES = ("conda-forge", "pytorch", "nvidia")


def world_url(port: int | None = None) -> str:
    """The base URL of a served world (no trailing slash)."""
    from .build import world_port

    return f"http://127.0.0.1:{port if port is not None else world_port()}"


def channel_url(channel: str, port: int | None = None) -> str:
    return f"{world_url(port)}/conda/{channel}"


def pip_index_url(port: int | None = None) -> str:
    return f"{world_url(port)}/pypi/simple"

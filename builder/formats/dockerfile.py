"""The Dockerfile envbuild writes for a target, as one typed value and its one writer.

image/render.py decides what each stage holds (its blocks, rendered from docker/blocks/); this writes
the file: the header, the env-builder stage on the builder image, the runtime stage on the runtime image,
one blank line between instructions at most. A team's own Dockerfile is init's to read.
"""

from __future__ import annotations

from dataclasses import dataclass

from builder import __version__
from builder.templates import environment


@dataclass(frozen=True)
class StageBlock:
    """One block's instructions in each stage (either may be empty)."""

    builder: str = ""
    runtime: str = ""


@dataclass(frozen=True)
class Dockerfile:
    env_name: str
    target_key: str
    builder_image: str  # image references, checked where they entered (the spec, --base-image)
    runtime_image: str
    blocks: tuple[StageBlock, ...]


def dumps(dockerfile: Dockerfile) -> str:
    text = environment().get_template("Dockerfile.j2").render(
        version=__version__, env_name=dockerfile.env_name, target_key=dockerfile.target_key,
        builder_image=dockerfile.builder_image, runtime_image=dockerfile.runtime_image, blocks=dockerfile.blocks)
    return _tidy(text)


def _tidy(text: str) -> str:
    """One blank line between instructions at most, one newline at the end."""
    lines: list[str] = []
    for line in text.splitlines():
        if not line.strip() and (not lines or not lines[-1].strip()):
            continue
        lines.append(line.rstrip())
    return "\n".join(lines).strip() + "\n"

"""The one Jinja environment of envbuild, for every text it renders: the image's Dockerfile and
environment.yml (templates in `docker/`) and the files it writes into a team's repository, a spec and
a CI pipeline (templates in `builder/data/templates/`).

Every value reaches the text through a filter that makes it one word of the target language (a
Dockerfile string, a YAML scalar, a shell word, a comment line), so no value can add an instruction,
a key, a job or a step. Undefined names fail the render instead of printing nothing.
"""

from __future__ import annotations

import json
import shlex
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from builder import __version__
from builder.safe_io.text import escape_unsafe, has_unsafe_characters


def templates_dir() -> Path:
    """The image templates: `docker/` in a source checkout; the copy packed into the wheel otherwise."""
    checkout = Path(__file__).resolve().parent.parent / "docker"
    if (checkout / "Dockerfile.j2").is_file():
        return checkout
    return Path(str(resources.files("builder").joinpath("_templates")))


def docker_str(value: Any) -> str:
    """A Dockerfile double-quoted word: backslash, quote and `$` (variable expansion) escaped."""
    text = str(value)
    if has_unsafe_characters(text):
        raise ValueError(f"control character in a Dockerfile value: {text!r}")
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def yaml_str(value: Any) -> str:
    """A YAML scalar that reads back as exactly this value (JSON is a subset of YAML)."""
    # U+2028, U+0085, ... stay escaped: raw, a YAML 1.1 reader folds them into a line break.
    return escape_unsafe(json.dumps(value, ensure_ascii=False))


def shell_word(value: Any) -> str:
    return shlex.quote(str(value))


def comment_text(value: Any) -> str:
    """Text for a `#` comment: control characters (a newline would end the comment) shown escaped."""
    # json.dumps leaves U+2028/U+0085 raw, and those end the comment for YAML 1.1 readers too.
    return escape_unsafe(json.dumps(str(value), ensure_ascii=False)[1:-1])


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The environment over both template folders (their names do not overlap: image templates sit
    at the top and in blocks/, repository files in ci/ and spec.yaml.j2)."""
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader([
            jinja2.FileSystemLoader(str(templates_dir())),
            jinja2.PackageLoader("builder", "data/templates"),
        ]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters.update(docker_str=docker_str, yaml_str=yaml_str, shell=shell_word, comment=comment_text)
    return env


def render_template(name: str, **values: Any) -> str:
    """Template `name` rendered with `values` and envbuild's version."""
    return environment().get_template(name).render(version=__version__, **values)

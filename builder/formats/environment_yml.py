"""The environment.yml envbuild writes for a target, as one typed value and its one writer.

The lock stage builds an `EnvironmentFile` from a Target (builder/lock/environment.py); its hash, its
content check, `--update`'s names and `export` read the model's fields, and `dumps` writes the file
conda-lock solves and `envbuild render` shows (template `docker/environment.yml.j2`). Nothing reads a
rendered environment.yml back: a team's own is init's to read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from builder import __version__
from builder.templates import environment


@dataclass(frozen=True)
class CondaEntry:
    """One entry of `dependencies:`: a conda MatchSpec, with the platform selector comment that narrows it."""

    spec: str
    selector: str | None = None  # conda-lock platform selector token, None for every platform


@dataclass(frozen=True)
class EnvironmentFile:
    """One target's environment.yml: its conda lines (conda's pip included when there is a pip part), its
    pip requirements and where pip takes them from."""

    env_name: str
    target_key: str
    channels: tuple[str, ...]
    conda: tuple[CondaEntry, ...]
    pip: tuple[str, ...] = ()
    pip_repositories: tuple[str, ...] = ()
    allow_pypi_requests: bool = False

    @property
    def name(self) -> str:
        """The environment's name: `pytorch-cuda12.9`."""
        return f"{self.env_name}-{self.target_key}"

    def conda_part(self) -> EnvironmentFile:
        """What conda-lock solves: the conda lines alone (the pip part is resolved by uv on top of it)."""
        return replace(self, pip=(), pip_repositories=())


def dumps(env: EnvironmentFile) -> str:
    return environment().get_template("environment.yml.j2").render(
        version=__version__, env_name=env.env_name, target_key=env.target_key, channels=env.channels,
        conda=env.conda, pip=env.pip, pip_repositories=env.pip_repositories,
        allow_pypi_requests=env.allow_pypi_requests)

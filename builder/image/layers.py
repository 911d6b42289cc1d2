"""Which locked packages go into which image layer (builder/data/layers.yaml), and each group's plan.

The environment is installed as a fixed sequence of groups: `bootstrap` (python and what it needs, in
the env-builder stage), then `cuda`, `torch` and `rest` in the runtime stage, one layer each. A group's
plan holds only its own packages, so a change in `rest` leaves the plans, and so the cached layers,
of the groups before it as they were.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from packaging.utils import canonicalize_name

from builder.lock.install import InstallPlan
from builder.yamlio import data_text, load_yaml

BOOTSTRAP = "bootstrap"
BOOTSTRAP_ROOTS = ("python",)


@dataclass(frozen=True)
class LayerGroup:
    """A group takes the packages its patterns match, or, with `dependencies_of`, what the packages
    of those groups need (followed through) that no group before it took."""

    name: str
    why: str
    patterns: tuple[str, ...] = ()
    dependencies_of: tuple[str, ...] = ()

    def matches(self, package: str) -> bool:
        name = normal_name(package)
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.patterns)


def normal_name(package: str) -> str:
    """conda names and PEP 503 names in one spelling: `typing_extensions` is `typing-extensions`."""
    return canonicalize_name(package)


@cache
def layer_groups() -> tuple[LayerGroup, ...]:
    """The runtime-stage groups, in build order (the last one matches every name)."""
    text = data_text("layers.yaml")
    return tuple(LayerGroup(g["name"], " ".join(g["why"].split()), tuple(g.get("patterns", ())),
                            tuple(g.get("dependencies_of", ())))
                 for g in load_yaml(text)["groups"])


def group_names() -> tuple[str, ...]:
    """Every group, bootstrap first: the plan files a build context holds, in install order."""
    return (BOOTSTRAP, *(group.name for group in layer_groups()))


def _closure(start: list[str], dependencies: Mapping[str, tuple[str, ...]], among: set[str]) -> set[str]:
    """`start` and everything they need by `dependencies`, only names in `among`."""
    found: set[str] = set()
    wanted = list(start)
    while wanted:
        name = wanted.pop()
        if name in found or name not in among:
            continue
        found.add(name)
        wanted.extend(normal_name(dep) for dep in dependencies.get(name, ()))
    return found


def bootstrap_names(plan: InstallPlan, dependencies: Mapping[str, tuple[str, ...]]) -> set[str]:
    """python and everything it needs by the lock's dependency records; pip too when pip entries
    follow (the environment's pip installs them). Conda packages only: they come before any pip."""
    conda = {normal_name(a.name) for a in plan.conda}
    roots = [name for name in BOOTSTRAP_ROOTS if name in conda]
    if plan.pip and "pip" in conda:
        roots.append("pip")
    return _closure(roots, dependencies, conda)


def split_plan(plan: InstallPlan, dependencies: Mapping[str, tuple[str, ...]]) -> dict[str, InstallPlan]:
    """One plan per group (every group, some perhaps empty), in install order. `dependencies`: each
    package's dependency names, from the lock (conda and pip)."""
    deps = {normal_name(name): value for name, value in dependencies.items()}
    boot = bootstrap_names(plan, deps)
    # (manager, name) -> group; a name may be locked as a conda package and as a pip one.
    group_of = {("conda", name): BOOTSTRAP for name in boot}
    every = [("conda", normal_name(a.name)) for a in plan.conda] + [("pip", normal_name(a.name)) for a in plan.pip]
    for group in layer_groups():
        unassigned = [key for key in every if key not in group_of]
        if group.dependencies_of:
            needed_by = [name for key, owner in group_of.items() if owner in group.dependencies_of
                         for name in deps.get(key[1], ())]
            taken = _closure([normal_name(n) for n in needed_by], deps, {name for _, name in unassigned})
            group_of.update({key: group.name for key in unassigned if key[1] in taken})
        else:
            group_of.update({key: group.name for key in unassigned if group.matches(key[1])})
    return {
        name: InstallPlan(
            platform=plan.platform,
            conda=tuple(a for a in plan.conda if group_of.get(("conda", normal_name(a.name))) == name),
            pip=tuple(a for a in plan.pip if group_of.get(("pip", normal_name(a.name))) == name),
        )
        for name in group_names()
    }


@dataclass(frozen=True)
class LayerStep:
    """One RUN of the runtime stage: its group, and whether it links conda packages (so needs rattler)."""

    group: str
    links_conda: bool


def runtime_steps(split: Mapping[str, InstallPlan] | None = None) -> tuple[LayerStep, ...]:
    """The runtime stage's install steps: one per group with packages in `split`; without a lock
    (`envbuild render` before `envbuild lock`), one per group, each ready to link conda packages."""
    if split is None:
        return tuple(LayerStep(group.name, True) for group in layer_groups())
    return tuple(LayerStep(name, bool(plan.conda)) for name, plan in split.items()
                 if name != BOOTSTRAP and (plan.conda or plan.pip))

"""Advice on a spec, from the seeds' experience (seed 001) and the traps the field notes record."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from builder.spec import EnvSpec, Route

Level = Literal["error", "warning"]

VAGUE_NAME = re.compile(r"^(env|environment|test|tmp|temp|myenv|new|base|default|foo|bar|venv)[-_]?\d*$")
TORCH_CONDA_NAMES = {"pytorch", "torch", "pytorch-gpu", "pytorch-cpu", "pytorch-cuda", "libtorch"}
TORCH_PIP_NAMES = {"torch"}


@dataclass(frozen=True)
class Finding:
    level: Level
    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"level": self.level, "field": self.field, "message": self.message}


def package_name(requirement: str) -> str:
    return re.split(r"[=<>!~\[\s]", requirement, maxsplit=1)[0].lower()


def _torch_sections(spec: EnvSpec) -> list[Finding]:
    conda_torch = [p for p in spec.conda if package_name(p) in TORCH_CONDA_NAMES]
    pip_torch = [p for p in spec.pip if package_name(p) in TORCH_PIP_NAMES]
    findings = []
    from_conda = spec.route is not Route.PIP or conda_torch
    from_pip = spec.route is Route.PIP or pip_torch
    if from_conda and from_pip:
        where = "pip" if pip_torch else "conda"
        findings.append(Finding(
            "error", where,
            "torch comes from both conda and pip: two copies fight over site-packages and CUDA "
            f"libraries; let route {spec.route.value} install it and remove it from `{where}`",
        ))
    elif conda_torch:
        findings.append(Finding(
            "warning", "conda",
            f"{conda_torch[0]!r} is pinned by envbuild from `torch` and the target; remove it from `conda`",
        ))
    return findings


def _channel_mix(spec: EnvSpec) -> list[Finding]:
    channels = list(spec.effective_channels)
    if spec.route is Route.CONDA_FORGE and "pytorch" in channels:
        return [Finding(
            "warning", "channels",
            "the legacy pytorch channel next to conda-forge's pytorch mixes two builds of torch and "
            "their CUDA libraries; drop `pytorch` from channels or use route pytorch-channel",
        )]
    if spec.route is Route.PYTORCH_CHANNEL and "conda-forge" in channels and "pytorch" in channels:
        if channels.index("conda-forge") < channels.index("pytorch"):
            return [Finding(
                "warning", "channels",
                "conda-forge is listed before pytorch, so conda-forge's pytorch can win over the "
                "legacy channel's; list pytorch and nvidia first",
            )]
    return []


def _name(spec: EnvSpec) -> list[Finding]:
    if VAGUE_NAME.match(spec.name):
        return [Finding(
            "warning", "name",
            f"the env name {spec.name!r} says nothing about what it is for; name it after the "
            "project or the stack (e.g. `vision-train`)",
        )]
    return []


def _old_toolkits(spec: EnvSpec) -> list[Finding]:
    if any(package_name(p) == "cudatoolkit" for p in spec.conda):
        return [Finding(
            "warning", "conda",
            "`cudatoolkit` is the pre-2023 way to get CUDA from conda; the target's CUDA version is "
            "pinned by envbuild (cuda-version or pytorch-cuda), remove `cudatoolkit`",
        )]
    return []


def _unpinned_images(spec: EnvSpec) -> list[Finding]:
    return [
        Finding(
            "warning", f"images.{role}",
            f"{ref.image} is not pinned by digest: a rebuild can pick up a different base; add `digest:`",
        )
        for role, ref in (("runtime", spec.images.runtime), ("builder", spec.images.builder))
        if ref.digest is None and not ref.image.startswith("local/")
    ]


def _fleet_coverage(spec: EnvSpec) -> list[Finding]:
    """A target without kernels for a GPU of the spec's `fleet:` installs cleanly and fails at its first kernel."""
    if not spec.fleet:
        return []
    from builder.errors import UsageError
    from builder.fleet import fleet_warnings, spec_hosts
    from builder.target import resolve_targets

    try:
        targets = resolve_targets(spec)
    except UsageError:
        return []  # `envbuild targets` reports why the targets do not resolve
    return [Finding("warning", "fleet", message) for message in fleet_warnings(targets, spec_hosts(spec))]


RULES = (_torch_sections, _channel_mix, _name, _old_toolkits, _unpinned_images, _fleet_coverage)


def lint_spec(spec: EnvSpec) -> list[Finding]:
    return [finding for rule in RULES for finding in rule(spec)]

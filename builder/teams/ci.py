"""`envbuild ci github|gitlab`: a pipeline that lock-checks, builds and smoke-tests every target
(and `envbuild ci k8s`: Kubernetes Jobs for the GPU smoke tests, builder/teams/k8s.py).

Jobs: a lock check (`envbuild lock --check`), then one chain per target: its build (on GitHub two jobs,
one that pushes, in the registry's environment, for the default branch and tags, and one that does not)
and, for a CUDA target, a GPU smoke test on self-hosted GPU runners that needs only that build, so one
failed build stops only its own smoke test. The smoke test pulls the digest its build pushed, or builds
from the lock where nothing was pushed; a CPU target is smoke-tested in its build job (a hosted runner
has no GPU to test a CUDA image on). Every job has a time limit and a build checks the engine's free
disk first (`builder/data/ci.yaml`). JSON, JUnit and Markdown reports are kept as artifacts. GPU jobs
never run a fork's code, and jobs install envbuild from a pinned source (builder/teams/install_source.py).
The templates are `builder/data/templates/ci/*.j2`. Spec-derived values reach the pipeline only as YAML scalars
(variables), never spliced into shell text: the scripts read them from the environment.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml

from builder.errors import UsageError
from builder.generated_files import write_new_file
from builder.lock.location import default_lock_folder
from builder.specs.cuda import cuda_or_cpu
from builder.specs.model import EnvSpec
from builder.specs.target import Target
from builder.teams.install_source import InstallSource, install_source
from builder.teams.k8s import K8sOptions, Manifests, write_manifests
from builder.templates import render_template
from builder.yamlio import data_text

Provider = Literal["github", "gitlab"]
PROVIDERS: tuple[Provider, ...] = ("github", "gitlab")
# `envbuild ci k8s` writes Kubernetes Jobs instead of a pipeline (builder/teams/k8s.py).
K8S = "k8s"
LABEL_PATTERN = r"[A-Za-z0-9_.:/\-]{1,100}"


@dataclass(frozen=True)
class CiOptions:
    """What a team changes about the generated pipeline; None means the provider's default."""

    gpu_runner_labels: tuple[str, ...] | None = None
    cpu_runner_labels: tuple[str, ...] | None = None
    require_gpus: int | None = None
    # None: where this envbuild was installed from (builder/teams/install_source.py), else a CI variable.
    install_from: str | None = None


@dataclass(frozen=True)
class Job:
    """One job of a written pipeline, as the file says: where it runs, which targets it covers."""

    name: str
    runs_on: tuple[str, ...]
    targets: tuple[str, ...]  # empty: one job, not one per target

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "runs_on": list(self.runs_on), "targets": list(self.targets)}


@dataclass(frozen=True)
class Pipeline:
    provider: Provider
    path: Path
    text: str
    jobs: tuple[Job, ...]
    install: InstallSource

    def as_dict(self) -> dict[str, Any]:
        return {"provider": self.provider, "path": str(self.path), "install": self.install.as_dict(),
                "jobs": [j.as_dict() for j in self.jobs]}


@lru_cache(maxsize=1)
def ci_defaults() -> dict[str, Any]:
    text = data_text("ci.yaml")
    return yaml.safe_load(text)


def parse_labels(value: str | None, option: str) -> tuple[str, ...] | None:
    """`self-hosted,linux,gpu` -> a tuple of labels; None (the default) when the option is absent."""
    if value is None:
        return None
    labels = tuple(label.strip() for label in value.split(",") if label.strip())
    for label in labels:
        if not re.fullmatch(LABEL_PATTERN, label):
            raise UsageError(f"{option} {label!r}: a runner label is letters, digits and . _ - : / (at most 100)")
    return labels


def _repository_path(path: Path, what: str) -> str:
    """A path as the pipeline sees it: relative to the repository root (this folder), with `/`."""
    relative = os.path.relpath(path.resolve(), Path.cwd().resolve())
    if relative.startswith(".."):
        raise UsageError(f"{path}: the {what} is outside this folder; run `envbuild ci` from the repository root")
    return PurePosixPath(Path(relative)).as_posix()


def job_id(target_key: str) -> str:
    """A target key as part of a job id (GitHub allows letters, digits, `-` and `_`): cuda12.6 -> cuda12-6."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", target_key)


def _target_row(target: Target) -> dict[str, Any]:
    defaults = ci_defaults()
    kind = "cuda" if target.cuda else "cpu"
    build_minutes = defaults["timeouts"]["build"][kind]
    return {"target": target.key, "cuda": cuda_or_cpu(target.cuda), "tag": target.tag, "id": job_id(target.key),
            "is_cuda": bool(target.cuda), "build_minutes": build_minutes,
            # A pull request's smoke job builds its image from the lock before testing it.
            "smoke_minutes": defaults["timeouts"]["smoke"] + build_minutes,
            "disk_gb": defaults["disk_need_gb"][kind]}


def pipeline_text(provider: Provider, spec: EnvSpec, spec_path: Path, targets: list[Target],
                  pipeline_path: Path, options: CiOptions = CiOptions(), source: InstallSource | None = None) -> str:
    """The pipeline file's text; `source` defaults to what `options.install_from` says."""
    if provider not in PROVIDERS:
        raise UsageError(f"unknown CI provider {provider!r}; use one of: {', '.join(PROVIDERS)}")
    source = source or install_source(options.install_from)
    defaults = ci_defaults()
    settings = defaults[provider]
    gpu_labels = (options.gpu_runner_labels if options.gpu_runner_labels is not None
                  else tuple(settings["gpu_runner_labels"]))
    cpu_labels = (options.cpu_runner_labels if options.cpu_runner_labels is not None
                  else tuple(settings["cpu_runner_labels"]))
    if provider == "github" and not (gpu_labels and cpu_labels):
        raise UsageError("GitHub jobs need runner labels: "
                         "give at least one in --gpu-runner-labels and --cpu-runner-labels")
    spec_file = _repository_path(spec_path, "spec")
    rows = [_target_row(t) for t in targets]
    return render_template(
        f"ci/{provider}.yml.j2",
        env_name=spec.name,
        spec_path=spec_file,
        lock_dir=_repository_path(default_lock_folder(spec_path, spec.name), "lock folder"),
        pipeline_path=_repository_path(pipeline_path, "pipeline file"),
        targets=rows,
        cuda_targets=[row for row in rows if row["is_cuda"]],
        gpu_labels=list(gpu_labels),
        cpu_labels=list(cpu_labels),
        cpu_targets=[row for row in rows if not row["is_cuda"]],
        timeouts=defaults["timeouts"],
        requirement=source.requirement,
        install_origin=source.origin,
        require_gpus=str(options.require_gpus if options.require_gpus is not None else defaults["require_gpus"]),
        settings=settings,
    )


def pipeline_jobs(provider: Provider, text: str) -> tuple[Job, ...]:
    """The jobs of a pipeline file, read back from its YAML."""
    data = yaml.safe_load(text)
    if provider == "github":
        return tuple(Job(name, tuple(job["runs-on"]), _job_targets(job.get("env", {})))
                     for name, job in data["jobs"].items())
    return tuple(Job(name, tuple(job.get("tags", ())), _job_targets(job.get("variables", {})))
                 for name, job in data.items() if isinstance(job, dict) and "script" in job)


def _job_targets(variables: dict[str, Any]) -> tuple[str, ...]:
    """Each build or smoke job covers one target (a failed build stops only its own target's smoke)."""
    return (variables["ENVBUILD_TARGET"],) if "ENVBUILD_TARGET" in variables else ()


def default_pipeline_path(provider: Provider, spec: EnvSpec) -> Path:
    return Path(ci_defaults()[provider]["default_path"].format(name=spec.name))


def write_pipeline(provider: Provider, spec: EnvSpec, spec_path: Path, targets: list[Target],
                   out: Path | None = None, options: CiOptions = CiOptions(), force: bool = False) -> Pipeline:
    path = out or default_pipeline_path(provider, spec)
    source = install_source(options.install_from)
    text = pipeline_text(provider, spec, spec_path, targets, path, options, source)
    write_new_file(path, text, force=force)
    return Pipeline(provider, path, text, pipeline_jobs(provider, text), source)


def write_k8s_jobs(spec: EnvSpec, spec_path: Path, targets: list[Target], out: Path | None,
                   options: K8sOptions, force: bool = False) -> Manifests:
    settings = ci_defaults()["k8s"]
    path = out or Path(settings["default_path"].format(name=spec.name))
    return write_manifests(spec, PurePosixPath(spec_path).as_posix(), targets, path, options, settings, force)

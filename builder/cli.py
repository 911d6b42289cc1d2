"""The `envbuild` command: parse arguments, call the library, print. No logic lives here."""

from __future__ import annotations

from pathlib import Path

import click

from builder import __version__
from builder import reports
from builder.lint import lint_spec
from builder.render import render_target, render_to
from builder.spec import load_spec
from builder.target import Sources, resolve_targets

SPEC = click.argument("spec", type=click.Path(exists=True, dir_okay=False, path_type=Path))
JSON = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
CUDA = click.option("--cuda", "cuda", multiple=True, metavar="X.Y|cpu",
                    help="Only this CUDA target (repeatable); default: every target of the spec.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="envbuild")
def cli() -> None:
    """Reproducible PyTorch-CUDA environments: render, lock, build and smoke-test one image per CUDA target."""


@cli.command()
@SPEC
@JSON
def targets(spec: Path, as_json: bool) -> None:
    """The CUDA targets of SPEC: torch, CUDA, cuDNN, minimum driver, GPU architectures, base images."""
    resolved = resolve_targets(load_spec(spec))
    rows = [target_summary(t) for t in resolved]
    if as_json:
        reports.print_json(rows)
        return
    reports.print_table(
        f"{resolved[0].name}: CUDA targets",
        ["target", "torch", "torchvision", "python", "route", "cuDNN", "min driver", "full driver",
         "GPU archs", "runtime image", "nvidia/cuda image"],
        [[r["target"], r["torch"], r["torchvision"], r["python"], r["route"], r["cudnn"],
          r["min_driver"], r["full_compat_driver"], r["archs"], r["runtime_image"], r["nvidia_cuda_image"]]
         for r in rows],
    )
    for target in resolved:
        for warning in target.warnings:
            click.echo(f"warning: {warning}", err=True)


def target_summary(target) -> dict:
    archs = target.archs
    return {
        "target": target.key,
        "torch": target.torch,
        "torchvision": target.torchvision,
        "python": target.python,
        "route": target.route.value,
        "cuda": target.cuda,
        "cudnn": target.cudnn,
        "min_driver": target.min_driver,
        "full_compat_driver": target.toolkit.full_compat_driver if target.toolkit else None,
        "archs": f"{archs[0]}..{archs[-1]}" if archs else None,
        "arch_list": archs,
        "platforms": list(target.platforms),
        "runtime_image": target.runtime_image.reference,
        "builder_image": target.builder_image.reference,
        "nvidia_cuda_image": target.toolkit.nvidia_cuda_image if target.toolkit else None,
        "tag": target.tag,
        "confidence": target.release.confidence,
    }


@cli.command()
@SPEC
@CUDA
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Output folder (one target) or parent folder (several); default build/<env>/<target>.")
@JSON
def render(spec: Path, cuda: tuple[str, ...], out: Path | None, as_json: bool) -> None:
    """Render environment.yml, the Dockerfile and the build context of each target."""
    env_spec = load_spec(spec)
    resolved = resolve_targets(env_spec, cuda)
    written = []
    for target in resolved:
        if out is None:
            folder = Path("build") / target.name / target.key
        elif len(resolved) == 1:
            folder = out
        else:
            folder = out / target.key
        render_to(render_target(target), folder)
        written.append({"target": target.key, "path": str(folder)})
    if as_json:
        reports.print_json(written)
    else:
        for item in written:
            click.echo(f"{item['target']}: {item['path']}")


@cli.command()
@SPEC
@JSON
def lint(spec: Path, as_json: bool) -> None:
    """Check SPEC against the seeds' advice; exit 1 when an error is found."""
    findings = lint_spec(load_spec(spec))
    if as_json:
        reports.print_json([f.as_dict() for f in findings])
    else:
        for finding in findings:
            click.echo(f"{spec}: {finding.level}: {finding.field}: {finding.message}")
        if not findings:
            click.echo(f"{spec}: no findings")
    if any(f.level == "error" for f in findings):
        raise SystemExit(1)


def main() -> None:
    cli(prog_name="envbuild")

"""The `envbuild` command: parse arguments, call the library, print. No logic lives here."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, cast

import click

from builder import __version__, reports
from builder.cli.options import (
    ALLOW_OUTSIDE,
    IMAGE_PLATFORM,
    TARGET_ID,
    BuildFlags,
    CiJobFlags,
    ContainerFlags,
    ImagePathFlags,
    InputFile,
    K8sFlags,
    LocalEnvFlags,
    LockFlags,
    OutputFile,
    PublishFlags,
    SolveFlags,
    build_options,
    ci_job_options,
    container_options_group,
    image_path_options,
    k8s_options,
    local_env_options,
    lock_options,
    publish_options,
    solve_options,
    sources_options,
)
from builder.errors import EnvbuildError, UsageError
from builder.safe_io.text import terminal_line
from builder.specs.cuda import TargetId
from builder.specs.model import load_spec
from builder.specs.target import Sources, resolve_targets, target_summary


def _spec_or_default(ctx: click.Context, _param: click.Parameter, value: Path | None) -> Path:
    """SPEC, or the project's only envs/*.yaml (said on stderr, so --json output stays clean)."""
    if value is not None or ctx.resilient_parsing:  # shell completion parses without running: say nothing
        return value  # type: ignore[return-value]
    from builder.specs.discovery import default_spec

    found = default_spec()
    click.echo(f"using {found.shown} (the project's only spec)", err=True)
    return Path(found.shown)  # as the user would have typed it: relative paths stay relative in what is written


SPEC = click.argument("spec", type=InputFile(), required=False, callback=_spec_or_default)
JSON = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
ERROR_LINE_LIMIT = 299  # an Error line names the cause and the fix; past this, neither is read
CUDA = click.option("--cuda", "cuda", multiple=True, type=TARGET_ID, metavar="X.Y|cpu",
                    help="Only this CUDA target (repeatable); default: every target of the spec.")


class EnvbuildGroup(click.Group):
    """The one place where library errors become an `Error:` line and an exit code (no traceback)."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except EnvbuildError as error:
            _say_error(error.message)
            ctx.exit(error.exit_code)


def _print_version(ctx: click.Context) -> None:
    from builder.lock.inputs import lock_tool_versions

    tools = ", ".join(f"{name} {version}" for name, version in lock_tool_versions().items())
    click.echo(f"envbuild {__version__} (lock hash inputs: {tools})")
    ctx.exit(0)


@click.group(cls=EnvbuildGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=lambda ctx, _param, value: _print_version(ctx) if value else None,
              help="Show envbuild's version and those of the tools that enter a lock's hash, and exit.")
def cli() -> None:
    """Reproducible PyTorch-CUDA environments: render, lock, build and smoke-test one image per CUDA target."""
    from builder.envvars import check_environment

    check_environment()  # junk in an ENVBUILD_* variable is one line now, not a silent default later


@cli.command()
@SPEC
@JSON
def targets(spec: Path, as_json: bool) -> None:
    """The CUDA targets of SPEC: torch, CUDA, cuDNN, minimum driver, GPU architectures, base images."""
    from builder.host.fleet import fleet_warnings, spec_hosts

    loaded = load_spec(spec)
    resolved = resolve_targets(loaded)
    fleet = fleet_warnings(resolved, spec_hosts(loaded))
    rows = [target_summary(t) for t in resolved]
    if as_json:
        reports.print_json("targets", [
            {**row, "fleet_warnings": [w for w in fleet if w.startswith(f"target {row['target']} ")]} for row in rows])
        return
    reports.print_table(
        f"{resolved[0].name}: CUDA targets",
        ["target", "torch", "torchvision", "python", "route", "cuDNN", "min driver", "full driver",
         "GPU archs", "runtime image", "nvidia/cuda image"],
        [[r["target"], r["torch"], r["torchvision"], r["python"], r["route"], r["cudnn"],
          r["min_driver"], r["full_compat_driver"], r["archs"], r["runtime_image"], r["nvidia_cuda_image"]]
         for r in rows],
    )
    for warning in dict.fromkeys([*(w for t in resolved for w in t.warnings), *fleet]):
        reports.print_marked("", "warning", f": {warning}", stderr=True)


@cli.command()
@click.argument("path", required=False, type=InputFile())
@click.option("--rules", "list_rules", is_flag=True, help="List the rules (id and what each checks) and exit.")
@click.option("--rule", "only", multiple=True, metavar="ID", help="Run only this rule (repeatable).")
@ALLOW_OUTSIDE
@JSON
def lint(path: Path | None, list_rules: bool, only: tuple[str, ...], allow_outside: bool, as_json: bool) -> None:
    """Check PATH, a spec or an environment file you have (environment.yml, requirements.txt,
    conda-lock.yml, Dockerfile); exit 1 when an error is found."""
    from builder.lint.rules import LINT, lint_path

    if list_rules:
        rules = [{"rule": rule.id, "summary": rule.summary} for rule in LINT]
        if as_json:
            reports.print_json("lint-rules", rules)
        else:
            reports.print_table("lint rules", ["rule", "checks"], [[r["rule"], r["summary"]] for r in rules])
        return
    if path is None:
        raise UsageError("envbuild lint needs a PATH (a spec or an environment file), or --rules")
    findings = lint_path(path, only, allow_outside)
    if as_json:
        reports.print_json("lint", {"path": str(path), "findings": [finding.as_dict() for finding in findings]})
    else:
        _print_findings(path, findings)
    if any(f.is_error for f in findings):
        raise SystemExit(1)


def _print_findings(path: Path, findings: list) -> None:
    for finding in findings:
        reports.print_marked(f"{path}: ", str(finding.severity), f": {finding.rule}: {finding.message}"
                             + (f" (fix: {finding.fix})" if finding.fix else ""))
    if not findings:
        click.echo(f"{path}: no findings")


@cli.command()
@SPEC
@CUDA
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Output folder (one target) or parent folder (several); default build/<env>/<target>.")
@click.option("--locks", "lock_root", type=click.Path(file_okay=False, path_type=Path),
              help="Folder of the locks (default: <spec folder>/<env>/locks).")
@IMAGE_PLATFORM
@sources_options
@JSON
def render(spec: Path, cuda: tuple[TargetId, ...], out: Path | None, lock_root: Path | None, image_platform: str,
           sources: Sources, as_json: bool) -> None:
    """Write each target's build context (Dockerfile, install plan from its lock, installer, smoke suite).

    `docker build OUT` builds it with any engine. Without a fresh lock only environment.yml and the
    Dockerfile are written. A folder is replaced only when envbuild wrote it and nobody changed it."""
    from builder.image.context import render_contexts

    written = render_contexts(resolve_targets(load_spec(spec), cuda, sources), out, lock_root=lock_root,
                              image_platform=image_platform)
    if as_json:
        reports.print_json("render", [item.as_dict() for item in written])
        return
    for item in written:
        click.echo(f"{item.target}: {item.path}" + ("" if item.buildable else " (not buildable)"))
        if item.note:
            click.echo(f"{item.target}: {item.note}", err=True)


@cli.command()
@SPEC
@CUDA
@solve_options
@click.option("--base-image", metavar="IMAGE[@DIGEST]",
              help="Runtime base image in place of the spec's (its glibc becomes __glibc).")
@sources_options
@JSON
def lock(spec: Path, cuda: tuple[TargetId, ...], solve: SolveFlags, base_image: str | None, sources: Sources,
         as_json: bool) -> None:
    """Lock each CUDA target of SPEC with conda-lock (all its platforms in one conda-lock.yml)."""
    from builder.lock.targets import check_targets, lock_targets
    from builder.specs.target import with_images

    check = solve.check
    env_spec = with_images(load_spec(spec), base_image)
    resolved = resolve_targets(env_spec, cuda, sources, solve.platforms)
    if check:
        results = check_targets(resolved, lock_root=solve.lock_root, solver=solve.solver)
    else:
        from builder.cli.live import live_progress

        with live_progress(transient=False) as progress:
            results = lock_targets(resolved, lock_root=solve.lock_root, solver=solve.solver, update=solve.update,
                                   force=solve.force, parallel=solve.jobs, timeout=solve.timeout, progress=progress)
    if as_json:
        reports.print_json("lock", [r.as_dict() for r in results])
    else:
        reports.print_table(
            f"{resolved[0].name}: locks",
            ["target", "status", "seconds", "torch per platform", "lockfile", "reason"],
            [[r.target, r.status, f"{r.seconds:.1f}" if r.seconds else "",
              "; ".join(f"{p}: {b}" for p, b in r.torch_builds.items()), r.path, _lock_reason(r)] for r in results],
        )
    # On stderr also with --json: a CI log then says what to run, while the JSON goes to a report file.
    blamed = _first_bad(results, check)
    for result in results:
        if result is blamed and result.status != "failed":
            continue  # said by the Error line below
        if result.status != "failed" and result.message:
            click.echo(f"{result.target}: {result.message}" + (f"; {result.hint}" if result.hint else ""), err=True)
        elif "\n" in result.message:  # the solver's explanation: the Error line below sums it up
            details = result.message.splitlines()
            click.echo("\n".join(f"{result.target}: {line}" if i == 0 else f"  {line}"
                                  for i, line in enumerate(details)), err=True)
    _raise_for_locks(results, check, spec)


def _lock_reason(result) -> str:
    """A failed row's cause (its fix is on the Error line); any other row's own message."""
    from builder.lock.targets import failure_line

    if result.status == "failed":
        return failure_line(result.message).split("; ", 1)[0]
    return result.message


def _bad_locks(results, check: bool) -> list:
    """The targets that failed or, with --check, are not fresh; the Error line names the first."""
    return [r for r in results if r.status == "failed" or (check and r.status in ("stale", "missing"))]


def _first_bad(results, check: bool):
    return next(iter(_bad_locks(results, check)), None)


def _raise_for_locks(results, check: bool, spec: Path) -> None:
    """One Error line for the first target that failed (or, with --check, is not fresh)."""
    from builder.lock.targets import failure_line

    bad = _bad_locks(results, check)
    if not bad:
        return
    first = bad[0]
    more = f" (and {len(bad) - 1} more target(s), see above)" if len(bad) > 1 else ""
    if first.status == "failed":
        raise EnvbuildError(f"{first.target}: lock failed: {failure_line(first.message, shown_above=True)}{more}")
    why = first.message or ("no lockfile yet" if first.status == "missing" else "its inputs changed")
    state = why if why.startswith(first.status) else f"the lock is {first.status} ({why})"
    fix = first.hint or f"run `envbuild lock {spec}`"
    raise EnvbuildError(f"{first.target}: {state}; {fix}{more}")


@cli.command()
@SPEC
@CUDA
@click.option("--all", "all_targets", is_flag=True, help="Every target of the spec.")
@publish_options
@build_options
@lock_options
@sources_options
@JSON
def image(spec: Path, cuda: tuple[TargetId, ...], all_targets: bool, publish: PublishFlags, build: BuildFlags,
          locks: LockFlags, sources: Sources, as_json: bool) -> None:
    """Build one PyTorch-CUDA image per target through the Docker SDK."""
    from builder.image.pipeline import build_target_image
    from builder.image.progress import build_progress

    if not cuda and not all_targets:
        raise UsageError("name a target with --cuda X.Y (or --cuda cpu), or build every target with --all")
    if cuda and all_targets:
        raise UsageError("--all builds every target, --cuda names some: give one of them")
    resolved = resolve_targets(build.spec(spec), () if all_targets else cuda, sources)
    engine = build.engine_for(spec, publish.source, publish.revision)
    results = []
    for target in resolved:
        with build_progress(target.tag) as echo:
            results.append(build_target_image(target, locks=locks.policy(), options=engine, push=publish.push,
                                              echo=echo))
    if as_json:
        reports.print_json("image", [r.as_dict() for r in results])
        return
    reports.print_table(
        f"{resolved[0].name}: images",
        ["target", "tags", "size", "env layer", "seconds", "pushed"],
        [[r.target, " ".join(r.tags), reports.human_size(r.size),
          reports.human_size(r.env_layer_size), f"{r.seconds:.0f}", " ".join(r.pushed)] for r in results],
    )


@cli.command()
@SPEC
@JSON
def images(spec: Path, as_json: bool) -> None:
    """The images envbuild built for SPEC: tags, sizes, the lock each came from, the env's layers."""
    from builder.image.build import list_images

    rows = list_images(load_spec(spec).name)
    if as_json:
        reports.print_json("images", rows)
        return
    reports.print_table(
        "images", ["target", "torch", "cuda", "tags", "size", "lock", "created", "env layers"],
        [[r["target"], r["torch"], r["cuda"], " ".join(r["tags"]), reports.human_size(r["size"]),
          r["lock_hash"][:12], r["created"],
          ", ".join(f"{layer['group']} {reports.human_size(layer['size'])}" for layer in r["env_layers"])]
         for r in rows],
    )


@cli.command()
@click.argument("image_name", metavar="IMAGE", required=False)
@click.option("--local", is_flag=True, help="Run the suite in this Python instead of a container.")
@click.option("--expect-torch", metavar="VER", help="Default: the image's io.envbuild.torch label.")
@click.option("--expect-cuda", metavar="X.Y|cpu", help="Default: the image's io.envbuild.cuda label.")
@click.option("--only", metavar="NAME,...", help="Run only these checks.")
@click.option("--pull", is_flag=True, help="Pull IMAGE first (e.g. REGISTRY/NAME@sha256:... a build job pushed).")
@container_options_group
@JSON
def smoke(image_name: str | None, local: bool, expect_torch: str | None, expect_cuda: str | None, only: str | None,
          pull: bool, smoke_container: ContainerFlags, as_json: bool) -> None:
    """Run the smoke suite inside IMAGE (or --local): CUDA, DataParallel, AMP and the seeds' pitfalls."""
    from builder.cli.live import live_progress
    from builder.image.smoke_run import Expected, run_labelled_image, run_local

    flags = smoke_container
    _check_smoke_subject(image_name, local, pull)
    if image_name is None:
        with live_progress() as progress:
            report = run_local(flags.require_gpus, expect_torch, expect_cuda, only, flags.timeout, progress=progress)
        title = "smoke: this Python"
    else:
        if pull:
            from builder.image.build import pull_reference  # the engine client: loaded only to pull, not for --local

            pull_reference(image_name)
        with live_progress() as progress:
            report = run_labelled_image(image_name, container=flags.container(), require_gpus=flags.require_gpus,
                                        expect=Expected(expect_torch, expect_cuda), only=only, timeout=flags.timeout,
                                        progress=progress)
        title = f"smoke: {image_name}"
    if as_json:
        reports.print_json("smoke", report.as_dict())
    else:
        for note in report.notes:
            click.echo(terminal_line(f"note: {note}"), err=True)
        reports.print_table(title, report.TABLE_COLUMNS, report.table_rows())
        click.echo(report.summary_line())
    if flags.junit:  # after the results are out: a report that cannot be written does not hide them
        reports.write_junit(flags.junit, "envbuild.smoke", report.checks, force=flags.junit_force)
    if report.failed:
        raise SystemExit(1)


def _check_smoke_subject(image_name: str | None, local: bool, pull: bool) -> None:
    """Exactly one of IMAGE and --local; --pull only with an IMAGE."""
    if local and image_name:
        raise UsageError(f"--local tests this Python, IMAGE ({image_name}) an image: give one of them")
    if not local and not image_name:
        raise UsageError("give an IMAGE to test, or --local for this Python")
    if pull and not image_name:
        raise UsageError("--pull pulls the IMAGE to test: give one, or drop --pull for --local")


@cli.command()
@click.argument("spec", required=False, type=InputFile())
@click.option("--save", "save_to", type=OutputFile(),
              help="Also record this host (driver, GPUs, capabilities) in FILE for a spec's `fleet:` or --fleet.")
@click.option("--force", is_flag=True, help="Let --save replace a regular file that is not a host file.")
@click.option("--fleet", "fleet_files", multiple=True, type=InputFile(dir_okay=True),
              metavar="FILE|DIR", help="Judge SPEC's targets on these recorded hosts (and the spec's `fleet:`) "
                                       "instead of this host; repeatable. Exit 1 when no target runs on one.")
@JSON
def doctor(spec: Path | None, save_to: Path | None, force: bool, fleet_files: tuple[Path, ...], as_json: bool) -> None:
    """This host for envbuild: OS, Python, Docker engine, NVIDIA toolkit, driver, GPUs; with SPEC, whether
    each CUDA target runs here. Exit 1 only when a target cannot run on this host's GPUs."""
    from builder.host.doctor import diagnose, gather_host_facts

    if fleet_files:
        _fleet_doctor(spec, fleet_files, as_json)
        return
    resolved = resolve_targets(load_spec(spec)) if spec else []
    if save_to is not None:  # refused before the host is read: nothing is written where it may not be
        from builder.formats.host_file import check_host_file_path

        check_host_file_path(save_to, force)
    facts = gather_host_facts()
    if save_to is not None:
        from builder.host.fleet import save_host

        save_host(facts, save_to, force=force)
        click.echo(f"recorded this host in {save_to}", err=True)
    report = diagnose(facts, resolved)
    if as_json:
        reports.print_json("doctor", report.as_dict())
    else:
        _print_doctor(report, resolved[0].name if resolved else None)
    if report.cannot_run:
        raise SystemExit(1)


def _print_doctor(report, env_name: str | None) -> None:
    reports.print_table("host", ["fact", "value"], report.host_rows())
    if report.host.gpus:
        reports.print_table("GPUs, most free memory first",
                            ["index", "name", "arch", "MIG", "free", "total", "util", "UUID / bus"],
                            report.gpu_rows())
    if report.process_rows():
        reports.print_table("GPU processes", ["GPU", "PID", "name", "memory"], report.process_rows())
    problems = report.problem_rows()
    if problems:
        reports.print_table("problems", ["level", "what", "problem", "fix"], problems)
    if env_name is not None:
        reports.print_table(f"{env_name}: targets on this host",
                            ["target", "torch", "CUDA", "route", "verdict", "why", "fix"], report.target_rows())


def _fleet_doctor(spec: Path | None, files: tuple[Path, ...], as_json: bool) -> None:
    from builder.host.fleet import fleet_matrix, host_paths, load_host, spec_hosts

    if spec is None:
        raise UsageError("--fleet needs SPEC: the targets to judge on the recorded hosts")
    loaded = load_spec(spec)
    hosts = [*spec_hosts(loaded), *(load_host(path) for path in host_paths(files))]
    matrix = fleet_matrix(resolve_targets(loaded), hosts)
    if as_json:
        reports.print_json("fleet", matrix.as_dict())
    else:
        title = f"{loaded.name}: targets on the fleet (* = the fewest targets that cover it)"
        if len(matrix.hosts) > len(matrix.targets):  # hosts down the side: the grid does not fold words
            reports.print_table(title, ["host", *(r[0] for r in matrix.table_rows())], matrix.host_rows())
        else:
            reports.print_table(title, ["target", *(h.name for h in matrix.hosts)], matrix.table_rows())
        if matrix.fix_rows():
            reports.print_table("what does not run, and the fix", ["target", "host", "why", "fix"], matrix.fix_rows())
        click.echo(f"cover: {', '.join(matrix.cover) or 'none'}")
    if matrix.uncovered:
        raise SystemExit(1)


@cli.command("explain")
@click.argument("log", type=InputFile(allow_dash=True), metavar="FILE|-", required=False)
@click.option("--spec", "spec", type=InputFile(),
              help="Name this spec's targets in the fixes.")
@click.option("--no-host", is_flag=True, help="Do not read this host's driver and GPUs (explain a log from elsewhere).")
@click.option("--catalogue", is_flag=True, help="List every message family explain knows, with its source.")
@JSON
def explain(log: Path | None, spec: Path | None, no_host: bool, catalogue: bool, as_json: bool) -> None:
    """Read an error log (pip, conda, CUDA, PyTorch, NCCL; FILE or - for stdin) and say what happened, why,
    and the fix. Exit 0 when something was recognised, 1 when not."""
    from builder.explain import report as explaining
    from builder.host.gpuinfo import read_host_gpus

    if catalogue:
        if as_json:
            reports.print_json("explain-catalogue", explaining.catalogue())
        else:
            click.echo("\n".join(explaining.catalogue_lines()))
        return
    if log is None:
        raise click.UsageError("give a log FILE, or - for stdin (or --catalogue)")
    driver, gpus, processes = (None, [], []) if no_host else read_host_gpus()
    with _log_stream(log) as stream:
        report = explaining.explain_stream(stream, str(log), driver=driver, gpus=gpus, processes=processes,
                                           targets=resolve_targets(load_spec(spec)) if spec else ())
    if as_json:
        reports.print_json("explain", report.as_dict())
    else:
        click.echo("\n".join(report.text_lines()))
    if not report.recognised:
        raise SystemExit(1)


@contextlib.contextmanager
def _log_stream(log: Path) -> Iterator[IO[bytes]]:
    """The log as a byte stream (explain reads it bounded): standard input for -, else the regular file
    InputFile already checked."""
    if str(log) == "-":
        if sys.stdin is None:  # Python's stand-in for a closed file descriptor 0
            raise UsageError("standard input is closed; pipe the log in, or give its FILE")
        yield sys.stdin.buffer
        return
    try:
        handle = open(log, "rb")  # noqa: SIM115 - closed below, after explain has read it
    except OSError as exc:
        raise UsageError(f"{log}: cannot read the log ({exc.strerror}); give a readable FILE, or - for stdin") from None
    with handle:
        yield handle


@cli.command("init")
@click.option("--from", "source", type=InputFile(),
              help="A file to turn into a spec: environment.yml (hand-written or `conda env export`), "
                   "requirements.txt, conda-lock.yml, Dockerfile, pixi.toml, pixi.lock, uv's pyproject.toml or "
                   "uv.lock.")
@click.option("--upgrade", is_flag=True,
              help="When the file's torch, CUDA or Python is older than envbuild builds, write the nearest "
                   "supported ones (each change is listed) instead of refusing.")
@click.option("--name", help="The env name (default: the file's `name:`, else this folder's).")
@click.option("--out", type=OutputFile(), help="Spec file (default envs/<name>.yaml).")
@click.option("--force", is_flag=True, help="Replace an existing spec file.")
@ALLOW_OUTSIDE
@JSON
def init(source: Path | None, name: str | None, out: Path | None, force: bool, upgrade: bool,
         allow_outside: bool, as_json: bool) -> None:
    """Write a spec: from an environment file you have (--from), or a commented starter."""
    from builder.init.importer import init_spec
    from builder.lint.rules import lint_spec

    result = init_spec(source, name, out, force, upgrade, allow_outside)
    findings = lint_spec(result.spec)
    if as_json:
        reports.print_json("init", {**result.as_dict(), "lint": [f.as_dict() for f in findings]})
    else:
        spec = result.spec
        click.echo(f"wrote {result.path}: torch {spec.torch}, route {spec.route.value}, "
                   f"targets {', '.join(t.key for t in result.targets)}")
        if result.notes:
            reports.print_table(f"{result.source}: what envbuild derived, assumed or left out",
                                ["line", "outcome", "why"],
                                [[n.entry, n.outcome, n.reason] for n in result.notes])
        unmapped = result.unmapped
        click.echo(f"{len(unmapped)} line(s) could not be mapped" + (": see the table" if unmapped else ""))
        for finding in findings:
            reports.print_marked(f"{result.path}: ", str(finding.severity), f": {finding.rule}: {finding.message}")
        click.echo(f"next: envbuild targets {result.path}; envbuild lock {result.path}")
    if any(f.is_error for f in findings):
        raise SystemExit(1)


@cli.command("export")
@click.argument("fmt", metavar="pixi|uv", type=click.Choice(["pixi", "uv"]))
@SPEC
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="File to write (default <spec folder>/<name>/pixi/pixi.toml or <name>/uv/pyproject.toml).")
@click.option("--pip-index", metavar="URL", help="The PyTorch wheel index to write ({tag} becomes cu128, cpu, ...).")
@click.option("--force", is_flag=True, help="Replace an existing file.")
@JSON
def export(fmt: str, spec: Path, out: Path | None, pip_index: str | None, force: bool, as_json: bool) -> None:
    """Write SPEC's targets as a pixi workspace (one environment per target, its platform declaring the driver
    and GPU floors) or a uv project (one extra per pip-route target, each with its wheel index)."""
    from builder.teams.export import Format, write_export

    env_spec = load_spec(spec)
    targets = resolve_targets(env_spec, sources=Sources(pip_index=pip_index))
    written = write_export(cast(Format, fmt), env_spec, spec, targets, out, force)
    if as_json:
        reports.print_json("export", written.as_dict())
        return
    kind = "environment" if fmt == "pixi" else "extra"
    click.echo(f"wrote {written.path}: {fmt} {'workspace' if fmt == 'pixi' else 'project'} for {env_spec.name}")
    reports.print_table(f"{written.path}: one {kind} per target", ["target", kind],
                        [list(pair) for pair in written.names])
    for note in written.notes:
        click.echo(terminal_line(f"note: {note}"), err=True)


@cli.command("summary")
@click.argument("report_files", metavar="REPORT.json...", nargs=-1, required=True,
                type=click.Path(dir_okay=False, path_type=Path))
@JSON
def summary(report_files: tuple[Path, ...], as_json: bool) -> None:
    """The JSON reports of `lock --check`, `image` and `matrix` as Markdown (a CI step summary)."""
    from builder.teams.summary import markdown_summary, read_report

    read = [read_report(path) for path in report_files]
    if as_json:
        reports.print_json("summary", [report.as_dict() for report in read])
    else:
        click.echo(markdown_summary(read))


@cli.command("ci")
@click.argument("provider", type=click.Choice(["github", "gitlab", "k8s"]))
@SPEC
@click.option("--out", type=OutputFile(),
              help="File to write (default .github/workflows/envbuild-<name>.yml, .gitlab-ci.yml or "
                   "k8s/envbuild-<name>-smoke.yaml).")
@ci_job_options
@k8s_options
@click.option("--force", is_flag=True, help="Replace an existing file.")
@JSON
def ci(provider: str, spec: Path, out: Path | None, ci_jobs: CiJobFlags, k8s: K8sFlags, force: bool,
       as_json: bool) -> None:
    """Write a GitHub or GitLab pipeline (lock check, a build per target, GPU and CPU smoke jobs), or
    Kubernetes Jobs that smoke-test each CUDA target's pushed image on a cluster's GPUs (k8s)."""
    from builder.teams.ci import K8S, CiOptions, Provider, parse_labels, write_pipeline

    env_spec = load_spec(spec)
    _check_ci_flags(provider, ci_jobs, k8s)
    if provider == K8S:
        _ci_k8s(env_spec, spec, out, ci_jobs, k8s, force, as_json)
        return
    options = CiOptions(
        gpu_runner_labels=parse_labels(ci_jobs.gpu_runner_labels, "--gpu-runner-labels"),
        cpu_runner_labels=parse_labels(ci_jobs.cpu_runner_labels, "--cpu-runner-labels"),
        require_gpus=ci_jobs.require_gpus,
        install_from=ci_jobs.install_from,
    )
    pipeline = write_pipeline(cast(Provider, provider), env_spec, spec, resolve_targets(env_spec), out, options, force)
    if as_json:
        reports.print_json("ci", pipeline.as_dict())
    else:
        _print_pipeline(pipeline, provider, env_spec.name, spec)


def _check_ci_flags(provider: str, ci_jobs: CiJobFlags, k8s: K8sFlags) -> None:
    """The runner flags are for github/gitlab, the cluster flags for k8s: one given to the other is refused."""
    from builder.teams.ci import K8S

    given = {"--gpu-runner-labels": ci_jobs.gpu_runner_labels, "--cpu-runner-labels": ci_jobs.cpu_runner_labels,
             "--install-from": ci_jobs.install_from} if provider == K8S else \
        {"--registry": k8s.registry, "--image": k8s.images, "--gpu-product": k8s.gpu_products,
         "--namespace": k8s.namespace}
    misplaced = [name for name, value in given.items() if value]
    if misplaced:
        raise UsageError(f"{misplaced[0]} does not apply to `envbuild ci {provider}`")


def _ci_k8s(env_spec, spec: Path, out: Path | None, ci_jobs: CiJobFlags, k8s: K8sFlags, force: bool,
            as_json: bool) -> None:
    from builder.teams.ci import write_k8s_jobs
    from builder.teams.k8s import K8sOptions, parse_images

    manifests = write_k8s_jobs(env_spec, spec, resolve_targets(env_spec), out, K8sOptions(
        images=parse_images(k8s.images), registry=k8s.registry, gpu_products=tuple(k8s.gpu_products),
        require_gpus=ci_jobs.require_gpus or 1, namespace=k8s.namespace), force)
    if as_json:
        reports.print_json("k8s", manifests.as_dict())
        return
    click.echo(f"wrote {manifests.path}: {len(manifests.jobs)} Kubernetes Job(s) for {env_spec.name}")
    reports.print_table(f"{manifests.path}: jobs", ["job", "target", "GPU product", "image"], [
        [job.name, job.target, job.gpu_product or "(any)", job.image] for job in manifests.jobs])
    for note in manifests.notes:
        click.echo(terminal_line(f"note: {note}"), err=True)


def _print_pipeline(pipeline, provider: str, env_name: str, spec: Path) -> None:
    click.echo(f"wrote {pipeline.path}: {provider} pipeline for {env_name}")
    if pipeline.install.requirement:
        click.echo(f"jobs install {pipeline.install.requirement} ({pipeline.install.origin})")
    else:
        click.echo("jobs install envbuild from the CI variable ENVBUILD_REQUIREMENT: set it to a pinned source, "
                   "or run again with --install-from")
    if pipeline.install.note:
        click.echo(f"note: {pipeline.install.note}", err=True)
    if pipeline.unlocked:
        reports.print_marked("", "warning", f": no lock for {', '.join(pipeline.unlocked)}: the lock-check job fails "
                             f"until `envbuild lock {spec}` runs and its locks are committed", stderr=True)
    reports.print_table(f"{pipeline.path}: jobs", ["job", "runs on", "one per target"], [
        [job.name, ", ".join(job.runs_on) or "(shared runners)", ", ".join(job.targets) or "(one job)"]
        for job in pipeline.jobs
    ])


@cli.command()
@SPEC
@CUDA
@build_options
@lock_options
@sources_options
@container_options_group
@JSON
def matrix(spec: Path, cuda: tuple[TargetId, ...], build: BuildFlags, locks: LockFlags, sources: Sources,
           smoke_container: ContainerFlags, as_json: bool) -> None:
    """Lock-check, build and smoke-test every target of SPEC on this host (what a GPU runner runs);
    exit 1 if anything failed."""
    from builder.image.progress import build_progress
    from builder.teams.matrix import first_error, run_matrix

    resolved = resolve_targets(build.spec(spec), cuda, sources)
    flags = smoke_container
    container = flags.container()
    rows = run_matrix(resolved, locks=locks.policy(), options=build.engine_for(spec), container=container,
                      require_gpus=flags.require_gpus, timeout=flags.timeout, progress=build_progress)
    if as_json:
        reports.print_json("matrix", [row.as_dict() for row in rows])
    else:
        _print_matrix(rows, resolved[0].name)
    if flags.junit:  # after the results are out: a report that cannot be written does not hide them
        reports.write_junit(flags.junit, f"envbuild.matrix.{resolved[0].name}",
                            [case for row in rows for case in row.junit_cases()], force=flags.junit_force)
    failed = first_error(rows)
    if failed is not None:
        raise EnvbuildError(f"{failed.target}: {failed.stage} failed: {failed.error}")
    if not all(row.ok for row in rows):
        raise SystemExit(1)


def _print_matrix(rows: list, env_name: str) -> None:
    """The table, then on stderr each row's notes, its error (the first one is the Error line) and failed checks."""
    from builder.teams.matrix import first_error

    reports.print_table(
        f"{env_name}: matrix on this host",
        ["target", "torch", "CUDA", "lock", "image", "size", "passed", "failed", "skipped", "seconds", "result"],
        [[r.target, r.torch, r.cuda, r.lock, r.image, reports.human_size(r.image_size),
          r.summary.get("passed", ""), r.summary.get("failed", ""), r.summary.get("skipped", ""),
          f"{r.seconds:.0f}", r.result] for r in rows],
    )
    for row in rows:
        for note in row.notes:
            click.echo(f"{row.target}: note: {note}", err=True)
        if row.error and row is not first_error(rows):
            click.echo(f"{row.target}: {row.stage} failed: {row.error}", err=True)
        for check in row.failed_checks():
            click.echo(f"{row.target}: {check['name']} failed: {check.get('reason', '')}", err=True)


@cli.command()
@SPEC
@click.option("--cuda", type=TARGET_ID, metavar="X.Y|cpu",
              help="The target; default: the newest CUDA target this host runs, else cpu.")
@local_env_options
@image_path_options
@lock_options
@sources_options
@JSON
def onboard(spec: Path, cuda: TargetId | None, local_env: LocalEnvFlags, image_path: ImagePathFlags, locks: LockFlags,
            sources: Sources, as_json: bool) -> None:
    """A new team member's path: the local environment of SPEC from its lock, a Jupyter kernel, the smoke
    suite in it, and what to do next (--image: the image and its `docker run` line)."""
    from builder.specs.target import with_images
    from builder.teams import onboard as path

    wants_image = bool(image_path.as_image or image_path.pull)
    _check_onboard_flags(wants_image, local_env, image_path)
    env_spec = with_images(load_spec(spec), image_path.base_image, image_path.builder_image)
    resolved = resolve_targets(env_spec, (cuda,) if cuda else (), sources)
    if wants_image:
        _onboard_image(resolved, bool(cuda), image_path, locks, as_json)
        return
    from builder.cli.live import live_progress

    with live_progress() as progress:
        result = path.onboard(resolved, asked=bool(cuda), options=replace(local_env.options(spec), progress=progress),
                              locks=locks.policy(), echo=_echo_err)
    if as_json:
        reports.print_json("onboard", result.as_dict())
    else:
        _print_onboard(result)
    if result.failed:
        raise SystemExit(1)


def _echo_err(line: str) -> None:
    click.echo(terminal_line(line), err=True)


def _check_onboard_flags(wants_image: bool, local_env: LocalEnvFlags, image_path: ImagePathFlags) -> None:
    """The local environment's flags are refused with --image/--pull, the image build's without."""
    image_only = {"--base-image": image_path.base_image, "--builder-image": image_path.builder_image,
                  "--network": image_path.network}
    local_only = {"--prefix": local_env.prefix, "--name": local_env.name, "--kernel-dir": local_env.kernel_dir,
                  "--no-smoke": local_env.no_smoke, "--installer": local_env.installer != "auto"}
    misplaced = [flag for flag, value in (local_only if wants_image else image_only).items() if value]
    if misplaced:
        where = "a local environment, not with --image/--pull" if wants_image else "--image builds"
        raise UsageError(f"{', '.join(misplaced)}: for {where}")


def _onboard_image(resolved: list, asked: bool, image_path: ImagePathFlags, locks: LockFlags, as_json: bool) -> None:
    from builder.image.build import BuildOptions
    from builder.image.progress import build_progress
    from builder.teams.onboard import onboard_image

    image_result = onboard_image(resolved, asked=asked, pull=image_path.pull, locks=locks.policy(),
                                 options=BuildOptions(network=image_path.network), progress=build_progress,
                                 echo=_echo_err)
    if as_json:
        reports.print_json("onboard-image", image_result.as_dict())
        return
    click.echo(f"{image_result.image} ({image_result.how}); run it with:\n  {image_result.run_command}")
    gpus = " --gpus all" if image_result.cuda else ""
    click.echo(f"smoke-test it: envbuild smoke {image_result.image}{gpus}")


def _print_onboard(result) -> None:
    runtime = f"CUDA {result.cuda}" if result.cuda else "CPU"
    click.echo(f"target: {result.target} (torch {result.torch}, {runtime}): {result.reason}")
    click.echo(f"environment: {result.prefix} ({result.status}, installer: {result.installer}, "
               f"lock: {result.lock})")
    kernel = result.kernel
    click.echo(f"Jupyter kernel: {kernel.name} \"{kernel.display_name}\" at {kernel.path}"
               if kernel is not None and kernel.path else "Jupyter kernel: none (see next)")
    if result.smoke:
        reports.print_table(f"smoke: {result.prefix / 'bin' / 'python'}", result.smoke.TABLE_COLUMNS,
                            result.smoke.table_rows())
        click.echo(f"smoke: {result.smoke.summary_line()}")
    click.echo("next:")
    for step in result.next_steps:
        click.echo(f"  {step}")


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL.

    \b
    Examples:
      eval "$(envbuild completion bash)"      # in ~/.bashrc
      envbuild completion fish > ~/.config/fish/completions/envbuild.fish"""
    from click.shell_completion import get_completion_class

    completion_class = get_completion_class(shell)
    assert completion_class is not None  # click ships all three of the choices
    click.echo(completion_class(cli, {}, "envbuild", "_ENVBUILD_COMPLETE").source())


@cli.command()
@click.argument("name", metavar="spec|lockfile|REPORT",
                type=click.Choice(["spec", "lockfile", *reports.report_names()]))
@click.option("--out", type=OutputFile(), help="Write the schema here instead of printing it.")
@click.option("--markdown", is_flag=True, help="The spec's fields as a Markdown reference (docs/spec-reference.md).")
def schema(name: str, out: Path | None, markdown: bool) -> None:
    """Print the JSON Schema of a spec (what editors validate envs/*.yaml with), of a lockfile, or of a
    command's --json report (lock, doctor, smoke, ...), generated from envbuild's own models.

    \b
    Examples:
      envbuild schema spec --out envs/envbuild-spec.schema.json
      envbuild schema doctor > doctor.schema.json"""
    from builder.specs.schema import schema_text, spec_reference, spec_schema

    if markdown and name != "spec":
        raise UsageError("--markdown is for `envbuild schema spec`")
    if markdown:
        text = spec_reference()
    elif name == "spec":
        text = schema_text(spec_schema())
    elif name == "lockfile":
        from builder.formats.conda_lock import lockfile_schema

        text = schema_text(lockfile_schema())
    else:
        text = schema_text(reports.report_schema(name))
    if out is None:
        click.echo(text, nl=False)
    else:
        from builder.generated_files import write_new_file

        write_new_file(out, text, owned=_is_schema_output, what="the schema")
        click.echo(f"wrote {out}", err=True)


def _is_schema_output(head: bytes) -> bool:
    """Whether a file's first bytes are what `schema` writes: a JSON Schema, or the spec reference."""
    return (head.startswith(b"{") and b'"$schema"' in head or b'"$defs"' in head[:20]) \
        or b"Generated by `envbuild schema" in head


def _add_examples() -> None:
    """Each command's help ends with its two examples (data/cli_examples.yaml)."""
    from builder.yamlio import data_text, load_yaml

    for name, lines in load_yaml(data_text("cli_examples.yaml"))["examples"].items():
        cli.commands[name].epilog = "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


_add_examples()


def main() -> None:
    """The console script: leaves through proc.exit_now (py-rattler can crash in interpreter teardown)."""
    from builder import proc

    proc.exit_now(run_cli(sys.argv[1:]))


def run_cli(args: list[str]) -> int:
    """Run one command; whatever goes wrong ends in one `Error:` line and an exit code, never a
    traceback. SIGTERM and SIGHUP unwind like Ctrl-C, so containers and folders are cleaned up.
    Standard output is checked to the end: output that could not be written is an error too."""
    from builder import proc
    from builder.safe_io.stdout import OutputError, checked_stdout

    with proc.signals_as_interrupt(), checked_stdout() as stdout:
        code = _run_command(args)
        try:
            stdout.flush()  # what is still buffered: a full disk or a closed stdout says so here
        except OutputError as error:
            click.echo(fit_error_line(terminal_line(f"Error: {error.message}")), err=True)
            return error.exit_code
        return code


def _say_error(message: str) -> None:
    """One `Error:` line, after what the command printed (whose own failure is then not said again)."""
    from builder.safe_io.stdout import settle_stdout

    settle_stdout()
    click.echo(fit_error_line(terminal_line(f"Error: {message}")), err=True)


def fit_error_line(text: str, limit: int = ERROR_LINE_LIMIT) -> str:
    """The Error line (the first of `text`; lines after it, such as a build log's tail, stay) within
    `limit` characters: a long middle (a path, a tool's words) gives way, the cause's start and the
    fix at the end stay."""
    first, newline, rest = text.partition("\n")
    if len(first) <= limit:
        return text
    keep_end = limit // 3
    first = f"{first[:limit - keep_end - 5]} ... {first[-keep_end:]}"
    return first + newline + rest


def _run_command(args: list[str]) -> int:
    import errno
    import os

    from builder import proc
    from builder.safe_io.oserrors import os_error_line

    try:
        result = cli.main(args=args, prog_name="envbuild", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except click.exceptions.Abort as exc:
        signal = exc.__cause__ if isinstance(exc.__cause__, proc.Terminated) else None
        name = signal.args[0] if signal else "Ctrl-C"
        _say_error(f"interrupted ({name}); unfinished work was undone, run the command again")
        return 128 + signal.signum if signal else 130
    except click.ClickException as exc:
        import io

        shown = io.StringIO()
        exc.show(file=shown)
        click.echo(terminal_line(shown.getvalue()), err=True, nl=False)  # click quotes the value given: no escapes
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except OSError as exc:
        if exc.errno == errno.EPIPE:  # a pipe envbuild writes to went away
            return 1
        _say_error(os_error_line(exc))
        return 1
    except Exception as exc:  # a bug: still one line, with the way to see more
        if os.environ.get("ENVBUILD_DEBUG"):
            raise
        _say_error(f"internal error: {type(exc).__name__}: {exc}; rerun with ENVBUILD_DEBUG=1 and report the traceback")
        return 70

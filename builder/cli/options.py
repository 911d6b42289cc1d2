"""Option groups that several commands share, declared once.

Each group adds its click options to a command and hands the command ONE typed value in their place,
so `image`, `matrix`, `lock`, `smoke` and `onboard` take a handful of parameters instead of twenty, and
a flag means the same thing on every command that has it. A command's own long list of options
(`lock`, `image`, `ci`, `onboard`) is grouped the same way, below the shared groups."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from builder.errors import UsageError
from builder.image.smoke_run import ContainerOptions, container_options
from builder.safe_io.reading import input_problem
from builder.safe_io.writing import output_destination
from builder.specs.cuda import TargetId
from builder.specs.model import EnvSpec, load_spec
from builder.specs.reference import check_label_text, check_registry
from builder.specs.target import Sources, with_ca_certificates, with_images

if TYPE_CHECKING:  # builder.image.build pulls in the build context and conda-lock: only commands that build load it
    from builder.image.build import BuildOptions
    from builder.image.pipeline import LockPolicy
    from builder.teams.onboard import LocalEnvOptions

Command = TypeVar("Command", bound=Callable[..., Any])
Decorator = Callable[[Command], Command]


def _option_names(options: Sequence[Decorator]) -> list[str]:
    def probe() -> None: ...

    for option in options:
        probe = option(probe)
    return [param.name for param in probe.__click_params__ if param.name]  # type: ignore[attr-defined]


def option_group(parameter: str, options: Sequence[Decorator], pack: Callable[..., Any]) -> Decorator:
    """A decorator adding `options` to a command and passing `pack(**their values)` as `parameter`."""
    names = _option_names(options)

    def decorator(function: Command) -> Command:
        @functools.wraps(function)
        def command(*args: Any, **kwargs: Any) -> Any:
            kwargs[parameter] = pack(**{name: kwargs.pop(name) for name in names})
            return function(*args, **kwargs)

        for option in reversed(options):
            command = option(command)
        return command  # type: ignore[return-value]

    return decorator


class TargetIdParam(click.ParamType):
    """`--cuda 12.9` / `--cuda cpu`, parsed where it enters: commands receive a TargetId."""

    name = "X.Y|cpu"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> TargetId:
        if isinstance(value, TargetId):
            return value
        try:
            return TargetId.parse(value)
        except UsageError as exc:
            raise UsageError(f"{param.opts[0] if param else '--cuda'}: {exc.message}") from None


TARGET_ID = TargetIdParam()


class InputFile(click.Path):
    """A file a command reads, checked where it enters: a FIFO (the read would block forever), a device,
    a socket or a symbolic link loop is refused in one line before any work starts; a missing file or
    a folder reads as click says it."""

    def __init__(self, dir_okay: bool = False, allow_dash: bool = False) -> None:
        super().__init__(exists=True, dir_okay=dir_okay, path_type=Path, allow_dash=allow_dash)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not (self.allow_dash and str(value) == "-"):
            problem = input_problem(Path(value), dir_okay=True)
            if problem and problem != "does not exist":
                dash = " (or - for standard input)" if self.allow_dash else ""
                self.fail(f"{value} {problem}; give a regular file{dash}", param, ctx)
        return super().convert(value, param, ctx)


class OutputFile(click.Path):
    """A file a command writes, checked before the work: a symbolic link (a dangling one too), a folder,
    device, FIFO or socket is refused in one line (builder.safe_io.output_destination), --force or not."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        output_destination(Path(str(path)))
        return path


BASE_IMAGE = click.option("--base-image", metavar="IMAGE[@DIGEST]", help="Runtime base image in place of the spec's.")
BUILDER_IMAGE = click.option("--builder-image", metavar="IMAGE[@DIGEST]",
                             help="Env-builder image (needs Python >= 3.10).")
ALLOW_OUTSIDE = click.option("--allow-outside", is_flag=True,
                             help="Read a requirements file's -r/-c file even outside that file's folder.")
NETWORK = click.option("--network", type=click.Choice(["host", "bridge", "none"]),
                       help="Network of the build containers.")

sources_options = option_group("sources", [
    click.option("--channel", multiple=True, metavar="URL", help="Replace the spec's channels (repeatable)."),
    click.option("--mirror", multiple=True, metavar="NAME=URL", help="Use URL in place of channel NAME (repeatable)."),
    click.option("--pip-index", metavar="URL", help="Replace the PyTorch wheel index ({tag} becomes cu118, cpu, ...)."),
], lambda channel, mirror, pip_index: Sources.parse(channel, mirror, pip_index))


@dataclass(frozen=True)
class LockFlags:
    """How a command that builds gets its locks: `--frozen`, `--locks`, `--solver`."""

    frozen: bool = False
    lock_root: Path | None = None
    solver: str | None = None

    def policy(self) -> LockPolicy:
        """These flags as the library takes them."""
        from builder.image.pipeline import LockPolicy

        return LockPolicy(lock_root=self.lock_root, frozen=self.frozen, solver=self.solver)


LOCKS_HELP = "Folder for the locks (default: <spec folder>/<env>/locks)."
SOLVER_HELP = "micromamba, mamba or conda to use (default: found on PATH, else envbuild's)."


def _conda_platforms(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    from builder.specs.compat import conda_platform

    return tuple(conda_platform(value) for value in values)


def _oci_platform(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    from builder.specs.compat import oci_platform

    return oci_platform(value)


# One spelling on every command (conda's, as `lock` takes it); Docker's is converted.
IMAGE_PLATFORM = click.option("--platform", "image_platform", default="linux-64", show_default=True,
                              callback=_oci_platform, metavar="SUBDIR",
                              help="Platform of the image (its locked packages), e.g. linux-64, linux-aarch64; "
                                   "Docker's linux/amd64 is taken too.")

lock_options = option_group("locks", [
    click.option("--frozen", is_flag=True, help="Fail instead of locking when a lock is stale."),
    click.option("--locks", "lock_root", type=click.Path(file_okay=False, path_type=Path), help=LOCKS_HELP),
    click.option("--solver", metavar="PATH", help=SOLVER_HELP),
], LockFlags)


@dataclass(frozen=True)
class BuildFlags:
    """How `image` and `matrix` build: the images to build on, extra CAs, and the engine's options."""

    base_image: str | None
    builder_image: str | None
    ca_certs: tuple[Path, ...]
    engine: BuildOptions

    def spec(self, path: Path) -> EnvSpec:
        """The spec at `path` with these images and CA certificates in place of its own."""
        return with_ca_certificates(with_images(load_spec(path), self.base_image, self.builder_image), self.ca_certs)

    def engine_for(self, path: Path, source: str | None = None, revision: str | None = None) -> BuildOptions:
        """The engine's options with the provenance labels of the spec at `path` (its git checkout,
        or `source` / `revision` given on the command line)."""
        import dataclasses

        from builder.image.provenance import source_labels

        return dataclasses.replace(self.engine, labels={**self.engine.labels, **source_labels(path, source, revision)})


def _build_flags(base_image: str | None, builder_image: str | None, ca_certs: tuple[Path, ...],
                 build_args: tuple[str, ...], no_cache: bool, image_platform: str, network: str | None) -> BuildFlags:
    from builder.image.build import BuildOptions, parse_build_args

    engine = BuildOptions(build_args=parse_build_args(build_args), no_cache=no_cache, platform=image_platform,
                          network=network)
    return BuildFlags(base_image, builder_image, ca_certs, engine)


build_options = option_group("build", [
    BASE_IMAGE,
    BUILDER_IMAGE,
    click.option("--ca-cert", "ca_certs", multiple=True, type=InputFile(),
                 help="Extra CA certificate to trust in both stages (repeatable)."),
    click.option("--build-arg", "build_args", multiple=True, metavar="KEY=VALUE",
                 help="Docker build argument (repeatable)."),
    click.option("--no-cache", is_flag=True, help="Build every layer again."),
    IMAGE_PLATFORM,
    NETWORK,
], _build_flags)


@dataclass(frozen=True)
class ContainerFlags:
    """How the smoke suite runs in a container: GPUs, shared memory, ulimits, time, JUnit output."""

    gpus: str | None = None
    require_gpus: int = 0
    shm_size: str = "1g"
    ulimits: tuple[str, ...] = ()
    timeout: float = 900.0
    junit: Path | None = None
    junit_force: bool = False

    def __post_init__(self) -> None:
        if self.junit is not None:  # refused before the suite runs: a run's results are never lost to it
            from builder.reports import check_junit_path

            check_junit_path(self.junit, self.junit_force)

    def container(self) -> ContainerOptions:
        """The container's options, checked (one UsageError line for a bad --gpus, --shm-size or --ulimit).
        Only commands that start a container ask: `smoke --local` ignores these flags."""
        from builder.image.smoke_run import check_gpu_request

        options = container_options(self.gpus, self.shm_size, self.ulimits)
        check_gpu_request(options, self.require_gpus)
        return options


container_options_group = option_group("smoke_container", [
    click.option("--gpus", metavar="all|N|device=ID,...|auto:N",
                 help="GPUs for the container, as CDI devices where the engine has NVIDIA's CDI specs "
                      "(auto:N: the N with most free memory)."),
    click.option("--require-gpus", type=click.IntRange(0), default=0, help="Fail unless N GPUs are visible."),
    click.option("--shm-size", default="1g", show_default=True, help="Shared memory (DataLoader workers need it)."),
    click.option("--ulimit", "ulimits", multiple=True, metavar="NAME=SOFT[:HARD]",
                 help="Container ulimit (repeatable); memlock=-1 is refused on some hosts."),
    click.option("--timeout", type=click.FloatRange(1), default=900.0, show_default=True,
                 help="Seconds the suite may run in one container."),
    click.option("--junit", type=OutputFile(), help="Write JUnit XML here."),
    click.option("--force", "junit_force", is_flag=True,
                 help="Let --junit replace a regular file that is not a JUnit report of envbuild's."),
], ContainerFlags)


# --- one command's own options ------------------------------------------------------------------

@dataclass(frozen=True)
class SolveFlags:
    """How `lock` solves: for which platforms, or only checking; what may move; with what, where, how many at once."""

    platforms: tuple[str, ...] = ()
    check: bool = False
    update: tuple[str, ...] = ()
    force: bool = False
    solver: str | None = None
    lock_root: Path | None = None
    jobs: int | None = None
    timeout: float = 600.0

    def __post_init__(self) -> None:
        if self.check and (self.update or self.force):
            given = "--update" if self.update else "--force"
            raise UsageError(f"--check solves nothing, so {given} has nothing to do: drop --check to lock, "
                             f"or drop {given} to check")


solve_options = option_group("solve", [
    click.option("--platform", "platforms", multiple=True, metavar="SUBDIR", callback=_conda_platforms,
                 help="Lock only these platforms (repeatable), e.g. linux-64, osx-arm64 "
                      "(Docker's linux/amd64 is taken too)."),
    click.option("--check", is_flag=True, help="Solve nothing; exit 1 when any lock is stale or missing."),
    click.option("--update", multiple=True, metavar="PACKAGE", help="Move this package, keep the rest (repeatable)."),
    click.option("--force", is_flag=True, help="Solve again even when the inputs are unchanged."),
    click.option("--solver", metavar="PATH", help=SOLVER_HELP),
    click.option("--locks", "lock_root", type=click.Path(file_okay=False, path_type=Path), help=LOCKS_HELP),
    click.option("--jobs", type=click.IntRange(1, 64), help="Targets locked at once (default: twice the CPU count)."),
    click.option("--timeout", type=click.FloatRange(1), default=600.0, show_default=True, help="Seconds per target."),
], SolveFlags)


@dataclass(frozen=True)
class PublishFlags:
    """Where `image` says its images come from (the source and revision labels), and where it pushes them."""

    push: str | None = None
    source: str | None = None
    revision: str | None = None

    def __post_init__(self) -> None:
        # Checked before the build: a push refused by the engine would come after a full build.
        check_registry("--push", self.push)
        check_label_text("--source", self.source)
        check_label_text("--revision", self.revision)


publish_options = option_group("publish", [
    click.option("--push", metavar="REGISTRY", help="Push every tag to REGISTRY (e.g. 127.0.0.1:5000/team)."),
    click.option("--source", metavar="URL", help="org.opencontainers.image.source (default: the spec's git remote)."),
    click.option("--revision", metavar="REV",
                 help="org.opencontainers.image.revision (default: the spec's git HEAD)."),
], PublishFlags)


@dataclass(frozen=True)
class CiJobFlags:
    """What `ci`'s jobs run on and need: runner labels (GitHub, GitLab), GPUs per smoke job, envbuild's source."""

    gpu_runner_labels: str | None = None
    cpu_runner_labels: str | None = None
    require_gpus: int | None = None
    install_from: str | None = None


ci_job_options = option_group("ci_jobs", [
    click.option("--gpu-runner-labels", metavar="A,B,...",
                 help="Labels (GitHub) or tags (GitLab) of the GPU runners; default self-hosted,linux,gpu / gpu."),
    click.option("--cpu-runner-labels", metavar="A,B,...",
                 help="Labels or tags of the hosted runners; default ubuntu-latest / none (shared runners)."),
    click.option("--require-gpus", type=click.IntRange(1), help="GPUs each GPU smoke job must see (default 1)."),
    click.option("--install-from", "--envbuild-requirement", "install_from", metavar="SOURCE",
                 help="Where the jobs pip-install envbuild from: envbuild==X.Y.Z on your index, git+URL@COMMIT, "
                      "a wheel URL with #sha256=, or a path in the repository (default: where this envbuild "
                      "came from, else the CI variable ENVBUILD_REQUIREMENT)."),
], CiJobFlags)


@dataclass(frozen=True)
class K8sFlags:
    """`ci k8s`: where the images are, the GPU classes to test on, the Jobs' namespace."""

    registry: str | None = None
    images: tuple[str, ...] = ()
    gpu_products: tuple[str, ...] = ()
    namespace: str | None = None


k8s_options = option_group("k8s", [
    click.option("--registry", metavar="REGISTRY/PATH", help="k8s: where the build jobs pushed the images."),
    click.option("--image", "images", multiple=True, metavar="TARGET=REF",
                 help="k8s: the image a target's Job runs, best by digest (repeatable; default REGISTRY/<tag>)."),
    click.option("--gpu-product", "gpu_products", multiple=True, metavar="LABEL",
                 help="k8s: a GPU class (nvidia.com/gpu.product node label) to test on; one Job each (repeatable)."),
    click.option("--namespace", metavar="NAME", help="k8s: the Jobs' namespace (default: kubectl's)."),
], K8sFlags)


@dataclass(frozen=True)
class LocalEnvFlags:
    """`onboard`'s local environment: where it goes, what installs it, its kernel, the smoke run, a reinstall."""

    prefix: Path | None = None
    name: str | None = None
    installer: str = "auto"
    kernel_dir: Path | None = None
    no_smoke: bool = False
    force: bool = False

    def options(self, spec_path: Path) -> LocalEnvOptions:
        """These flags as the library takes them, for the spec at `spec_path`."""
        from builder.teams.onboard import LocalEnvOptions

        return LocalEnvOptions(prefix=self.prefix, name=self.name, installer=self.installer,
                               kernel_dir=self.kernel_dir, spec_path=spec_path, smoke=not self.no_smoke,
                               force=self.force)


local_env_options = option_group("local_env", [
    click.option("--prefix", type=click.Path(file_okay=False, path_type=Path), help="Create the environment here."),
    click.option("--name", help="Create it as NAME in $ENVBUILD_ENVS_DIR (default: the user data folder's "
                 "envbuild/envs, e.g. ~/.local/share/envbuild/envs, or ~/.envbuild/envs if it exists)."),
    click.option("--installer", default="auto", show_default=True, metavar="auto|envbuild|PATH",
                 help="micromamba, mamba or conda to install with "
                      "(auto: the first on PATH, else envbuild's verified one)."),
    click.option("--kernel-dir", type=click.Path(file_okay=False, path_type=Path),
                 help="Jupyter kernels folder; default: <Jupyter data dir>/kernels."),
    click.option("--no-smoke", is_flag=True, help="Do not run the smoke suite in the new environment."),
    click.option("--force", is_flag=True, help="Reinstall even when the environment is from the same lock."),
], LocalEnvFlags)


@dataclass(frozen=True)
class ImagePathFlags:
    """`onboard --image` or `--pull`: the target's image instead of a local environment, and how it is built."""

    as_image: bool = False
    pull: str | None = None
    base_image: str | None = None
    builder_image: str | None = None
    network: str | None = None

    def __post_init__(self) -> None:
        check_registry("--pull", self.pull)


image_path_options = option_group("image_path", [
    click.option("--image", "as_image", is_flag=True, help="Build the target's image instead of a local environment."),
    click.option("--pull", metavar="REGISTRY", help="With --image: pull REGISTRY/<env>:<tag> instead of building."),
    BASE_IMAGE,
    BUILDER_IMAGE,
    NETWORK,
], ImagePathFlags)

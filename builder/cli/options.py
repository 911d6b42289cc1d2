"""Option groups that several commands share, declared once.

Each group adds its click options to a command and hands the command ONE typed value in their place,
so `image`, `matrix`, `lock`, `smoke` and `onboard` take a handful of parameters instead of twenty, and
a flag means the same thing on every command that has it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from builder.errors import UsageError
from builder.image.smoke_run import ContainerOptions, container_options
from builder.spec.cuda import TargetId
from builder.spec.model import EnvSpec, load_spec
from builder.spec.target import Sources, with_ca_certificates, with_images

if TYPE_CHECKING:  # builder.image.build pulls in the build context and conda-lock: only commands that build load it
    from builder.image.build import BuildOptions

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
BASE_IMAGE = click.option("--base-image", metavar="IMAGE[@DIGEST]", help="Runtime base image in place of the spec's.")
BUILDER_IMAGE = click.option("--builder-image", metavar="IMAGE[@DIGEST]",
                             help="Env-builder image (needs Python >= 3.10).")
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


lock_options = option_group("locks", [
    click.option("--frozen", is_flag=True, help="Fail instead of locking when a lock is stale."),
    click.option("--locks", "lock_root", type=click.Path(file_okay=False, path_type=Path)),
    click.option("--solver", metavar="PATH"),
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
    click.option("--ca-cert", "ca_certs", multiple=True,
                 type=click.Path(exists=True, dir_okay=False, path_type=Path),
                 help="Extra CA certificate to trust in both stages (repeatable)."),
    click.option("--build-arg", "build_args", multiple=True, metavar="KEY=VALUE",
                 help="Docker build argument (repeatable)."),
    click.option("--no-cache", is_flag=True, help="Build every layer again."),
    click.option("--platform", "image_platform", default="linux/amd64", show_default=True),
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

    def container(self) -> ContainerOptions:
        """The container's options, checked (one UsageError line for a bad --gpus, --shm-size or --ulimit).
        Only commands that start a container ask: `smoke --local` ignores these flags."""
        from builder.image.smoke_run import check_gpu_request

        options = container_options(self.gpus, self.shm_size, self.ulimits)
        check_gpu_request(options, self.require_gpus)
        return options


container_options_group = option_group("smoke_container", [
    click.option("--gpus", metavar="all|N|auto:N",
                 help="GPUs for the container (auto:N: the N with most free memory)."),
    click.option("--require-gpus", type=click.IntRange(0), default=0, help="Fail unless N GPUs are visible."),
    click.option("--shm-size", default="1g", show_default=True, help="Shared memory (DataLoader workers need it)."),
    click.option("--ulimit", "ulimits", multiple=True, metavar="NAME=SOFT[:HARD]",
                 help="Container ulimit (repeatable); memlock=-1 is refused on some hosts."),
    click.option("--timeout", type=click.FloatRange(1), default=900.0, show_default=True,
                 help="Seconds the suite may run in one container."),
    click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), help="Write JUnit XML here."),
], ContainerFlags)

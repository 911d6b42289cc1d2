"""A spec resolved for one CUDA target (or CPU), checked against the compatibility data.

This is the first typed value every later stage (render, lock, image, smoke) receives; it never
re-reads the spec file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from builder.errors import UsageError
from builder.safe_io.text import escape_unsafe, has_unsafe_characters, unsafe_characters
from builder.specs.compat import (
    CompatData,
    CudaToolkit,
    PlatformInfo,
    TorchRelease,
    load_compat,
    load_platforms,
    paired_torchvision,
    parse_version,
    release_line,
)
from builder.specs.cuda import CPU, CudaVersion, TargetId, cuda_json, cuda_or_cpu
from builder.specs.fleet import lowest_capability
from builder.specs.model import (
    CHANNEL_PATTERN,
    CaFiles,
    EnvSpec,
    ImageRef,
    Images,
    Route,
    TargetSpec,
    checked_value,
)
from builder.yamlio import data_text, load_yaml

# A channel as a spec names it (model.CHANNEL_PATTERN's first half), and the model's length cap.
CHANNEL_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.\-]*"
MAX_CHANNEL_LENGTH = 300


@dataclass(frozen=True)
class Sources:
    """Replacements for the spec's package sources, given on the command line."""

    channels: tuple[str, ...] = ()  # replaces the spec's channels when not empty
    mirrors: tuple[tuple[str, str], ...] = ()  # (channel name, URL) pairs
    pip_index: str | None = None  # replaces the PyTorch wheel index ({tag} allowed)

    @classmethod
    def parse(cls, channels: Sequence[str] = (), mirrors: Sequence[str] = (), pip_index: str | None = None) -> Sources:
        """`--channel URL`, `--mirror NAME=URL` and `--pip-index URL` as given, or a one-line UsageError."""
        pairs = []
        for channel in channels:
            _check_channel("--channel", channel, channel)
        for item in mirrors:
            name, sep, url = item.partition("=")
            if not sep or not name or not url:
                raise UsageError(f"--mirror {escape_unsafe(repr(item))}: write NAME=URL, e.g. "
                                 "conda-forge=https://mirror.example/conda-forge")
            _check_channel("--mirror", item, name, names_only=True)
            _check_channel("--mirror", item, url)
            pairs.append((name, url))
        if pip_index is not None and not _is_url(pip_index):
            raise UsageError(f"--pip-index {pip_index!r}: give the wheel index's URL (https://, http:// or file://), "
                             "e.g. https://download.pytorch.org/whl/{tag}")
        return cls(channels=tuple(channels), mirrors=tuple(pairs), pip_index=pip_index)

    def apply(self, channels: tuple[str, ...]) -> tuple[str, ...]:
        chosen = self.channels or channels
        mirrors = dict(self.mirrors)
        return tuple(mirrors.get(channel, channel) for channel in chosen)


def _check_channel(option: str, given: str, value: str, names_only: bool = False) -> None:
    """A channel as the spec's `channels:` takes it (a name, or an http(s)/file URL of URL characters): what
    reaches environment.yml, the lock's inputs and the generated files; else one line that names the option."""
    problem = None
    if unsafe_characters(value) or any(character.isspace() for character in value):
        problem = "holds whitespace, control or Unicode line-break characters"
    elif len(value) > MAX_CHANNEL_LENGTH:
        problem = f"is longer than {MAX_CHANNEL_LENGTH} characters"
    elif not re.fullmatch(CHANNEL_NAME_PATTERN if names_only else CHANNEL_PATTERN, value):
        problem = "is not a channel name (letters, digits, . _ -)" if names_only or "://" not in value \
            else "is not a channel URL (https://, http:// or file://, with a host or path of URL characters)"
    if problem:
        raise UsageError(f"{option} {escape_unsafe(repr(given))} {problem}; give a channel name such as conda-forge, "
                         "or its URL, e.g. https://mirror.example/conda-forge")


def _is_url(text: str) -> bool:
    """An index URL as pip and uv take it: a scheme they speak, a host (or a file path), nothing that
    breaks a line; `{tag}` may stand for the CUDA tag."""
    parts = urlsplit(text)
    located = bool(parts.netloc) if parts.scheme in ("http", "https") else parts.scheme == "file" and bool(parts.path)
    return located and not any(character.isspace() for character in text) and not has_unsafe_characters(text)


@dataclass(frozen=True)
class Target:
    spec: EnvSpec
    key: str  # "cuda11.8" or "cpu"
    cuda: CudaVersion | None  # None for the CPU target
    torch: str
    torchvision: str | None
    python: str
    route: Route
    channels: tuple[str, ...]
    pip_index: str | None  # only for the pip route
    # False when --pip-index replaced the wheel index (a mirror or an air-gapped local index): the lock
    # must then resolve from that index alone, never reach past it to the public one.
    allow_pypi_requests: bool
    platforms: tuple[str, ...]
    release: TorchRelease
    toolkit: CudaToolkit | None
    glibc: str | None
    min_driver: str | None
    runtime_image: ImageRef
    builder_image: ImageRef
    warnings: tuple[str, ...] = field(default=())
    cuda_arch: str | None = None  # conda's __cuda_arch: the lowest compute capability of the spec's fleet

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def cudnn(self) -> str | None:
        return self.release.cudnn.get(self.cuda) if self.cuda else None

    @property
    def archs(self) -> list[str]:
        return self.release.archs_for(self.route, self.cuda) if self.cuda else []

    @property
    def tag(self) -> str:
        """The human tag `<env>:<torch>-cuda<X>` (or `-cpu`)."""
        return f"{self.spec.name}:{self.torch}-{self.key}"

    @property
    def conda_forge_build_prefix(self) -> str:
        """How conda-forge's pytorch build strings start for this CUDA (`cuda129`), or `cpu`."""
        return self.cuda.build_prefix if self.cuda else CPU

    @property
    def pip_tag(self) -> str:
        return self.toolkit.pip_tag if self.toolkit else CPU

    def uses_cuda_on(self, platform: str) -> bool:
        return self.cuda is not None and _platforms()[platform].cuda


@lru_cache(maxsize=1)
def _platforms() -> dict[str, PlatformInfo]:
    return load_platforms()


@lru_cache(maxsize=1)
def default_pip_index() -> str:
    text = data_text("sources.yaml")
    return str(load_yaml(text)["pip_index"])


def _fail(spec: EnvSpec, target: TargetSpec, reason: str) -> UsageError:
    source = spec.source or spec.name
    return UsageError(f"{source}: target {cuda_or_cpu(target.cuda)}: {reason}")


def _not_on_legacy_channel(compat: CompatData, release: TorchRelease) -> str:
    last = [r.line for r in compat.releases() if r.cuda_variants(Route.PYTORCH_CHANNEL)]
    hint = f"; its last release there is {last[-1]}" if last else ""
    return f"torch {release.line} is not on the legacy pytorch channel{hint}; use route conda-forge or pip"


def _check_cuda(compat: CompatData, release: TorchRelease, route: Route, cuda: CudaVersion) -> str | None:
    """Why this torch line has no build for this CUDA on this route, with the nearest valid choices."""
    variants = release.cuda_variants(route)
    if cuda in variants:
        return None
    if route is Route.PYTORCH_CHANNEL and not variants:
        return _not_on_legacy_channel(compat, release)
    with_cuda = [r.line for r in compat.releases() if cuda in r.cuda_variants(route)]
    reason = f"torch {release.line} has no CUDA {cuda} build on route {route.value}"
    if with_cuda:
        later = [line for line in with_cuda if parse_version(line) < parse_version(release.line)]
        if later:
            reason += f"; the last with {cuda} is {later[-1]}"
        else:
            reason += f"; the first with {cuda} is {with_cuda[0]}"
    choices = ", ".join(str(v) for v in variants) if variants else "none (CPU only)"
    return f"{reason}; CUDA targets for {release.line}: {choices}"


# ---------------------------------------------------------------- resolution rules
# Each rule decides one field of the Target (or refuses the target with one line that says why and
# what to choose instead); resolve_target applies them in order.


def _release(spec: EnvSpec, target: TargetSpec, compat: CompatData) -> TorchRelease:
    torch = target.torch or spec.torch
    release = compat.release(torch)
    if release is None:
        known = ", ".join(r.line for r in compat.releases())
        raise _fail(spec, target, f"torch {torch} is not in envbuild's compatibility data (known: {known})")
    return release


def _torchvision(spec: EnvSpec, target: TargetSpec, release: TorchRelease) -> str | None:
    """The target's torchvision: its own, the spec's, or (for a target with its own torch) the pair."""
    torchvision = target.torchvision or spec.torchvision
    if target.torch and not target.torchvision and spec.torchvision:
        torchvision = release.torchvision_latest or None
    if torchvision and not paired_torchvision(release, torchvision):
        raise _fail(
            spec, target,
            f"torchvision {torchvision} does not pair with torch {release.line}; "
            f"use torchvision {release.torchvision_latest or release.torchvision}",
        )
    return torchvision


def _check_python(spec: EnvSpec, target: TargetSpec, release: TorchRelease) -> None:
    if not release.python.contains(spec.python):
        raise _fail(
            spec, target,
            f"torch {release.line} supports Python {release.python.min} to {release.python.max}, "
            f"not {spec.python}",
        )


def _toolkit(spec: EnvSpec, target: TargetSpec, compat: CompatData, release: TorchRelease,
             route: Route) -> CudaToolkit | None:
    """The CUDA toolkit row of a CUDA target (None for CPU), once this torch line has that build."""
    cuda = target.cuda
    if cuda is None:
        if route is Route.PYTORCH_CHANNEL and not release.cuda_variants(route):
            raise _fail(spec, target, _not_on_legacy_channel(compat, release))
        return None
    reason = _check_cuda(compat, release, route, cuda)
    if reason:
        raise _fail(spec, target, reason)
    toolkit = compat.toolkit(cuda)
    if toolkit is None:
        raise _fail(spec, target, f"CUDA {cuda} is missing from the compatibility data's cuda table")
    return toolkit


def _target_platforms(spec: EnvSpec, target: TargetSpec, route: Route) -> tuple[str, ...]:
    platforms = tuple(target.platforms or spec.platforms)
    known = _platforms()
    unknown = [p for p in platforms if p not in known]
    if unknown:
        raise _fail(spec, target, f"unknown platform {unknown[0]}; known: {', '.join(known)}")
    if route is Route.PIP and target.cuda is not None:
        cpu_only = [p for p in platforms if not known[p].cuda]
        if cpu_only:
            raise _fail(
                spec, target,
                f"the PyTorch wheel index has no CUDA {target.cuda} torch for {cpu_only[0]}; lock that platform "
                "in the CPU target (set `platforms:` on this target)",
            )
    return platforms


def _glibc(spec: EnvSpec, target: TargetSpec, compat: CompatData, platforms: tuple[str, ...]) -> str | None:
    """The runtime image's glibc (the solve's __glibc): from the spec, else envbuild's data."""
    runtime = spec.images.runtime
    glibc = runtime.glibc or compat.glibc_of(runtime.image)
    if glibc is None and any(_platforms()[p].glibc for p in platforms):
        raise _fail(
            spec, target,
            f"envbuild does not know the glibc of {runtime.image}; set images.runtime.glibc in the spec",
        )
    return glibc


def _pip_index(spec: EnvSpec, route: Route, toolkit: CudaToolkit | None, sources: Sources) -> str | None:
    """The PyTorch wheel index of a pip-route target ({tag} filled in); None on the conda routes."""
    if route is not Route.PIP:
        return None
    template = sources.pip_index or spec.pip_index or default_pip_index()
    return template.replace("{tag}", toolkit.pip_tag if toolkit else CPU)


def _warnings(release: TorchRelease) -> tuple[str, ...]:
    if release.confidence == "projected":
        return (f"torch {release.line}: its compatibility row is projected, not verified against a release",)
    return ()


def resolve_target(
    spec: EnvSpec, target: TargetSpec, sources: Sources = Sources(), compat: CompatData | None = None
) -> Target:
    """One target of the spec, every field decided (sources from the command line included), so no
    later stage needs the spec's raw fields or the command line again."""
    compat = compat or load_compat()
    route = target.route or spec.route
    release = _release(spec, target, compat)
    torchvision = _torchvision(spec, target, release)
    _check_python(spec, target, release)
    toolkit = _toolkit(spec, target, compat, release, route)
    cuda = target.cuda
    platforms = _target_platforms(spec, target, route)
    return Target(
        spec=spec,
        key=target.key,
        cuda=cuda,
        torch=target.torch or spec.torch,
        torchvision=torchvision,
        python=spec.python,
        route=route,
        channels=sources.apply(spec.channels_for(route)),
        pip_index=_pip_index(spec, route, toolkit, sources),
        allow_pypi_requests=not sources.pip_index,
        platforms=platforms,
        release=release,
        toolkit=toolkit,
        glibc=_glibc(spec, target, compat, platforms),
        min_driver=compat.min_driver(cuda) if cuda else None,
        runtime_image=spec.images.runtime,
        builder_image=spec.images.builder,
        warnings=_warnings(release),
        cuda_arch=_fleet_cuda_arch(spec) if cuda else None,
    )


def _fleet_cuda_arch(spec: EnvSpec) -> str | None:
    """`__cuda_arch` for a lock that serves the whole fleet: its lowest compute capability (CEP 46), so the
    solver refuses packages built only for newer GPUs than the oldest one the team runs on."""
    if not spec.fleet:
        return None
    lowest = lowest_capability(spec)
    return f"{lowest[0]}.{lowest[1]}" if lowest else None


def with_images(spec: EnvSpec, runtime: str | None = None, builder: str | None = None) -> EnvSpec:
    """The spec with base images replaced from the command line (each checked like the spec's own)."""
    if not runtime and not builder:
        return spec
    images = dict(spec.images)
    for role, image in (("runtime", runtime), ("builder", builder)):
        if image:
            name, _, digest = image.partition("@")
            images[role] = {"image": name, "digest": digest or None}
    source = f"{spec.source or spec.name} (with --base-image/--builder-image)"
    return spec.model_copy(update={"images": checked_value(Images, images, source, "images")})


def with_ca_certificates(spec: EnvSpec, ca_certs: Sequence[Path]) -> EnvSpec:
    """CA files from the command line join the spec's (made absolute: they are not in the spec's folder)."""
    if not ca_certs:
        return spec
    files = (*spec.ca_certificates, *(str(p.resolve()) for p in ca_certs))
    source = f"{spec.source or spec.name} (with --ca-cert)"
    return spec.model_copy(update={"ca_certificates": checked_value(CaFiles, files, source, "ca_certificates")})


def resolve_targets(
    spec: EnvSpec, cuda: Sequence[TargetId] = (), sources: Sources = Sources(),
    platforms: tuple[str, ...] = (),
) -> list[Target]:
    """The spec's targets (all, or those named by `--cuda`), each resolved and checked."""
    wanted = spec.targets
    if cuda:
        by_cuda = {t.cuda: t for t in spec.targets}
        missing = [c for c in cuda if c.cuda not in by_cuda]
        if missing:
            have = ", ".join(cuda_or_cpu(t.cuda) for t in spec.targets)
            raise UsageError(f"{spec.source or spec.name}: no target {missing[0]} in the spec (targets: {have})")
        wanted = tuple(by_cuda[c.cuda] for c in cuda)
    resolved = []
    for target_spec in wanted:
        if platforms:
            target_spec = target_spec.model_copy(update={"platforms": tuple(platforms)})
        resolved.append(resolve_target(spec, target_spec, sources))
    return resolved


def target_summary(target: Target) -> dict:
    """What `envbuild targets` reports of one target (its JSON row)."""
    archs = target.archs
    return {
        "target": target.key,
        "torch": target.torch,
        "torchvision": target.torchvision,
        "python": target.python,
        "route": target.route.value,
        "cuda": cuda_json(target.cuda),
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


__all__ = ["Sources", "Target", "release_line", "resolve_target", "resolve_targets", "target_summary"]

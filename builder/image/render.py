"""Rendering a Target into a multi-stage Dockerfile (Jinja2, StrictUndefined), beside its environment.yml.

Each build concern is a block (`docker/blocks/<name>.j2`) that contributes lines to the env-builder
stage (macro `builder`) and/or the runtime stage (macro `runtime`) of one template,
`docker/Dockerfile.j2`. The order of the runtime blocks puts what rarely changes (CA files, the user,
the NVIDIA variables, the environment) before what changes often (the smoke suite, labels).
"""

from __future__ import annotations

import base64
import binascii
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

import smoke
from builder import __version__
from builder.errors import UsageError
from builder.formats.dockerfile import Dockerfile, StageBlock, dumps
from builder.generated_files import write_owned_folder
from builder.image.layers import BOOTSTRAP, LayerStep, runtime_steps
from builder.image.smoke_data import write_smoke_data
from builder.lock.cuda_builds import load_cuda_builds, package_name
from builder.lock.environment import environment_yml
from builder.safe_io.reading import input_problem, read_bounded
from builder.specs.cuda import CudaVersion, cuda_or_cpu
from builder.specs.features import compile_smoke_env, compiles
from builder.specs.model import TORCH_NAMES, expected_pin
from builder.specs.target import Target
from builder.templates import environment

ENV_PREFIX = "/opt/env"
# Every file of the environment layer gets this mtime (1980-01-01, the oldest a zip can hold), so
# two builds of one lock give one layer digest whatever day they run.
LAYER_EPOCH = 315532800


def layer_source(name: str) -> str:
    """Where a build context stages the root tree that `COPY <it>/ /` lays over the image."""
    return f"envbuild/layers/{name}".rstrip("/")


def smoke_dir() -> Path:
    return Path(smoke.__file__).resolve().parent


@dataclass(frozen=True)
class Block:
    """One build concern: its template, which macros it contributes, and its parameters."""

    template: str
    params: Mapping[str, Any] = field(default_factory=dict)
    builder_macro: str | None = "builder"
    runtime_macro: str | None = "runtime"


@dataclass(frozen=True)
class RenderedEnv:
    """The rendered files of one target; what `envbuild render` writes and the lock stage reads."""

    target: Target
    environment_yml: str
    dockerfile: str
    ca_files: tuple[Path, ...] = ()

    def files(self) -> dict[str, str]:
        return {"environment.yml": self.environment_yml, "Dockerfile": self.dockerfile}


# SPDX's word for "nobody stated the license" (SPDX spec 2.3, 7.15): an image without a `license:` in
# its spec says that, rather than envbuild guessing from the packages.
NO_LICENSE_STATED = "NOASSERTION"


def image_version(target: Target) -> str:
    """org.opencontainers.image.version: "the version of the packaged software", which "MAY match a label
    or tag in the source code repository" (OCI image-spec, annotations.md). The packaged software is the
    env: its spec's `version:` when the team gives one, else the version its image tag carries (torch and
    target, e.g. 2.13.0-cuda13.0), so the label and the tag a user pulls say the same. The exact content
    is the lock's hash, already its own label (io.envbuild.lock-hash) and tag."""
    return target.spec.version or target.tag.rpartition(":")[2]


def _labels(target: Target, lock_hash: str | None) -> dict[str, str]:
    labels = {
        "io.envbuild.lock-hash": lock_hash or "",
        "org.opencontainers.image.title": f"{target.name} {target.key}",
        "org.opencontainers.image.version": image_version(target),
        "org.opencontainers.image.licenses": target.spec.license or NO_LICENSE_STATED,
        "io.envbuild.env": target.name,
        "io.envbuild.target": target.key,
        "io.envbuild.torch": target.torch,
        "io.envbuild.torchvision": target.torchvision or "",
        "io.envbuild.cuda": cuda_or_cpu(target.cuda),
        "io.envbuild.python": target.python,
        "io.envbuild.route": target.route.value,
        "io.envbuild.min-driver": target.min_driver or "",
        "io.envbuild.version": __version__,
    }
    if target.archs:
        labels["io.envbuild.archs"] = " ".join(target.archs)
    labels["io.envbuild.features"] = " ".join(feature.value for feature in target.spec.features)
    # gcc/g++ in the image and torch.compile required by its smoke suite, or the spec's opt-out
    labels["io.envbuild.compile"] = "gcc" if compiles(target.torch, target.spec.features) else "no"
    labels.update(target.spec.labels)
    # An unknown value is no label at all: an empty one reads as "known to be nothing".
    return dict(sorted((key, value) for key, value in labels.items() if value))


def required_driver_cuda(cuda: CudaVersion | None) -> str:
    """NVIDIA_REQUIRE_CUDA for a CUDA X.Y build: `cuda>=X.0`. CUDA minor-version compatibility lets
    an X.Y build run on any X.* driver (the compat data's min_driver); requiring X.Y would make
    the container runtime refuse hosts where envbuild doctor and the smoke suite say it runs."""
    if not cuda:
        return ""
    return f"cuda>={cuda.major_floor}"


def _pinned_version(line: str, manager: str) -> str | None:
    """The version a conda or pip line pins its package to (a prefix: `=2.9` is 2.9.*), or None when it
    names a range or nothing."""
    if manager == "pip":
        from packaging.requirements import InvalidRequirement, Requirement

        try:
            specifiers = list(Requirement(line).specifier)
        except InvalidRequirement:
            return None
        exact = [s.version for s in specifiers if s.operator in ("==", "===")]
        version = exact[0] if len(specifiers) == 1 and exact else None
    else:
        from rattler import MatchSpec

        version = str(MatchSpec(line, strict=False).version or "")
    found = re.fullmatch(r"(?:==)?([0-9][A-Za-z0-9_.+!\-]*?)(?:\.\*)?", version or "")
    return found.group(1) if found else None


def expected_packages(target: Target) -> dict[str, str | None]:
    """Every package the spec pins with torch, by name: its torchvision, each conda or pip line of a
    package built with torch (builder/data/cuda_builds.yaml: torchaudio, torchcodec, ...) and its
    `expect:` list; the version each must have, or None for any."""
    built_with_torch = set(load_cuda_builds().checked.packages) - set(TORCH_NAMES)
    pins: dict[str, str | None] = {"torchvision": target.torchvision} if target.torchvision else {}
    for manager, lines in (("conda", target.spec.conda), ("pip", target.spec.pip)):
        for line in lines:
            name = package_name(line)
            if name in built_with_torch:
                pins[name] = _pinned_version(line, manager) or pins.get(name)
    for entry in target.spec.expect:
        name, version = expected_pin(entry)
        pins[name] = version
    return pins


def expected_packages_env(target: Target) -> dict[str, str]:
    """What the spec pins with torch, baked into the image like ENVBUILD_EXPECT_TORCH (NAME=VERSION, or
    NAME for any version): the smoke suite fails when one is missing, does not import, or has another
    version."""
    listed = " ".join(f"{name}={version}" if version else name for name, version in expected_packages(target).items())
    return {"ENVBUILD_EXPECT_PACKAGES": listed} if listed else {}


def dockerfile_blocks(target: Target, has_ca: bool, lock_hash: str | None = None,
                      steps: Sequence[LayerStep] | None = None) -> list[Block]:
    user = {"name": target.spec.user.name, "uid": target.spec.user.uid}
    groups = [{"name": step.group, "rattler": step.links_conda} for step in (steps or runtime_steps())]
    env = {"prefix": ENV_PREFIX, "epoch": LAYER_EPOCH, "bootstrap": BOOTSTRAP, "groups": groups}
    return [
        Block("ca_certificates.j2", {"files": has_ca}),
        Block("runtime_user.j2", user, builder_macro=None),
        Block("compiler.j2", builder_macro=None,
              runtime_macro="runtime" if compiles(target.torch, target.spec.features) else None),
        Block("nvidia_runtime.j2", {"require_cuda": required_driver_cuda(target.cuda)}, builder_macro=None),
        Block("locked_env.j2", env),
        Block(
            "smoke_suite.j2",
            {
                "torch": target.torch,
                "cuda": cuda_or_cpu(target.cuda),
                # the smoke check env.arch_flags compares this with what the installed torch was built for
                "archs": " ".join(target.archs),
                "smoke_env": {**compile_smoke_env(target.torch, target.spec.features),
                              **expected_packages_env(target)},
            },
            builder_macro=None,
        ),
        Block("runtime_user.j2", user, builder_macro=None, runtime_macro="switch"),
        Block("labels.j2", {"labels": _labels(target, lock_hash)}),
    ]


def _render_block(env: jinja2.Environment, block: Block) -> StageBlock:
    module = env.get_template(f"blocks/{block.template}").module
    params = dict(block.params)

    def call(macro: str | None) -> str:
        return str(getattr(module, macro)(params)).strip() if macro else ""

    return StageBlock(builder=call(block.builder_macro), runtime=call(block.runtime_macro))


def render_target(target: Target, lock_hash: str | None = None,
                  steps: Sequence[LayerStep] | None = None) -> RenderedEnv:
    """Render one target; a build context passes its lock's hash, which becomes a label, and the
    install steps its lock needs (without them: one per layer group). Same inputs, same bytes:
    nothing here reads the clock or the host."""
    env = environment()
    ca_files = checked_ca_files(target)
    blocks = tuple(_render_block(env, block) for block in dockerfile_blocks(target, bool(ca_files), lock_hash, steps))
    dockerfile = Dockerfile(env_name=target.name, target_key=target.key, builder_image=target.builder_image.reference,
                            runtime_image=target.runtime_image.reference, blocks=blocks)
    return RenderedEnv(target, environment_yml(target), dumps(dockerfile), ca_files)


def compiler_instructions(target: Target) -> str:
    """The runtime stage's compiler RUN for this target, as its Dockerfile holds it (empty where the spec opted
    out): what a one-stage Dockerfile must hold too for the same torch.compile (bench/image.py's baselines)."""
    block = next(block for block in dockerfile_blocks(target, has_ca=False) if block.template == "compiler.j2")
    return _render_block(environment(), block).runtime


def checked_ca_files(target: Target) -> tuple[Path, ...]:
    """The spec's CA files, each checked to be a PEM certificate (one UsageError line if not)."""
    base = target.spec.source.parent if target.spec.source else Path.cwd()
    files = []
    for name in target.spec.ca_certificates:
        problem = input_problem(base / name)
        if problem:
            raise UsageError(f"{target.spec.source}: ca_certificates: {name!r} {problem}")
        path = (base / name).resolve()
        check_ca_file(path, name)
        files.append(path)
    return tuple(files)


PEM_CERTIFICATE = re.compile(rb"-----BEGIN CERTIFICATE-----\s+([A-Za-z0-9+/=\s]+?)-----END CERTIFICATE-----")
MAX_CA_BYTES = 4 * 1024 * 1024


def check_ca_file(path: Path, shown: str) -> None:
    """Only PEM certificates go into an image: never a private key (it would ship in every layer
    copy of the image), a DER file or anything else someone pointed --ca-cert at by mistake."""
    try:
        data = read_bounded(path, MAX_CA_BYTES, "CA file")
    except UsageError as exc:
        raise UsageError(exc.message.replace(str(path), shown, 1)) from None
    if b"PRIVATE KEY-----" in data:
        raise UsageError(f"{shown}: holds a private key; give only the CA's certificate (never ship a key in an image)")
    blocks = PEM_CERTIFICATE.findall(data)
    if not blocks:
        raise UsageError(f"{shown}: not a PEM CA certificate (no -----BEGIN CERTIFICATE----- block); convert it "
                         "with `openssl x509 -inform der -in FILE -out FILE.crt`")
    for block in blocks:
        try:
            base64.b64decode(b"".join(block.split()), validate=True)
        except (binascii.Error, ValueError):
            raise UsageError(f"{shown}: a certificate block is not valid base64; give the CA's PEM file") from None


def write_context(rendered: RenderedEnv, root: Path, extra: Mapping[str, bytes] = {}) -> None:
    """Lay out a build context: Dockerfile, environment.yml, smoke suite, CA files, extra files."""
    for name, text in rendered.files().items():
        (root / name).write_text(text, encoding="utf-8")
    shutil.copytree(smoke_dir(), root / "smoke", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    write_smoke_data(root / "smoke", rendered.target)
    ca_dir = root / "envbuild" / "ca"
    ca_dir.mkdir(parents=True, exist_ok=True)
    for index, path in enumerate(rendered.ca_files):
        shutil.copyfile(path, ca_dir / f"{index:02d}-{path.stem}.crt")
    for name, data in extra.items():
        destination = root / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(data)


def render_to(rendered: RenderedEnv, out: Path) -> Path:
    """The rendered files alone (no lock yet): into a new folder, or one envbuild wrote before."""
    return write_owned_folder(out, lambda staging: write_context(rendered, staging), "envbuild render")

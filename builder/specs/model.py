"""The environment spec (`envs/*.yaml`): what a team declares, before any CUDA target is resolved.

Every string that ends up in a Dockerfile, a shell command or environment.yml is constrained here by a
pattern, so no spec value can carry a newline, a shell operator or a Dockerfile instruction into the
rendered files.
"""

from __future__ import annotations

import re
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetPydanticSchema,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, core_schema

from builder.errors import UsageError
from builder.safe_io.confine import OutsideFolder, confined
from builder.specs.cuda import CPU, CudaVersion, cuda_or_cpu, target_key
from builder.specs.gpus import capability_of
from builder.userfile import read_yaml
from builder.yamlio import SpecLoader

# A conda MatchSpec or pip requirement as envbuild accepts it: a name, then version and build
# constraints made of version characters and comparison operators. No spaces inside a constraint
# list, no quotes, no shell or YAML metacharacters.
PACKAGE_PATTERN = (
    r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(\[[A-Za-z0-9_,\-]+\])?"  # name[extras]
    r"(\s?(==|>=|<=|!=|~=|=|>|<)[A-Za-z0-9_.*+!\-]+(,(==|>=|<=|!=|~=|>|<)?[A-Za-z0-9_.*+!\-]+)*)?"  # constraints
    r"(=[A-Za-z0-9_.*+\-]+)?$"  # conda build string
)
VERSION_PATTERN = r"^[0-9]+(\.[0-9]+){0,3}([a-z]+[0-9]*)?(\+[a-z0-9.]+)?$"
PYTHON_PATTERN = r"^3\.[0-9]{1,2}$"
CUDA_PATTERN = r"^([1-9][0-9]\.(0|[1-9][0-9]?)|cpu)$"
IMAGE_PATTERN = r"^[a-z0-9]+([._\-/:][a-z0-9]+)*(:[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127})?$"
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
URL_PATTERN = r"^(https?|file)://[A-Za-z0-9._~:/?#@!$&'()*+,;=%\-\[\]]+$"
CHANNEL_PATTERN = r"^([A-Za-z0-9][A-Za-z0-9_.\-]*|(https?|file)://[A-Za-z0-9._~:/%\-]+)$"
LABEL_KEY_PATTERN = r"^[a-z0-9]([a-z0-9.\-]*[a-z0-9])?$"
USER_PATTERN = r"^[a-z_][a-z0-9_\-]{0,31}$"
NAME_PATTERN = r"^[a-z0-9][a-z0-9_.\-]{0,62}$"
# One line as every reader sees it: no C0/C1 control, no Unicode line or paragraph separator (YAML 1.1
# breaks lines there) and no bidi or invisible format character (builder/safe_io/text.py names them).
PRINTABLE_PATTERN = "^[^\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]*$"
# The env's own version (org.opencontainers.image.version): one word, as a tag or release names it.
ENV_VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9.+_\-]{0,127}$"
# An SPDX license expression (SPDX spec 2.3, annex D): license ids joined by AND, OR, WITH and parentheses,
# e.g. "BSD-3-Clause AND MIT" or "LicenseRef-team-internal". Its form is checked here; the ids are not.
LICENSE_PATTERN = r"^\(*[A-Za-z0-9.+\-:]+\)*( (AND|OR|WITH) \(*[A-Za-z0-9.+\-:]+\)*)*$"

PackageSpec = Annotated[str, Field(pattern=PACKAGE_PATTERN, max_length=200)]
# An `expect:` entry: a package the image must hold and import, at this version when given (pip's `==`;
# a prefix: 2.9 accepts 2.9.1 and 2.9.0+cu130).
EXPECTED_PACKAGE_PATTERN = r"^([A-Za-z0-9][A-Za-z0-9_.\-]*)(==([0-9][A-Za-z0-9_.+!\-]*))?$"
# Expected already through the image's ENVBUILD_EXPECT_TORCH (the spec's `torch:`).
TORCH_NAMES = ("torch", "pytorch", "pytorch-gpu", "pytorch-cpu")


def _expected_package_form(value: Any) -> Any:
    if isinstance(value, str) and not re.fullmatch(EXPECTED_PACKAGE_PATTERN, value):
        raise ValueError("write NAME or NAME==VERSION, a package the image must hold and import "
                         "(e.g. torchaudio==2.9.0)")
    return value


ExpectedPackage = Annotated[str, Field(pattern=EXPECTED_PACKAGE_PATTERN, max_length=200),
                            BeforeValidator(_expected_package_form)]
Version = Annotated[str, Field(pattern=VERSION_PATTERN)]
Platform = Annotated[str, Field(pattern=r"^(linux-64|linux-aarch64|osx-64|osx-arm64|win-64)$")]
Channel = Annotated[str, Field(pattern=CHANNEL_PATTERN, max_length=300)]
CaFiles = tuple[Annotated[str, Field(pattern=r"^[A-Za-z0-9_./\-]+\.(crt|pem)$")], ...]


def _cuda_or_none(text: str) -> CudaVersion | None:
    return None if text == CPU else CudaVersion.parse(text)


def _target_cuda_schema(source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
    return core_schema.no_info_after_validator_function(
        _cuda_or_none, core_schema.str_schema(pattern=CUDA_PATTERN),
        serialization=core_schema.plain_serializer_function_ser_schema(cuda_or_cpu))


# A target's `cuda:` is checked as text (so a bad one is reported like every other field), then held
# typed: a CudaVersion, or None for the CPU target; it is written back as the same text.
TargetCuda = Annotated[CudaVersion | None, GetPydanticSchema(_target_cuda_schema)]


class Feature(str, Enum):
    """What a spec can ask every image to support beyond torch itself (builder/data/features.yaml)."""

    COMPILE = "compile"  # torch.compile: a C/C++ compiler in the env, and the smoke check required
    NO_COMPILE = "no-compile"  # opt out of the C/C++ compiler layer every torch >= 2.0 image gets


class Route(str, Enum):
    """How torch gets its CUDA: the three ways teams install PyTorch with conda."""

    CONDA_FORGE = "conda-forge"  # conda-forge's pytorch, CUDA chosen by the `cuda-version` pin
    PYTORCH_CHANNEL = "pytorch-channel"  # legacy `pytorch` channel with `pytorch-cuda=X.Y` (torch <= 2.5)
    PIP = "pip"  # wheels from the PyTorch index for cuXYZ; conda only for python and system libraries


DEFAULT_CHANNELS: dict[Route, tuple[str, ...]] = {
    Route.CONDA_FORGE: ("conda-forge",),
    Route.PYTORCH_CHANNEL: ("pytorch", "nvidia", "conda-forge"),
    Route.PIP: ("conda-forge",),
}


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)


class ImageRef(StrictModel):
    """A base image, optionally pinned by digest so a rebuild cannot silently pick up a new base."""

    image: Annotated[str, Field(pattern=IMAGE_PATTERN, max_length=255)]
    digest: Annotated[str, Field(pattern=DIGEST_PATTERN)] | None = None
    glibc: Version | None = None  # needed when the compatibility data does not know the image

    @property
    def reference(self) -> str:
        return f"{self.image}@{self.digest}" if self.digest else self.image


class Images(StrictModel):
    runtime: ImageRef = ImageRef(image="ubuntu:24.04")
    builder: ImageRef = ImageRef(image="python:3.12-slim-bookworm")


class ContainerUser(StrictModel):
    name: Annotated[str, Field(pattern=USER_PATTERN)] = "envbuild"
    # strict: `uid: true` is not uid 1 (which would replace the image's `daemon` user)
    uid: Annotated[int, Field(ge=1, le=65000, strict=True)] = 1000


class TargetSpec(StrictModel):
    """One CUDA target (`cuda: "12.6"`) or the CPU target (`cuda: cpu`), with optional overrides."""

    cuda: TargetCuda  # None for the CPU target
    torch: Version | None = None
    torchvision: Version | None = None
    route: Route | None = None
    platforms: tuple[Platform, ...] | None = None

    @field_validator("cuda", mode="before")
    @classmethod
    def _cuda_as_text(cls, value: Any) -> Any:
        # YAML reads `cuda: 12.6` as a float. A spec file's float keeps its text (`12.10` stays
        # 12.10); a float from elsewhere that may have lost digits is refused rather than guessed.
        if isinstance(value, float):
            text = getattr(value, "text", None) or repr(value)
            if not re.fullmatch(r"[0-9]{2}\.[0-9]{1,2}", text):
                raise ValueError(f"write the CUDA version in quotes (YAML read it as {value!r})")
            return text
        return value

    @property
    def key(self) -> str:
        return target_key(self.cuda)


class FleetEntry(StrictModel):
    """One kind of machine the team runs on: a GPU (model name or compute capability) or a host file.

    A host file is what `envbuild doctor --save` wrote on that machine (driver, GPUs, capabilities);
    a GPU alone says nothing of the driver, so only architecture coverage is judged for it.
    """

    gpu: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9 ._\-]{0,63}$")] | None = None
    host: Annotated[str, Field(pattern=r"^[A-Za-z0-9_./\-]+\.json$", max_length=300)] | None = None
    count: Annotated[int, Field(ge=1, le=100000)] = 1
    name: Annotated[str, Field(pattern=PRINTABLE_PATTERN, max_length=100)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        # `- V100`, `- "8.6"`, `- hosts/node1.json`: one word per machine kind is the common case.
        if isinstance(value, str):
            return {"host": value} if value.endswith(".json") else {"gpu": value}
        if isinstance(value, float):
            return {"gpu": getattr(value, "text", None) or repr(value)}
        return value

    @model_validator(mode="after")
    def _gpu_or_host(self) -> FleetEntry:
        if (self.gpu is None) == (self.host is None):
            raise ValueError("give either `gpu` (a model like V100 or a capability like 7.0) or `host` (a .json file)")
        if self.gpu is not None and capability_of(self.gpu) is None:
            raise ValueError(f"GPU {self.gpu!r} is not in envbuild's GPU list; write its compute capability "
                             "instead (e.g. 7.0 or sm_70)")
        return self

    @property
    def label(self) -> str:
        return self.name or self.gpu or self.host or ""


class EnvSpec(StrictModel):
    """A team's environment: the seeds' stack (python, torch, torchvision) plus its own packages."""

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    description: Annotated[str, Field(pattern=PRINTABLE_PATTERN, max_length=500)] = ""
    # The env's release (e.g. 2026.12 or 1.4.0) and the SPDX license expression of what the image holds;
    # both become OCI labels (builder/image/render.py).
    version: Annotated[str, Field(pattern=ENV_VERSION_PATTERN)] | None = None
    license: Annotated[str, Field(pattern=LICENSE_PATTERN, max_length=300)] | None = None
    python: Annotated[str, Field(pattern=PYTHON_PATTERN)]
    torch: Version
    torchvision: Version | None = None
    route: Route = Route.CONDA_FORGE
    targets: tuple[TargetSpec, ...] = Field(min_length=1)
    platforms: tuple[Platform, ...] = ("linux-64",)
    channels: tuple[Channel, ...] | None = None
    pip_index: Annotated[str, Field(pattern=URL_PATTERN, max_length=300)] | None = None
    conda: tuple[PackageSpec, ...] = ()
    pip: tuple[PackageSpec, ...] = ()
    images: Images = Images()
    ca_certificates: CaFiles = ()
    user: ContainerUser = ContainerUser()
    labels: dict[
        Annotated[str, Field(pattern=LABEL_KEY_PATTERN, max_length=128)],
        Annotated[str, Field(pattern=PRINTABLE_PATTERN, max_length=500)],
    ] = Field(default_factory=dict)
    fleet: tuple[FleetEntry, ...] = ()  # the GPUs the team runs on; lint and targets check coverage
    features: tuple[Feature, ...] = ()
    # What the smoke suite must find in every image beside torch and the pins above (ENVBUILD_EXPECT_PACKAGES).
    expect: tuple[ExpectedPackage, ...] = ()
    _source: Path | None = PrivateAttr(default=None)

    @property
    def source(self) -> Path | None:
        """The spec file this came from; relative paths in it (CA files) are relative to its folder."""
        return self._source

    @field_validator("labels")
    @classmethod
    def _own_labels_kept(cls, value: dict[str, str]) -> dict[str, str]:
        # io.envbuild.* is the image's provenance (lock hash, target, torch): a spec cannot overwrite it.
        taken = sorted(key for key in value if key.startswith("io.envbuild.") or key == "io.envbuild")
        if taken:
            raise ValueError(f"{', '.join(taken)}: labels under io.envbuild. are envbuild's own; choose another key")
        return value

    @field_validator("expect")
    @classmethod
    def _expect_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        names = [expected_pin(entry)[0] for entry in value]
        if any(name in TORCH_NAMES for name in names):
            raise ValueError("torch is expected already (the spec's `torch:`); list the other packages")
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"each package may be listed once; repeated: {', '.join(repeated)}")
        return value

    @field_validator("python", mode="before")
    @classmethod
    def _python_as_text(cls, value: Any) -> Any:
        if isinstance(value, float):
            raise ValueError(f"write the Python version in quotes, e.g. \"3.11\" (YAML read it as {value!r})")
        return value

    @model_validator(mode="after")
    def _targets_unique(self) -> EnvSpec:
        keys = [t.key for t in self.targets]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise ValueError(f"each CUDA target may appear once; repeated: {', '.join(duplicates)}")
        return self

    @property
    def effective_channels(self) -> tuple[str, ...]:
        return self.channels_for(self.route)

    def channels_for(self, route: Route) -> tuple[str, ...]:
        """The spec's channels, else the default channels of a route (a target may change route)."""
        return self.channels if self.channels is not None else DEFAULT_CHANNELS[route]

    def target(self, key: str) -> TargetSpec:
        for target in self.targets:
            if target.key == key:
                return target
        raise KeyError(key)


def expected_pin(entry: str) -> tuple[str, str | None]:
    """An `expect:` entry as (normalised name, version or None)."""
    found = re.fullmatch(EXPECTED_PACKAGE_PATTERN, entry)
    if found is None:
        raise ValueError(f"not an expect: entry: {entry!r}")
    return re.sub(r"[-_.]+", "-", found.group(1)).lower(), found.group(3)


def _describe_error(source: str, error: ErrorDetails, field: str | None = None) -> str:
    parts = (field, *error["loc"]) if field else error["loc"]
    # A key is the user's text: one with a newline or a control character is shown quoted, on one line.
    location = ".".join(str(part) if str(part).isprintable() else repr(part) for part in parts) or "(top level)"
    message = error["msg"]
    if error["type"] == "string_pattern_mismatch":
        message = "contains characters or a form that is not allowed"
    elif error["type"] == "extra_forbidden":
        message = "is not a known field"
    elif error["type"] == "enum":
        message = f"must be one of: {_enum_choices(error)}"
    shown = error.get("input")
    value = "" if isinstance(shown, (dict, list)) or shown is None else f" {shown!r}"
    return f"{source}: {location}:{value} {message}"


def _enum_choices(error: ErrorDetails) -> str:
    """The field's own choices, as pydantic states them ("'a', 'b' or 'c'"), as a plain list."""
    expected = str((error.get("ctx") or {}).get("expected", ""))
    return ", ".join(choice.strip().strip("'") for choice in expected.replace(" or ", ", ").split(","))


SHOWN_ERRORS = 3  # the first problems of a spec, in one line; fixing them shows the rest


def parse_spec(data: Any, source: str = "<spec>") -> EnvSpec:
    """Validate already-loaded YAML data; errors name the file, the field, the value and the rule."""
    if not isinstance(data, dict):
        raise UsageError(f"{source}: the spec must be a YAML mapping with name, python, torch and targets")
    try:
        return EnvSpec.model_validate(data)
    except ValidationError as exc:
        lines = [_describe_error(source, error) for error in exc.errors()]
        more = f"; and {len(lines) - SHOWN_ERRORS} more problem(s)" if len(lines) > SHOWN_ERRORS else ""
        raise UsageError("; ".join(lines[:SHOWN_ERRORS]) + more) from None


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def checked_value(kind: Any, data: Any, source: str, field: str) -> Any:
    """A new value for one field of an already valid spec (from the command line), checked as that field
    of the spec is, and refused with the same words; the rest of the spec is not validated again."""
    try:
        return _adapter(kind).validate_python(data)
    except ValidationError as exc:
        raise UsageError("; ".join(_describe_error(source, error, field) for error in exc.errors())) from None


def read_yaml_file(path: Path, what: str) -> Any:
    """A user's YAML file (a spec, an environment.yml), or one clear line saying why it cannot be read.
    Floats keep the text they were written as (`cuda: 12.10` is not CUDA 12.1)."""
    return read_yaml(path, what, UsageError, f"give a {what} file as `envbuild init` writes it", loader=SpecLoader)


def load_spec(path: Path) -> EnvSpec:
    """Read and validate an `envs/*.yaml` file."""
    data = read_yaml_file(path, "spec")
    spec = parse_spec(data, str(path))
    _check_ca_paths(spec, path)
    spec._source = path
    return spec


def _check_ca_paths(spec: EnvSpec, path: Path) -> None:
    """A spec names CA files beside it: a spec from elsewhere must not pull /etc/ssl/private/... or
    ../../secrets into an image. (`--ca-cert` is how a user adds a file from anywhere.)"""
    for name in spec.ca_certificates:
        try:
            confined(path.parent, name, plain_relative=True)
        except OutsideFolder:
            raise UsageError(f"{path}: ca_certificates: {name!r} must be a file under the spec's folder "
                             "(no absolute or ../ paths); pass other files with --ca-cert") from None

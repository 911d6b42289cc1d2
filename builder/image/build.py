"""`envbuild image`: build one image per target through the Docker SDK, tag, label, push.

A build is never tagged until it succeeded, never leaves intermediate containers (rm and forcerm,
and the containers named in the log are removed after a failure or Ctrl-C), and reports the image
size next to the size of the layer that holds /opt/env.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from builder.engine import (  # noqa: F401  (re-exported: callers that predate builder.engine)
    ENGINE_START_FIX,
    EngineUnreachable,
    docker_client,
    engine_address,
    engine_error,
    engine_failures,
    unpullable_base,
)
from builder.errors import EnvbuildError, UsageError
from builder.image.context import BuildContext
from builder.safe_io.locks import exclusive_lock, lock_file

LOG_TAIL = 30
STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
ENV_COPY = re.compile(r"#\(nop\) COPY dir:\S+ in /\s*$")
GROUP_RUN = re.compile(r"--plan /opt/envbuild/plans/([\w.-]+)\.json")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
RUNNING_IN = re.compile(r"^ ---> Running in ([0-9a-f]{12,64})")
STEP_IMAGE = re.compile(r"^ ---> ([0-9a-f]{12,64})\s*$")
TAG_LOCK_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class BuildOptions:
    build_args: dict[str, str] = field(default_factory=dict)
    no_cache: bool = False
    platform: str = "linux/amd64"
    network: str | None = None  # "host" reaches channels served on the host's loopback
    pull: bool = False
    # Labels known only when building (builder/image/provenance.py: source, revision); empty ones are
    # left out. Set by the engine after the last instruction, so they never invalidate a cached layer.
    labels: dict[str, str] = field(default_factory=dict)


def parse_build_args(items: Iterable[str]) -> dict[str, str]:
    """`--build-arg KEY=VALUE` items as a dict, or a one-line UsageError."""
    args = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--build-arg {item!r}: write KEY=VALUE")
        args[key] = value
    return args


@dataclass
class ImageResult:
    target: str
    image_id: str
    tags: list[str]
    size: int
    env_layer_size: int | None
    env_layer_digest: str | None
    base_size: int | None
    seconds: float
    lock_hash: str
    pushed: list[str] = field(default_factory=list)
    # REGISTRY/NAME@sha256:... as the registry reported it: what CI smoke jobs and k8s Jobs pull, since
    # a tag can move between the push and the test.
    pushed_by_digest: str | None = None
    # The environment's layers in order: {"group", "size", "digest"} (builder/data/layers.yaml).
    env_layers: list[dict] = field(default_factory=list)
    # What the last --push sent and what the registry already had (bytes of the layers, uncompressed).
    push_sent_bytes: int | None = None
    push_reused_bytes: int | None = None

    def as_dict(self) -> dict:
        return {
            "target": self.target, "image_id": self.image_id, "tags": self.tags, "size": self.size,
            "env_layer_size": self.env_layer_size, "env_layer_digest": self.env_layer_digest,
            "base_size": self.base_size, "seconds": round(self.seconds, 1),
            "lock_hash": self.lock_hash, "pushed": self.pushed, "pushed_by_digest": self.pushed_by_digest,
            "env_layers": self.env_layers,
            "push_sent_bytes": self.push_sent_bytes, "push_reused_bytes": self.push_reused_bytes,
        }


def created_timestamp() -> str:
    """From SOURCE_DATE_EPOCH when set (reproducible builds), else now."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = datetime.fromtimestamp(int(epoch), timezone.utc) if epoch else datetime.now(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def image_tags(context: BuildContext) -> list[str]:
    target = context.target
    return [target.tag, f"{target.name}:{context.lock_hash[:12]}"]


class BuildLog:
    """Keeps the current step, the last lines and the containers the builder started."""

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.echo = echo
        self.step = ""
        self.tail: deque[str] = deque(maxlen=LOG_TAIL)
        self.containers: list[str] = []
        self.image_id: str | None = None
        self.error: str | None = None
        self.step_number = 0
        self.errors: list[str] = []  # what the failing program itself said went wrong
        self.step_images: list[str] = []  # images this build made for its steps (not taken from the cache)
        self._made_step = False

    def cause(self) -> str | None:
        return self.errors[-1] if self.errors else None

    def _step_image(self, line: str) -> None:
        """An image this build made: the result of a step that is not a FROM (its image is the base)
        and did not come from the cache."""
        step = STEP.match(line)
        if step:
            self._made_step = not step.group(3).lstrip().upper().startswith("FROM ")
        elif line.strip() == "---> Using cache":
            self._made_step = False
        else:
            made = STEP_IMAGE.match(line)
            if made and self._made_step:
                self.step_images.append(made.group(1))

    def feed(self, chunk: dict) -> None:
        if "stream" in chunk:
            # The engine wraps a step's stderr in colour codes (red): strip them before reading it.
            for line in ANSI.sub("", chunk["stream"]).splitlines():
                if line.strip():
                    self._line(line)
        if "aux" in chunk and isinstance(chunk["aux"], dict) and "ID" in chunk["aux"]:
            self.image_id = chunk["aux"]["ID"]
        if "error" in chunk:
            self.error = chunk.get("errorDetail", {}).get("message") or chunk["error"]
            self.tail.append(self.error.rstrip())
            # A full disk is often said only here, by the engine committing a step's layer.
            if "no space left on device" in self.error.lower():
                self.errors.append(" ".join(self.error.split())[:300])

    def _line(self, line: str) -> None:
        """One line of the build's log: its step, what the installer said, the containers and images it made."""
        self.tail.append(line)
        step = STEP.match(line)
        if step:
            self.step = line
            self.step_number = int(step.group(1))
            self.errors.clear()
        said = INSTALLER_ERROR.match(line.strip())
        if said or "no space left on device" in line.lower():
            self.errors.append(" ".join((said.group(1) if said else line).split())[:300])
        running = RUNNING_IN.match(line)
        if running:
            self.containers.append(running.group(1))
        self._step_image(line)
        self.echo(line)


# A failed step's own words, lifted out of the log, and what to do about them. Checked in order.
BUILD_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"no space left on device", re.I),
     "free disk space where the Docker engine keeps its data (`docker system df`), then build again; "
     "a build holds about twice the installed environment at its peak (each layer's step, and the "
     "layer committed from it)"),
    (re.compile(r"sha256|checksum|hash mismatch|does not match", re.I),
     "the channel serves a different file than the lock names: fix the mirror, or relock with "
     "`envbuild lock --force`"),
    (re.compile(r"\b404\b|not found", re.I),
     "the channel no longer has a locked file: relock with `envbuild lock --force`, or use a mirror that has it"),
    (re.compile(r"timed out|timeout", re.I), "the channel was too slow: check it, or raise the installer timeout"),
    (re.compile(r"cannot download|connection|resolve|unreachable", re.I),
     "the build container cannot reach the channel: try --network host, or a --mirror it can reach"),
)
STEP_SHOWN = 48
INSTALLER_ERROR = re.compile(r"^(?:envbuild-install: )?error: (.+)$")


def build_failure(context: BuildContext, log: BuildLog) -> str:
    """One line: the step, the failing program's own error (not only "returned a non-zero code"),
    and a fix; the log's last lines follow only when nothing better was found."""
    key = context.target.key
    error = (log.error or "no image produced").strip()
    images = [context.target.builder_image.reference, context.target.runtime_image.reference]
    at_from = log.step_number <= 1 or " : FROM " in log.step
    base = unpullable_base(error, images) if at_from else None
    if base:
        return f"{key}: {base}"
    cause = log.cause()
    # The step's number and the start of its instruction place it; the cause and the fix need the room.
    step = log.step if len(log.step) <= STEP_SHOWN else log.step[:STEP_SHOWN - 3] + "..."
    step = step or "the start"
    if cause:
        fix = next((fix for pattern, fix in BUILD_CAUSES if pattern.search(cause)),
                   "fix the cause above and build again")
        return f"{key}: build failed at {step}: {cause}; {fix}"
    tail = "\n".join(f"  | {line}" for line in log.tail)
    return (f"{key}: build failed at {step}: {' '.join(error.split())}; see the log lines below\n"
            f"last {len(log.tail)} log lines:\n{tail}")


def _remove_containers(client, ids: Iterable[str]) -> None:
    for container_id in ids:
        try:
            client.api.remove_container(container_id, force=True)
        except engine_failures():
            pass  # already gone: rm/forcerm did it


def build_image(
    context: BuildContext,
    options: BuildOptions = BuildOptions(),
    echo: Callable[[str], None] = lambda line: None,
    client=None,
) -> ImageResult:
    client = client or docker_client()
    started = time.monotonic()
    log = BuildLog(echo)
    # The build time, through the API: a line of the Dockerfile would leave a plain `docker build`
    # of a rendered folder an empty label.
    labels = {"org.opencontainers.image.created": created_timestamp(), **options.labels}
    what = f"{context.target.key}: the build"
    try:
        stream = client.api.build(
            path=str(context.root), rm=True, forcerm=True, decode=True, nocache=options.no_cache,
            buildargs=dict(options.build_args), network_mode=options.network, platform=options.platform,
            pull=options.pull, labels={key: value for key, value in labels.items() if value},
        )
        for chunk in stream:
            log.feed(chunk)
    except BaseException as exc:  # whatever stopped it, the builder's containers go
        _undo_unfinished(client, log, options)
        # Ctrl-C, and SIGTERM through proc.signals_as_interrupt, go on as themselves: the command
        # then exits 130 or 143, as an interrupted command does.
        if isinstance(exc, engine_failures()):
            raise engine_error(exc, what) from None
        raise
    image_id = log.image_id
    if log.error or not image_id:
        _undo_unfinished(client, log, options)
        raise EnvbuildError(build_failure(context, log))
    tags = image_tags(context)
    with tag_lock(context.target.name):
        move_tags(client, image_id, tags)
    result = inspect_result(client, context, image_id, tags)
    result.seconds = time.monotonic() - started
    return result


def _undo_unfinished(client, log: BuildLog, options: BuildOptions) -> None:
    """After a failed or interrupted build: its containers go, and so do the step images of a
    --no-cache build. Those duplicate steps the cache already has; left behind, the next ordinary
    build takes one as the cache of its step, finds no later step under it and builds the rest again."""
    _remove_containers(client, log.containers)
    if options.no_cache:
        for image_id in reversed(log.step_images):
            try:
                client.api.remove_image(image_id, noprune=True)
            except engine_failures():
                continue  # a child or a container holds it, or the engine went away


def tag_lock_path(env_name: str) -> Path:
    return lock_file("tags", f"{engine_address()} {env_name}")


@contextmanager
def tag_lock(env_name: str, timeout: float = TAG_LOCK_TIMEOUT_S) -> Iterator[None]:
    """One envbuild at a time moves an env's tags on this engine: two builds of one env that tagged
    at once could leave `<env>:<torch>-<target>` on one image and `<env>:<lock hash>` on the other."""
    def waiting() -> None:
        print(f"waiting for another envbuild to tag {env_name} images ...", file=sys.stderr)

    with exclusive_lock(tag_lock_path(env_name), timeout, waiting, lambda: EnvbuildError(
            f"another envbuild held the tags of {env_name} for {timeout:.0f} s; try again")):
        yield


def move_tags(client, image_id: str, tags: list[str]) -> None:
    """Point every tag at `image_id`, then drop the images the tags named before when nothing else names them."""
    before = [_image_id(client, tag) for tag in tags]  # what the tags name until they move
    replaced = {old for old in before if old is not None and old != image_id}
    for tag in tags:
        repository, _, name = tag.rpartition(":")
        client.api.tag(image_id, repository, name)
    _drop_untagged(client, replaced)


def _image_id(client, reference: str) -> str | None:
    try:
        return client.api.inspect_image(reference)["Id"]
    except engine_failures():  # ImageNotFound: the tag names nothing yet
        return None


def _drop_untagged(client, image_ids: Iterable[str]) -> None:
    """Earlier builds whose tags all moved to the new image, so rebuilding a target does not pile up
    untagged images. One that keeps a tag (`env:<old lock hash>`) stays: removing by id would take
    its remaining tags with it. One that a container uses stays too (the engine refuses)."""
    for image_id in image_ids:
        try:
            if client.api.inspect_image(image_id).get("RepoTags"):
                continue
            client.api.remove_image(image_id)
        except engine_failures():
            pass


def _layer_history(client, image_id: str) -> list[tuple[dict, str]]:
    """Each filesystem layer, oldest first, with the history line that made it; none when the two
    do not line up (an image not built here, say)."""
    layers = client.api.inspect_image(image_id)["RootFS"]["Layers"]
    history = list(reversed(client.api.history(image_id)))
    made_layer = [h for h in history if "#(nop)" not in h.get("CreatedBy", "")
                  or "#(nop) COPY" in h["CreatedBy"] or "#(nop) ADD" in h["CreatedBy"]]
    if len(made_layer) != len(layers):
        return []
    return list(zip(made_layer, layers, strict=True))


def env_layers(client, image_id: str) -> list[dict]:
    """The environment's layers, oldest first: the bootstrap group's (`COPY --from=env-builder /out/
    /`, the first whole-root copy; the engine's history does not name a stage) and one per later
    group (the RUN that installs its plan), each with its size and diff id."""
    found: list[dict] = []
    for entry, diff_id in _layer_history(client, image_id):
        group = GROUP_RUN.search(entry["CreatedBy"])
        if group or (not found and ENV_COPY.search(entry["CreatedBy"])):
            found.append({"group": group.group(1) if group else "bootstrap", "size": int(entry["Size"]),
                          "digest": diff_id})
    return found


def _env_layer(client, image_id: str) -> tuple[int | None, str | None, list[dict]]:
    """The environment's layers, their total size, and one digest naming them all (equal when every
    one of them is)."""
    found = env_layers(client, image_id)
    if not found:
        return None, None, []
    joined = " ".join(layer["digest"] for layer in found)
    return sum(layer["size"] for layer in found), f"sha256:{hashlib.sha256(joined.encode()).hexdigest()}", found


def _base_size(client, context: BuildContext) -> int | None:
    try:
        return int(client.api.inspect_image(context.target.runtime_image.reference)["Size"])
    except engine_failures():  # ImageNotFound: its size is then unknown
        return None


def inspect_result(client, context: BuildContext, image_id: str, tags: list[str]) -> ImageResult:
    size = int(client.api.inspect_image(image_id)["Size"])
    env_size, env_digest, layers = _env_layer(client, image_id)
    return ImageResult(context.target.key, image_id, tags, size, env_size, env_digest,
                       _base_size(client, context), 0.0, context.lock_hash, env_layers=layers)


def remote_reference(registry: str, tag: str) -> tuple[str, str]:
    """`<env>:<tag>` as it lives in REGISTRY (what --push writes and --pull reads): (repository, tag)."""
    repository, _, name = tag.rpartition(":")
    return f"{registry.rstrip('/')}/{repository}", name


@dataclass(frozen=True)
class Pushed:
    references: list[str]
    by_digest: str | None  # REGISTRY/NAME@sha256:..., None when the registry reported no digest


def layer_sizes(client, image_id: str) -> dict[str, int]:
    """Each layer's size by the short id push progress names it with (its diff id's first 12 hex digits)."""
    sizes: dict[str, int] = {}
    for entry, diff_id in _layer_history(client, image_id):
        short = diff_id.split(":", 1)[-1][:12]
        sizes[short] = sizes.get(short, 0) + int(entry["Size"])
    return sizes


# Push progress statuses that end a layer: sent now, or already in the registry (or mounted there).
_SENT = "Pushed"
_REUSED = ("Layer already exists", "Mounted from")


def push_image(result: ImageResult, registry: str, echo: Callable[[str], None] = lambda line: None,
               client=None) -> Pushed:
    """Push every tag; on a failure the registry-named tags made for it are dropped again, so a
    failed push leaves only the image's own tags. The engine's push stream ends with an `aux`
    record {Tag, Digest, Size} (Docker's PushResult): that digest names the manifest every tag got. Counts,
    on `result`, the bytes of the layers it sent and of those the registry already had (a one-package
    change sends only its own layer)."""
    client = client or docker_client()
    pushed: list[str] = []
    by_digest: str | None = None
    made: list[str] = []
    outcome: dict[str, str] = {}
    try:
        for tag in result.tags:
            remote, name = remote_reference(registry, tag)
            client.api.tag(result.image_id, remote, name)
            made.append(f"{remote}:{name}")
            for chunk in client.api.push(remote, tag=name, stream=True, decode=True):
                _read_push_chunk(chunk, f"{remote}:{name}", outcome, echo)
                by_digest = by_digest or _pushed_digest(remote, chunk)
            pushed.append(f"{remote}:{name}")
    except BaseException as exc:
        _untag(client, made)
        if isinstance(exc, Exception):
            raise engine_error(exc, f"push to {registry}") from None
        raise
    sizes = layer_sizes(client, result.image_id)
    result.push_sent_bytes = sum(sizes.get(layer, 0) for layer, how in outcome.items() if how == "sent")
    result.push_reused_bytes = sum(sizes.get(layer, 0) for layer, how in outcome.items() if how == "reused")
    echo(f"pushed {_mb(result.push_sent_bytes)} MB of layers; "
         f"the registry already had {_mb(result.push_reused_bytes)} MB")
    return Pushed(pushed, by_digest)


def _read_push_chunk(chunk: dict, reference: str, outcome: dict[str, str], echo: Callable[[str], None]) -> None:
    """One record of the engine's push stream: an error, a status line, or a layer sent or already there."""
    if "error" in chunk:
        raise EnvbuildError(f"push of {reference} failed: {' '.join(str(chunk['error']).split())}; "
                            "check that the registry is reachable and you are logged in (`docker login`)")
    status, layer = chunk.get("status") or "", chunk.get("id")
    if status and layer is None:
        echo(status)
    elif layer and layer not in outcome and (status == _SENT or status.startswith(_REUSED)):
        outcome[layer] = "sent" if status == _SENT else "reused"


def _untag(client, references: list[str]) -> None:
    for reference in references:
        try:
            client.api.remove_image(reference, noprune=True)
        except engine_failures():
            continue  # the engine is gone: nothing more to undo from here


def _pushed_digest(remote: str, chunk: dict) -> str | None:
    aux = chunk.get("aux")
    digest = aux.get("Digest") if isinstance(aux, dict) else None
    if isinstance(digest, str) and re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        return f"{remote}@{digest}"
    return None


def pull_reference(reference: str, client=None) -> str:
    """Pull an image by its full reference (REGISTRY/NAME:TAG or REGISTRY/NAME@sha256:...)."""
    client = client or docker_client()
    repository, tag = _split_reference(reference)
    try:
        # The engine answers 200 and reports a failed pull inside the stream, as it does for a push.
        reasons = [chunk["error"] for chunk in client.api.pull(repository, tag=tag, stream=True, decode=True)
                   if "error" in chunk]
    except engine_failures() as exc:
        reasons = [getattr(exc, "explanation", None) or str(exc)]
    if reasons:
        raise EnvbuildError(f"pull of {reference} failed: {' '.join(str(reasons[0]).split())[:160]}; check the "
                            "reference and that you are logged in to its registry (`docker login`)")
    return reference


def _split_reference(reference: str) -> tuple[str, str | None]:
    """`name@sha256:x` -> (name, sha256:x); `host:5000/name:tag` -> (host:5000/name, tag); `name` -> (name, None)."""
    if "@" in reference:
        repository, _, digest = reference.partition("@")
        return repository, digest
    repository, sep, tag = reference.rpartition(":")
    if sep and "/" not in tag:
        return repository, tag
    return reference, None


def _mb(size: int) -> str:
    return f"{size / 1e6:.0f}"


def pull_image(tag: str, registry: str, client=None) -> str:
    """Pull what `--push REGISTRY` pushed for `tag`; the local reference, or one line saying why not."""
    client = client or docker_client()
    repository, name = remote_reference(registry, tag)
    try:
        client.images.pull(repository, tag=name)
    except engine_failures() as exc:  # the SDK's NotFound / APIError: one line with the engine's reason
        reason = getattr(exc, "explanation", None) or str(exc)
        raise EnvbuildError(f"pull of {repository}:{name} failed: {reason}") from None
    return f"{repository}:{name}"


def list_images(env_name: str, client=None) -> list[dict]:
    """Images envbuild built for this env: tags, sizes, the lock each came from, the env's layers."""
    client = client or docker_client()
    rows = []
    # Untagged ones are superseded builds still held by a container or a child image: not "what exists".
    for image in client.api.images(filters={"label": f"io.envbuild.env={env_name}", "dangling": False}):
        labels = image.get("Labels") or {}
        rows.append({
            "id": image["Id"], "tags": sorted(image.get("RepoTags") or []),
            "size": int(image.get("Size", 0)), "target": labels.get("io.envbuild.target", ""),
            "torch": labels.get("io.envbuild.torch", ""), "cuda": labels.get("io.envbuild.cuda", ""),
            "lock_hash": labels.get("io.envbuild.lock-hash", ""),
            "created": labels.get("org.opencontainers.image.created", ""),
            "env_layers": env_layers(client, image["Id"]),
        })
    return sorted(rows, key=lambda r: (r["target"], r["created"]))


"""`envbuild image`: build one image per target through the Docker SDK, tag, label, push.

A build is never tagged until it succeeded, never leaves intermediate containers (rm and forcerm,
and the containers named in the log are removed after a failure or Ctrl-C), and reports the image
size next to the size of the layer that holds /opt/env.
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from builder.context import BuildContext
from builder.errors import EnvbuildError, UsageError

LOG_TAIL = 30
STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
ENV_COPY = re.compile(r"#\(nop\) COPY dir:\S+ in /\s*$")
RUNNING_IN = re.compile(r"^ ---> Running in ([0-9a-f]{12,64})")


@dataclass(frozen=True)
class BuildOptions:
    build_args: dict[str, str] = field(default_factory=dict)
    no_cache: bool = False
    platform: str = "linux/amd64"
    network: str | None = None  # "host" reaches channels served on the host's loopback
    pull: bool = False
    source: str = ""  # org.opencontainers.image.source
    revision: str = ""


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

    def as_dict(self) -> dict:
        return {
            "target": self.target, "image_id": self.image_id, "tags": self.tags, "size": self.size,
            "env_layer_size": self.env_layer_size, "env_layer_digest": self.env_layer_digest,
            "base_size": self.base_size, "seconds": round(self.seconds, 1),
            "lock_hash": self.lock_hash, "pushed": self.pushed,
        }


ENGINE_START_FIX = (
    "start the Docker engine (`sudo systemctl start docker`, or `sudo dockerd &`) or point DOCKER_HOST at a running one"
)


class EngineUnreachable(EnvbuildError):
    def __init__(self, address: str, reason: str) -> None:
        self.address = address
        self.reason = reason
        super().__init__(f"no Docker engine answers at {address}: {ENGINE_START_FIX}")


def engine_address() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def docker_client(timeout: float = 600):
    """The engine at DOCKER_HOST or the local socket, or one line saying how to start one."""
    import docker

    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
        return client
    except Exception as exc:
        raise EngineUnreachable(engine_address(), f"{type(exc).__name__}: {exc}") from None


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

    def feed(self, chunk: dict) -> None:
        if "stream" in chunk:
            for line in chunk["stream"].splitlines():
                if not line.strip():
                    continue
                self.tail.append(line)
                step = STEP.match(line)
                if step:
                    self.step = line
                running = RUNNING_IN.match(line)
                if running:
                    self.containers.append(running.group(1))
                self.echo(line)
        if "aux" in chunk and isinstance(chunk["aux"], dict) and "ID" in chunk["aux"]:
            self.image_id = chunk["aux"]["ID"]
        if "error" in chunk:
            self.error = chunk.get("errorDetail", {}).get("message") or chunk["error"]
            self.tail.append(self.error.rstrip())


def _remove_containers(client, ids: Iterable[str]) -> None:
    for container_id in ids:
        try:
            client.api.remove_container(container_id, force=True)
        except Exception:
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
    build_args = {
        "ENVBUILD_LOCK_HASH": context.lock_hash,
        "ENVBUILD_CREATED": created_timestamp(),
        "ENVBUILD_SOURCE": options.source,
        "ENVBUILD_REVISION": options.revision,
        **options.build_args,
    }
    try:
        stream = client.api.build(
            path=str(context.root), rm=True, forcerm=True, decode=True, nocache=options.no_cache,
            buildargs=build_args, network_mode=options.network, platform=options.platform,
            pull=options.pull,
        )
        for chunk in stream:
            log.feed(chunk)
    except KeyboardInterrupt:
        _remove_containers(client, log.containers)
        raise EnvbuildError(f"{context.target.key}: build interrupted; nothing was tagged") from None
    except EnvbuildError:
        raise
    except Exception as exc:
        _remove_containers(client, log.containers)
        raise EnvbuildError(f"{context.target.key}: the engine refused the build: {exc}") from None
    if log.error or not log.image_id:
        _remove_containers(client, log.containers)
        tail = "\n".join(f"  | {line}" for line in log.tail)
        raise EnvbuildError(
            f"{context.target.key}: build failed at {log.step or 'the start'}: "
            f"{(log.error or 'no image produced').strip()}\nlast {len(log.tail)} log lines:\n{tail}"
        )
    tags = image_tags(context)
    replaced = {_image_id(client, tag) for tag in tags} - {None, log.image_id}
    for tag in tags:
        repository, _, name = tag.rpartition(":")
        client.api.tag(log.image_id, repository, name)
    _drop_untagged(client, replaced)
    result = inspect_result(client, context, log.image_id, tags)
    result.seconds = time.monotonic() - started
    return result


def _image_id(client, reference: str) -> str | None:
    try:
        return client.api.inspect_image(reference)["Id"]
    except Exception:
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
        except Exception:
            pass


def _env_layer(client, image_id: str) -> tuple[int | None, str | None]:
    """The size and diff id of the layer made by `COPY --from=env-builder /out/ /`."""
    inspect = client.api.inspect_image(image_id)
    layers = inspect["RootFS"]["Layers"]
    history = list(reversed(client.api.history(image_id)))
    # History lines that made a filesystem layer, oldest first, align with RootFS.Layers.
    made_layer = [h for h in history if "#(nop)" not in h.get("CreatedBy", "")
                  or "#(nop) COPY" in h["CreatedBy"] or "#(nop) ADD" in h["CreatedBy"]]
    if len(made_layer) != len(layers):
        return None, None
    for entry, diff_id in zip(made_layer, layers):
        if ENV_COPY.search(entry["CreatedBy"]):
            return int(entry["Size"]), diff_id
    return None, None


def _base_size(client, context: BuildContext) -> int | None:
    try:
        return int(client.api.inspect_image(context.target.runtime_image.reference)["Size"])
    except Exception:
        return None


def inspect_result(client, context: BuildContext, image_id: str, tags: list[str]) -> ImageResult:
    size = int(client.api.inspect_image(image_id)["Size"])
    env_size, env_digest = _env_layer(client, image_id)
    return ImageResult(context.target.key, image_id, tags, size, env_size, env_digest,
                       _base_size(client, context), 0.0, context.lock_hash)


def remote_reference(registry: str, tag: str) -> tuple[str, str]:
    """`<env>:<tag>` as it lives in REGISTRY (what --push writes and --pull reads): (repository, tag)."""
    repository, _, name = tag.rpartition(":")
    return f"{registry.rstrip('/')}/{repository}", name


def push_image(result: ImageResult, registry: str, echo: Callable[[str], None] = lambda line: None,
               client=None) -> list[str]:
    client = client or docker_client()
    pushed = []
    for tag in result.tags:
        remote, name = remote_reference(registry, tag)
        client.api.tag(result.image_id, remote, name)
        for chunk in client.api.push(remote, tag=name, stream=True, decode=True):
            if "error" in chunk:
                raise EnvbuildError(f"push of {remote}:{name} failed: {chunk['error']}")
            if chunk.get("status") and chunk.get("id") is None:
                echo(chunk["status"])
        pushed.append(f"{remote}:{name}")
    return pushed


def pull_image(tag: str, registry: str, client=None) -> str:
    """Pull what `--push REGISTRY` pushed for `tag`; the local reference, or one line saying why not."""
    client = client or docker_client()
    repository, name = remote_reference(registry, tag)
    try:
        client.images.pull(repository, tag=name)
    except Exception as exc:  # the SDK's NotFound / APIError: one line with the engine's reason
        reason = getattr(exc, "explanation", None) or str(exc)
        raise EnvbuildError(f"pull of {repository}:{name} failed: {reason}") from None
    return f"{repository}:{name}"


def list_images(env_name: str, client=None) -> list[dict]:
    """Images envbuild built for this env: tags, sizes, and the lock each came from."""
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
        })
    return sorted(rows, key=lambda r: (r["target"], r["created"]))


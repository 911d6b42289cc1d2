"""The Docker engine as envbuild talks to it: one client, the SDK's errors as one line each, and the
labels that let a later run find what a killed run left behind.

image, smoke, doctor and onboard share this module, so an engine that is missing, stops mid-build,
times out or refuses a request reads the same everywhere.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from builder.errors import EnvbuildError
from builder.proc import process_alive

ENGINE_START_FIX = (
    "start the Docker engine (`sudo systemctl start docker`; rootless: `systemctl --user start docker`) "
    "or point DOCKER_HOST at a running one"
)
ENGINE_LOST_FIX = "check that the Docker engine is running (`docker info`), then run the command again"

# Every container envbuild starts carries these, so the next run can remove the ones a killed run left.
RUN_LABEL = "io.envbuild.run"  # what started it: "smoke"
OWNER_LABEL = "io.envbuild.owner"  # "<host>:<pid>" of the envbuild process that owns it

# Substrings of engine messages that mean "this base image is not here and cannot be fetched".
UNPULLABLE = ("pull access denied", "no such host", "dial tcp", "lookup ", "repository does not exist",
              "manifest unknown", "not found: manifest", "connection refused", "i/o timeout",
              "TLS handshake timeout", "server misbehaving")


class EngineUnreachable(EnvbuildError):
    def __init__(self, address: str, reason: str) -> None:
        self.address = address
        self.reason = reason
        super().__init__(f"no Docker engine answers at {address}: {ENGINE_START_FIX}")


class EngineLost(EnvbuildError):
    """The engine answered, then stopped answering (stopped, restarted, socket gone) mid-request."""


def engine_address() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def engine_failures() -> tuple[type[Exception], ...]:
    """What a call through the Docker SDK raises when the engine refuses or goes away: the SDK's own
    errors (APIError, NotFound, ...: DockerException; StreamParseError for a cut JSON stream), requests'
    transport errors (OSError, like socket errors) and urllib3's, which a streamed answer (build, push)
    raises unwrapped. A function: importing docker is paid only by commands that talk to the engine."""
    import docker.errors
    import urllib3

    return (docker.errors.DockerException, docker.errors.StreamParseError, OSError, urllib3.exceptions.HTTPError)


def docker_client(timeout: float = 600):
    """The engine at DOCKER_HOST or the local socket, or one line saying how to start one."""
    import docker

    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
        return client
    except Exception as exc:  # whatever the transport DOCKER_HOST names raises (ssh:// brings paramiko's)
        raise EngineUnreachable(engine_address(), unreachable_reason(exc)) from exc


# Why no engine answered, from the socket error under the SDK's wrapping, in a person's words.
SOCKET_REASONS: tuple[tuple[type[OSError], str], ...] = (
    (FileNotFoundError, "no engine socket there"),
    (ConnectionRefusedError, "nothing listens on the socket"),
    (PermissionError, "permission denied on the socket: add yourself to the `docker` group and log in again"),
)


def unreachable_reason(exc: BaseException) -> str:
    """The cause of a failed ping as a person reads it: the socket's error found under the SDK's
    DockerException and requests' ConnectionError (carried in args and causes), not their repr."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        for kind, words in SOCKET_REASONS:
            if isinstance(current, kind):
                return words
        for arg in current.args:
            if isinstance(arg, BaseException):
                pending.append(arg)
            elif isinstance(arg, tuple):
                pending += [item for item in arg if isinstance(item, BaseException)]
        pending += [link for link in (current.__cause__, current.__context__) if link is not None]
    return reason(exc)


def is_timeout(exc: BaseException) -> bool:
    """The engine did not answer in the time given. A streamed or waited-for answer (a container's
    wait, a build) that runs past it reaches here as requests' ConnectionError around urllib3's
    ReadTimeoutError, which is not a lost engine."""
    import requests
    import urllib3

    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, (requests.exceptions.Timeout, urllib3.exceptions.TimeoutError, TimeoutError)):
            return True
        pending += [arg for arg in current.args if isinstance(arg, BaseException)]
        pending += [link for link in (current.__cause__, current.__context__) if link is not None]
    return False


def is_connection_loss(exc: BaseException) -> bool:
    """The engine went away (as opposed to answering with a refusal)."""
    import requests

    if isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError,
                        ConnectionError)):
        return True
    try:
        import urllib3

        return isinstance(exc, urllib3.exceptions.ProtocolError)
    except ImportError:  # pragma: no cover - requests always brings urllib3
        return False


def reason(exc: BaseException) -> str:
    """The engine's own words for a refusal, on one line, without the SDK's HTTP wrapping."""
    text = getattr(exc, "explanation", None) or str(exc) or type(exc).__name__
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return " ".join(str(text).split())


def engine_error(exc: BaseException, what: str) -> EnvbuildError:
    """One EnvbuildError for any exception the SDK raised while doing `what` (e.g. "the build of cpu")."""
    if isinstance(exc, EnvbuildError):
        return exc
    if is_timeout(exc):
        return EngineLost(f"{what}: the Docker engine did not answer in time; {ENGINE_LOST_FIX}")
    if is_connection_loss(exc):
        return EngineLost(f"{what}: the Docker engine stopped answering ({type(exc).__name__}); {ENGINE_LOST_FIX}")
    return EnvbuildError(f"{what}: the engine refused: {reason(exc)}")


def unpullable_base(message: str, images: list[str]) -> str | None:
    """When a build failed because a FROM image is neither local nor fetchable: one line with the fix."""
    if not any(marker.lower() in message.lower() for marker in UNPULLABLE):
        return None
    named = [image for image in images if image.split("@")[0].split(":")[0] in message] or images
    shown = ", ".join(dict.fromkeys(named))
    return (f"base image {shown} is not on this engine and could not be pulled "
            f"({' '.join(message.split())[:160]}); `docker pull`/`docker load` it first, or pass "
            "--base-image/--builder-image with an image this engine has")


# --- labels and stale containers ------------------------------------------------------------------

def owner_value() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def container_labels(run: str) -> dict[str, str]:
    return {RUN_LABEL: run, OWNER_LABEL: owner_value()}


def _owner_gone(value: str) -> bool:
    host, _, pid = value.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another machine's engine client: not ours to judge
    return int(pid) != os.getpid() and not process_alive(int(pid))


def reap_stale_containers(client, run: str) -> list[str]:
    """Remove containers of kind `run` whose envbuild process died without removing them (SIGKILL,
    an OOM kill, a power cut). Ones of live processes, other hosts or other kinds are left alone."""
    removed = []
    try:
        found = client.api.containers(all=True, filters={"label": f"{RUN_LABEL}={run}"})
    except engine_failures():  # an engine that cannot list is reported by the command's own request
        return []
    for container in found:
        labels: dict[str, Any] = container.get("Labels") or {}
        if _owner_gone(str(labels.get(OWNER_LABEL, ""))):
            try:
                client.api.remove_container(container["Id"], force=True)
                removed.append(container["Id"])
            except engine_failures():
                continue  # another run is removing it
    return removed

"""The engine's own failures, with the real engine: a registry that refuses the push, and the
engine going away in the middle of a build (its socket cut by a proxy that stands between envbuild
and the world's engine, as a stopped or restarted dockerd looks from the client's side).

Each test builds an env of its own, so the session's images (`built`) and their layer cache stay as
the other tests expect: a rebuild of the same env would move their tags, and a cut `--no-cache`
build of the same lock would leave dead-end cache images the next build could pick."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.envbuild_cli import envbuild
from tests.paths import REPO
from tests.system.world_env import WorldEnv
from tests.world.offline import remove_env_images, unique_spec_copy

pytestmark = [pytest.mark.docker, pytest.mark.world]

ENGINE_SOCKET = "/var/run/docker.sock"


def _tags(client, *prefixes: str) -> set[str]:
    """Tags starting with one of `prefixes`: other users of the shared engine tag their own."""
    return {tag for image in client.images.list() for tag in image.tags if tag.startswith(prefixes)}


@pytest.fixture
def own_env(docker_world, tmp_path: Path, request) -> Iterator[WorldEnv]:
    """An env of this test's own; `extra_conda` (indirect) makes its lock differ from the session's."""
    spec = unique_spec_copy(tmp_path, "engine-fault")
    extra = getattr(request, "param", ())
    if extra:
        data = yaml.safe_load(spec.read_text())
        data["conda"] = [*data.get("conda", []), *extra]
        spec.write_text(yaml.safe_dump(data, sort_keys=False))
    yield WorldEnv(spec.stem, spec, tmp_path / "locks")
    remove_env_images(spec.stem)


def test_a_push_the_registry_refuses_is_one_line_and_leaves_no_registry_tag(built, own_env: WorldEnv) -> None:
    import docker

    client = docker.from_env()
    done = envbuild(*own_env.image_args("cpu"), "--push", "127.0.0.1:1/team")  # built: the layers are cached
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert done.returncode == 1 and len(errors) == 1 and "127.0.0.1:1" in errors[0], done.stderr[-2000:]
    assert not _tags(client, "127.0.0.1:1/")
    assert f"{own_env.name}:2.13.0-cpu" in _tags(client, own_env.name)  # the local build stays
    client.close()


class SocketCutter:
    """A unix socket that forwards to the engine's until `cut()` closes every connection at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(16)
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            engine.connect(ENGINE_SOCKET)
            with self.lock:
                self.open += [client, engine]
            for source, sink in ((client, engine), (engine, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        self.listener.close()
        with self.lock:
            for end in self.open:
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                end.close()


@pytest.mark.parametrize("own_env", [("markupsafe",)], indirect=True)
def test_the_engine_going_away_mid_build_is_one_line_and_tags_nothing(own_env: WorldEnv, tmp_path: Path) -> None:
    import docker

    client = docker.from_env()
    cutter = SocketCutter(tmp_path / "engine.sock")
    # its own lock, so its install step has no cached layer: the engine is mid-build when the socket goes
    command = [sys.executable, "-m", "builder", *own_env.image_args("cpu")]
    env = {**os.environ, "CI": "true", "DOCKER_HOST": f"unix://{tmp_path / 'engine.sock'}"}
    build = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    assert build.stderr is not None
    for line in build.stderr:
        seen.append(line)
        if "Running in" in line and any("builder.lock.install" in earlier for earlier in seen):
            break  # the installer's RUN has a container: the engine is mid-build
    cutter.cut()
    rest = build.communicate(timeout=300)[1]
    stderr = "".join(seen) + rest
    errors = [line for line in stderr.splitlines() if line.startswith("Error:")]
    assert build.returncode == 1 and len(errors) == 1, stderr[-3000:]
    assert "stopped answering" in errors[0] and "docker info" in errors[0], errors
    assert "Traceback" not in stderr
    # the engine itself cancels a build whose client went away: nothing tagged, its containers gone
    steps = {line.split("Running in", 1)[1].split()[0] for line in stderr.splitlines() if "Running in" in line}
    assert steps

    def left() -> list[str]:
        return [c.short_id for c in client.containers.list(all=True) if any(c.id.startswith(s) for s in steps)]

    deadline = time.monotonic() + 120
    while left() and time.monotonic() < deadline:
        time.sleep(1)
    assert left() == [] and _tags(client, own_env.name) == set()
    client.close()

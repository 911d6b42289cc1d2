"""The engine's own failures, with the real engine: a registry that refuses the push, and the
engine going away in the middle of a build (its socket cut by a proxy that stands between envbuild
and the world's engine, as a stopped or restarted dockerd looks from the client's side)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, envbuild

pytestmark = [pytest.mark.docker, pytest.mark.world]

ENGINE_SOCKET = "/var/run/docker.sock"


def _tags(client, *prefixes: str) -> set[str]:
    """Tags starting with one of `prefixes`: other users of the shared engine tag their own."""
    return {tag for image in client.images.list() for tag in image.tags if tag.startswith(prefixes)}


def test_a_push_the_registry_refuses_is_one_line_and_leaves_no_registry_tag(built, world_env) -> None:
    import docker

    client = docker.from_env()
    before = _tags(client, world_env.name, "127.0.0.1:1/")
    done = envbuild(*world_env.image_args("cpu"), "--push", "127.0.0.1:1/team")
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert done.returncode == 1 and len(errors) == 1 and "127.0.0.1:1" in errors[0], done.stderr[-2000:]
    after = _tags(client, world_env.name, "127.0.0.1:1/")
    assert not {tag for tag in after if tag.startswith("127.0.0.1:1/")}
    assert set(built["cpu"]["tags"]) <= after and after == before
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


def test_the_engine_going_away_mid_build_is_one_line_and_tags_nothing(built, world_env, tmp_path: Path) -> None:
    import docker

    client = docker.from_env()
    tags_before = _tags(client, world_env.name)
    cutter = SocketCutter(tmp_path / "engine.sock")
    command = [sys.executable, "-m", "builder", *world_env.image_args("cpu"), "--no-cache"]
    env = {**os.environ, "CI": "true", "DOCKER_HOST": f"unix://{tmp_path / 'engine.sock'}"}
    build = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    assert build.stderr is not None
    for line in build.stderr:
        seen.append(line)
        if "Running in" in line and any("builder.install" in earlier for earlier in seen):
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
    assert left() == [] and _tags(client, world_env.name) == tags_before
    client.close()

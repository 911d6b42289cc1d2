"""The Docker side of the offline world, and the engine/SDK facts envbuild's image code relies on.

These run against the engine, base images and registry that tests/world/up.sh brings up; under
`make test` (tests/run-all.sh) ENVBUILD_TEST_WORLD names its state dir. Outside it they skip.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker.errors
import pytest
from docker.types import DeviceRequest

import docker
from tests.paths import TESTS

WORLD_SCRIPTS = TESTS / "world"
WORLD_DIR = os.environ.get("ENVBUILD_TEST_WORLD")
LABEL = "org.envbuild.world"
NONCE_LABEL = "org.envbuild.test.nonce"

needs_world = pytest.mark.skipif(
    not WORLD_DIR,
    reason="ENVBUILD_TEST_WORLD is unset: run through `make test` (tests/run-all.sh), which starts the engine",
)


def read_world_env() -> dict[str, str]:
    assert WORLD_DIR is not None
    env_file = Path(WORLD_DIR) / "env" / "world.env"
    lines = env_file.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


@pytest.fixture(scope="module")
def world_env() -> dict[str, str]:
    return read_world_env()


@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    engine = docker.from_env(timeout=120)
    yield engine
    engine.close()


@pytest.fixture
def nonce() -> str:
    return uuid.uuid4().hex[:12]


def remove_by_nonce(engine: docker.DockerClient, nonce: str) -> None:
    """Build leftovers carry the nonce label (containers inherit their image's labels)."""
    selector = {"label": f"{NONCE_LABEL}={nonce}"}
    for container in engine.containers.list(all=True, filters=selector):
        container.remove(force=True)
    for image in engine.images.list(filters=selector):
        engine.images.remove(image.id, force=True)


def dockerfile(*lines: str) -> io.BytesIO:
    return io.BytesIO(("\n".join(lines) + "\n").encode())


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---- the world itself -----------------------------------------------------------------------


@pytest.mark.docker
@needs_world
def test_engine_answers_through_the_sdk(client: docker.DockerClient) -> None:
    assert client.ping() is True
    api_version = tuple(int(part) for part in client.version()["ApiVersion"].split("."))
    assert api_version >= (1, 41)


@pytest.mark.docker
@needs_world
def test_debian_image_runs_bookworm(client: docker.DockerClient, world_env: dict[str, str]) -> None:
    out = client.containers.run(world_env["ENVBUILD_TEST_DEBIAN_IMAGE"], ["cat", "/etc/debian_version"], remove=True)
    assert out.decode().startswith("12.")


@pytest.mark.docker
@needs_world
def test_debian_image_carries_the_host_ca_bundle(client: docker.DockerClient, world_env: dict[str, str]) -> None:
    image_tag = world_env["ENVBUILD_TEST_DEBIAN_IMAGE"]
    bundle_in_image = client.containers.run(image_tag, ["sh", "-c", 'cat "$SSL_CERT_FILE"'], remove=True)
    host_bundle = Path(world_env["ENVBUILD_TEST_HOST_CA_BUNDLE"]).read_bytes()
    assert host_bundle.strip(), "the host CA bundle is empty: nothing to compare"
    assert sha256(bundle_in_image) == sha256(host_bundle)
    assert client.images.get(image_tag).labels[f"{LABEL}.ca-sha256"] == sha256(host_bundle)


@pytest.mark.docker
@needs_world
def test_base_images_say_what_they_were_made_from(client: docker.DockerClient, world_env: dict[str, str]) -> None:
    debian = client.images.get(world_env["ENVBUILD_TEST_DEBIAN_IMAGE"]).labels
    busybox = client.images.get(world_env["ENVBUILD_TEST_BUSYBOX_IMAGE"]).labels
    assert debian[f"{LABEL}.source"].startswith("debootstrap --variant=minbase")
    assert "libexpat1,libssl3,libsqlite3-0" in debian[f"{LABEL}.recipe"]
    assert "busybox-static" in busybox[f"{LABEL}.source"]


@pytest.mark.docker
@needs_world
def test_busybox_image_runs(client: docker.DockerClient, world_env: dict[str, str]) -> None:
    out = client.containers.run(world_env["ENVBUILD_TEST_BUSYBOX_IMAGE"], ["echo", "ok"], remove=True)
    assert out == b"ok\n"


@pytest.mark.docker
@needs_world
def test_registry_takes_a_push_and_gives_it_back(
    client: docker.DockerClient, world_env: dict[str, str], nonce: str
) -> None:
    registry = world_env["ENVBUILD_TEST_REGISTRY"]
    repository = f"{registry}/envbuild-test/busybox"
    original = client.images.get(world_env["ENVBUILD_TEST_BUSYBOX_IMAGE"])
    original.tag(repository, tag=nonce)
    try:
        events = list(client.images.push(repository, tag=nonce, stream=True, decode=True))
        assert not [event for event in events if "error" in event], events
        client.images.remove(f"{repository}:{nonce}")

        pulled = client.images.pull(repository, tag=nonce)
        assert pulled.id == original.id
        no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with no_proxy.open(f"http://{registry}/v2/envbuild-test/busybox/tags/list", timeout=10) as reply:
            assert nonce in json.load(reply)["tags"]
    finally:
        try:
            client.images.remove(f"{repository}:{nonce}")
        except docker.errors.ImageNotFound:
            pass


@pytest.mark.docker
@needs_world
def test_nested_up_starts_nothing_and_down_keeps_a_leased_world(client: docker.DockerClient) -> None:
    assert WORLD_DIR is not None
    leases = Path(WORLD_DIR) / "leases"
    stale = leases / "pytest-stale"
    # Our own pid with a start time it never had: a holder whose pid was reused.
    stale.write_text(f"{os.getpid()} 0\n")
    env = {**os.environ, "ENVBUILD_WORLD_DIR": WORLD_DIR, "ENVBUILD_WORLD_LEASE": f"pytest-{os.getpid()}"}

    up = subprocess.run(["bash", WORLD_SCRIPTS / "up.sh"], env=env, capture_output=True, text=True, timeout=300)
    assert up.returncode == 0, up.stderr
    engine_line = next(line for line in up.stdout.splitlines() if line.startswith("world: engine"))
    assert "already" in engine_line

    down = subprocess.run(["bash", WORLD_SCRIPTS / "down.sh"], env=env, capture_output=True, text=True, timeout=300)
    assert down.returncode == 0, down.stderr
    assert "kept running: still leased by" in down.stdout
    assert "pytest-stale" not in down.stdout
    assert not stale.exists()
    assert not (leases / f"pytest-{os.getpid()}").exists()
    assert client.ping() is True


# ---- SDK facts envbuild's image code relies on (FIELD-NOTES section 2) -----------------------


@pytest.mark.docker
@needs_world
def test_failing_build_with_rm_and_forcerm_leaves_no_container(
    client: docker.DockerClient, world_env: dict[str, str], nonce: str
) -> None:
    busybox = world_env["ENVBUILD_TEST_BUSYBOX_IMAGE"]
    control = f"{nonce}-control"
    try:
        with pytest.raises(docker.errors.BuildError):
            client.images.build(
                fileobj=dockerfile(f"FROM {busybox}", f"LABEL {NONCE_LABEL}={nonce}", "RUN false"),
                rm=True,
                forcerm=True,
            )
        assert client.containers.list(all=True, filters={"label": f"{NONCE_LABEL}={nonce}"}) == []

        # Control: with the SDK's defaults every step's container stays, the failed one included,
        # so the filter above does find leftovers when there are any.
        with pytest.raises(docker.errors.BuildError):
            client.images.build(fileobj=dockerfile(f"FROM {busybox}", f"LABEL {NONCE_LABEL}={control}", "RUN false"))
        leftovers = client.containers.list(all=True, filters={"label": f"{NONCE_LABEL}={control}"})
        assert ["/bin/sh", "-c", "false"] in [container.attrs["Config"]["Cmd"] for container in leftovers]
    finally:
        remove_by_nonce(client, nonce)
        remove_by_nonce(client, control)


@pytest.mark.docker
@needs_world
def test_streamed_build_yields_aux_id_and_error_detail(
    client: docker.DockerClient, world_env: dict[str, str], nonce: str
) -> None:
    busybox = world_env["ENVBUILD_TEST_BUSYBOX_IMAGE"]
    try:
        good = list(
            client.api.build(
                fileobj=dockerfile(f"FROM {busybox}", f"LABEL {NONCE_LABEL}={nonce}"), rm=True, forcerm=True, decode=True
            )
        )
        image_ids = [chunk["aux"]["ID"] for chunk in good if "ID" in chunk.get("aux", {})]
        assert len(image_ids) == 1
        assert client.images.get(image_ids[0]).labels[NONCE_LABEL] == nonce
        assert any("stream" in chunk for chunk in good)

        bad = list(
            client.api.build(
                fileobj=dockerfile(f"FROM {busybox}", f"LABEL {NONCE_LABEL}={nonce}", "RUN exit 7"),
                rm=True,
                forcerm=True,
                decode=True,
            )
        )
        errors = [chunk for chunk in bad if "errorDetail" in chunk]
        assert len(errors) == 1
        assert errors[0]["errorDetail"]["code"] == 7
        assert "error" in errors[0]
    finally:
        remove_by_nonce(client, nonce)


@pytest.mark.docker
@needs_world
def test_failed_run_raises_container_error_with_status_and_stderr(
    client: docker.DockerClient, world_env: dict[str, str]
) -> None:
    with pytest.raises(docker.errors.ContainerError) as failure:
        client.containers.run(
            world_env["ENVBUILD_TEST_BUSYBOX_IMAGE"], ["sh", "-c", "echo boom >&2; exit 3"], remove=True
        )
    assert failure.value.exit_status == 3
    assert b"boom" in failure.value.stderr


@pytest.mark.docker
@needs_world
def test_gpu_request_without_nvidia_runtime_fails_at_start(
    client: docker.DockerClient, world_env: dict[str, str]
) -> None:
    if "nvidia" in client.info().get("Runtimes", {}):
        pytest.skip("this engine has the NVIDIA runtime: a GPU request would start")
    container = client.containers.create(
        world_env["ENVBUILD_TEST_BUSYBOX_IMAGE"],
        ["true"],
        device_requests=[DeviceRequest(count=-1, capabilities=[["gpu"]])],
    )
    try:
        with pytest.raises(docker.errors.APIError) as failure:
            container.start()
        assert 'could not select device driver "" with capabilities: [[gpu]]' in str(failure.value)
        container.reload()
        assert container.status == "created"
    finally:
        container.remove(force=True)
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(container.id)


def _free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _registry(action: str, state: Path, machine: Path, addr: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ENVBUILD_WORLD_DIR": str(state),
        "ENVBUILD_WORLD_MACHINE_DIR": str(machine),
        "ENVBUILD_REGISTRY_ADDR": addr,
    }
    return subprocess.run(
        ["bash", WORLD_SCRIPTS / "registry.sh", action], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.world
@pytest.mark.skipif(
    not shutil.which("docker-registry"), reason="Debian's docker-registry is not installed (engine.sh install)"
)
def test_a_registry_outlives_the_world_that_started_it_while_another_world_is_leased(tmp_path: Path) -> None:
    # Two checkouts' `make test` share the machine's registry port; the first to end stopped the
    # registry under the other's pushes.
    machine, starter, user = tmp_path / "machine", tmp_path / "starter", tmp_path / "user"
    addr = f"127.0.0.1:{_free_loopback_port()}"
    (user / "leases").mkdir(parents=True)
    (user / "leases" / "manual").write_text("")  # a manual `up`: live until its `down`
    try:
        assert _registry("up", starter, machine, addr).returncode == 0
        shared = _registry("up", user, machine, addr)
        assert shared.returncode == 0 and "started elsewhere" in shared.stdout

        handed = _registry("down", starter, machine, addr)
        assert handed.returncode == 0 and "kept running" in handed.stdout, handed.stdout
        heir_pid = (user / "registry" / "registry.pid").read_text().strip()
        assert f"started by this world, pid {heir_pid}" in _registry("status", user, machine, addr).stdout

        stopped = _registry("down", user, machine, addr)
        assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stdout
        assert _registry("status", user, machine, addr).returncode == 3
    finally:
        _registry("down", user, machine, addr)
        _registry("down", starter, machine, addr)

"""envbuild image end to end on the offline world: real lock, real engine, real python and CPU torch.

The session fixture `built` (tests/conftest.py) locks and builds the CPU target (the real CPU torch
repacked from the wheel) and the CUDA 12.9 target (payload-free stand-ins of conda-forge's CUDA
builds) of a copy of envs/pytorch.yaml; these tests look inside the results.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid

import pytest

import docker
from tests.envbuild_cli import envbuild
from tests.world.offline import BUILDER_BASE, RUNTIME_BASE

pytestmark = [pytest.mark.docker, pytest.mark.world]


@pytest.fixture(scope="module")
def client():
    engine = docker.from_env(timeout=300)
    yield engine
    engine.close()


def run_in(client, image: str, *command: str) -> str:
    return client.containers.run(image, list(command), remove=True).decode().strip()


def labels_of(client, image: str) -> dict[str, str]:
    return client.api.inspect_image(image)["Config"]["Labels"]


def env_of(client, image: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in client.api.inspect_image(image)["Config"]["Env"])


def test_cpu_image_runs_the_locked_torch_as_a_non_root_user(built, world_env, client) -> None:
    cpu = built["cpu"]
    tag = f"{world_env.name}:2.13.0-cpu"
    assert tag in cpu["tags"] and f"{world_env.name}:{cpu['lock_hash'][:12]}" in cpu["tags"]
    out = run_in(client, tag, "python", "-c",
                 "import sys, torch; print(torch.__version__, torch.version.cuda, sys.prefix)")
    assert out.splitlines()[-1] == "2.13.0+cpu None /opt/env"
    assert run_in(client, tag, "id", "-u") == "1000"
    # The suite's expectations come from envbuild's compatibility data, written into the build context.
    shipped = run_in(client, tag, "python", "-c", "import json, smoke.compat as c; d = c.load_compat_data(); "
                     "print(json.dumps([d['target']['key'], d['target']['torch'], d['torchvision_pairs']['2.13']]))")
    assert json.loads(shipped.splitlines()[-1]) == ["cpu", "2.13.0", "0.28"]
    assert run_in(client, tag, "sh", "-c", "ls /opt/env/conda-meta | grep -c '^pytorch-2.13.0-cpu_'") == "1"
    env = env_of(client, tag)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert "NVIDIA_REQUIRE_CUDA" not in env  # a CPU image must start on hosts without a driver
    assert env["PATH"].startswith("/opt/env/bin:")


def test_labels_say_what_the_image_is_and_which_lock_made_it(built, world_env, client) -> None:
    for target, cuda, min_driver in (("cpu", "cpu", ""), ("cuda12.9", "12.9", "525.60.13")):
        result = built[target]
        labels = labels_of(client, result["image_id"])
        assert labels["io.envbuild.env"] == world_env.name
        assert labels["io.envbuild.target"] == target
        assert labels["io.envbuild.cuda"] == cuda
        assert labels["io.envbuild.torch"] == "2.13.0"
        # a CPU image has no minimum driver: the label is left out, not written empty
        assert labels.get("io.envbuild.min-driver") == (min_driver or None)
        assert "" not in labels.values()
        assert labels["io.envbuild.lock-hash"] == result["lock_hash"]
        assert labels["org.opencontainers.image.created"]


def test_cuda_image_carries_the_cuda_build_and_driver_requirement(built, world_env, client) -> None:
    tag = f"{world_env.name}:2.13.0-cuda12.9"
    assert tag in built["cuda12.9"]["tags"]
    assert env_of(client, tag)["NVIDIA_REQUIRE_CUDA"] == "cuda>=12.0"  # minor-version compatibility
    meta = run_in(client, tag, "sh", "-c", "ls /opt/env/conda-meta")
    assert any(line.startswith("pytorch-2.13.0-cuda129_") for line in meta.splitlines()), meta
    assert any(line.startswith("cuda-version-12.9") for line in meta.splitlines()), meta
    # Only /opt/env comes from the builder stage: no installer, plan or package cache.
    assert run_in(client, tag, "sh", "-c", "ls /opt; ls /tmp | wc -l") == "env\nenvbuild\n0"
    assert run_in(client, tag, "ls", "/opt/envbuild") == "smoke"


def _compiler_layer_size(image_id: str) -> int:
    """The layer docker/blocks/compiler.j2 adds (Debian's gcc and g++ for torch.compile), from the engine's history."""
    client = docker.from_env()
    try:
        return sum(int(h["Size"]) for h in client.api.history(image_id)
                   if "install -y -q --no-install-recommends gcc g++" in h.get("CreatedBy", ""))
    finally:
        client.close()


def test_sizes_are_reported_and_the_env_layer_is_most_of_the_image(built) -> None:
    cpu = built["cpu"]
    assert cpu["env_layer_size"] and cpu["base_size"]
    compiler = _compiler_layer_size(cpu["image_id"])
    assert compiler > 0, "the CPU image has no compiler layer: torch.compile would fail in it"
    # Beyond the base, the env and the compiler, the runtime stage adds a user and the smoke suite: nothing big.
    overhead = cpu["size"] - cpu["env_layer_size"] - cpu["base_size"] - compiler
    assert 0 <= overhead < 0.05 * cpu["size"], (cpu, compiler)


def test_unchanged_rebuild_hits_the_cache_and_keeps_the_env_layer(built, world_env) -> None:
    again = envbuild(*world_env.image_args("cpu"))
    assert again.returncode == 0, again.stderr[-3000:]
    result = json.loads(again.stdout)["images"][0]
    assert result["env_layer_digest"] == built["cpu"]["env_layer_digest"]
    install_step = again.stderr[again.stderr.index("python3 -m builder.lock.install"):]
    assert install_step.splitlines()[1].strip() == "---> Using cache", install_step[:400]


def test_env_layer_is_identical_after_a_no_cache_build(built, world_env) -> None:
    again = world_env.build("12.9", extra=("--no-cache",))[0]
    assert again["env_layer_digest"] == built["cuda12.9"]["env_layer_digest"]


def test_images_lists_what_was_built_with_its_lock(built, world_env) -> None:
    listed = envbuild("images", str(world_env.spec), "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["target"]: row for row in json.loads(listed.stdout)["images"]}
    assert set(rows) >= {"cpu", "cuda12.9"}
    assert rows["cpu"]["lock_hash"] == built["cpu"]["lock_hash"]
    assert f"{world_env.name}:2.13.0-cuda12.9" in rows["cuda12.9"]["tags"]
    # the env in layers by group, CUDA libraries before torch before the rest, as the build reported them
    layers = rows["cuda12.9"]["env_layers"]
    assert [layer["group"] for layer in layers][:3] == ["bootstrap", "cuda", "torch"]
    assert layers == built["cuda12.9"]["env_layers"]


def skopeo_inspect(reference: str) -> dict:
    skopeo = shutil.which("skopeo")
    assert skopeo, "skopeo is not installed: tests/world/engine.sh install puts it there"
    done = subprocess.run([skopeo, "inspect", "--tls-verify=false", f"docker://{reference}"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_push_to_the_loopback_registry_and_pull_back(built, world_env, client) -> None:
    registry = os.environ.get("ENVBUILD_TEST_REGISTRY", "127.0.0.1:5000")
    team = f"{registry}/team-{uuid.uuid4().hex[:6]}"
    result = world_env.build("12.9", extra=("--push", team))[0]
    pushed = result["pushed"]
    remote = f"{team}/{world_env.name}:2.13.0-cuda12.9"
    assert remote in pushed and len(pushed) == 2
    # every layer accounted for (sent, or already there: the registry may hold a layer of an earlier run)
    assert result["push_sent_bytes"] + result["push_reused_bytes"] > 0.9 * result["env_layer_size"]
    again = world_env.build("12.9", extra=("--push", team))[0]  # the same image: nothing left to send
    assert again["push_sent_bytes"] == 0
    assert again["push_reused_bytes"] == result["push_sent_bytes"] + result["push_reused_bytes"]
    local = client.api.inspect_image(remote)
    digest_before = local["Id"]
    # A registry client that is not Docker reads the same manifest, labels and platform back.
    seen = skopeo_inspect(remote)
    assert f"{team}/{world_env.name}@{seen['Digest']}" in local["RepoDigests"]
    # What CI smoke jobs pull: the digest the registry reported for the last push, the one skopeo reads back
    # (each build is a new image: its build-time label differs, so the first push's manifest is another one).
    assert result["pushed_by_digest"].startswith(f"{team}/{world_env.name}@sha256:")
    assert again["pushed_by_digest"] == f"{team}/{world_env.name}@{seen['Digest']}"
    assert seen["Labels"] == local["Config"]["Labels"] and seen["Labels"]["io.envbuild.target"] == "cuda12.9"
    assert (seen["Os"], seen["Architecture"]) == ("linux", "amd64") and len(seen["Layers"]) == len(
        local["RootFS"]["Layers"])
    for tag in pushed:
        client.images.remove(tag)
    client.images.pull(remote)
    assert client.api.inspect_image(remote)["Id"] == digest_before
    client.images.remove(remote)
    from builder.image.build import pull_reference

    assert pull_reference(again["pushed_by_digest"]) == again["pushed_by_digest"]
    assert client.api.inspect_image(again["pushed_by_digest"])["Id"] == digest_before
    client.images.remove(again["pushed_by_digest"])


def test_failed_build_tags_nothing_and_leaves_no_container(built, world_env, client) -> None:
    before_containers = {c.id for c in client.containers.list(all=True)}
    before_tags = {tag for image in client.images.list() for tag in image.tags}
    # A builder base without python: the installer step fails inside the build.
    args = world_env.image_args("12.9")
    args[args.index(BUILDER_BASE)] = RUNTIME_BASE
    failed = envbuild(*args, "--no-cache")
    assert failed.returncode == 1
    error = failed.stderr.strip().splitlines()
    message = next(line for line in error if line.startswith("Error:"))
    assert "build failed at Step" in message and "python3" in failed.stderr
    assert "last " in failed.stderr and "log lines" in failed.stderr
    assert {c.id for c in client.containers.list(all=True)} == before_containers
    assert {tag for image in client.images.list() for tag in image.tags} == before_tags


def test_no_engine_is_one_line_saying_how_to_start_one(built, world_env, tmp_path) -> None:
    # `built` made the lock: with --frozen the engine is the first thing this build needs.
    done = envbuild(*world_env.image_args("cpu"), "--frozen",
                    env={"DOCKER_HOST": f"unix://{tmp_path}/nothing.sock"})
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and "no Docker engine answers" in lines[0] and "start the Docker engine" in lines[0]


def test_frozen_refuses_a_stale_lock_without_building(world_env, tmp_path) -> None:
    args = world_env.image_args("cpu")
    args[args.index(str(world_env.locks))] = str(tmp_path / "no-locks")
    done = envbuild(*args, "--frozen")
    assert done.returncode == 1
    assert "the lock is missing; run `envbuild lock` first" in done.stderr


def test_ctrl_c_during_a_build_stops_it_tags_nothing_and_leaves_no_container(built, world_env, client) -> None:
    import signal
    import subprocess
    import sys
    import time

    before_containers = {c.id for c in client.containers.list(all=True)}
    before_tags = {tag for image in client.images.list() for tag in image.tags}
    process = subprocess.Popen([sys.executable, "-m", "builder", *world_env.image_args("12.9"), "--no-cache"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "CI": "true"})
    seen = []
    for line in process.stderr:  # wait until the installer step runs in its build container
        seen.append(line)
        if "Running in" in line and any("builder.lock.install" in s for s in seen):
            break
    time.sleep(1)
    process.send_signal(signal.SIGINT)
    _, rest = process.communicate(timeout=120)
    assert process.returncode == 130, "".join(seen[-20:]) + rest  # as the README promises for Ctrl-C
    assert "interrupted (Ctrl-C)" in rest
    deadline = time.monotonic() + 30  # the engine removes a cancelled step's container asynchronously
    while {c.id for c in client.containers.list(all=True)} != before_containers and time.monotonic() < deadline:
        time.sleep(0.5)
    assert {c.id for c in client.containers.list(all=True)} == before_containers
    assert {tag for image in client.images.list() for tag in image.tags} == before_tags


def test_a_rebuild_from_another_lock_keeps_the_old_image_under_its_lock_tag(built, world_env, client, tmp_path) -> None:
    import yaml

    from tests.system.world_env import WorldEnv

    data = yaml.safe_load(world_env.spec.read_text())
    data["conda"] = [*data.get("conda", []), "filelock"]  # another top-level spec: another lock
    spec = tmp_path / world_env.spec.name
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    target_tag = f"{world_env.name}:2.13.0-cuda12.9"
    old_id = client.api.inspect_image(target_tag)["Id"]  # earlier tests may have rebuilt it
    changed = WorldEnv(world_env.name, spec, world_env.locks).build("12.9")[0]
    old_hash = built["cuda12.9"]["lock_hash"]
    assert changed["lock_hash"] != old_hash and changed["image_id"] != old_id
    assert target_tag in client.api.inspect_image(changed["image_id"])["RepoTags"]
    # The old build lost its target tag to the new one but keeps the tag of its own lock.
    assert client.api.inspect_image(old_id)["RepoTags"] == [f"{world_env.name}:{old_hash[:12]}"]

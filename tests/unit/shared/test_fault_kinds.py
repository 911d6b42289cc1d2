"""The fault kinds below the command line: process groups, engine errors, stale leftovers, YAML caps."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from builder import proc
from builder.engine import OWNER_LABEL, RUN_LABEL, EngineLost, engine_error, reap_stale_containers, unpullable_base
from builder.errors import EnvbuildError, UsageError
from builder.userfile import load_yaml

pytestmark = pytest.mark.unit


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] if Path(f"/proc/{pid}").exists() else "Z"
    return state != "Z"


def test_a_timeout_kills_the_grandchild_that_holds_the_pipes(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild"
    script = f"sleep 300 & echo $! > {pid_file}; wait"
    with pytest.raises(proc.ProcessTimeout, match="ran past 1 s"):
        proc.run(["sh", "-c", script], timeout=1, what="the test child")
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 3
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_output_that_is_not_utf8_is_text_not_an_error() -> None:
    done = proc.run(["sh", "-c", r"printf 'ok \377\376 end'"], timeout=10, what="printf")
    assert done.returncode == 0 and done.stdout.startswith("ok ") and done.stdout.endswith(" end")


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux only")
def test_children_die_with_a_parent_killed_by_sigkill(tmp_path: Path) -> None:
    pid_file = tmp_path / "child"
    parent_code = (
        "import sys, time; from builder import proc; "
        f"p = proc.popen(['sleep', '300']); open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(300)"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code])
    deadline = time.monotonic() + 20
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(pid_file.read_text())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 3
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_stale_folders_are_those_of_dead_owners(tmp_path: Path) -> None:
    ours = tmp_path / (proc.owned_name("envbuild-x") + "a")
    ours.mkdir()
    gone = tmp_path / "envbuild-x-pid999999999-b"
    gone.mkdir()
    other = tmp_path / "envbuild-y-pid999999999-c"
    other.mkdir()
    assert proc.remove_stale_folders(tmp_path, "envbuild-x") == [gone]
    assert ours.exists() and other.exists()


def test_engine_errors_read_as_one_line() -> None:
    lost = engine_error(requests.exceptions.ChunkedEncodingError("Connection broken"), "cpu: the build")
    assert isinstance(lost, EngineLost) and "stopped answering" in lost.message and "docker info" in lost.message
    timeout = engine_error(requests.exceptions.ReadTimeout("read timed out"), "cpu: the build")
    assert "did not answer in time" in timeout.message

    class Refusal(Exception):
        explanation = "Unknown runtime specified nvidia\n"

    refused = engine_error(Refusal(), "img: the smoke container")
    assert refused.message == "img: the smoke container: the engine refused: Unknown runtime specified nvidia"
    mine = EnvbuildError("already one line")
    assert engine_error(mine, "x") is mine


def test_a_missing_base_image_is_named_with_the_fix() -> None:
    line = unpullable_base("pull access denied for local/not-here, repository does not exist",
                           ["local/not-here:1", "local/debian:bookworm"])
    assert line and "local/not-here:1" in line and "local/debian" not in line and "--base-image" in line
    assert unpullable_base("no space left on device", ["a:1"]) is None


class FakeApi:
    def __init__(self, containers: list[dict]) -> None:
        self.listed = containers
        self.removed: list[str] = []

    def containers(self, all: bool, filters: dict) -> list[dict]:  # the SDK's name
        assert filters == {"label": f"{RUN_LABEL}=smoke"}
        return self.listed

    def remove_container(self, container_id: str, force: bool) -> None:
        self.removed.append(container_id)


class FakeClient:
    def __init__(self, containers: list[dict]) -> None:
        self.api = FakeApi(containers)


def test_only_containers_of_dead_envbuild_processes_on_this_host_are_reaped() -> None:
    import socket

    host = socket.gethostname()
    client = FakeClient([
        {"Id": "dead", "Labels": {OWNER_LABEL: f"{host}:999999999"}},
        {"Id": "alive", "Labels": {OWNER_LABEL: f"{host}:{os.getppid()}"}},
        {"Id": "mine", "Labels": {OWNER_LABEL: f"{host}:{os.getpid()}"}},
        {"Id": "elsewhere", "Labels": {OWNER_LABEL: "another-host:999999999"}},
    ])
    assert reap_stale_containers(client, "smoke") == ["dead"]
    assert client.api.removed == ["dead"]


class RegistryApi:
    """The engine's side of a push, replaying one push stream: records the tags made and removed."""

    def __init__(self, stream: list[dict]) -> None:
        self.stream = stream
        self.tags: list[str] = []
        self.removed: list[str] = []

    def tag(self, image: str, repository: str, tag: str) -> None:
        self.tags.append(f"{repository}:{tag}")

    def push(self, repository: str, tag: str, stream: bool, decode: bool):
        yield from self.stream

    def remove_image(self, reference: str, noprune: bool) -> None:
        self.removed.append(reference)


def test_a_failed_push_drops_the_registry_tags_it_made() -> None:
    from builder.image.build import ImageResult, push_image

    client = type("Client", (), {"api": RegistryApi([{"error": "dial tcp 127.0.0.1:1: connect: connection refused"}])})()
    result = ImageResult("cpu", "sha256:1", ["team:2.13.0-cpu", "team:abc"], 1, None, None, None, 0.0, "abc")
    with pytest.raises(EnvbuildError, match="connection refused.*docker login"):
        push_image(result, "127.0.0.1:1/team", client=client)
    assert client.api.removed == client.api.tags == ["127.0.0.1:1/team/team:2.13.0-cpu"]


def test_an_installer_error_is_lifted_out_of_a_coloured_build_log() -> None:
    from builder.image.build import BuildLog

    log = BuildLog(lambda line: None)
    log.feed({"stream": "Step 4/19 : RUN python3 -m builder.lock.install --plan plan.json\n"})
    log.feed({"stream": "\x1b[91merror: zlib: cannot download http://x/zlib-1.conda (File not found)\n\x1b[0m"})
    log.feed({"error": "The command '/bin/sh -c python3 ...' returned a non-zero code: 1"})
    assert log.cause() == "zlib: cannot download http://x/zlib-1.conda (File not found)"


def test_a_full_disk_said_only_by_the_engine_commit_is_the_cause() -> None:
    from builder.image.build import BUILD_CAUSES, BuildLog

    log = BuildLog(lambda line: None)
    log.feed({"stream": "Step 4/17 : RUN python3 -m builder.lock.install --plan plan.json\n"})
    log.feed({"stream": "installed 4 conda and 31 pip package(s)\n"})
    # as the world engine said it in CI, committing the 5.8 GB CUDA env layer
    log.feed({"error": "Error processing tar file(exit status 1): write /out/opt/env/lib/libnccl.so.2: "
                       "no space left on device"})
    assert log.cause() is not None and log.cause().endswith("no space left on device")
    assert next(fix for pattern, fix in BUILD_CAUSES if pattern.search(log.cause())).startswith("free disk space")


@pytest.mark.parametrize("text, words", [
    ("a: " + "[" * 200 + "]" * 200, "nested"),
    ("\n".join(["a: &a [1,2,3,4,5,6,7,8,9]"] + [f"{n}: &{n} [" + ",".join([f"*{p}"] * 9) + "]"
                                                for p, n in zip("abcdefg", "bcdefgh", strict=True)]), "alias"),
])
def test_yaml_that_costs_more_than_its_size_is_refused(text: str, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        load_yaml(text, Path("x.yaml"), "spec", UsageError, "fix it")


def test_ordinary_anchors_are_fine() -> None:
    data = load_yaml("base: &b {x: 1}\none: *b\ntwo: *b\n", Path("x.yaml"), "spec", UsageError, "fix it")
    assert data["one"] == data["two"] == {"x": 1}


def test_an_interrupted_onboard_puts_the_old_env_back_and_drops_its_staging(tmp_path: Path) -> None:
    from builder.teams.onboard import recover_interrupted

    prefix = tmp_path / "env"
    backup = tmp_path / ".env.envbuild-old-pid999999999-env"
    backup.mkdir()
    (backup / "old-file").write_text("old")
    _envbuild_marker(backup)
    staging = tmp_path / ".env.envbuild-new-pid999999999-x"
    staging.mkdir()
    (prefix / "conda-meta").mkdir(parents=True)  # half-filled by micromamba when the kill came
    (prefix / "partial").write_text("")
    recover_interrupted(prefix)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env"]
    assert (prefix / "old-file").read_text() == "old"


def _envbuild_marker(prefix: Path) -> None:
    from builder.teams.onboard import EnvMarker

    (prefix / "conda-meta").mkdir(parents=True, exist_ok=True)
    EnvMarker("team", "cpu", "2.13.0", None, "0" * 64, "envbuild").write(prefix)


@pytest.mark.parametrize("backup_is_envbuilds", [False, True])
def test_a_stale_backup_beside_a_users_folder_removes_nothing(tmp_path: Path, backup_is_envbuilds: bool) -> None:
    """A folder named like envbuild's backup next to --prefix NAME, where NAME is the user's own folder:
    what NAME holds is decided first, and nothing of either is removed."""
    from builder.teams.onboard import recover_interrupted

    prefix = tmp_path / "thesis"
    prefix.mkdir()
    (prefix / "chapter1.tex").write_text("precious")
    backup = tmp_path / ".thesis.envbuild-old-pid999999999-env"
    backup.mkdir()
    if backup_is_envbuilds:
        _envbuild_marker(backup)
    with pytest.raises(EnvbuildError, match="refusing to remove either"):
        recover_interrupted(prefix)
    assert (prefix / "chapter1.tex").read_text() == "precious" and backup.is_dir()


def test_a_backup_beside_a_complete_new_env_is_retired(tmp_path: Path) -> None:
    from builder.teams.onboard import EnvMarker, recover_interrupted

    prefix, backup = tmp_path / "env", tmp_path / ".env.envbuild-old-pid999999999-env"
    _envbuild_marker(prefix)
    _envbuild_marker(backup)
    recover_interrupted(prefix)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env"] and EnvMarker.read(prefix) is not None


def test_a_registry_that_drops_the_connection_mid_push_leaves_no_tag_and_claims_no_bytes() -> None:
    """Layers went up, then the registry cut the connection: the push fails in one line, the registry tag
    it made is dropped, and no byte counts are reported for a push that did not finish."""
    from builder.image.build import ImageResult, push_image

    # what the engine writes when the registry closes the connection during a blob upload
    dropped = {"errorDetail": {"message": "write tcp 127.0.0.1:5000: write: broken pipe"},
               "error": "write tcp 127.0.0.1:5000: write: broken pipe"}
    api = RegistryApi([{"status": "Preparing", "id": "5f70bf18a086"}, {"status": "Pushed", "id": "5f70bf18a086"},
                       {"status": "Pushing", "id": "a3ed95caeb02", "progressDetail": {"current": 512, "total": 4096}},
                       dropped])
    client = type("Client", (), {"api": api})()
    result = ImageResult("cpu", "sha256:1", ["team:2.13.0-cpu"], 1, None, None, None, 0.0, "abc")
    with pytest.raises(EnvbuildError, match="broken pipe.*docker login") as failure:
        push_image(result, "127.0.0.1:5000/team", client=client)
    assert "\n" not in str(failure.value) and len(str(failure.value)) < 300
    assert client.api.removed == client.api.tags == ["127.0.0.1:5000/team/team:2.13.0-cpu"]
    assert (result.pushed, result.push_sent_bytes, result.push_reused_bytes) == ([], None, None)


def test_a_full_disk_during_a_layer_group_is_the_cause() -> None:
    """The layered build installs each group in its own RUN: a full engine disk there (the download, or the
    commit of that group's layer) is named with its fix, not the last line of the log."""
    from builder.image.build import BUILD_CAUSES, BuildLog

    log = BuildLog(lambda line: None)
    log.feed({"stream": "Step 9/24 : RUN touch /tmp/envbuild-start  && PYTHONPATH=/opt/envbuild/installer "
                        "/opt/env/bin/python -m builder.lock.install --plan /opt/envbuild/plans/cuda.json\n"})
    log.feed({"stream": "downloading 31 pip package(s)\n"})
    log.feed({"error": "failed to register layer: Error processing tar file(exit status 1): write "
                       "/opt/env/lib/python3.11/site-packages/nvidia/cublas/lib/libcublasLt.so.13: "
                       "no space left on device"})
    assert log.cause() is not None and log.cause().endswith("no space left on device")
    assert next(fix for pattern, fix in BUILD_CAUSES if pattern.search(log.cause())).startswith("free disk space")

"""Signals keep their promises and causes are named right, below the command line, with fake engines:
an interrupted build or matrix stays an interrupt (exit 130/143), a cut --no-cache build takes its
step images with it, two builds of one env tag one at a time, a smoke run past its time is a
timeout (not a lost engine), an image without python says so, a cut lock is named by its own path,
and onboard keeps its staging env and downloads in one folder the next run can remove."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import requests
import urllib3

from builder import proc
from builder.engine import engine_error, is_timeout
from builder.errors import EnvbuildError
from builder.image.build import BuildContext, BuildLog, BuildOptions, build_image, move_tags, tag_lock
from builder.specs.model import load_spec
from builder.specs.target import resolve_targets
from tests.paths import REPO

pytestmark = [pytest.mark.unit, pytest.mark.timeout(120)]


def cpu_target():
    return next(t for t in resolve_targets(load_spec(REPO / "envs" / "pytorch.yaml")) if t.key == "cpu")


class FakeApi:
    """The calls build_image makes, recorded; `build` yields `chunks`, then raises `stop` if given."""

    def __init__(self, chunks=(), stop: BaseException | None = None) -> None:
        self.chunks = list(chunks)
        self.stop = stop
        self.removed_containers: list[str] = []
        self.removed_images: list[str] = []
        self.tags: dict[str, str] = {}
        self.lock = threading.Lock()

    def build(self, **kwargs):
        yield from self.chunks
        if self.stop is not None:
            raise self.stop

    def remove_container(self, container_id: str, force: bool = False) -> None:
        self.removed_containers.append(container_id)

    def remove_image(self, image_id: str, noprune: bool = False) -> None:
        self.removed_images.append(image_id)

    def inspect_image(self, reference: str) -> dict:
        with self.lock:
            if reference in self.tags:
                return {"Id": self.tags[reference], "RepoTags": []}
            if reference in self.tags.values():
                return {"Id": reference, "RepoTags": [t for t, i in self.tags.items() if i == reference]}
        import docker.errors

        raise docker.errors.ImageNotFound(reference)

    def tag(self, image_id: str, repository: str, name: str) -> None:
        time.sleep(0.05)  # room for another build's tagging to interleave
        with self.lock:
            self.tags[f"{repository}:{name}"] = image_id


class FakeClient:
    def __init__(self, api: FakeApi) -> None:
        self.api = api


def stream(*lines: str) -> list[dict]:
    return [{"stream": line + "\n"} for line in lines]


NO_CACHE_STEPS = stream(
    "Step 1/4 : FROM debian", " ---> 1111aaaa2222",
    "Step 2/4 : RUN apt-get update", " ---> Running in c0ffee000001", "Removing intermediate container c0ffee000001",
    " ---> 3333bbbb4444",
    "Step 3/4 : RUN python -m builder.lock.install", " ---> Running in c0ffee000002",
)


def context(tmp_path: Path) -> BuildContext:
    return BuildContext(cpu_target(), tmp_path, "f" * 64, "linux-64", None)  # type: ignore[arg-type]


# --- interrupts ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("stop", [KeyboardInterrupt(), proc.Terminated(signal.SIGTERM)])
def test_an_interrupted_build_stays_an_interrupt_and_cleans_up(tmp_path: Path, stop: BaseException) -> None:
    api = FakeApi(NO_CACHE_STEPS, stop)
    with pytest.raises(KeyboardInterrupt):
        build_image(context(tmp_path), BuildOptions(no_cache=True), client=FakeClient(api))
    assert api.removed_containers == ["c0ffee000001", "c0ffee000002"]
    # the step images this --no-cache build made, newest first; the base image it took stays
    assert api.removed_images == ["3333bbbb4444"]
    assert api.tags == {}


def test_an_ordinary_build_keeps_its_step_images_as_cache(tmp_path: Path) -> None:
    api = FakeApi(NO_CACHE_STEPS, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        build_image(context(tmp_path), BuildOptions(), client=FakeClient(api))
    assert api.removed_images == []


def test_cached_steps_are_not_counted_as_made() -> None:
    log = BuildLog(lambda line: None)
    for chunk in stream("Step 1/3 : FROM x", " ---> 1111aaaa2222", "Step 2/3 : RUN a", " ---> Using cache",
                        " ---> 5555cccc6666", "Step 3/3 : RUN b", " ---> Running in c0ffee000003",
                        " ---> 7777dddd8888"):
        log.feed(chunk)
    assert log.step_images == ["7777dddd8888"]


def test_a_failed_no_cache_build_drops_its_step_images_too(tmp_path: Path) -> None:
    api = FakeApi([*NO_CACHE_STEPS, {"error": "exit 1", "errorDetail": {"message": "exit 1"}}])
    with pytest.raises(EnvbuildError):
        build_image(context(tmp_path), BuildOptions(no_cache=True), client=FakeClient(api))
    assert api.removed_images == ["3333bbbb4444"]


@pytest.mark.parametrize(("stop", "code", "name"), [(KeyboardInterrupt(), 130, "Ctrl-C"),
                                                    (proc.Terminated(signal.SIGTERM), 143, "SIGTERM")])
@pytest.mark.parametrize("command", ["image", "matrix"])
def test_image_and_matrix_exit_130_and_143(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
                                           stop: BaseException, code: int, name: str, command: str) -> None:
    """The interrupt reaches the CLI through the build (image) and through the matrix's per-target
    error handling (matrix), as the README promises."""
    import builder.image.build as build_module
    import builder.teams.matrix as matrix_module
    from builder.cli.commands import run_cli
    from builder.lock.targets import LockResult

    api = FakeApi(NO_CACHE_STEPS, stop)
    monkeypatch.setattr(build_module, "docker_client", lambda *args, **kwargs: FakeClient(api))

    def build(target, **kwargs):
        return build_image(context(Path(os.devnull).parent), BuildOptions(), client=FakeClient(api))

    monkeypatch.setattr("builder.image.pipeline.build_target_image", build)
    monkeypatch.setattr(matrix_module, "build_target_image", build)
    monkeypatch.setattr(matrix_module, "ensure_lock", lambda target, locks: Path("conda-lock.yml"))
    monkeypatch.setattr(matrix_module, "check_targets",
                        lambda targets, **kwargs: [LockResult(t.key, "fresh", Path("x"), 0.0) for t in targets])
    spec = str(REPO / "envs" / "pytorch.yaml")
    args = ["image", spec, "--cuda", "cpu"] if command == "image" else ["matrix", spec, "--cuda", "cpu"]
    assert run_cli(args) == code
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Error:")]
    assert errors == [f"Error: interrupted ({name}); unfinished work was undone, run the command again"]


# --- one env's tags move together --------------------------------------------------------------------

def test_two_builds_of_one_env_leave_its_tags_on_one_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    api = FakeApi()
    tags = ["team:2.13.0-cpu", "team:0123456789ab", "team:latest-lock"]

    def build(image_id: str) -> None:
        with tag_lock("team"):
            move_tags(FakeClient(api), image_id, tags)

    for _ in range(5):
        threads = [threading.Thread(target=build, args=(image,)) for image in ("sha256:aaa", "sha256:bbb")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(set(api.tags.values())) == 1, api.tags
    assert list(tmp_path.iterdir()) == []  # the lock file goes with its last holder


# --- causes named right -------------------------------------------------------------------------------

def read_timeout() -> requests.exceptions.ConnectionError:
    """What docker-py raises when a container's wait runs past its timeout over the unix socket."""
    return requests.exceptions.ConnectionError(
        urllib3.exceptions.ReadTimeoutError(None, "/containers/x/wait", "Read timed out. (read timeout=5)"))


def test_a_wait_past_its_timeout_is_a_timeout_not_a_lost_engine() -> None:
    assert is_timeout(read_timeout())
    assert not is_timeout(requests.exceptions.ConnectionError(urllib3.exceptions.ProtocolError("reset")))
    assert "did not answer in time" in engine_error(read_timeout(), "x").message


def test_a_smoke_run_past_timeout_says_raise_timeout() -> None:
    from builder.image.smoke_run import _wait

    class Container:
        def wait(self, timeout: float) -> None:
            raise read_timeout()

    with pytest.raises(EnvbuildError, match="ran past 5 s and was stopped; raise --timeout"):
        _wait(Container(), "team:2.13.0-cpu", 5)


@pytest.mark.parametrize("said", [b"sh: 1: exec: python: not found\n",
                                  b'exec: "python": executable file not found in $PATH\n'])
def test_an_image_without_python_is_named(said: bytes) -> None:
    from builder.image.smoke_run import _suite_report

    class Container:
        def get_archive(self, path: str):
            import docker.errors

            raise docker.errors.NotFound("no report")

        def logs(self, tail: int) -> bytes:
            return said

    with pytest.raises(EnvbuildError, match="has no `python` on its PATH.*envbuild image"):
        _suite_report(Container(), "alpine:3")


def test_a_cut_lock_is_named_by_its_own_path_before_any_plan_file(tmp_path: Path) -> None:
    import yaml

    from builder.lock.install import export_platform_plan

    url = "https://conda.example/conda-forge/linux-64/x-1.0-0.conda"
    lock = tmp_path / "conda-lock.yml"
    lock.write_text(yaml.safe_dump({
        "version": 1,
        "metadata": {"content_hash": {"linux-64": "0" * 64}, "channels": [{"url": "conda-forge", "used_env_vars": []}],
                     "platforms": ["linux-64"], "sources": ["environment.yml"]},
        "package": [{"name": "x", "version": "1.0", "manager": "conda", "platform": "linux-64", "dependencies": {},
                     "url": url, "hash": {"md5": "", "sha256": "9f86d08188"}, "category": "main", "optional": False}],
    }))
    with pytest.raises(EnvbuildError) as caught:
        export_platform_plan(lock, "linux-64")
    assert str(lock) in caught.value.message and "plan.json" not in caught.value.message
    assert "envbuild lock --force" in caught.value.message


def test_a_full_tmpdir_while_writing_the_context_is_one_short_line(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    import builder.image.pipeline as pipeline

    def full(*args, **kwargs):
        raise shutil.Error([(f"/a/{i}", f"/tmp/ctx/{i}", "[Errno 28] No space left on device: 'x'")
                            for i in range(300)])

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.setattr(pipeline, "make_context", full)
    monkeypatch.setattr(pipeline, "checked_ca_files", lambda target: ())
    with pytest.raises(EnvbuildError) as caught:
        pipeline.build_target_image(cpu_target(), lock_path=tmp_path / "conda-lock.yml")
    assert len(caught.value.message) < 300
    assert "No space left on device" in caught.value.message and "TMPDIR" in caught.value.message
    assert list(tmp_path.iterdir()) == []


# --- onboard's staging ---------------------------------------------------------------------------------

def test_onboard_stages_the_env_and_its_downloads_in_one_owned_folder(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import builder.teams.onboard as onboard

    seen: dict[str, Path] = {}

    def installer(lock_path, platform, prefix, staging, work, timeout, progress=None) -> None:
        seen.update(staging=staging, work=work)
        (staging / "bin").mkdir()
        (work / "cache").mkdir()
        raise EnvbuildError("envbuild's installer failed: a download broke")

    monkeypatch.setattr(onboard, "_run_own_installer", installer)
    marker = onboard.EnvMarker("team", "cpu", "2.13.0", None, "0" * 64, "envbuild")
    with pytest.raises(EnvbuildError):
        onboard.install_environment(tmp_path / "lock.yml", "linux-64", tmp_path / "env", None, marker)
    assert seen["staging"].parent == seen["work"].parent
    assert seen["staging"].parent.name.startswith(f".env.envbuild-new-pid{os.getpid()}-")
    assert list(tmp_path.iterdir()) == []


def test_what_a_killed_onboard_left_goes_whole(tmp_path: Path) -> None:
    from builder.teams.onboard import recover_interrupted

    left = tmp_path / ".env.envbuild-new-pid999999999-abcd"
    (left / "env" / "lib").mkdir(parents=True)
    (left / "work" / "cache" / "pkgs").mkdir(parents=True)
    (left / "work" / "plan.json").write_text("{}")
    recover_interrupted(tmp_path / "env")
    assert list(tmp_path.iterdir()) == []


# --- every Error line fits ------------------------------------------------------------------------------

def test_a_long_error_line_keeps_its_cause_and_its_fix() -> None:
    from builder.cli.commands import ERROR_LINE_LIMIT, fit_error_line

    line = fit_error_line("Error: cpu: build failed: " + "x" * 1000 + "; fix: free disk space\n  | a log line")
    first, _, rest = line.partition("\n")
    assert len(first) <= ERROR_LINE_LIMIT and first.startswith("Error: cpu: build failed: ")
    assert first.endswith("; fix: free disk space") and rest == "  | a log line"
    assert fit_error_line("Error: short") == "Error: short"


def test_an_unchanged_env_still_clears_what_a_killed_onboard_left(tmp_path: Path) -> None:
    import hashlib

    from builder.teams.onboard import MARKER, EnvMarker, LocalEnvOptions, TargetChoice, onboard_local

    target = cpu_target()
    lock = tmp_path / "conda-lock.yml"
    lock.write_text("version: 1\n")
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()
    envs = tmp_path / "envs"
    prefix = envs / "env"
    (prefix / MARKER).parent.mkdir(parents=True)
    EnvMarker(target.name, target.key, target.torch, None, digest, "envbuild").write(prefix)
    left = envs / ".env.envbuild-new-pid999999999-abcd"
    (left / "work" / "cache").mkdir(parents=True)
    result = onboard_local(TargetChoice(target, "asked", "runs"), lock, prefix, platform="linux-64", tool=None,
                           gpus_here=0, options=LocalEnvOptions(smoke=False, kernel_dir=tmp_path / "kernels"))
    assert result.status == "unchanged"
    assert sorted(p.name for p in envs.iterdir()) == ["env"]

"""`envbuild smoke`: the in-image suite (`python -m smoke`) run in a container or in this Python.

The container is created, started, waited on with a timeout and always removed. GPUs are asked
for through device_requests on the path this engine takes (builder/gpu_access.py): CDI device names
(nvidia.com/gpu=...) where it reads CDI specs listing NVIDIA GPUs, else the `gpu` capability request
of `--gpus`. An engine that refuses them at start (no NVIDIA runtime, no CDI spec for a device) is
reported in one line naming the cause and, unless GPUs are required, followed by a CPU-only run.

The command line imports this module at start-up (its container options are shared flags), so the
engine adapter, the GPU readings and the renderer are imported by the functions that use them: every
other command would pay for them (about 80 ms) otherwise.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from builder import proc
from builder.errors import EnvbuildError, UsageError
from builder.events import Progress, ignore, read_event_line
from builder.host.mig import check_mig_limit, host_mig_limit
from smoke.report import SmokeReport

if TYPE_CHECKING:  # the decision and its data load only when a run asks for GPUs
    from builder.gpu_access import GpuAccess
    from builder.host.gpuinfo import GpuInfo

REPORT_DIR = "/tmp/envbuild-smoke"
SMOKE_RUN = "smoke"  # the io.envbuild.run label of the suite's containers


# The suite's switch for its progress lines (smoke/cli.py's PROGRESS_ENV: smoke/ cannot be imported here).
PROGRESS_ENV = "ENVBUILD_PROGRESS"
FOLLOW_GRACE_S = 5.0  # how long the container's log stream may take to end once the container did


@dataclass(frozen=True)
class Expected:
    """The torch version and CUDA (X.Y or cpu) the suite holds an image to; None: not checked."""

    torch: str | None = None
    cuda: str | None = None


@dataclass(frozen=True)
class SmokeRun:
    """One run of the suite as the host reads it: the suite's own report (`smoke.report.SmokeReport`, the
    one model the image writes and the host parses) plus what only the host knows: how it ran, how long."""

    report: SmokeReport
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    TABLE_COLUMNS = ("check", "status", "seconds", "reason")

    @classmethod
    def from_json(cls, data: dict, notes: list[str], seconds: float) -> SmokeRun:
        try:
            report = SmokeReport.from_dict(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise EnvbuildError(f"the smoke suite wrote a report envbuild cannot read ({type(exc).__name__}: {exc})"
                                ) from None
        return cls(report, notes, seconds)

    @property
    def summary(self) -> dict[str, int]:
        return self.report.summary.to_dict()

    @property
    def checks(self) -> list[dict]:
        return [check.to_dict() for check in self.report.checks]

    @property
    def failed(self) -> int:
        return self.report.summary.failed

    def as_dict(self) -> dict:
        return {**self.report.to_dict(), "notes": self.notes, "seconds": round(self.seconds, 1)}

    def table_rows(self) -> list[list[str]]:
        return [[c.name, c.status, f"{c.seconds:.1f}", c.reason] for c in self.report.checks]

    def summary_line(self) -> str:
        s = self.report.summary
        return f"{s.passed} passed, {s.failed} failed, {s.skipped} skipped"


@dataclass(frozen=True)
class GpuRequest:
    count: int | None  # None: none asked; -1: all
    device_ids: tuple[str, ...] = ()


MAX_GPUS = 256  # more than any one host has; a larger count is a typo, not a request


# docker's `--gpus device=...` entries: an index, a GPU or MIG UUID, or a MIG instance as gpu:mig.
DEVICE_ID = re.compile(r"^(?:[0-9]+(?::[0-9]+)?|(?:GPU|MIG)-[0-9A-Za-z-]+)$")


def parse_gpus(value: str | None) -> GpuRequest:
    """`all`, `N`, `device=ID[,ID...]` (as `docker run --gpus`), or `auto:N` (the N GPUs with the most
    free memory, by NVML on this host).

    Counts the engine could never satisfy are refused here, before anything is built or started:
    0 (leave --gpus out for a CPU run), more than this host's GPUs when NVML can count them."""
    if value in (None, "", "none"):
        return GpuRequest(None)
    if value == "all":
        return GpuRequest(-1)
    if value.startswith("device="):
        return _device_request(value)
    count_text = value[5:] if value.startswith("auto:") else value
    if not count_text.isdigit():
        raise UsageError(f"--gpus {value!r}: use all, a count (1, 2, ...), device=ID[,ID...], or auto:N")
    wanted = int(count_text)
    if not 1 <= wanted <= MAX_GPUS:
        raise UsageError(f"--gpus {value}: ask for 1 to {MAX_GPUS} GPUs, or all; leave --gpus out for a CPU-only run")
    from builder.host.gpuinfo import gpus_by_free_memory

    ranked = gpus_by_free_memory()
    if value.startswith("auto:"):
        return _most_free(value, wanted, ranked)
    if ranked and wanted > len(ranked):
        raise UsageError(f"--gpus {value}: this host has {len(ranked)} GPU(s); ask for at most {len(ranked)}, or all")
    return GpuRequest(wanted)


def _device_request(value: str) -> GpuRequest:
    ids = tuple(entry.strip() for entry in value[7:].split(","))
    if not all(DEVICE_ID.match(entry) for entry in ids):
        raise UsageError(f"--gpus {value!r}: list GPUs by index or UUID, e.g. device=0,1 or device=GPU-<uuid>")
    return GpuRequest(None, ids)


def _most_free(value: str, wanted: int, ranked: list[GpuInfo]) -> GpuRequest:
    """`auto:N`: the N GPUs with the most free memory, by UUID (an index can change between boots)."""
    if len(ranked) < wanted:
        raise UsageError(f"--gpus {value}: this host shows {len(ranked)} GPU(s) through NVML; "
                         f"ask for at most {len(ranked)}" if ranked else
                         f"--gpus {value}: NVML shows no GPU on this host; use --gpus all or a count")
    return GpuRequest(None, tuple(gpu.uuid or str(gpu.index) for gpu in ranked[:wanted]))


def check_gpu_request(container: ContainerOptions, require_gpus: int) -> None:
    """`--require-gpus N` without GPUs in the container would fail every GPU check for the wrong reason."""
    if require_gpus and container.gpus.count is None and not container.gpus.device_ids:
        raise UsageError(f"--require-gpus {require_gpus}: the container gets no GPUs; add --gpus all "
                         f"(or --gpus {require_gpus})")
    if require_gpus and container.gpus.count not in (None, -1) and container.gpus.count < require_gpus:
        raise UsageError(f"--require-gpus {require_gpus} with --gpus {container.gpus.count}: ask for at least "
                         f"{require_gpus} GPUs, or --gpus all")
    if require_gpus > 1:  # one GPU is one MIG instance too; past that, MIG mode sets the limit
        check_mig_limit(require_gpus, host_mig_limit())


def suite_args(require_gpus: int, expect_torch: str | None, expect_cuda: str | None,
               only: str | None, require_compile: bool = False) -> list[str]:
    args = ["--json", f"{REPORT_DIR}/report.json"]
    if require_compile:  # an image states it itself (ENVBUILD_REQUIRE_COMPILE); a local env is told here
        args.append("--require-compile")
    if require_gpus:
        args += ["--require-gpus", str(require_gpus)]
    if expect_torch:
        args += ["--expect-torch", expect_torch]
    if expect_cuda:
        args += ["--expect-cuda", expect_cuda]
    if only:
        args += ["--only", only]
    return args


def run_local(require_gpus: int = 0, expect_torch: str | None = None, expect_cuda: str | None = None,
              only: str | None = None, timeout: float = 900, python: Path | None = None,
              require_compile: bool = False, progress: Progress = ignore) -> SmokeRun:
    """The suite in this Python, or in another environment's interpreter (`python`): that one gets a
    copy of the suite on PYTHONPATH and nothing else of this Python or the user's site-packages,
    so it is tested as it is. `progress` hears each check start and end."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        args = [a.replace(REPORT_DIR, folder)
                for a in suite_args(require_gpus, expect_torch, expect_cuda, only, require_compile)]
        from builder.image.render import smoke_dir
        from builder.image.smoke_data import write_smoke_data

        # A copy of the suite with its compatibility data (the source tree has none: one source of truth).
        suite = Path(folder) / "suite" / "smoke"
        shutil.copytree(smoke_dir(), suite, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        write_smoke_data(suite)
        env = {key: value for key, value in os.environ.items() if key not in ("PYTHONHOME", "PYTHONSTARTUP")}
        if python is None:  # this Python as it is, the copy of the suite first
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(suite.parent), os.environ.get("PYTHONPATH")]))
        else:
            env.update(PYTHONPATH=str(suite.parent), PYTHONNOUSERSITE="1")
        if progress is not ignore:
            env[PROGRESS_ENV] = "1"
        try:
            process = proc.run([str(python or sys.executable), "-m", "smoke", *args], timeout=timeout,
                               what="the smoke suite", env=env, stderr_line=_events_to(progress))
        except proc.ProcessTimeout as exc:
            raise EnvbuildError(f"{exc}; raise --timeout") from None
        except OSError as exc:
            raise EnvbuildError(f"{python}: cannot run the smoke suite with it ({exc.strerror})") from None
        report = Path(folder) / "report.json"
        if not report.is_file():
            raise EnvbuildError("the smoke suite wrote no report: " + suite_said(process.stderr or process.stdout))
        return SmokeRun.from_json(json.loads(report.read_text()), [], time.monotonic() - started)


def _device_requests(request: GpuRequest, access: GpuAccess | None = None) -> list:
    """The engine's device requests for `request`, on the path `access` chose: CDI names
    (driver "cdi", as `docker run --device nvidia.com/gpu=all` sends) or the `gpu` capability (`--gpus`)."""
    from docker.types import DeviceRequest

    if request.count is None and not request.device_ids:
        return []
    if access is not None and access.uses_cdi:
        from builder.gpu_access import CDI, cdi_device_names

        return [DeviceRequest(driver=CDI, device_ids=cdi_device_names(request.count, request.device_ids))]
    if request.device_ids:
        return [DeviceRequest(device_ids=list(request.device_ids), capabilities=[["gpu"]])]
    if request.count is not None:
        return [DeviceRequest(count=request.count, capabilities=[["gpu"]])]
    return []


def _read_report(container) -> dict | None:
    from builder.engine import engine_failures

    try:
        stream, _ = container.get_archive(f"{REPORT_DIR}/report.json")
    except engine_failures():  # NotFound: the suite wrote none
        return None
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
        member = archive.extractfile("report.json")
        return json.loads(member.read()) if member else None


@dataclass(frozen=True)
class ContainerOptions:
    """How the suite's container is started, checked before anything runs."""

    gpus: GpuRequest = GpuRequest(None)
    shm_size: str = "1g"
    ulimits: tuple[tuple[str, int, int], ...] = ()  # (name, soft, hard)


SIZE = re.compile(r"^[0-9]+[bkmg]?$", re.IGNORECASE)


def container_options(gpus: str | None = None, shm_size: str = "1g",
                      ulimits: tuple[str, ...] = ()) -> ContainerOptions:
    """`--gpus`, `--shm-size` and `--ulimit` as given on the command line, or a one-line UsageError."""
    if not SIZE.match(shm_size):
        raise UsageError(f"--shm-size {shm_size!r}: give bytes or a size like 512m or 2g")
    limits = []
    for item in ulimits:
        name, _, value = item.partition("=")
        soft, _, hard = value.partition(":")
        try:
            limits.append((name, int(soft), int(hard or soft)))
        except ValueError:
            raise UsageError(f"--ulimit {item!r}: write NAME=SOFT[:HARD] in numbers (-1 for unlimited), "
                             "e.g. stack=67108864") from None
        if not name:
            raise UsageError(f"--ulimit {item!r}: write NAME=SOFT[:HARD], e.g. stack=67108864")
    return ContainerOptions(parse_gpus(gpus), shm_size, tuple(limits))


def run_in_image(image: str, *, container: ContainerOptions = ContainerOptions(), require_gpus: int = 0,
                 expect: Expected = Expected(), only: str | None = None, timeout: float = 900, client=None,
                 progress: Progress = ignore) -> SmokeRun:
    """The suite in a container of `image`; `progress` hears each check start and end (read from the
    container's stderr as it runs)."""
    from docker.types import Ulimit

    from builder.engine import container_labels, docker_client, engine_error, engine_failures, reap_stale_containers

    check_gpu_request(container, require_gpus)
    client = client or docker_client()
    reap_stale_containers(client, SMOKE_RUN)
    limits = [Ulimit(name=name, soft=soft, hard=hard) for name, soft, hard in container.ulimits]
    notes: list[str] = []
    started = time.monotonic()
    args = ["sh", "-c", f"mkdir -p {REPORT_DIR} && exec python -m smoke " + " ".join(
        suite_args(require_gpus, expect.torch, expect.cuda, only))]
    watched = {"environment": {PROGRESS_ENV: "1"}} if progress is not ignore else {}
    requests = _device_requests(container.gpus, gpu_access_of(client, container.gpus))
    while True:
        try:
            created = client.containers.create(image, command=args, device_requests=requests or None,
                                               shm_size=container.shm_size, ulimits=limits or None, detach=True,
                                               labels=container_labels(SMOKE_RUN), **watched)
        except engine_failures() as exc:
            raise engine_error(exc, f"{image}: the smoke container") from None
        try:
            refused = _start(created, image, require_gpus, requests)
            if refused:
                notes.append(refused)
                requests = []
                continue
            follower = _follow(created, progress) if watched else None
            _wait(created, image, timeout)
            if follower is not None:
                follower.join(timeout=FOLLOW_GRACE_S)  # the last checks' events come before the table
            return SmokeRun.from_json(_suite_report(created, image), notes, time.monotonic() - started)
        finally:
            try:
                created.remove(force=True)
            except engine_failures():
                pass  # the engine went away; the next run reaps it by its labels


def _events_to(progress: Progress):
    """A stderr line consumer that hands the suite's events (PROGRESS_ENV) to `progress`; None when no one listens."""
    if progress is ignore:
        return None

    def hear(line: str) -> None:
        event = read_event_line(line.strip())
        if event is not None:
            progress(event)
    return hear


def _follow(created, progress: Progress):
    """The container's stderr read as it comes, in a thread that ends with the container (returned, started),
    its events told."""
    import threading  # only a watched run follows the logs

    from builder.engine import engine_failures

    hear = _events_to(progress)
    assert hear is not None

    def follow() -> None:
        partial = b""
        try:
            for chunk in created.logs(stream=True, follow=True, stdout=False, stderr=True):
                *lines, partial = (partial + chunk).split(b"\n")
                for line in lines:
                    hear(line.decode(errors="replace"))
        except engine_failures():
            pass  # the engine went away: the wait below says so

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    return thread


def gpu_access_of(client, request: GpuRequest) -> GpuAccess | None:
    """The path this engine gives GPUs (CDI or the `gpu` capability); None when no GPU is asked for."""
    if request.count is None and not request.device_ids:
        return None
    from builder.gpu_access import client_gpu_access

    return client_gpu_access(client)


def _start(created, image: str, require_gpus: int, requests: list) -> str | None:
    """Start the suite's container. When the engine refuses the GPUs asked (no NVIDIA runtime, a CDI
    device no spec names) and none are required: the note saying why, and the caller runs the CPU
    checks without them; None once started."""
    from builder.engine import engine_error, engine_failures
    from builder.gpu_access import gpu_refusal

    try:
        created.start()
    except engine_failures() as exc:
        refusal = gpu_refusal(str(exc), [name for request in requests for name in request.get("DeviceIDs") or []]
                              ) if requests else None
        if refusal is not None:
            if require_gpus:
                raise EnvbuildError(refusal.required(require_gpus)) from None
            return refusal.note
        if "rlimit" in str(exc):
            raise EnvbuildError(f"the engine refused a --ulimit: {exc}; drop it on this host") from None
        raise engine_error(exc, f"{image}: the smoke container's start") from None
    return None


def _wait(created, image: str, timeout: float) -> None:
    from builder.engine import engine_error, engine_failures, is_timeout

    try:
        created.wait(timeout=timeout)
    except engine_failures() as exc:
        if is_timeout(exc):  # the suite is still running: the container goes with the caller's finally
            raise EnvbuildError(f"{image}: the smoke suite ran past {timeout:.0f} s and was stopped; "
                                "raise --timeout") from None
        raise engine_error(exc, f"{image}: the smoke run") from None


SAID_CHARS = 200


def suite_said(output: str) -> str:
    """What a suite that wrote no report said: its error line when it has one (argparse's usage text
    before it is noise), else its last lines; short enough for an Error line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line.lower()]
    said = errors[-1] if errors else " | ".join(lines[-3:]) or "no output"
    return said if len(said) <= SAID_CHARS else said[:SAID_CHARS - 3] + "..."


NO_PYTHON = re.compile(r"python: (?:not found|No such file)|exec: \W?python\W?: executable file not found")


def _suite_report(created, image: str) -> dict:
    data = _read_report(created)
    if data is None:
        logs = created.logs(tail=10).decode(errors="replace").strip().splitlines()
        if NO_PYTHON.search("\n".join(logs)):
            raise EnvbuildError(f"{image}: has no `python` on its PATH, so the smoke suite cannot run in it (it runs "
                                "the image's own python with torch); smoke-test an image `envbuild image` built")
        raise EnvbuildError(f"{image}: the smoke suite wrote no report: " + suite_said("\n".join(logs)))
    return data


def image_expectations(image: str, client=None) -> tuple[str | None, str | None]:
    """The torch and CUDA an envbuild image says it has (its labels)."""
    from builder.engine import docker_client, engine_error, engine_failures, is_connection_loss

    client = client or docker_client()
    try:
        labels = client.api.inspect_image(image)["Config"].get("Labels") or {}
    except engine_failures() as exc:
        if is_connection_loss(exc):
            raise engine_error(exc, f"{image}: inspecting the image") from None
        raise EnvbuildError(f"no image {image!r} on this engine; build it with `envbuild image`, "
                            "or `docker pull` it") from None
    return labels.get("io.envbuild.torch"), labels.get("io.envbuild.cuda")


def run_labelled_image(image: str, *, container: ContainerOptions, require_gpus: int = 0,
                       expect: Expected = Expected(), only: str | None = None, timeout: float = 900,
                       progress: Progress = ignore) -> SmokeRun:
    """run_in_image expecting the torch and CUDA given, else those the image's labels name."""
    labelled_torch, labelled_cuda = image_expectations(image)
    return run_in_image(image, container=container, require_gpus=require_gpus,
                        expect=Expected(expect.torch or labelled_torch, expect.cuda or labelled_cuda),
                        only=only, timeout=timeout, progress=progress)

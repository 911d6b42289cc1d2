"""The smoke container's GPU requests on each path (CDI names or the `gpu` capability), and an engine's
refusal of them at start: one line naming the cause, a CPU-only run unless GPUs are required, and the
container removed either way. The engine here is Docker 20.10 without GPUs and belongs to the system
tests, so these replay engine answers: /version and /info as engines give them
(tests/fixtures/engine-info/gpu_access_cases.yaml) and the refusals' texts (builder/data/gpu_access.yaml)."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
import requests
import yaml
from docker.errors import APIError

from builder.errors import EnvbuildError, UsageError
from builder.gpu_access import EngineGpuFacts, decide_gpu_access
from builder.image.smoke_run import ContainerOptions, GpuRequest, _device_requests, parse_gpus, run_in_image
from smoke.report import CheckResult, SmokeReport
from tests.paths import FIXTURES

pytestmark = pytest.mark.unit

CASES = {case["name"]: case for case in
         yaml.safe_load((FIXTURES / "engine-info" / "gpu_access_cases.yaml").read_text())["cases"]}
ON_CDI = decide_gpu_access(EngineGpuFacts("28.2.2", "1.50", ("/etc/cdi",), ("nvidia.com/gpu=all",)))
NO_CDI = decide_gpu_access(EngineGpuFacts("20.10.24+dfsg1", "1.41", None, None))


@pytest.mark.parametrize(("gpus", "access", "wanted"), [
    ("all", ON_CDI, {"Driver": "cdi", "Count": 0, "DeviceIDs": ["nvidia.com/gpu=all"], "Capabilities": [],
                     "Options": {}}),
    ("2", ON_CDI, {"Driver": "cdi", "Count": 0, "DeviceIDs": ["nvidia.com/gpu=0", "nvidia.com/gpu=1"],
                   "Capabilities": [], "Options": {}}),
    ("device=GPU-e9050893-7feb-1b73-f785-1e25e3d12837", ON_CDI,
     {"Driver": "cdi", "Count": 0, "DeviceIDs": ["nvidia.com/gpu=GPU-e9050893-7feb-1b73-f785-1e25e3d12837"],
      "Capabilities": [], "Options": {}}),
    ("all", NO_CDI, {"Driver": "", "Count": -1, "DeviceIDs": [], "Capabilities": [["gpu"]], "Options": {}}),
    ("device=0,2", NO_CDI, {"Driver": "", "Count": 0, "DeviceIDs": ["0", "2"], "Capabilities": [["gpu"]],
                            "Options": {}}),
])
def test_device_requests_follow_the_engines_path(gpus: str, access, wanted: dict) -> None:
    # moby's CDI driver refuses a request with a Count or Options (daemon/cdi.go injectCDIDevices)
    assert _device_requests(parse_gpus(gpus), access) == [wanted]
    assert _device_requests(GpuRequest(None), ON_CDI) == []


@pytest.mark.parametrize("value", ["device=", "device=0,,1", "device=gpu0", "device=GPU-x;rm"])
def test_a_bad_device_list_is_one_usage_line(value: str) -> None:
    with pytest.raises(UsageError, match="^--gpus .*device=0,1"):
        parse_gpus(value)


def test_device_entries_as_docker_takes_them() -> None:
    assert parse_gpus("device=0,1:2,MIG-4f8d2a1c-7e9b").device_ids == ("0", "1:2", "MIG-4f8d2a1c-7e9b")


def _api_error(status: int, engine_said: str) -> APIError:
    """What the SDK raises for an engine's refusal: requests' HTTPError wrapped, the engine's text as explanation."""
    response = requests.Response()
    response.status_code, response.reason = status, "Internal Server Error"
    response.url = "http+docker://localhost/v1.50/containers/4f0c/start"
    return APIError(requests.HTTPError(response=response), response=response, explanation=engine_said)


def _report_archive() -> list[bytes]:
    data = json.dumps(SmokeReport([CheckResult("env.import_torch", "passed", "torch imports", 1.0)]).to_dict())
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        member = tarfile.TarInfo("report.json")
        member.size = len(data)
        archive.addfile(member, io.BytesIO(data.encode()))
    return [buffer.getvalue()]


class ReplayedContainer:
    def __init__(self, engine: ReplayedEngine, refusal: APIError | None) -> None:
        self.engine, self.refusal = engine, refusal

    def start(self) -> None:
        if self.refusal is not None:
            raise self.refusal

    def wait(self, timeout: float) -> dict:
        return {"StatusCode": 0}

    def get_archive(self, path: str) -> tuple[list[bytes], dict]:
        return _report_archive(), {}

    def remove(self, force: bool) -> None:
        self.engine.removed += 1

    def logs(self, stream: bool, follow: bool, stdout: bool, stderr: bool):
        """The suite's stderr as the engine streams it: chunks that cut lines anywhere."""
        assert (stream, follow, stdout, stderr) == (True, True, False, True)
        text = "".join(self.engine.said).encode()
        return iter([text[i:i + 7] for i in range(0, len(text), 7)])


class NoStaleContainers:
    def containers(self, all: bool, filters: dict) -> list:  # the SDK's keyword
        return []


class ReplayedEngine:
    """Answers as the engine of `case` did; the start of a GPU container is refused with `refusal`."""

    def __init__(self, case: dict, refusal: APIError | None) -> None:
        self.case, self.refusal = case, refusal
        self.created: list[list | None] = []
        self.environments: list[dict | None] = []
        self.said: list[str] = []  # what the suite in its containers writes on stderr
        self.removed = 0
        self.api = NoStaleContainers()
        self.containers = self  # client.containers.create

    def version(self) -> dict:
        return self.case["version"]

    def info(self) -> dict:
        return self.case["info"]

    def create(self, image: str, **options) -> ReplayedContainer:
        self.created.append(options["device_requests"])
        self.environments.append(options.get("environment"))
        return ReplayedContainer(self, self.refusal if options["device_requests"] else None)



def test_a_cdi_engine_gets_cdi_names_and_a_refusal_names_its_cause() -> None:
    engine = ReplayedEngine(CASES["docker-28-default-with-nvidia-spec"], _api_error(
        500, "CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=all"))
    run = run_in_image("pytorch:2.14.1-cuda13.0", container=ContainerOptions(parse_gpus("all")), client=engine)
    assert engine.created[0] == [{"Driver": "cdi", "Count": 0, "DeviceIDs": ["nvidia.com/gpu=all"],
                                  "Capabilities": [], "Options": {}}]
    assert engine.created[1] is None  # the CPU-only run after it
    assert run.notes == ["the engine has CDI on but no CDI spec names nvidia.com/gpu=all: ran the CPU checks only"]
    assert engine.removed == 2  # the refused container too


def test_required_gpus_refused_stop_the_run_with_one_line_and_remove_the_container() -> None:
    engine = ReplayedEngine(CASES["docker-28-default-with-nvidia-spec"], _api_error(
        500, "CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=0"))
    with pytest.raises(EnvbuildError) as caught:
        run_in_image("pytorch:2.14.1-cuda13.0", container=ContainerOptions(parse_gpus("1")), require_gpus=1,
                     client=engine)
    assert caught.value.message.startswith(
        "1 GPU(s) required but the engine has CDI on but no CDI spec names nvidia.com/gpu=0 (run `sudo nvidia-ctk")
    assert "\n" not in caught.value.message and engine.removed == 1


def test_the_engine_here_gets_the_gpu_capability_request_and_says_so_as_before() -> None:
    engine = ReplayedEngine(CASES["docker-20.10-here"], _api_error(
        500, 'could not select device driver "" with capabilities: [[gpu]]'))
    run = run_in_image("pytorch:2.14.1-cuda13.0", container=ContainerOptions(parse_gpus("all")), client=engine)
    assert engine.created[0] == [{"Driver": "", "Count": -1, "DeviceIDs": [], "Capabilities": [["gpu"]],
                                  "Options": {}}]
    assert run.notes == ["no NVIDIA container runtime on this engine: ran the CPU checks only"]
    assert engine.removed == 2


def test_a_cpu_run_does_not_ask_the_engine_about_gpus() -> None:
    engine = ReplayedEngine({"version": None, "info": None}, None)
    run = run_in_image("pytorch:2.14.1-cpu", client=engine)
    assert engine.created == [None] and run.notes == [] and engine.removed == 1


def test_a_watched_run_hears_each_check_from_the_containers_stderr_before_it_returns() -> None:
    from builder.events import LINE_PREFIX, Event

    engine = ReplayedEngine({"version": None, "info": None}, None)
    engine.said = [
        "Traceback noise the suite did not write as an event\n",
        LINE_PREFIX + json.dumps({"subject": "env.import_torch", "state": "start", "text": "importing torch"}) + "\n",
        LINE_PREFIX + json.dumps({"subject": "env.import_torch", "state": "done", "text": "passed in 1.0 s"}) + "\n",
    ]
    heard: list[Event] = []
    run_in_image("pytorch:2.14.1-cpu", client=engine, progress=heard.append)
    assert engine.environments == [{"ENVBUILD_PROGRESS": "1"}]
    assert heard == [Event("env.import_torch", "start", "importing torch"),
                     Event("env.import_torch", "done", "passed in 1.0 s")]
    quiet = ReplayedEngine({"version": None, "info": None}, None)
    run_in_image("pytorch:2.14.1-cpu", client=quiet)
    assert quiet.environments == [None]  # nobody listens: the suite is not asked, its logs not followed

"""onboard's `docker run` line asks for GPUs the way this host's engine takes them."""

from __future__ import annotations

import pytest

from builder.gpu_access import EngineGpuFacts, decide_gpu_access
from builder.teams.onboard import docker_run_line

pytestmark = pytest.mark.unit


def test_the_run_line_uses_cdi_names_where_the_engine_lists_nvidia_devices() -> None:
    on_cdi = decide_gpu_access(EngineGpuFacts("28.2.2", "1.50", ("/etc/cdi", "/var/run/cdi"),
                                              ("nvidia.com/gpu=0", "nvidia.com/gpu=all")))
    assert docker_run_line("reg/pytorch:2.14.1-cuda13.0", "13.0", on_cdi) == (
        'docker run --rm -it --device nvidia.com/gpu=all --shm-size 1g -v "$PWD":/work -w /work '
        "reg/pytorch:2.14.1-cuda13.0")


@pytest.mark.parametrize("facts", [EngineGpuFacts("20.10.24+dfsg1", "1.41", None, None),
                                   EngineGpuFacts("28.2.2", "1.50", ("/etc/cdi",), ())])
def test_the_run_line_keeps_gpus_all_elsewhere(facts: EngineGpuFacts) -> None:
    line = docker_run_line("reg/pytorch:2.14.1-cuda13.0", "13.0", decide_gpu_access(facts))
    assert " --gpus all " in line and "--device" not in line
    assert "--gpus" not in docker_run_line("pytorch:2.14.1-cpu", None, decide_gpu_access(facts))

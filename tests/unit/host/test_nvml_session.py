"""The one NVML session helper: init for a block, shutdown always, None (with the reason) without NVML.

No driver here, so a stand-in `pynvml` module records the calls; the real library is used on GPU hosts.
"""

from __future__ import annotations

import sys
import types

import pytest

from builder.host.gpuinfo import nvml_snapshot
from smoke.driver import read_driver
from smoke.nvml import nvml_answers, nvml_session

pytestmark = pytest.mark.unit


class NVMLError(Exception):
    """nvidia-ml-py's base class: what callers catch."""


class NVMLError_LibraryNotFound(NVMLError):  # nvidia-ml-py's own name
    pass


class NVMLError_GpuIsLost(NVMLError):  # nvidia-ml-py's own name
    pass


def stand_in(monkeypatch: pytest.MonkeyPatch, init_fails: bool = False) -> list[str]:
    calls: list[str] = []
    module = types.ModuleType("pynvml")

    def init() -> None:
        calls.append("init")
        if init_fails:
            raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")

    module.NVMLError = NVMLError  # type: ignore[attr-defined]
    module.nvmlInit = init  # type: ignore[attr-defined]
    module.nvmlShutdown = lambda: calls.append("shutdown")  # type: ignore[attr-defined]
    module.nvmlSystemGetCudaDriverVersion = lambda: 13000  # type: ignore[attr-defined]
    module.nvmlSystemGetDriverVersion = lambda: b"580.95.05"  # type: ignore[attr-defined]
    module.nvmlDeviceGetCount = lambda: (_ for _ in ()).throw(NVMLError_GpuIsLost("GPU is lost"))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return calls


def test_session_shuts_down_even_when_the_block_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = stand_in(monkeypatch)
    with pytest.raises(ValueError), nvml_session() as nvml:
        assert nvml is sys.modules["pynvml"]
        raise ValueError("a query went wrong")
    assert calls == ["init", "shutdown"]


def test_session_without_a_driver_is_none_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = stand_in(monkeypatch, init_fails=True)
    notes: list[str] = []
    with nvml_session(notes) as nvml:
        assert nvml is None
    assert calls == ["init"]  # nothing to shut down
    assert notes == ["NVML: NVMLError_LibraryNotFound: NVML Shared Library Not Found"]
    assert nvml_answers() is False


def test_session_without_nvidia_ml_py(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    notes: list[str] = []
    with nvml_session(notes) as nvml:
        assert nvml is None
    assert notes == ["NVML: nvidia-ml-py is not installed"]


def test_driver_reading_and_snapshot_go_through_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = stand_in(monkeypatch)
    reading = read_driver()
    assert (reading.source, reading.driver_version, reading.cuda) == ("nvml", "580.95.05", (13, 0))
    assert nvml_snapshot() is None  # the device count failed: no half snapshot
    assert calls == ["init", "shutdown", "init", "shutdown"]

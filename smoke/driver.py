"""The host driver's maximum CUDA version, from NVML (nvidia-ml-py) or else from `nvidia-smi`.

No torch here. `pynvml` is imported only when present: images need not carry nvidia-ml-py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field

from smoke.compat import driver_cuda_from_nvml
from smoke.nvsmi import SmiGpu, parse_nvidia_smi

NVIDIA_SMI_TIMEOUT_S = 30.0
NVIDIA_SMI_TIMEOUT_ENV = "ENVBUILD_NVIDIA_SMI_TIMEOUT"  # a hung driver costs this long (tests shorten it)


def _smi_timeout() -> float:
    try:
        return max(0.1, float(os.environ.get(NVIDIA_SMI_TIMEOUT_ENV, NVIDIA_SMI_TIMEOUT_S)))
    except ValueError:
        return NVIDIA_SMI_TIMEOUT_S


@dataclass(frozen=True)
class DriverReading:
    source: str | None  # "nvml", "nvidia-smi" or None when neither answered
    cuda: tuple[int, int] | None
    driver_version: str | None
    notes: list[str] = field(default_factory=list)
    # The GPU rows of nvidia-smi's table when it was the source (NVML callers read GPUs themselves).
    smi_gpus: list[SmiGpu] = field(default_factory=list)

    @property
    def cuda_text(self) -> str | None:
        return None if self.cuda is None else f"{self.cuda[0]}.{self.cuda[1]}"


def read_driver() -> DriverReading:
    notes: list[str] = []
    reading = _from_nvml(notes)
    if reading is None:
        reading = _from_nvidia_smi(notes)
    return reading or DriverReading(None, None, None, notes)


def _from_nvml(notes: list[str]) -> DriverReading | None:
    try:
        import pynvml
    except ImportError:
        notes.append("NVML: nvidia-ml-py is not installed")
        return None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound without a driver, others when it is broken
        notes.append(f"NVML: {type(exc).__name__}: {exc}")
        return None
    try:
        cuda = driver_cuda_from_nvml(int(pynvml.nvmlSystemGetCudaDriverVersion()))
        version = pynvml.nvmlSystemGetDriverVersion()
        if isinstance(version, bytes):  # older nvidia-ml-py returns bytes
            version = version.decode()
        return DriverReading("nvml", cuda, str(version), notes)
    except Exception as exc:
        notes.append(f"NVML: {type(exc).__name__}: {exc}")
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass  # shutting down a half-initialised NVML is not worth a failure


def _from_nvidia_smi(notes: list[str]) -> DriverReading | None:
    executable = shutil.which("nvidia-smi")
    if executable is None:
        notes.append("nvidia-smi: not on PATH")
        return None
    try:
        returncode, stdout, stderr = _run_alone([executable], _smi_timeout())
    except subprocess.TimeoutExpired:
        notes.append(f"nvidia-smi: no answer in {_smi_timeout():g} s; it and its children were stopped")
        return None
    except OSError as exc:
        notes.append(f"nvidia-smi: {type(exc).__name__}: {exc}")
        return None
    if returncode != 0:
        notes.append(f"nvidia-smi: exit {returncode}: {' '.join((stdout + stderr).split())[:200]}")
        return None
    parsed = parse_nvidia_smi(stdout)
    if parsed.cuda_version is None:
        notes.append("nvidia-smi: no CUDA version in its header")
    return DriverReading("nvidia-smi", parsed.cuda_version, parsed.driver_version, notes, parsed.gpus)


def _run_alone(command: list[str], timeout: float) -> tuple[int, str, str]:
    """Run in a session of its own, so a timeout stops what it forked too (a hung nvidia-smi leaves a
    child holding its pipes); output as text whatever bytes a broken driver prints. (The suite runs
    in images without envbuild, so it cannot use builder.proc.)"""
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except BaseException:
        _kill_group(process.pid)
        process.communicate()
        raise
    _kill_group(process.pid)
    return process.returncode, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace")


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass

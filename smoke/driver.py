"""The host driver's maximum CUDA version, from NVML (nvidia-ml-py) or else from `nvidia-smi`.

No torch here. `pynvml` is imported only when present: images need not carry nvidia-ml-py.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field, replace

from smoke.gpu_compat import driver_cuda_from_nvml, failure_meaning
from smoke.nvml import nvml_session
from smoke.nvsmi import (
    APPS_QUERY_FIELDS,
    GPU_QUERY_FIELDS,
    SmiGpu,
    SmiProcess,
    SmiReading,
    decode_output,
    gpus_from_query,
    parse_nvidia_smi,
    parse_query_csv,
    processes_from_query,
)

NVIDIA_SMI_TIMEOUT_S = 30.0
# What nvidia-smi prints for dozens of GPUs is a few hundred KB; more is a broken tool, not data.
MAX_SMI_OUTPUT_BYTES = 8 << 20
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
    # The GPUs of nvidia-smi's query (else its table) when it was the source (NVML callers read GPUs themselves).
    smi_gpus: list[SmiGpu] = field(default_factory=list)
    smi_processes: list[SmiProcess] = field(default_factory=list)
    smi_version: str | None = None  # nvidia-smi's own version: on WSL2 not the driver's
    smi_failure: str | None = None  # a gpu_compat.json failure key when nvidia-smi said why it could not answer
    smi_signs: tuple[str, ...] = ()  # smoke.nvsmi.host_signs of what nvidia-smi printed: the host it runs on
    smi_mig_devices: int = 0  # MIG instances nvidia-smi's table listed
    smi_ran: bool = False  # an nvidia-smi ran and printed something (even nothing doctor can read)
    smi_cuda_not_a_version: str | None = None  # nvidia-smi's CUDA field when it is there but no version ("N/A")

    @property
    def cuda_text(self) -> str | None:
        return None if self.cuda is None else f"{self.cuda[0]}.{self.cuda[1]}"


def read_driver() -> DriverReading:
    notes: list[str] = []
    reading = _from_nvml(notes)
    if reading is None:
        reading = _from_nvidia_smi(notes)
    return reading or DriverReading(None, None, None, notes)


def _run_smi(executable: str, args: list[str], notes: list[str]) -> tuple[int, str] | None:
    try:
        returncode, stdout, stderr = _run_alone([executable, *args], _smi_timeout())
    except subprocess.TimeoutExpired:
        notes.append(f"nvidia-smi: no answer in {_smi_timeout():g} s; it and its children were stopped")
        return None
    except OSError as exc:
        notes.append(f"nvidia-smi: {type(exc).__name__}: {exc}")
        return None
    return returncode, stdout + stderr


def _query(executable: str, kind: str, fields: tuple[str, ...], notes: list[str]) -> list[dict[str, str | None]] | None:
    """Rows of `nvidia-smi --query-KIND=FIELDS`; None when the driver refuses the query (old drivers lack fields)."""
    answer = _run_smi(executable, [f"--query-{kind}={','.join(fields)}", "--format=csv,noheader,nounits"], [])
    if answer is None or answer[0] != 0:
        if answer is not None:
            notes.append(f"nvidia-smi --query-{kind}: exit {answer[0]}: {' '.join(answer[1].split())[:160]}")
        return None
    rows = parse_query_csv(answer[1], fields)
    if len(rows) != len([line for line in answer[1].splitlines() if line.strip()]):
        notes.append(f"nvidia-smi --query-{kind}: output is not the CSV asked for; using the table")
        return None
    return rows


def _from_nvml(notes: list[str]) -> DriverReading | None:
    with nvml_session(notes) as nvml:
        if nvml is None:
            return None
        try:
            cuda = driver_cuda_from_nvml(int(nvml.nvmlSystemGetCudaDriverVersion()))
            version = nvml.nvmlSystemGetDriverVersion()
            if isinstance(version, bytes):  # older nvidia-ml-py returns bytes
                version = version.decode()
            return DriverReading("nvml", cuda, str(version), notes)
        except nvml.NVMLError as exc:
            notes.append(f"NVML: {type(exc).__name__}: {exc}")
            return None


def _from_nvidia_smi(notes: list[str]) -> DriverReading | None:
    """The table for the driver's versions, the query for GPUs and processes; each falls back to the other."""
    executable = shutil.which("nvidia-smi")
    if executable is None:
        notes.append("nvidia-smi: not on PATH")
        return None
    answer = _run_smi(executable, [], notes)
    if answer is None:
        return None
    returncode, text = answer
    parsed = parse_nvidia_smi(text)
    if returncode != 0 or parsed.failure:
        return _failed(returncode, text, parsed, notes)
    if parsed.cuda_version is None:
        notes.append("nvidia-smi: no CUDA version in its header")
    rows = _query(executable, "gpu", GPU_QUERY_FIELDS, notes)
    if rows is None:  # compute_cap came with driver 510; ask older drivers without it
        rows = _query(executable, "gpu", GPU_QUERY_FIELDS[:-1], notes)
    queried = gpus_from_query(rows or [])
    gpus, signs = _with_q(executable, _filled_in(queried, parsed.gpus) if queried else parsed.gpus, parsed.signs)
    driver_version = parsed.driver_version or next((r["driver_version"] for r in rows or [] if r.get("driver_version")),
                                                   None)
    apps = _query(executable, "compute-apps", APPS_QUERY_FIELDS, notes)
    processes = processes_from_query(apps) if apps is not None else parsed.processes
    if driver_version is None and parsed.cuda_version is None and not gpus:
        # It ran and printed nothing doctor can read (a log, a bare process table): no driver is claimed.
        notes.append(f"nvidia-smi: printed no driver version nor GPU: {' '.join(text.split())[:160]}")
        return DriverReading(None, None, None, notes, smi_processes=processes, smi_signs=signs,
                             smi_mig_devices=parsed.mig_devices, smi_ran=True)
    return DriverReading("nvidia-smi", parsed.cuda_version, driver_version, notes, gpus, processes,
                         smi_version=parsed.smi_version, smi_signs=signs, smi_mig_devices=parsed.mig_devices,
                         smi_ran=True, smi_cuda_not_a_version=parsed.cuda_not_a_version)


def _failed(returncode: int, text: str, parsed: SmiReading, notes: list[str]) -> DriverReading | None:
    """nvidia-smi said why it could not answer (a reading with that cause), or failed without saying (None)."""
    why = failure_meaning(parsed.failure)
    notes.append(f"nvidia-smi: exit {returncode}: {' '.join(text.split())[:200]}" + (f" ({why})" if why else ""))
    if not parsed.failure:
        return None
    return DriverReading(None, None, None, notes, smi_failure=parsed.failure, smi_signs=parsed.signs, smi_ran=True)


def _with_q(executable: str, gpus: list[SmiGpu], signs: tuple[str, ...]) -> tuple[list[SmiGpu], tuple[str, ...]]:
    """Old drivers cannot be asked for compute_cap: -q's Product Architecture is the next best thing (and -q
    names the driver model and a vGPU's licence, which the table does not)."""
    if gpus and all(gpu.compute_capability is not None for gpu in gpus):
        return gpus, signs
    detailed = _run_smi(executable, ["-q"], [])
    if detailed is None or detailed[0] != 0:
        return gpus, signs
    q_reading = parse_nvidia_smi(detailed[1])
    return (_filled_in(gpus, q_reading.gpus) if gpus else q_reading.gpus,
            tuple(dict.fromkeys((*signs, *q_reading.signs))))


def _filled_in(gpus: list[SmiGpu], other: list[SmiGpu]) -> list[SmiGpu]:
    """`gpus` with the architecture and MIG mode another reading of the same GPUs (same PCI bus id) says."""
    by_bus = {_bus_key(gpu.bus_id): gpu for gpu in other if gpu.bus_id}
    filled = []
    for gpu in gpus:
        same = by_bus.get(_bus_key(gpu.bus_id))
        if same is not None:
            gpu = replace(gpu, architecture=gpu.architecture or same.architecture,
                          mig_mode=gpu.mig_mode or same.mig_mode)
        filled.append(gpu)
    return filled


def _bus_key(bus_id: str | None) -> str:
    # "00000000:17:00.0" (query, -q) and "0000:17:00.0" (older tables) name one GPU.
    domain, _, rest = (bus_id or "").lower().partition(":")
    return f"{domain.lstrip('0')}:{rest}"


def _run_alone(command: list[str], timeout: float) -> tuple[int, str, str]:
    """Run in a session of its own, so a timeout stops what it forked too (a hung nvidia-smi leaves a
    child holding its pipes); output as text whatever bytes a broken driver prints. (The suite runs
    in images without envbuild, so it cannot use builder.proc.)"""
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    try:
        stdout, stderr = _read_capped(process, command, timeout)
    finally:
        _kill_group(process.pid)
        process.wait()
    return process.returncode, decode_output(stdout), decode_output(stderr)


def _read_capped(process: subprocess.Popen, command: list[str], timeout: float) -> tuple[bytes, bytes]:
    """Both pipes until they close, at most MAX_SMI_OUTPUT_BYTES each (the rest is left unread: a broken
    driver can print hundreds of MB), within `timeout` (a grandchild may keep the pipes open)."""
    deadline = time.monotonic() + timeout
    chunks: dict[int, bytearray] = {}
    with selectors.DefaultSelector() as selector:
        for pipe in (process.stdout, process.stderr):
            assert pipe is not None
            selector.register(pipe.fileno(), selectors.EVENT_READ)
            chunks[pipe.fileno()] = bytearray()
        full = False
        while selector.get_map() and not full:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(command, timeout)
            for key, _ in selector.select(left):
                data = os.read(key.fd, 1 << 16)
                if not data:
                    selector.unregister(key.fd)
                    continue
                buffer = chunks[key.fd]
                buffer += data[:MAX_SMI_OUTPUT_BYTES - len(buffer)]
                full = full or len(buffer) >= MAX_SMI_OUTPUT_BYTES  # the rest is not read: the group is killed
    assert process.stdout is not None and process.stderr is not None
    return bytes(chunks[process.stdout.fileno()]), bytes(chunks[process.stderr.fileno()])


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass

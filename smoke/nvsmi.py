"""Read what `nvidia-smi` prints: the default table, `-q`/`-a`, `--query-*` CSV, and its failure lines.

No torch, no NVML, standard library only: this also runs inside images.

- Table headers come in two styles: the classic `Driver Version: 535.54.03    CUDA Version: 12.2` and,
  from driver 610 on, `KMD Version: 610.43.02     CUDA UMD Version: 13.3`. Very old drivers print no
  CUDA version; WSL2 may print `CUDA Version: ERR!`; on WSL2 the `NVIDIA-SMI` version (the Linux tool)
  differs from `Driver Version` (the Windows driver), and only the latter counts.
- GPU rows: the persistence column reads On/Off/N/A on Linux, WDDM/TCC on Windows; long names are cut
  to "NVIDIA GeForce ..."; the MIG table and the process table follow and must not read as GPUs.
- `--query-gpu` CSV is the reliable source (full names, UUIDs, compute capability), but fields a GPU or
  an old driver lacks read `[N/A]`, `N/A`, `[Not Supported]` or `[Insufficient Permissions]`, and a
  field the driver does not know fails the whole query.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field

from smoke.gpu_compat import driver_failures

# Both labels in one pattern each: old headers say "CUDA Version", new ones "CUDA UMD Version".
_CUDA_VERSION = re.compile(r"CUDA(?: UMD)? Version\s*:\s*(\d+)\.(\d+)")
_DRIVER_VERSION = re.compile(r"(?:KMD|Driver) Version\s*:\s*(\d+(?:\.\d+)*)")
_SMI_VERSION = re.compile(r"NVIDIA-SMI\s+(\d+(?:\.\d+)+)")
# A GPU's first table row: "|   0  NVIDIA H200   On  |   00000000:19:00.0 Off |  0 |"
_GPU_ROW = re.compile(
    r"^\|\s*(?P<index>\d+)\s+(?P<name>.+?)\s+(?P<persistence>On|Off|N/A|WDDM|TCC)\s*\|"
    r"\s*(?P<bus>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f])\b"
)
# A paste cut inside the first GPU row, after the name: "|   0  GRID P40-24Q" (its last line, under the header's
# "|===" rule); a persistence word the cut left is not the name's.
_CUT_GPU_ROW = re.compile(r"^\|\s*(?P<index>\d+)\s+(?P<name>[^|]*?\S)(?:\s+(?:On|Off|N/A|WDDM|TCC))?\s*$")
_TABLE_RULE = re.compile(r"^\|=+[=+|]*\|?\s*$")
_MEMORY = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")
# GPU-Util opens the third column of the same row; old drivers print N/A there.
_UTILIZATION = re.compile(r"MiB\s*\|\s*(\d+)%")
# Process rows: "|    0      1568    G   /usr/lib/xorg/Xorg      1850MiB |" (before 450) and
# "|    1    3    0      34965      C   python      14195MiB |" with GPU instance / compute instance ids.
_PROCESS_ROW = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+(?:(?P<gi>\d+|N/A)\s+(?P<ci>\d+|N/A)\s+)?(?P<pid>\d+)\s+(?P<type>C\+G|[CGM])\s+"
    r"(?P<name>.*?)\s*(?:(?P<memory>\d+)MiB|N/A)?\s*\|?$"
)
_MIG_ROW = re.compile(r"^\|\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\|\s*\d+MiB\s*/\s*\d+MiB")
# `nvidia-smi -q`: "GPU 00000000:94:00.0" opens a GPU; its fields follow, indented.
_Q_GPU = re.compile(r"^GPU\s+([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f])\s*$")
_Q_FIELD = re.compile(r"^\s+(Product Name|GPU UUID|Product Architecture)\s*:\s*(.+?)\s*$")
# `MIG Mode` opens a block whose `Current : Enabled|Disabled|N/A` line is the mode now.
_Q_CURRENT = re.compile(r"^\s+Current\s*:\s*(.+?)\s*$")
# The table's third GPU row (from driver 450) ends with the MIG M. column: "|   Disabled |".
_MIG_MODE_CELL = re.compile(r"\|\s*(Enabled|Disabled|N/A)\s*\|\s*$")
_Q_FB_TOTAL = re.compile(r"^\s+Total\s*:\s*(\d+)\s*MiB")
_Q_FB_USED = re.compile(r"^\s+Used\s*:\s*(\d+)\s*MiB")

# What nvidia-smi's own output says of the host it runs on (doctor's host kind weighs them with the OS's word).
_DRIVER_MODEL_CELL = re.compile(r"\b(?:TCC/WDDM|Driver-Model)\b")
_Q_DRIVER_MODEL = re.compile(r"^\s+Driver Model\s*\n\s+Current\s*:\s*(\S+)", re.M)
_Q_MINOR_NUMBER = re.compile(r"^\s+Minor Number\s*:\s*(\S+)", re.M)
_Q_VIRTUALIZATION = re.compile(r"^\s+Virtualization Mode\s*:\s*(.+?)\s*$", re.M)
_VGPU_SOFTWARE = re.compile(r"vGPU Software Licensed Product|^\s*vGPU Software\b|Host VGPU Mode\s*:\s*SR-IOV", re.M)
_CUDA_ERR = re.compile(r"CUDA(?: UMD)? Version\s*:\s*ERR!")
_WSL_LIBRARY = re.compile(r"/usr/lib/wsl/(?:lib|drivers)/")
# A CUDA field that is not a version: the driver serves no CUDA there (a vGPU host's manager driver, a pod that
# cannot load libcuda), so its number alone says nothing of what CUDA runs.
_CUDA_NOT_A_VERSION = re.compile(r"CUDA(?: UMD)? Version\s*:\s*(N/A|Not Supported)\b")
# HAMi's in-container library (HAMi-core, formerly 4pdvGPU) logs through every NVML/CUDA program it is loaded in,
# nvidia-smi included; HAMi's device plugin loads it into the containers it gives a GPU share, never on the host.
_IN_CONTAINER_LIBRARY = re.compile(r"^\[(?:HAMI-core|4pdvGPU) (?:Info|Msg|Warn|Debug|ERROR)\b", re.M)
# The UNIX tool's words when no driver answers end at "installed and running."; nvidia-smi.exe goes on about WDDM.
_UNIX_NO_DRIVER_WORDING = re.compile(
    r"couldn.t communicate with the NVIDIA driver\. Make sure that the latest NVIDIA driver is installed and "
    r"running\.[ \t]*$", re.M)
_UNIX_DRIVER = re.compile(r"(?:KMD|Driver) Version\s*:\s*\d+\.(?:\d+\.\d+|\d{3})\b")
_LIST_ROW = re.compile(r"^GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>GPU-[0-9a-fA-F-]+)\)\s*$")

# Lines nvidia-smi prints instead of query rows: an unknown field (old drivers), bad arguments.
QUERY_REFUSAL = re.compile(r'^\s*(?:Field "[^"]*" is not a valid field to query|Invalid combination of input '
                           r'arguments|ERROR:)', re.I)
# Values a query field takes when it has no answer.
NO_VALUE = {"", "n/a", "[n/a]", "[not supported]", "not supported", "[insufficient permissions]",
            "[unknown error]", "[gpu is lost]", "[requested functionality has been deprecated]"}
# The fields doctor asks for. compute_cap appeared in driver 510: older drivers refuse the query.
GPU_QUERY_FIELDS = ("index", "uuid", "name", "pci.bus_id", "driver_version", "memory.total", "memory.used",
                    "utilization.gpu", "compute_cap")
APPS_QUERY_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")


@dataclass(frozen=True)
class SmiGpu:
    index: int
    name: str
    bus_id: str | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    utilization_percent: int | None = None
    uuid: str | None = None
    compute_capability: tuple[int, int] | None = None  # only the query shows it (driver 510 and newer)
    architecture: str | None = None  # `-q`'s Product Architecture (Hopper, Ada Lovelace, ...)
    mig_mode: str | None = None  # Enabled / Disabled (table's MIG M., -q, mig.mode.current); None: not said


@dataclass(frozen=True)
class SmiProcess:
    pid: int
    name: str
    gpu: int | None = None  # the table's GPU index
    gpu_uuid: str | None = None  # the query's
    memory_mib: int | None = None  # None: not reported ("N/A", e.g. on Windows or WSL)
    type: str | None = None  # C (compute), G (graphics), C+G


@dataclass(frozen=True)
class SmiReading:
    driver_version: str | None
    cuda_version: tuple[int, int] | None
    gpus: list[SmiGpu] = field(default_factory=list)
    processes: list[SmiProcess] = field(default_factory=list)
    smi_version: str | None = None  # the tool's own version; differs from the driver's on WSL2
    failure: str | None = None  # a gpu_compat.json failure key when nvidia-smi printed why it could not read the GPUs
    mig_devices: int = 0
    signs: tuple[str, ...] = ()  # host_signs(): what the output says of the host it runs on
    cuda_not_a_version: str | None = None  # the CUDA field's text when it is there but no version ("N/A")

    @property
    def cuda_version_text(self) -> str | None:
        return None if self.cuda_version is None else f"{self.cuda_version[0]}.{self.cuda_version[1]}"


def decode_output(raw: bytes | str) -> str:
    """nvidia-smi's bytes as text: not always UTF-8 (Windows code pages, a corrupted name), never fatal."""
    if isinstance(raw, str):
        return raw
    return raw.decode("utf-8", errors="replace")


def smi_failure(text: str) -> str | None:
    """The gpu_compat.json failure key for what nvidia-smi printed instead of GPUs, or None when it printed no
    such line."""
    return next((failure.key for failure in driver_failures() if failure.pattern.search(text)), None)


def parse_nvidia_smi(text: str | bytes) -> SmiReading:
    """Read what the table (or `-q`) says; fields it lacks come back as None (never guessed)."""
    text = decode_output(text)
    cuda = _CUDA_VERSION.search(text)
    driver = _DRIVER_VERSION.search(text)
    smi = _SMI_VERSION.search(text)
    lines = text.splitlines()
    gpus = _parse_gpu_rows(lines) or _parse_q_gpus(lines) or _parse_list_rows(lines)
    return SmiReading(
        driver_version=driver.group(1) if driver else None,
        cuda_version=(int(cuda.group(1)), int(cuda.group(2))) if cuda else None,
        gpus=gpus,
        processes=_parse_process_rows(lines),
        smi_version=smi.group(1) if smi else None,
        failure=None if gpus else smi_failure(text),
        mig_devices=sum(1 for line in lines if _MIG_ROW.match(line.strip())),
        signs=host_signs(text),
        cuda_not_a_version=_cuda_not_a_version(text),
    )


def _cuda_not_a_version(text: str) -> str | None:
    field = _CUDA_NOT_A_VERSION.search(text)
    return field.group(1) if field else None


def host_signs(text: str) -> tuple[str, ...]:
    """Marks in nvidia-smi's output (or an NVML log) of the system it runs on, each one word:

    - `wddm`: a Windows driver model (the table's TCC/WDDM or Driver-Model column, `-q`'s Driver Model WDDM/TCC):
      nvidia-smi.exe on Windows, or the Linux tool in WSL2 (whose -q reports the Windows driver's model);
    - `no-driver-model`: `-q` says Driver Model N/A, as on Linux and FreeBSD;
    - `persistence-column`: the table's Persistence-M column, which Windows' nvidia-smi.exe replaces by TCC/WDDM;
    - `device-minor`: `-q` gives a device minor number (/dev/nvidiaN: Linux and FreeBSD; WSL2 says N/A);
    - `unix-driver`: a driver version of the UNIX driver's form (535.113.01, 384.111), never a Windows one (461.72);
    - `unix-processes` / `windows-processes`: process names as paths of either system;
    - `cuda-err` and `wsl-library`: WSL2's nvidia-smi printing `CUDA Version: ERR!`, NVML loaded from /usr/lib/wsl;
    - `smi-differs`: NVIDIA-SMI's version differs from the driver's (WSL2: the Linux tool, the Windows driver);
    - `vgpu`: a vGPU guest (`vGPU Software Licensed Product`, `Virtualization Mode : VGPU`);
    - `passthrough`: a GPU passed whole into a virtual machine (`Virtualization Mode : Pass-Through`);
    - `in-container-library`: HAMi's in-container library (HAMi-core, 4pdvGPU) logging through nvidia-smi;
    - `unix-failure-wording`: "couldn't communicate with the NVIDIA driver" worded as the UNIX tool prints it.
    """
    signs = [*_driver_model_signs(text), *_version_signs(text)]
    processes = _parse_process_rows(text.splitlines())
    if any(p.name.startswith("/") for p in processes):
        signs.append("unix-processes")
    if any(p.name.lower().endswith(".exe") or "\\" in p.name for p in processes):
        signs.append("windows-processes")
    if _WSL_LIBRARY.search(text):
        signs.append("wsl-library")
    mode = _Q_VIRTUALIZATION.search(text)
    if _VGPU_SOFTWARE.search(text) or (mode and mode.group(1).upper() == "VGPU"):
        signs.append("vgpu")
    elif mode and mode.group(1).lower() == "pass-through":
        signs.append("passthrough")
    if _IN_CONTAINER_LIBRARY.search(text):
        signs.append("in-container-library")
    return tuple(signs)


def _driver_model_signs(text: str) -> list[str]:
    signs = []
    model = _Q_DRIVER_MODEL.search(text)
    if _DRIVER_MODEL_CELL.search(text) or re.search(r"\|\s*\d+\s+.+?\s(?:WDDM|TCC)\s*\|", text) or (
            model and model.group(1) in ("WDDM", "TCC", "MCDM")):
        signs.append("wddm")
    elif model and model.group(1) == "N/A":
        signs.append("no-driver-model")
    elif "Persistence-M" in text:
        signs.append("persistence-column")
    minor = _Q_MINOR_NUMBER.search(text)
    if minor and minor.group(1).isdigit():
        signs.append("device-minor")
    return signs


def _version_signs(text: str) -> list[str]:
    signs = []
    if _UNIX_DRIVER.search(text):
        signs.append("unix-driver")
    if _CUDA_ERR.search(text):
        signs.append("cuda-err")
    if _UNIX_NO_DRIVER_WORDING.search(text):
        signs.append("unix-failure-wording")
    smi, driver = _SMI_VERSION.search(text), _DRIVER_VERSION.search(text)
    if smi and driver and smi.group(1) != driver.group(1):
        signs.append("smi-differs")
    return signs


def _parse_list_rows(lines: list[str]) -> list[SmiGpu]:
    """`nvidia-smi -L`: "GPU 0: Quadro K620 (UUID: GPU-...)", names in full, nothing else."""
    gpus = []
    for line in lines:
        row = _LIST_ROW.match(line.strip())
        if row:
            gpus.append(SmiGpu(index=int(row.group("index")), name=row.group("name"), bus_id=None,
                               memory_used_mib=None, memory_total_mib=None, uuid=row.group("uuid")))
    return gpus


def _parse_gpu_rows(lines: list[str]) -> list[SmiGpu]:
    return _parse_full_gpu_rows(lines) or _parse_cut_gpu_row(lines)


def _parse_cut_gpu_row(lines: list[str]) -> list[SmiGpu]:
    """A table whose paste stops inside the first GPU row, after the name: that GPU, named, nothing else."""
    shown = [line.strip() for line in lines if line.strip()]
    if len(shown) < 2 or not _TABLE_RULE.match(shown[-2]):
        return []
    row = _CUT_GPU_ROW.match(shown[-1])
    if row is None:
        return []
    return [SmiGpu(index=int(row.group("index")), name=row.group("name"), bus_id=None, memory_used_mib=None,
                   memory_total_mib=None)]


def _parse_full_gpu_rows(lines: list[str]) -> list[SmiGpu]:
    gpus: list[SmiGpu] = []
    for number, line in enumerate(lines):
        row = _GPU_ROW.match(line.strip())
        if row is None:
            continue
        # Memory sits on the GPU's second row, in the middle column.
        following = lines[number + 1] if number + 1 < len(lines) else ""
        memory = _MEMORY.search(following)
        utilization = _UTILIZATION.search(following)
        third = lines[number + 2] if number + 2 < len(lines) else ""
        mig = _MIG_MODE_CELL.search(third.strip()) if not _GPU_ROW.match(third.strip()) else None
        gpus.append(
            SmiGpu(
                index=int(row.group("index")),
                name=row.group("name").strip(),
                bus_id=row.group("bus"),
                memory_used_mib=int(memory.group(1)) if memory else None,
                memory_total_mib=int(memory.group(2)) if memory else None,
                utilization_percent=int(utilization.group(1)) if utilization else None,
                mig_mode=_mig_mode(mig.group(1) if mig else None),
            )
        )
    return gpus


def _mig_mode(value: str | None) -> str | None:
    return value if value in ("Enabled", "Disabled") else None


def _parse_q_gpus(lines: list[str]) -> list[SmiGpu]:
    """GPUs of `nvidia-smi -q`: bus id, product name, UUID, architecture, MIG mode and frame-buffer memory."""
    found: list[dict[str, object]] = []
    in_fb = in_mig = False
    for line in lines:
        opened = _Q_GPU.match(line)
        if opened:
            found.append({"bus": opened.group(1)})
            in_fb = in_mig = False
            continue
        if not found:
            continue
        current = found[-1]
        named = _Q_FIELD.match(line)
        if named:
            current[_Q_KEYS[named.group(1)]] = named.group(2)
        in_mig = _q_mig_mode(line, in_mig, current)
        in_fb = _q_frame_buffer(line, in_fb, current)
    return [SmiGpu(index=index, name=str(gpu.get("name") or ""), bus_id=str(gpu["bus"]),
                   memory_used_mib=gpu.get("used"), memory_total_mib=gpu.get("total"),  # type: ignore[arg-type]
                   uuid=gpu.get("uuid"), architecture=gpu.get("architecture"),  # type: ignore[arg-type]
                   mig_mode=gpu.get("mig"))  # type: ignore[arg-type]
            for index, gpu in enumerate(found) if gpu.get("name")]


def _q_frame_buffer(line: str, in_fb: bool, current: dict[str, object]) -> bool:
    """Whether the next line is inside `FB Memory Usage` (not BAR1's); its Total and Used kept, in MiB."""
    stripped = line.strip()
    if stripped.endswith("Memory Usage"):
        return stripped.startswith("FB")
    if in_fb:
        total, used = _Q_FB_TOTAL.match(line), _Q_FB_USED.match(line)
        if total:
            current["total"] = int(total.group(1))
        elif used:
            current["used"] = int(used.group(1))
    return in_fb


def _q_mig_mode(line: str, in_mig: bool, current: dict[str, object]) -> bool:
    """Whether the next line is inside `MIG Mode`; its `Current` line (the block's first; Pending follows) kept."""
    if line.strip() == "MIG Mode":
        return True
    mode = _Q_CURRENT.match(line) if in_mig else None
    if mode:
        current["mig"] = _mig_mode(mode.group(1))
    return False


_Q_KEYS = {"Product Name": "name", "GPU UUID": "uuid", "Product Architecture": "architecture"}


def _parse_process_rows(lines: list[str]) -> list[SmiProcess]:
    processes: list[SmiProcess] = []
    in_processes = False
    for line in lines:
        stripped = line.strip()
        if "Processes:" in stripped:
            in_processes = True
            continue
        if not in_processes:
            continue
        row = _PROCESS_ROW.match(stripped)
        if row is None:
            continue
        processes.append(SmiProcess(
            pid=int(row.group("pid")),
            name=row.group("name").strip(),
            gpu=int(row.group("gpu")),
            memory_mib=int(row.group("memory")) if row.group("memory") else None,
            type=row.group("type"),
        ))
    return processes


# --- --query-gpu / --query-compute-apps -----------------------------------------------------------

def parse_query_csv(text: str | bytes, fields: tuple[str, ...] | list[str]) -> list[dict[str, str | None]]:
    """Rows of a `--query-...` CSV as {field: value}; values with no answer are None, units stripped.

    Accepts output with or without its header line and with or without `nounits`. A line that does not
    have one value per field is not a row (a failure message, or a table replayed by mistake).
    """
    text = decode_output(text)
    rows: list[dict[str, str | None]] = []
    lines = [line for line in text.splitlines() if not QUERY_REFUSAL.match(line) and not smi_failure(line)]
    for values in csv.reader(lines, skipinitialspace=True):
        if len(values) != len(fields):
            continue
        if values[0].strip().split(" [")[0] == fields[0] and len(rows) == 0:
            continue  # the header line of --format=csv
        rows.append({name: _query_value(value) for name, value in zip(fields, values, strict=False)})
    return rows


def _query_value(value: str) -> str | None:
    value = value.strip()
    if value.lower() in NO_VALUE:
        return None
    # `--format=csv` without nounits: "40960 MiB", "11 %", "67.00 W".
    unit = re.fullmatch(r"(-?\d+(?:\.\d+)?)\s*(?:MiB|%|W|MHz|C)", value)
    return unit.group(1) if unit else value


def gpus_from_query(rows: list[dict[str, str | None]]) -> list[SmiGpu]:
    """SmiGpu values from `--query-gpu` rows (any subset of GPU_QUERY_FIELDS); rows without a name are skipped."""
    gpus = []
    for position, row in enumerate(rows):
        name = row.get("name") or row.get("gpu_name")
        if not name:
            continue
        index = _int(row.get("index"))
        gpus.append(SmiGpu(
            index=position if index is None else index,
            name=name,
            bus_id=row.get("pci.bus_id"),
            memory_used_mib=_int(row.get("memory.used")),
            memory_total_mib=_int(row.get("memory.total")),
            utilization_percent=_int(row.get("utilization.gpu")),
            uuid=row.get("uuid") or row.get("gpu_uuid"),
            compute_capability=_capability(row.get("compute_cap")),
            mig_mode=_mig_mode(row.get("mig.mode.current")),
        ))
    return gpus


def processes_from_query(rows: list[dict[str, str | None]]) -> list[SmiProcess]:
    return [SmiProcess(pid=int(row.get("pid") or 0), name=row.get("process_name") or "", gpu_uuid=row.get("gpu_uuid"),
                       memory_mib=_int(row.get("used_memory")), type="C")
            for row in rows if (row.get("pid") or "").isdigit()]


def _int(value: str | None, default: int | None = None) -> int | None:
    if value is None:
        return default
    try:
        return int(float(value))
    except ValueError:
        return default


def _capability(value: str | None) -> tuple[int, int] | None:
    match = re.fullmatch(r"(\d+)\.(\d+)", value or "")
    return (int(match.group(1)), int(match.group(2))) if match else None

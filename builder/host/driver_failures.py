"""Why NVML or nvidia-smi could not read the GPUs, each failure with its own cause and fix: the words come from
explain's catalogue (builder/data/explain_rules.yaml, `explain.driver.*`), one catalogue for both commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.explain.report import explain_text
from builder.host.checks import (
    DRIVER_MISMATCH,
    FABRIC_NOT_READY,
    MISSING,
    NO_GPU,
    UNDECIDED,
    UNKNOWN,
    HostCheck,
)
from builder.host.hostkind import HostKind
from smoke.driver import DriverReading

if TYPE_CHECKING:
    from builder.specs.target import Target

# Families of the catalogue that say why the driver did not answer.
DRIVER_FAMILIES = ("explain.driver.", "explain.container.", "explain.cuda.system-not-ready")
NO_DRIVER_FIX = "CPU targets run here; for CUDA targets install the NVIDIA driver or use a GPU host"


def driver_failure(driver: DriverReading) -> HostCheck:
    """The one finding for a host where neither NVML nor nvidia-smi answered: the failure they printed, told by
    its family in explain's catalogue (nvidia-smi's lines first: NVML's own note is often only its absence)."""
    smi_notes = [note for note in driver.notes if note.startswith("nvidia-smi")]
    for notes in (smi_notes, driver.notes):
        told = _told(notes)
        if told is not None:
            message, fix = told
            return HostCheck(MISSING, "NVIDIA driver", f"{message} ({'; '.join(notes)})", fix)
    why = "; ".join(driver.notes) or "neither NVML nor nvidia-smi answered"
    return HostCheck(MISSING, "NVIDIA driver", f"no NVIDIA driver answered ({why})", NO_DRIVER_FIX)


def _told(notes: list[str]) -> tuple[str, str] | None:
    if not notes:
        return None
    for finding in explain_text("\n".join(notes), "doctor").findings:
        if finding.rule.startswith(DRIVER_FAMILIES) and finding.fix:
            return finding.message, finding.fix
    return None


# Each failure nvidia-smi or NVML printed, by the cause it means for a CUDA target: (verdict, message, fix).
# {cuda} is the target's CUDA version. Failures not here ("nvml-unknown-error", "insufficient-permissions",
# "nvml-failed") leave the GPUs unknown; "no-driver" is the caller's (it depends on the host kind).
_CAUSES = {
    "no-devices": (NO_GPU, "the NVIDIA driver is loaded but initialised no GPU ('No devices were found'), so the "
                   "CUDA {cuda} build has no GPU to run on",
                   "check `sudo dmesg | grep -iE 'NVRM|Xid'` (RmInitAdapter failed: the board did not start; on new "
                   "boards enable Above 4G Decoding and Resizable BAR, on old ones check power and seating), "
                   "and `lspci | grep -i nvidia`"),
    "gpu-lost": (NO_GPU, "the driver cannot reach the GPU ('Unable to determine the device handle' / 'GPU is "
                 "lost'), so the CUDA {cuda} build has no GPU to run on",
                 "check `sudo dmesg | grep -iE 'NVRM|Xid'` (Xid 79: fallen off the bus; RmInitAdapter: not "
                 "initialised; the open kernel module needs a Turing or newer GPU), then reboot"),
    "driver-library-mismatch": (DRIVER_MISMATCH, "the loaded NVIDIA kernel module and the driver's libraries are "
                                "two releases (typically a driver update without a reboot): no CUDA {cuda} build "
                                "starts until they match",
                                "reboot (or `sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo "
                                "modprobe nvidia`); compare `cat /proc/driver/nvidia/version` with the library "
                                "version NVML names"),
    "module-library-mismatch": (DRIVER_MISMATCH, "the NVIDIA kernel module is another release than the "
                                "user-space driver (NVRM: API mismatch): no CUDA {cuda} build starts until they "
                                "match", "reinstall the driver so that module and libraries are one release "
                                "(`dkms status`, `cat /proc/driver/nvidia/version`), then reboot"),
    "fabric-manager": (FABRIC_NOT_READY, "the NVSwitch fabric is not up (CUDA: 'system not yet initialized'): no "
                       "CUDA {cuda} build starts until nvidia-fabricmanager runs",
                       "`sudo systemctl enable --now nvidia-fabricmanager`; its version must be the driver's "
                       "exactly (`nv-fabricmanager --version` against `nvidia-smi`)"),
}
_CONTAINER_LIBRARIES_FIX = ("start the container with the NVIDIA runtime: `docker run --gpus all` (or "
                            "`--runtime=nvidia`, or CDI: `--device nvidia.com/gpu=all`); Kubernetes: make nvidia "
                            "the default runtime, or a RuntimeClass; never install the driver in the image")
_STUB_LIBRARY_FIX = ("take the toolkit's stubs folder (.../lib64/stubs) off the library path (LD_LIBRARY_PATH, "
                     "/etc/ld.so.conf.d, then `sudo ldconfig`): `ldconfig -p | grep libnvidia-ml` should name the "
                     "driver's library; then run `nvidia-smi`")
_LOST_DEVICES_FIX = ("the container lost its GPU device access (a host `systemctl daemon-reload` with the "
                     "systemd cgroup driver): restart the container; for good, pass the /dev/nvidia* nodes with "
                     "--device, or set the toolkit's cgroups handling as NVIDIA's troubleshooting guide says")


def inside_container(kind: HostKind) -> bool:
    return kind.name == "container" or "container" in kind.also


def container_without_driver(driver: DriverReading, kind: HostKind) -> HostCheck | None:
    """Inside a container, a missing NVML library or nvidia-smi is the runtime's part, not a driver to install."""
    if not inside_container(kind) or driver.smi_failure not in (None, "nvml-library-missing") or (
            driver.smi_ran and driver.smi_failure is None):
        return None
    why = "; ".join(driver.notes) or "neither NVML nor nvidia-smi answered"
    return HostCheck(MISSING, "NVIDIA driver", f"this container has no NVIDIA driver libraries or nvidia-smi (the "
                     f"NVIDIA runtime mounts them from the host when it starts the container) ({why})",
                     _CONTAINER_LIBRARIES_FIX)


def failure_verdict(driver: DriverReading, kind: HostKind, target: Target) -> tuple[str, HostCheck] | None:
    """The verdict a failure line means for a CUDA target, with its cause and fix; None: the caller decides."""
    failure = driver.smi_failure
    if failure in _CAUSES:
        word, message, fix = _CAUSES[failure]
        return word, HostCheck(MISSING, "driver", message.format(cuda=target.cuda), fix)
    if failure == "no-driver" and kind.name == "wsl":
        return NO_GPU, HostCheck(MISSING, "driver", f"WSL reaches no GPU (WSL 1 has none; WSL2 needs the Windows "
                                 f"NVIDIA driver): the CUDA {target.cuda} build runs on the CPU only",
                                 "use WSL2 (`wsl --set-version <distro> 2`) with a current Windows NVIDIA driver; "
                                 "install no Linux driver inside WSL")
    if failure == "nvml-library-missing":
        inside = inside_container(kind)
        where = ("this container has no NVIDIA driver libraries (the runtime mounts them from the host)" if inside
                 else "the driver's NVML library (libnvidia-ml.so) is not found")
        fix = _CONTAINER_LIBRARIES_FIX if inside else (
            "in a container: " + _CONTAINER_LIBRARIES_FIX + "; on a host: install the NVIDIA driver")
        return UNKNOWN, HostCheck(UNDECIDED, "driver", f"{where}, so whether the host's GPUs run the CUDA "
                                  f"{target.cuda} build is unknown", fix)
    if failure == "nvml-stub-library":
        return UNKNOWN, HostCheck(UNDECIDED, "driver", "the CUDA toolkit's stub libnvidia-ml.so was loaded instead of "
                                  "the driver's, so NVML did not start and whether the GPUs run the CUDA "
                                  f"{target.cuda} build is unknown", _STUB_LIBRARY_FIX)
    if failure == "nvml-unknown-error" and inside_container(kind):
        return UNKNOWN, HostCheck(UNDECIDED, "driver", "NVML failed with 'Unknown Error' inside a container, so "
                                  f"whether the host's GPUs run the CUDA {target.cuda} build is unknown",
                                  _LOST_DEVICES_FIX)
    if failure is None and not driver.smi_ran and inside_container(kind):
        return UNKNOWN, HostCheck(UNDECIDED, "driver", "this container has no NVIDIA driver libraries, so whether the "
                                  f"host's GPUs run the CUDA {target.cuda} build is unknown", _CONTAINER_LIBRARIES_FIX)
    return None

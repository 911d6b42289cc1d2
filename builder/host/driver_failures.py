"""Why NVML or nvidia-smi could not read the GPUs, each failure with its own cause and fix: the words come from
explain's catalogue (builder/data/explain_rules.yaml, `explain.driver.*`), one catalogue for both commands."""

from __future__ import annotations

from builder.explain.report import explain_text
from builder.host.checks import MISSING, HostCheck
from smoke.driver import DriverReading

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


def gpus_unknown(driver: DriverReading) -> bool:
    """A failure that leaves open whether this host has GPUs (the driver is there and broke), unlike no driver."""
    return driver.smi_failure not in (None, "no-driver")

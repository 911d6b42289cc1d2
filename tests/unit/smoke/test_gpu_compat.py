"""smoke/gpu_compat.json, the data the suite and doctor both read: well formed, and holding every mark and failure
the suite's nvidia-smi reader gives (a new one in the code without its data entry fails here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from smoke import gpu_compat
from smoke.nvsmi import host_signs, parse_nvidia_smi

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "nvidia-smi"


def test_every_failure_has_one_key_patterns_and_a_meaning() -> None:
    failures = gpu_compat.driver_failures()
    keys = [failure.key for failure in failures]
    assert len(keys) == len(set(keys)) and keys
    assert all(failure.meaning and failure.pattern.pattern for failure in failures)
    assert {failure.only_on for failure in failures} <= {None, "unix"}


def test_the_last_failure_is_the_catch_all_so_earlier_ones_win() -> None:
    # "Failed to initialize NVML: Unknown Error" is nvml-unknown-error, not the catch-all nvml-failed after it
    assert parse_nvidia_smi("Failed to initialize NVML: Unknown Error\n").failure == "nvml-unknown-error"
    assert parse_nvidia_smi("Failed to initialize NVML: Driver/library version mismatch\n").failure == \
        "driver-library-mismatch"
    assert gpu_compat.driver_failures()[-1].key == "nvml-failed"


def test_meaning_of_an_unknown_key_is_empty() -> None:
    assert gpu_compat.failure_meaning(None) == ""
    assert gpu_compat.failure_meaning("no-such-failure") == ""
    assert "reboot" in gpu_compat.failure_meaning("driver-library-mismatch")


def test_every_sign_the_reader_gives_on_the_corpus_is_in_the_data() -> None:
    known = {sign.sign for sign in gpu_compat.host_signs()}
    given = {sign for path in sorted(CORPUS.glob("*.txt")) for sign in host_signs(path.read_text(encoding="utf-8"))}
    assert given, "the nvidia-smi corpus gave no sign at all"
    assert given <= known, f"signs without an entry in smoke/gpu_compat.json: {sorted(given - known)}"


def test_signs_of_a_host_come_from_the_data() -> None:
    data = json.loads(gpu_compat.DATA_FILE.read_text(encoding="utf-8"))
    wsl = tuple(entry["sign"] for entry in data["host_signs"] if entry["host"] == "wsl")
    assert gpu_compat.signs_of("wsl") == wsl and "cuda-err" in wsl
    assert gpu_compat.signs_of("no-such-host") == ()

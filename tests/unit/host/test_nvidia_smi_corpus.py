"""nvidia-smi as users paste it: every capture in tests/corpus/nvidia-smi reads as the capture says.

The expectations in the manifest were read off each capture by eye; a parser change that misreads any
real layout (old drivers, WSL2, Windows, MIG, -q, CSV with missing fields, failure lines) fails here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from smoke.nvsmi import gpus_from_query, parse_nvidia_smi, parse_query_csv
from tests import paths

pytestmark = pytest.mark.unit

CORPUS = paths.CORPUS / "nvidia-smi"
MANIFEST = yaml.safe_load((CORPUS / "manifest.yaml").read_text(encoding="utf-8"))["captures"]


def _cuda_text(version: tuple[int, int] | None) -> str | None:
    return None if version is None else f"{version[0]}.{version[1]}"


def test_corpus_is_real_and_complete():
    files = {path.name for path in CORPUS.glob("*.txt")}
    listed = [entry["file"] for entry in MANIFEST]
    assert sorted(listed) == sorted(files), "every capture has a manifest entry and every entry a file"
    assert len(listed) >= 12
    for entry in MANIFEST:
        # A public thread, or a capture of ours on a lent GPU machine (tests/gpu/device-check.sh).
        assert entry["source"].startswith(("https://github.com/", "tests/gpu/device-check.sh")), entry["file"]


@pytest.mark.parametrize("entry", [e for e in MANIFEST if "fields" not in e], ids=lambda e: e["file"])
def test_table_and_q_captures(entry: dict[str, Any]) -> None:
    expect = entry["expect"]
    reading = parse_nvidia_smi((CORPUS / entry["file"]).read_bytes())
    assert reading.failure == expect.get("failure")
    if "driver" in expect:
        assert reading.driver_version == expect["driver"]
    if "cuda" in expect:
        assert _cuda_text(reading.cuda_version) == expect["cuda"]
    if "smi_version" in expect:
        assert reading.smi_version == expect["smi_version"]
    assert [gpu.name for gpu in reading.gpus] == expect["gpus"]
    assert [gpu.index for gpu in reading.gpus] == list(range(len(expect["gpus"])))
    for key, attribute in (("memory_total_mib", "memory_total_mib"), ("memory_used_mib", "memory_used_mib"),
                           ("utilization", "utilization_percent"), ("uuids", "uuid")):
        if key in expect:
            assert [getattr(gpu, attribute) for gpu in reading.gpus] == expect[key], key
    if "processes" in expect:
        assert len(reading.processes) == expect["processes"]
    if "process_names" in expect:
        assert [p.name for p in reading.processes] == expect["process_names"]
        assert [p.memory_mib for p in reading.processes] == expect["process_memory_mib"]
    assert reading.mig_devices == expect.get("mig_devices", 0)


def _mib(values: list[str | None]) -> list[int]:
    return [int(value or -1) for value in values]


# What a manifest entry may say about the rows, and how each is read off them.
ROW_FIELDS: dict[str, Callable[[list[dict[str, Any]]], Any]] = {
    "memory_total_mib": lambda rows: _mib([row["memory.total"] for row in rows]),
    "memory_used_mib": lambda rows: _mib([row["memory.used"] for row in rows]),
    "utilization": lambda rows: [None if row["utilization.gpu"] is None else int(row["utilization.gpu"])
                                 for row in rows],
    "driver": lambda rows: rows[0]["driver_version"],
    "capabilities_raw": lambda rows: [row["compute_cap"] for row in rows],
}


@pytest.mark.parametrize("entry", [e for e in MANIFEST if "fields" in e], ids=lambda e: e["file"])
def test_query_csv_captures(entry: dict[str, Any]) -> None:
    expect = entry["expect"]
    rows = parse_query_csv((CORPUS / entry["file"]).read_bytes(), entry["fields"])
    assert len(rows) == expect["rows"]
    for field in expect.get("missing", []):
        assert rows[0][field] is None, field
    for name, read in ROW_FIELDS.items():
        if name in expect:
            assert read(rows) == expect[name], name
    if "gpus" in expect:
        gpus = gpus_from_query(rows)
        assert [gpu.name for gpu in gpus] == expect["gpus"]
        if "uuids" in expect:
            assert [gpu.uuid for gpu in gpus] == expect["uuids"]
        if "capabilities" in expect:
            assert [_cuda_text(gpu.compute_capability) for gpu in gpus] == expect["capabilities"]
            assert [gpu.index for gpu in gpus] == list(range(len(gpus)))


def test_non_utf8_bytes_do_not_break_the_table():
    raw = (CORPUS / "titan-xp-450-table.txt").read_bytes().replace(b"TITAN Xp", b"TITAN\xff Xp")
    reading = parse_nvidia_smi(raw)
    assert reading.driver_version == "450.57"
    assert [gpu.name for gpu in reading.gpus] == ["TITAN\ufffd Xp"]

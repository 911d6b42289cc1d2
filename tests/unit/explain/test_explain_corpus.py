"""`envbuild explain` on real error logs: each log in tests/corpus/error-logs names its rule first.

The expected rule and the words its message or fix must contain were chosen per log by reading it;
a rule that stops matching, or a more general rule that starts winning over the specific one, fails here.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml

from bench.realworld import judge, load_cases
from builder.explain.report import explain_text, rule_registry
from tests import paths
from tests.unit.explain.explain_examples import EXAMPLES

pytestmark = pytest.mark.unit

CORPUS = paths.CORPUS / "error-logs"
REALWORLD = paths.CORPUS / "realworld-logs"
DEVICE = paths.CORPUS / "device-logs"
MANIFEST = yaml.safe_load((CORPUS / "manifest.yaml").read_text(encoding="utf-8"))["logs"]


def test_corpus_is_complete_and_sourced():
    assert sorted(entry["file"] for entry in MANIFEST) == sorted(p.name for p in CORPUS.glob("*.log"))
    assert len(MANIFEST) >= 15
    for entry in MANIFEST:
        assert entry["source"].startswith("https://github.com/"), entry["file"]
        assert entry["rule"] in rule_registry(), entry["rule"]


@pytest.mark.parametrize("entry", MANIFEST, ids=lambda e: e["file"])
def test_log_names_its_rule_first(entry: dict[str, Any]) -> None:
    report = explain_text((CORPUS / entry["file"]).read_bytes(), entry["file"])
    fired = [finding.rule for finding in report.findings]
    assert fired and fired[0] == entry["rule"], fired
    assert set(fired) - {entry["rule"]} <= set(entry.get("also", [])), f"unexpected rules: {fired}"
    first = report.findings[0]
    words = f"{first.message} {first.fix}"
    for said in entry.get("says", []):
        assert said in words, (said, words)
    assert first.fix and "\n" not in first.fix
    assert first.location is not None and first.location.line >= 1
    assert first.evidence and first.evidence in (CORPUS / entry["file"]).read_text(encoding="utf-8")


def test_every_rule_is_exercised_by_the_corpus_or_a_unit_test():
    covered = {entry["rule"] for entry in MANIFEST} | {rule for entry in MANIFEST for rule in entry.get("also", [])}
    # tests/unit/explain/test_explain_families.py feeds every family its source's own message.
    covered |= set(EXAMPLES)
    assert set(rule_registry().ids()) <= covered, set(rule_registry().ids()) - covered


def test_the_realworld_set_keeps_its_held_out_third():
    # bench/realworld.py measures explain on these; the split was drawn before any rule was written.
    manifest = yaml.safe_load((REALWORLD / "manifest.yaml").read_text(encoding="utf-8"))
    cases = manifest["cases"]
    assert sorted(case["file"] for case in cases) == sorted(p.name for p in REALWORLD.glob("*.log"))
    assert len(cases) >= 60 and manifest["seed"] == 22
    heldout = {case["file"] for case in cases if case["split"] == "heldout"}
    order = sorted(case["file"] for case in cases)
    random.Random(manifest["seed"]).shuffle(order)
    assert heldout == set(order[:round(len(order) / 3)])
    families = set(rule_registry().ids())
    for case in cases:
        assert case["source"].startswith("https://github.com/"), case["file"]
        assert case["expect"]["family"] in families, case["file"]


DEVICE_CASES = load_cases(DEVICE)


def test_the_device_logs_are_all_in_the_manifest():
    assert sorted(case["file"] for case in DEVICE_CASES) == sorted(p.name for p in DEVICE.glob("*.log"))
    assert all(case["split"] == "heldout" for case in DEVICE_CASES)


@pytest.mark.parametrize("case", DEVICE_CASES, ids=lambda case: case["file"])
def test_a_real_gpu_error_names_its_family(case: dict[str, Any]) -> None:
    # Errors raised on purpose on a real H200; expectations written before explain ran (bench/realworld.py
    # counts them as device=N/M). A family explain does not have yet must be marked planned there.
    if case["expect"]["family"] not in rule_registry():
        assert case["expect"].get("planned"), case["file"]
        pytest.skip(f"{case['expect']['family']} is planned, not built")
    outcome = judge(case, DEVICE)
    assert outcome.passed, outcome.why

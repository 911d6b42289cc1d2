"""The shared Finding type and the rule registry that lint, doctor and explain use."""

from __future__ import annotations

import json

import pytest

from builder.findings import (
    Finding,
    Location,
    RuleRegistry,
    Severity,
    findings_from_json,
    findings_to_json,
    sort_findings,
)

pytestmark = pytest.mark.unit


def test_finding_round_trips_through_json():
    finding = Finding("explain.cuda.oom", "error", "CUDA ran out of memory", "lower the batch size",
                      Location("train.log", 12), evidence="torch.OutOfMemoryError: CUDA out of memory.",
                      details={"gpu": 0})
    assert finding.severity is Severity.ERROR
    text = findings_to_json([finding], source="train.log")
    assert json.loads(text)["source"] == "train.log"
    assert json.loads(text)["findings"][0]["location"] == {"path": "train.log", "line": 12}
    assert findings_from_json(text) == [finding]


def test_unknown_severity_is_refused():
    with pytest.raises(ValueError):
        Finding("lint.x.y", "fatal", "message")


def test_location_reads_as_path_line_field():
    assert str(Location("env.yml", 3, "channels")) == "env.yml:3 (channels)"
    assert str(Location(line=7)) == "line 7"
    assert str(Location(field="pip")) == "pip"


def test_registry_runs_rules_in_order_and_only_those_asked():
    rules: RuleRegistry[str] = RuleRegistry("demo")

    @rules.rule("demo.shout")
    def shout(text: str):
        """Upper-case input is shouting."""
        if text.isupper():
            yield Finding("demo.shout", Severity.WARNING, "shouting")

    @rules.rule("demo.empty", "no text at all")
    def empty(text: str):
        return [Finding("demo.empty", Severity.ERROR, "empty")] if not text.strip() else []

    assert rules.ids() == ["demo.shout", "demo.empty"]
    assert rules.get("demo.shout").summary == "Upper-case input is shouting."
    assert [f.rule for f in rules.run("HEY")] == ["demo.shout"]
    assert [f.rule for f in rules.run("   ")] == ["demo.empty"]
    assert rules.run("HEY", only=["demo.empty"]) == []


def test_registry_refuses_duplicate_and_malformed_ids():
    rules: RuleRegistry[str] = RuleRegistry("demo")
    rules.add("demo.one", lambda text: [])
    with pytest.raises(ValueError, match="twice"):
        rules.add("demo.one", lambda text: [])
    with pytest.raises(ValueError, match="dotted"):
        rules.add("Demo One", lambda text: [])


def test_sort_puts_errors_first_and_keeps_rule_order_within_a_severity():
    found = [Finding("a.b", "info", "1"), Finding("a.c", "error", "2"), Finding("a.d", "warning", "3"),
             Finding("a.e", "error", "4")]
    assert [f.message for f in sort_findings(found)] == ["2", "4", "3", "1"]


def test_doctor_checks_become_shared_findings():
    from builder.host.doctor import FAIL, MISSING, OK, HostCheck

    assert HostCheck(FAIL, "archs", "no sm_61 kernels", "use target 12.6").as_finding() == Finding(
        "doctor.archs", Severity.ERROR, "no sm_61 kernels", "use target 12.6", details={"level": FAIL})
    assert HostCheck(MISSING, "NVIDIA container toolkit", "none").as_dict()["rule"] == "doctor.nvidia-container-toolkit"
    assert HostCheck(OK, "GPUs", "fine").severity is Severity.INFO

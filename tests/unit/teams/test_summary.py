"""`envbuild summary`, `lock --check`'s hint and the matrix's JUnit times: what a CI run page shows."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from builder.image.build import ImageResult
from builder.image.pipeline import LockPolicy
from builder.lock.targets import LockResult
from builder.reports import json_document, write_junit
from builder.specs.cuda import TargetId
from builder.specs.model import load_spec
from builder.specs.target import resolve_targets
from builder.teams.matrix import MatrixRow, run_matrix
from builder.teams.summary import markdown_summary, read_report
from tests.paths import REPO

pytestmark = pytest.mark.unit


def envbuild(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=cwd, check=False, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "envs").mkdir()
    shutil.copy(REPO / "envs" / "pytorch.yaml", tmp_path / "envs" / "pytorch.yaml")
    return tmp_path


def write(path: Path, rows: list[dict] | dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows))
    return path


def test_lock_check_without_committed_locks_says_what_to_run_and_commit(repo: Path) -> None:
    done = envbuild("lock", "envs/pytorch.yaml", "--check", "--cuda", "12.6", "--json", cwd=repo)
    assert done.returncode == 1
    [row] = json.loads(done.stdout)["locks"]  # stdout stays JSON; the hint is on stderr for the CI log
    hint = "run `envbuild lock envs/pytorch.yaml` and commit envs/pytorch/locks/cuda12.6/"
    assert (row["status"], row["message"], row["hint"]) == ("missing", "no committed lock", hint)
    assert done.stderr.strip() == f"Error: cuda12.6: the lock is missing (no committed lock); {hint}"


def test_lock_check_of_a_stale_lock_says_the_same(repo: Path) -> None:
    folder = repo / "envs" / "pytorch" / "locks" / "cuda12.6"
    folder.mkdir(parents=True)
    (folder / "conda-lock.yml").write_text("version: 1\n")
    done = envbuild("lock", "envs/pytorch.yaml", "--check", "--cuda", "12.6", "--locks", "envs/pytorch/locks", cwd=repo)
    assert done.returncode == 1
    assert done.stderr.strip().startswith("Error: cuda12.6: stale: ")
    assert done.stderr.strip().endswith(
        "; run `envbuild lock envs/pytorch.yaml --locks envs/pytorch/locks` and commit envs/pytorch/locks/cuda12.6/")


def test_matrix_junit_stage_carries_the_measured_time(repo: Path, tmp_path: Path) -> None:
    spec_path = repo / "envs" / "pytorch.yaml"
    [target] = resolve_targets(load_spec(spec_path), [TargetId.parse("cpu")])
    [row] = run_matrix([target], locks=LockPolicy(lock_root=tmp_path / "no-locks", frozen=True))
    assert row.stage == "lock" and "the lock is missing" in row.error
    assert set(row.stage_seconds) == {"lock"} and row.stage_seconds["lock"] > 0
    junit = tmp_path / "matrix.xml"
    write_junit(junit, "envbuild.matrix", row.junit_cases())
    cases = {case.get("name"): case for case in ElementTree.parse(junit).getroot().iter("testcase")}
    assert cases["cpu.lock"].get("time") == f"{row.stage_seconds['lock']:.3f}"
    assert cases["cpu.image"].get("time") == "0.000"  # not reached: it did not run


def test_summary_tables_of_every_report_kind(tmp_path: Path) -> None:
    lock = write(tmp_path / "reports" / "lock-check.json", json_document("lock", [
        LockResult("cuda12.6", "fresh", Path("l"), input_hash="h").as_dict(),
        LockResult("cpu", "missing", Path("l"), input_hash="h", message="no committed lock",
                   hint="run `envbuild lock`").as_dict(),
    ]))
    image = write(tmp_path / "reports" / "image-cpu.json", json_document("image", [
        ImageResult("cpu", "sha256:1", ["team/pytorch:2.7.1-cpu"], 1_400_000_000, None, None, None, 120.0, "h",
                    ["registry.example.org/team/pytorch:2.7.1-cpu"]).as_dict()]))
    ok = MatrixRow("cpu", "2.7.1", "cpu", lock="fresh", stage="done", image="team/pytorch:2.7.1-cpu",
                   image_size=1_400_000_000, summary={"passed": 12, "failed": 0, "skipped": 3}, seconds=95.0)
    bad = MatrixRow("cuda12.6", "2.7.1", "12.6", lock="fresh", stage="done", summary={"passed": 10, "failed": 1},
                    checks=[{"name": "amp.cuda_fp16", "status": "failed", "reason": "loss went up | then NaN\nstop"}])
    broke = MatrixRow("cuda11.8", "2.7.1", "11.8", lock="missing", stage="lock", error="the lock is missing")
    matrix = write(tmp_path / "reports" / "smoke-gpu.json",
                   json_document("matrix", [ok.as_dict(), bad.as_dict(), broke.as_dict()]))
    empty = tmp_path / "reports" / "smoke-cpu.json"
    empty.write_text("")
    reports = [read_report(path) for path in (lock, image, matrix, empty)]
    assert [r.kind for r in reports] == ["lock", "image", "matrix", "unreadable"]
    text = markdown_summary(reports)
    assert "| cpu | ❌ missing | no committed lock; run `envbuild lock` |" in text
    assert "| cpu | team/pytorch:2.7.1-cpu | 1.4 GB | yes | 120.0 |" in text
    assert "| cpu | cpu | fresh | done | team/pytorch:2.7.1-cpu | 1.4 GB | 12 | 0 | 3 | 95.0 | ✅ ok |" in text
    assert "| cuda12.6 | 12.6 | fresh | done |  |  | 10 | 1 |  | 0.0 | ❌ 1 smoke check(s) failed |" in text
    # A reason with a pipe or a newline stays inside its line.
    assert "- `cuda12.6` amp.cuda_fp16: loss went up \\| then NaN stop" in text
    assert "- `cuda11.8` lock: the lock is missing" in text
    assert f"- `{empty}` is empty or not JSON" in text


def test_summary_of_a_smoke_report(tmp_path: Path) -> None:
    """`envbuild smoke --json` (what CI smoke jobs write when they test a pushed digest): one image's suite."""
    from smoke.report import CheckResult, SmokeReport

    report = SmokeReport([CheckResult("cuda.visible", "passed", "1 device visible", 0.1),
                          CheckResult("amp.cuda_fp16", "failed", "loss went up | then NaN", 2.0),
                          CheckResult("ddp.two_ranks", "skipped", "needs 2 GPUs", 0.0)])
    path = write(tmp_path / "reports" / "smoke-gpu-cuda12.6.json",
                 json_document("smoke", {**report.to_dict(), "notes": [], "seconds": 7.5}))
    read = read_report(path)
    assert read.kind == "smoke"
    text = markdown_summary([read])
    assert f"### envbuild smoke test: `{path}`" in text
    assert "| 1 | 1 | 1 | 7.5 | ❌ failed |" in text
    assert "- amp.cuda_fp16: loss went up \\| then NaN" in text
    assert read_report(write(tmp_path / "other.json", {"checks": []})).kind == "unreadable"
    # Another command's report, or one whose rows do not match the name it gives, is not summarised.
    assert read_report(write(tmp_path / "doctor.json", json_document("doctor", {"host": {}}))).kind == "unreadable"
    assert read_report(write(tmp_path / "fake.json", json_document("lock", [{"checks": []}]))).kind == "unreadable"


def test_summary_command(tmp_path: Path) -> None:
    # A bare list, as an envbuild before the versioned --json wrote it: still read.
    report = write(tmp_path / "lock-check.json", [LockResult("cpu", "fresh", Path("l"), input_hash="h").as_dict()])
    done = envbuild("summary", str(report), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"### envbuild lock check: `{report}`\n\n| target | lock | what to do |")
    as_json = json.loads(envbuild("summary", str(report), "--json", cwd=tmp_path).stdout)
    assert as_json["schema_version"] == 1 and as_json["report"] == "summary"
    assert as_json["reports"][0]["kind"] == "lock" and as_json["reports"][0]["rows"][0]["status"] == "fresh"


def test_summary_reads_a_report_that_envbuild_lock_wrote(repo: Path) -> None:
    """The versioned document `lock --check --json` prints is what summary reads (as CI passes it on)."""
    done = envbuild("lock", "envs/pytorch.yaml", "--check", "--cuda", "12.6", "--json", cwd=repo)
    read = read_report(write(repo / "reports" / "lock-check.json", json.loads(done.stdout)))
    assert read.kind == "lock" and [row["status"] for row in read.rows] == ["missing"]


def test_a_report_from_a_pull_request_cannot_put_html_or_an_image_into_the_summary(tmp_path: Path) -> None:
    report = tmp_path / "lock-check.json"
    hostile = '<img src="https://tracker.invalid/x.png"> ![x](https://tracker.invalid/y) [click](javascript:x)\u2028'
    report.write_text(json.dumps([{"target": "cpu<script>", "status": "stale", "input_hash": "h",
                                   "message": hostile, "hint": ""}]))
    text = markdown_summary([read_report(report)])
    assert "cpu\\<script\\>" in text
    assert "\\<img" in text and "\\!\\[x\\](https" in text and "\\[click\\](javascript" in text
    assert "<" not in text.replace("\\<", "") and "](" not in text.replace("\\](", "")
    assert "\u2028" not in text

"""An adversary in the tests: hypothesis drives the spec loader, the lockfile reader, the nvidia-smi
parsers and explain with generated documents and with mutations of real ones. Whatever comes in, each
answers with its result or one line of its own error type: never another exception, never a hang.

Bounded: a fixed number of examples each, a deadline per example, derandomized so CI sees the same
inputs every run (a failure found once is found again)."""

from __future__ import annotations

import os
import string
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
import yaml  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from builder.errors import EnvbuildError, UsageError  # noqa: E402
from tests.paths import REPO  # noqa: E402
from tests.unit.value_paths import value_paths  # noqa: E402

pytestmark = [pytest.mark.unit, pytest.mark.timeout(300)]

# FUZZ_EXAMPLES=5000 searches deeper, with fresh random inputs each run (a bench, not the unit suite).
DEEP = int(os.environ.get("FUZZ_EXAMPLES") or 0)
# The deadline catches blow-ups (a quadratic reader takes minutes), not speed: 10 s per example holds on a
# machine whose two cores run other jobs, where 2 s failed one example now and then.
BOUNDED = settings(max_examples=DEEP or 150, deadline=10_000, derandomize=not DEEP, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

SPEC_SEEDS = [REPO / "envs" / "pytorch.yaml", REPO / "tests" / "fixtures" / "specs" / "torch-cuda-pip.yaml"]
SMI_SEEDS = sorted((REPO / "tests" / "fixtures" / "nvidia-smi").glob("*.txt"))
SPEC_KEYS = ["name", "python", "torch", "torchvision", "route", "targets", "cuda", "platforms", "conda", "pip",
             "channels", "images", "runtime", "builder", "image", "digest", "glibc", "ca_certificates", "fleet",
             "host", "gpu", "user", "uid", "labels", "description", "pip_index"]


# --- inputs ----------------------------------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(allow_nan=True),
                    st.text(max_size=20), st.sampled_from(["cpu", "12.9", "12.10", "3.11", "2.13.0", "linux-64",
                                                           "pip", "conda-forge", "", "~", "*", "&a"]))
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5),
                            st.dictionaries(st.one_of(st.sampled_from(SPEC_KEYS), st.text(max_size=8)), inner,
                                            max_size=6)),
    max_leaves=40,
)


@st.composite
def mutated(draw, seeds: list[Path]) -> bytes:
    """A real file with bytes inserted, deleted, replaced or the file cut short."""
    data = bytearray(draw(st.sampled_from(seeds)).read_bytes())
    for _ in range(draw(st.integers(1, 8))):
        where = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["insert", "delete", "replace", "cut"]))
        chunk = draw(st.one_of(st.binary(max_size=6),
                               st.sampled_from([b":", b"- ", b"\n", b"  ", b"{", b"[", b"&x", b"*x", b"!!python/x",
                                                b"\t", b"'", b'"', b"\xff", b"#", b"<<: *x"])))
        if action == "insert":
            data[where:where] = chunk
        elif action == "delete":
            del data[where:where + len(chunk) + 1]
        elif action == "replace":
            data[where:where + len(chunk)] = chunk
        else:
            del data[where:]
    return bytes(data)


def spec_inputs() -> st.SearchStrategy[bytes]:
    dumped = documents.map(lambda doc: yaml.safe_dump(doc, allow_unicode=True).encode("utf-8"))
    return st.one_of(mutated(SPEC_SEEDS), dumped, st.binary(max_size=200))


def one_line(error: EnvbuildError) -> None:
    assert error.message and "\n" not in error.message, error.message


# --- the spec loader --------------------------------------------------------------------------------------

@BOUNDED
@given(content=spec_inputs())
def test_the_spec_loader_answers_a_spec_or_one_line(tmp_path_factory: pytest.TempPathFactory, content: bytes) -> None:
    from builder.specs.model import load_spec
    from builder.specs.target import resolve_targets

    path = tmp_path_factory.mktemp("spec") / "team.yaml"
    path.write_bytes(content)
    try:
        spec = load_spec(path)
        resolve_targets(spec)
    except UsageError as error:
        one_line(error)


# --- the lockfile reader -----------------------------------------------------------------------------------

LOCK = {
    "version": 1,
    "metadata": {"content_hash": {"linux-64": "0" * 64}, "channels": [{"url": "conda-forge", "used_env_vars": []}],
                 "platforms": ["linux-64"], "sources": ["environment.yml"]},
    "package": [{"name": name, "version": "1.0", "manager": manager, "platform": "linux-64", "dependencies": {},
                 "url": f"https://conda.example/linux-64/{name}-1.0-0.conda", "category": "main", "optional": False,
                 "hash": {"md5": "d41d8cd98f00b204e9800998ecf8427e", "sha256": "e3b0c442" * 8}}
                for name, manager in (("python", "conda"), ("numpy", "conda"), ("torch", "pip"))],
}


@pytest.fixture(scope="module")
def lock_seed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("seed") / "conda-lock.yml"
    path.write_text(yaml.safe_dump(LOCK, sort_keys=False))
    return path


@BOUNDED
@given(data=st.data())
def test_the_lockfile_reader_answers_a_lock_or_one_line(tmp_path_factory: pytest.TempPathFactory, lock_seed: Path,
                                                        data: st.DataObject) -> None:
    from builder.formats.conda_lock import read_lock
    from builder.lock.install import export_platform_plan

    content = data.draw(st.one_of(mutated([lock_seed]), st.binary(max_size=200),
                                  documents.map(lambda doc: yaml.safe_dump(doc).encode())))
    path = tmp_path_factory.mktemp("lock") / "conda-lock.yml"
    path.write_bytes(content)
    try:
        lock = read_lock(path)
        export_platform_plan(lock, "linux-64", str(path))
    except EnvbuildError as error:
        one_line(error)


# --- nvidia-smi and explain: text from a tool or a user, never an error --------------------------------

smi_text = st.one_of(mutated(SMI_SEEDS), st.binary(max_size=400),
                     st.text(alphabet=string.printable + "|+-=NVIDIA%MiB", max_size=400))


@BOUNDED
@given(raw=smi_text)
def test_the_nvidia_smi_table_parser_never_fails(raw: bytes | str) -> None:
    from smoke.nvsmi import parse_nvidia_smi

    reading = parse_nvidia_smi(raw)
    assert all(gpu.index >= 0 for gpu in reading.gpus)


@BOUNDED
@given(raw=st.one_of(st.binary(max_size=300), st.lists(st.lists(
    st.sampled_from(["0", "1", "NVIDIA A100", "[N/A]", "N/A", "", " 8.0", "81920", "x", "-1", "12.9", ","]),
    max_size=6).map(", ".join), max_size=5).map("\n".join)))
def test_the_nvidia_smi_query_parser_never_fails(raw: bytes | str) -> None:
    from smoke.nvsmi import gpus_from_query, parse_query_csv, processes_from_query

    fields = ("index", "name", "compute_cap", "memory.total", "memory.used", "uuid")
    rows = parse_query_csv(raw, fields)
    gpus_from_query(rows)
    processes_from_query(parse_query_csv(raw, ("gpu_uuid", "pid", "process_name", "used_memory")))


LOG_SEEDS = sorted((REPO / "tests" / "corpus" / "error-logs").glob("*"))[:40]


@BOUNDED
@given(raw=st.one_of(mutated([p for p in LOG_SEEDS if p.is_file()] or SMI_SEEDS), st.binary(max_size=400)))
def test_explain_answers_any_log(raw: bytes) -> None:
    from builder.explain.report import explain_text

    report = explain_text(raw, "log.txt")
    assert isinstance(report.as_dict(), dict)
    "\n".join(report.text_lines())



@st.composite
def retyped(draw, seeds: list) -> object:
    """A valid document with a few of its values (at any depth) replaced by values of any type."""
    import copy

    document = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 3))):
        paths = value_paths(document)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        node = document
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = draw(documents)
    return document


REPORT_SEEDS = [
    {"schema_version": 1, "report": "lock", "locks": [{"target": "cpu", "status": "stale", "input_hash": "h",
                                                       "message": "m", "hint": "h"}]},
    [{"target": "cpu", "image_id": "sha256:1", "tags": ["t:1"], "size": 10, "pushed": ["r/t:1"], "seconds": 1.0}],
    [{"target": "cpu", "cuda": "cpu", "lock": "fresh", "stage": "smoke", "result": "ok", "ok": True, "image": "t",
      "image_size": 10, "summary": {"passed": 1, "failed": 1}, "error": None, "seconds": 2.0,
      "checks": [{"name": "a", "status": "failed", "reason": "r"}]}],
    {"report_version": 1, "summary": {"passed": 1}, "checks": [{"name": "a", "status": "failed"}], "seconds": 1},
]


@BOUNDED
@given(document=retyped(REPORT_SEEDS))
def test_summary_answers_any_report_with_a_page(tmp_path_factory: pytest.TempPathFactory, document: object) -> None:
    import json

    from builder.teams.summary import markdown_summary, read_report

    path = tmp_path_factory.mktemp("report") / "report.json"
    path.write_text(json.dumps(document, default=str))
    assert isinstance(markdown_summary([read_report(path)]), str)


PIXI_SEEDS = [{
    "workspace": {"name": "vision", "channels": ["conda-forge"], "platforms": ["linux-64", "osx-arm64"]},
    "system-requirements": {"cuda": "12.0"},
    "dependencies": {"python": "3.11.*", "pytorch-gpu": {"version": ">=2.7", "build": "cuda126*"}},
    "pypi-dependencies": {"numpy": "*", "torchvision": {"version": "*", "index": "https://download.pytorch.org/whl/cu126"}},
    "pypi-options": {"index-url": "https://mirror.example/simple", "extra-index-urls": ["https://download.pytorch.org/whl/cu126"]},
    "target": {"linux-64": {"dependencies": {"cuda-version": "12.6"}}},
    "feature": {"cuda": {"platforms": ["linux-64"], "channels": ["conda-forge"], "dependencies": {"cuda-version": "12.6"},
                         "system-requirements": {"cuda": "12"}, "target": {"linux-64": {"dependencies": {"nccl": "*"}}}}},
    "environments": {"cuda": ["cuda"], "cpu": {"features": [], "no-default-feature": False}},
}]


@BOUNDED
@given(document=retyped(PIXI_SEEDS))
def test_the_pixi_manifest_reader_answers_a_reading_or_one_line(document: dict) -> None:
    from builder.init.pixi_manifest import read_pixi_manifest_data

    try:
        read_pixi_manifest_data(document, "pixi.toml")
    except EnvbuildError as exc:
        assert "\n" not in exc.message

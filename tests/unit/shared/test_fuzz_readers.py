"""The adversary, turned on every file `envbuild init --from` reads and on the host files a fleet is made of.

Each reader gets real files of its kind (tests/corpus, tests/fixtures) mutated with hostile pieces: Unicode
line breaks (U+2028, U+2029, U+0085), bidi and zero-width format characters, NUL, a lone surrogate's bytes,
numbers longer than Python's 4300-digit int limit, 1000-level nesting, YAML tags (`!!binary`) and values of
the wrong type. Whatever comes in, init answers with its spec or one line of envbuild's own error; never
another exception, never a hang. Same bounded, derandomized settings as test_fuzz.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
import tomlkit  # noqa: E402
import yaml  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from builder.errors import EnvbuildError  # noqa: E402
from tests.paths import REPO  # noqa: E402

pytestmark = [pytest.mark.unit, pytest.mark.timeout(600)]

DEEP = int(os.environ.get("FUZZ_EXAMPLES") or 0)
# As in test_fuzz.py: the deadline catches blow-ups, not speed, so it leaves room for a loaded machine.
BOUNDED = settings(max_examples=DEEP or 60, deadline=10_000, derandomize=not DEEP, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

CORPUS = REPO / "tests" / "corpus"
HUGE = "9" * 4400


def _seeds(*patterns: str) -> list[Path]:
    found = sorted({path for pattern in patterns for path in CORPUS.glob(pattern) if path.is_file()})
    assert found, patterns
    return found[:12]


# The file name each reader is chosen by, and real files of that kind.
READERS = {
    "requirements.txt": _seeds("envfiles/*/requirements*.txt", "foreign-files/rq-*.txt"),
    "environment.yml": _seeds("envfiles/*/environment*.y*ml", "foreign-files/env-*.yml"),
    "Dockerfile": _seeds("envfiles/*/Dockerfile", "foreign-files/df-*"),
    "pixi.toml": _seeds("pixi-uv/*/pixi.toml"),
    "pixi.lock": _seeds("pixi-uv/*/pixi.lock"),
    "pyproject.toml": _seeds("pixi-uv/*/pyproject.toml"),
    "conda-lock.yml": _seeds("envfiles/*/conda-lock.yml"),
    "conda-list.txt": _seeds("foreign-files/cl-*.txt"),
}

HOSTILE = [
    "\u2028", "\u2029", "\x85", "\u202e", "\u200b", "\ufeff", "\x00", "\x1b]52;c;aGk=\x07", HUGE, f"-{HUGE}",
    f"0.{HUGE}", f"{HUGE}e1", "1e400", "nan", "true", "!!binary aGk=", "!!python/name:os.system", "{", "[", "]]",
    "= {}", "= 1", "= true", "= [1, 2]", ": 1", ": true", ": [1]", ": {a: 1}", "- 1", "\\", "${X}", "$(id)",
    "../" * 8 + "etc/passwd", "-r /proc/self/environ", "torch==" + HUGE, "python=" + HUGE, "cuda-version=" + HUGE,
]
HOSTILE_BYTES = [text.encode() for text in HOSTILE] + [b"\r", b"\n", b"\t", b"\n  - ", b"\n[a]\n", b"\nRUN "]
NOT_UTF8 = [b"\xed\xa0\x80", b"\xff\xfe", b"\xc0\xaf"]  # a lone surrogate's bytes, a BOM of UTF-16, overlong


@st.composite
def hostile_mutation(draw: st.DrawFn, seeds: list[Path]) -> bytes:
    """A real file with hostile pieces put at random places (or replacing what was there), or cut short."""
    data = bytearray(draw(st.sampled_from(seeds)).read_bytes())
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, len(data)))
        # Mostly UTF-8 (what passes the decoder reaches the parsers); now and then bytes that are not.
        chunk = draw(st.sampled_from(HOSTILE_BYTES) if draw(st.integers(0, 7)) else st.sampled_from(NOT_UTF8))
        action = draw(st.sampled_from(["insert", "insert", "replace", "cut"]))
        if action == "insert":
            data[where:where] = chunk
        elif action == "replace":
            data[where:where + len(chunk)] = chunk
        else:
            del data[where:]
    return bytes(data)


def deep(kind: str, depth: int = 1000) -> list[bytes]:
    """Nesting deeper than any real file, in the syntax of the reader's format."""
    flow = "[" * depth + "]" * depth
    if kind.endswith(".toml"):
        return [f"a = {flow}\n".encode(), ("[" + ".".join(["a"] * depth) + "]\n").encode(),
                ("dependencies = " + "{a = " * depth + "1" + "}" * depth + "\n").encode()]
    if kind in ("requirements.txt", "Dockerfile", "conda-list.txt"):
        return [("RUN " + "$(" * depth + "pip install torch" + ")" * depth + "\n").encode(),
                ("torch" + "[" * depth + "\n").encode(), ("x" * 200_000).encode()]
    return [f"dependencies: {flow}\n".encode(), ("dependencies:\n" + "".join(
        " " * level + "- \n" for level in range(depth))).encode(),
        ("package: " + "{a: " * depth + "1" + "}" * depth + "\n").encode(),
        b"a: &a [" + b"*a, " * 10 + b"]\n"]


# Values of the wrong type where each format expects a table, a list or a string.
KEYS = ["name", "channels", "dependencies", "pip", "platforms", "version", "metadata", "package", "project",
        "workspace", "feature", "environments", "pypi-dependencies", "system-requirements", "cuda", "tool", "uv",
        "sources", "index", "optional-dependencies", "requires-python", "torch", "python", "environments",
        "packages", "conda", "pypi", "url", "hash", "manager", "platform", "target", "linux-64", "default"]
scalars = st.one_of(st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=12), st.sampled_from(HOSTILE + ["torch", "12.1", "3.11", "linux-64", "*"]))
documents = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)), max_leaves=25)


def _dump(kind: str, doc: object) -> bytes:
    if kind.endswith(".toml"):
        table = doc if isinstance(doc, dict) else {"dependencies": doc}
        return tomlkit.dumps(table).encode()
    if kind.endswith((".yml", ".lock")):
        return yaml.safe_dump(doc, allow_unicode=True).encode()
    lines = doc if isinstance(doc, list) else [doc]
    return "\n".join(str(line) for line in lines).encode()


def reader_inputs(kind: str) -> st.SearchStrategy[bytes]:
    return st.one_of(hostile_mutation(READERS[kind]), st.sampled_from(deep(kind)),
                     documents.map(lambda doc: _dump(kind, doc)), st.binary(max_size=200))


def one_line(error: EnvbuildError) -> None:
    assert error.message and not any(mark in error.message for mark in "\n\r\u2028\u2029\x85"), error.message


def answers_or_one_line(tmp: Path, kind: str, content: bytes) -> None:
    from builder.init.importer import init_spec

    source = tmp / kind
    source.write_bytes(content)
    try:
        init_spec(source, out=tmp / "out" / "team.yaml")
    except EnvbuildError as error:
        one_line(error)


@pytest.mark.parametrize("kind", sorted(READERS))
def test_every_init_reader_answers_a_spec_or_one_line(kind: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    @BOUNDED
    @given(content=reader_inputs(kind))
    def run(content: bytes) -> None:
        answers_or_one_line(tmp_path_factory.mktemp("init"), kind, content)

    run()


DEEP_CASES = [(kind, piece) for kind in sorted(READERS) for piece in deep(kind)]


@pytest.mark.parametrize(("kind", "content"), DEEP_CASES, ids=[f"{kind}-{n}" for n, (kind, _) in enumerate(DEEP_CASES)])
def test_deep_nesting_answers_one_line(kind: str, content: bytes, tmp_path: Path) -> None:
    answers_or_one_line(tmp_path, kind, content)


# --- host files (`envbuild doctor --save`, the files of a fleet) ------------------------------------------

HOST_SEEDS = sorted((REPO / "tests" / "fixtures" / "hosts").glob("*.json"))


@st.composite
def host_documents(draw: st.DrawFn) -> bytes:
    """A recorded host with one value swapped for a hostile or wrongly typed one, at any depth."""
    record = json.loads(draw(st.sampled_from(HOST_SEEDS)).read_text())
    node = record
    while isinstance(node, (dict, list)) and node and draw(st.booleans()):
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        key = draw(st.sampled_from(keys))
        if not isinstance(node[key], (dict, list)) or draw(st.booleans()):
            node[key] = draw(documents)
            break
        node = node[key]
    text = json.dumps(record, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()):
        text = text.replace('"', "", 1) if draw(st.booleans()) else text.replace("1", HUGE, 1)
    return text.encode("utf-8", "surrogatepass")


HOST_DEEP = [b"[" * 100_000 + b"]" * 100_000, b'{"envbuild_host": 1, "gpus": ' + b"[" * 1000 + b"]" * 1000 + b"}",
             ('{"envbuild_host": ' + HUGE + "}").encode(), b'{"envbuild_host": 1e400}', b'"\\ud800"', b"\xed\xa0\x80"]


@BOUNDED
@given(content=st.one_of(host_documents(), st.sampled_from(HOST_DEEP), hostile_mutation(HOST_SEEDS)))
def test_the_host_file_reader_answers_a_host_or_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                         content: bytes) -> None:
    from builder.host.fleet import load_host

    path = tmp_path_factory.mktemp("host") / "box.json"
    path.write_bytes(content)
    try:
        load_host(path)
    except EnvbuildError as error:
        one_line(error)


# --- through the command line: exit 1 or 2 with one line, never 70 ----------------------------------------

CLI_CASES = [
    ("requirements.txt", f"torch=={HUGE}\n".encode()),
    ("environment.yml", "name: a\u2028b\ndependencies:\n  - python=3.11\n  - pytorch\n".encode()),
    ("pixi.toml", b"[workspace]\nplatforms = 1\n[dependencies]\npytorch = 1\n"),
    ("pyproject.toml", b"[project]\nname = 1\ndependencies = true\n"),
    ("environment.yml", b"dependencies: " + b"[" * 1000 + b"]" * 1000 + b"\n"),
    ("Dockerfile", "FROM python:3.11\u202e\nRUN pip install torch\x00\n".encode()),
    ("conda-lock.yml", b"version: 1\npackage: !!binary aGk=\n"),
    ("Dockerfile", b"\\"),
]


@pytest.mark.parametrize(("kind", "content"), CLI_CASES, ids=[f"{kind}-{n}" for n, (kind, _) in enumerate(CLI_CASES)])
def test_init_from_a_hostile_file_exits_with_one_line(kind: str, content: bytes, tmp_path: Path) -> None:
    source = tmp_path / kind
    source.write_bytes(content)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "builder", "init", "--from", str(source), "--out",
                           str(tmp_path / "out.yaml")], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert done.returncode in (0, 1, 2), (done.returncode, done.stderr[-800:])
    if done.returncode:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("Error:"), done.stderr[-800:]

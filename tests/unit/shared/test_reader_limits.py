"""The minimal cases the reader fuzzers (test_fuzz_readers.py) found: each an internal error before, one
UsageError line now."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.errors import UsageError

pytestmark = pytest.mark.unit

HUGE = "9" * 4301


def test_a_toml_file_nested_past_the_stack_is_one_line(tmp_path: Path) -> None:
    from builder.init.variants import read_toml_file

    path = tmp_path / "pixi.toml"
    path.write_text("a = " + "[" * 1000 + "]" * 1000 + "\n")
    with pytest.raises(UsageError, match="nest too deeply"):
        read_toml_file(path, "pixi.toml")


@pytest.mark.parametrize("kind", ["requirements.txt", "Dockerfile", "pyproject.toml"])
def test_a_number_past_pythons_int_limit_is_one_line(kind: str, tmp_path: Path) -> None:
    from builder.init.read import read_source

    path = tmp_path / kind
    path.write_text({"requirements.txt": f"torch=={HUGE}\n", "Dockerfile": f"FROM python:3.11\nRUN pip install torch=={HUGE}\n",
                     "pyproject.toml": f"[project]\nname = \"a\"\ndependencies = [\"torch=={HUGE}\"]\n"}[kind])
    with pytest.raises(UsageError, match=r"line \d+: a number of 4301 digits") as caught:
        read_source(path)
    assert "\n" not in str(caught.value)


def test_a_number_at_the_limit_is_read(tmp_path: Path) -> None:
    from builder.safe_io.text import overlong_number

    assert overlong_number("x" + "9" * 4300) is None
    assert overlong_number("a\nb " + HUGE) == (2, 4301)


@pytest.mark.parametrize("content", [b"[" * 100_000 + b"]" * 100_000, b'{"envbuild_host": ' + HUGE.encode() + b"}"],
                         ids=["deep", "huge-int"])
def test_a_host_file_too_deep_or_with_a_huge_int_is_one_line(content: bytes, tmp_path: Path) -> None:
    from builder.formats.host_file import read_host_file

    path = tmp_path / "box.json"
    path.write_bytes(content)
    with pytest.raises(UsageError, match="not an envbuild host file") as caught:
        read_host_file(path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("text", ["\\", "FROM python:3.11\n\\\n", "FROM python:3.11\nRUN pip install torch\n\\"])
def test_a_dockerfile_with_a_lone_continuation_line_is_read(text: str) -> None:
    from builder.init.dockerfile import read_dockerfile_text

    reading = read_dockerfile_text(text, "Dockerfile")
    assert reading.kind == "Dockerfile"


def test_a_reason_quoting_a_unicode_line_break_stays_one_line(tmp_path: Path) -> None:
    from builder.init.read import read_source

    path = tmp_path / "pixi.lock"
    path.write_text("version: '4\u2028jobs: x'\n", encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        read_source(path)
    assert "\u2028" not in str(caught.value) and "\\u2028" in str(caught.value)

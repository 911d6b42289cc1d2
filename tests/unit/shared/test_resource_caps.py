"""Inputs built to exhaust memory or time stop early with one line: a Dockerfile whose ARGs repeat each
other (889 bytes reached 24 GB before the cap) is refused at the first reference past the cap, in
milliseconds, while ordinary ARG and ENV references still read."""

from __future__ import annotations

import time

import pytest

from builder.errors import UsageError
from builder.init.dockerfile import read_dockerfile_text
from builder.init.dockerfile_vars import MAX_EXPANDED_CHARS, MAX_GROWTH_CHARS

pytestmark = pytest.mark.unit


def _chain(levels: int) -> str:
    lines = ["FROM python:3.11", "ARG A0=xxxxxxxxxx"]
    lines += [f"ARG A{i}=" + f"${{A{i - 1}}}" * 10 for i in range(1, levels + 1)]
    return "\n".join([*lines, f"RUN pip install torch==2.4.1 ${{A{levels}}}"]) + "\n"


@pytest.mark.parametrize("levels", [5, 9, 40])
def test_a_chain_of_args_that_repeat_each_other_is_one_line_at_once(levels: int) -> None:
    started = time.monotonic()
    with pytest.raises(UsageError, match="expand past") as refused:
        read_dockerfile_text(_chain(levels), "Dockerfile.bomb")
    assert time.monotonic() - started < 2
    assert str(refused.value).startswith("Dockerfile.bomb: ") and len(str(refused.value).splitlines()) == 1


def test_many_lines_each_under_the_line_cap_stop_at_the_files_cap() -> None:
    value = "y" * (MAX_EXPANDED_CHARS // 2)
    runs = MAX_GROWTH_CHARS // len(value) + 2
    text = f"FROM python:3.11\nARG BIG={value}\n" + "RUN echo $BIG\n" * runs
    with pytest.raises(UsageError, match="MiB in all"):
        read_dockerfile_text(text, "Dockerfile")


def test_a_short_chain_still_reads() -> None:
    text = ("ARG CUDA=cu124\nFROM python:3.11\nARG CUDA\nARG INDEX=https://download.pytorch.org/whl/${CUDA}\n"
            "ENV TORCH=2.6.0\nRUN pip install torch==${TORCH} --index-url $INDEX\n")
    reading = read_dockerfile_text(text, "Dockerfile")
    assert reading.pip_torch is not None

"""Inputs built to exhaust memory or time stop early with one line: a Dockerfile whose ARGs repeat each
other (889 bytes reached 24 GB before the cap) is refused at the first reference past the cap, in
milliseconds, while ordinary ARG and ENV references still read."""

from __future__ import annotations

import sys
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


def test_a_child_that_prints_hundreds_of_megabytes_is_kept_to_its_cap_and_its_last_lines() -> None:
    import resource

    from builder import proc

    script = ("import sys; out = sys.stdout.buffer; chunk = b'x' * (1 << 20) + b'\\n'\n"
              "for _ in range(200): out.write(chunk)\n"
              "out.write(b'the last line says why\\n'); sys.exit(3)\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    done = proc.run([sys.executable, "-c", script], timeout=120, what="a loud tool")
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert done.returncode == 3
    assert len(done.stdout) <= proc.MAX_OUTPUT_BYTES + proc.TAIL_BYTES + 100
    assert done.stdout.rstrip().endswith("the last line says why") and "bytes of this output left out" in done.stdout
    assert grown_mib < 100  # before the cap: the whole 200 MB was held, twice over as text


def test_a_grandchild_holding_the_pipes_ends_with_the_group_at_the_timeout() -> None:
    from builder import proc

    started = time.monotonic()
    with pytest.raises(proc.ProcessTimeout):
        proc.run(["sh", "-c", "sleep 300 & echo started; wait"], timeout=1, what="a tool that forks")
    assert time.monotonic() - started < 10


def test_input_reaches_the_child() -> None:
    from builder import proc

    done = proc.run([sys.executable, "-c", "import sys; print(len(sys.stdin.read()))"], timeout=60, what="cat",
                    input=b"y" * 300_000)
    assert (done.returncode, done.stdout.strip()) == (0, "300000")

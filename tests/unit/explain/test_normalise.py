"""The normaliser in front of explain's matchers: a message behind colour codes, timestamps, a runner's or a
launcher's prefixes, tabs, CR line ends or a terminal's wrap is found as if printed plainly, and its line
number is the pasted log's."""

from __future__ import annotations

import pytest

hypothesis = pytest.importorskip("hypothesis")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from builder.explain.normalise import normalise_log  # noqa: E402
from builder.explain.report import explain_text  # noqa: E402
from tests.unit.explain.explain_examples import EXAMPLES  # noqa: E402

pytestmark = pytest.mark.unit

# One-line examples: a decoration applies per line, and a multi-line example's continuation lines carry
# indentation of their own.
ONE_LINE = sorted((family, line) for family, line in EXAMPLES.items() if "\n" not in line.strip())

DECORATIONS = {
    "ansi red": lambda line: f"\x1b[31m{line}\x1b[0m",
    "ansi bold in the middle": lambda line: line.replace(" ", " \x1b[1m", 1) + "\x1b[0m",
    "iso timestamp": lambda line: f"2024-05-01 12:00:01,123 {line}",
    "ci timestamp": lambda line: f"2024-05-01T12:00:01.1234567Z {line}",
    "bracketed timestamp": lambda line: f"[2024-05-01 12:00:01] {line}",
    "pytest E": lambda line: f"E       {line}",
    "torchrun rank": lambda line: f"[rank3]: {line}",
    "torchrun tee": lambda line: f"[default0]:{line}",
    "buildkit step output": lambda line: f"#12 3.456 {line}",
    "rank behind a timestamp": lambda line: f"2024-05-01T12:00:01Z [rank0]: {line}",
    "tab indented": lambda line: f"\t{line}",
}

decorations = st.lists(st.sampled_from(sorted(DECORATIONS)), min_size=1, max_size=3)


def first_family(text: str) -> str | None:
    report = explain_text(text)
    return report.findings[0].rule if report.findings else None


@settings(max_examples=150, deadline=None)
@given(example=st.sampled_from(ONE_LINE), names=decorations, crlf=st.booleans())
def test_a_decorated_message_names_the_family_of_the_plain_one(example: tuple[str, str], names: list[str],
                                                               crlf: bool) -> None:
    family, line = example
    plain = f"Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n{line}\n"
    decorated_lines = plain.splitlines()
    for name in names:
        decorated_lines = [DECORATIONS[name](each) if each else each for each in decorated_lines]
    decorated = ("\r\n" if crlf else "\n").join(decorated_lines) + "\n"
    assert first_family(plain) == family
    assert first_family(decorated) == family


@settings(max_examples=100, deadline=None)
@given(example=st.sampled_from([pair for pair in ONE_LINE if len(pair[1]) > 90]),
       before=st.integers(min_value=2, max_value=6))
def test_a_message_a_terminal_wrapped_at_80_columns_is_read_whole(example: tuple[str, str], before: int) -> None:
    family, line = example
    filler = [f"epoch {i} step {i * 100} loss 0.5 lr 3e-4 grad norm 1.0 saved state dict to checkpoint-{i}.pt ok"
              for i in range(before)]
    log = "\n".join(filler + [line]) + "\n"
    wrapped = "\n".join(chunk for each in log.splitlines() for chunk in _wrap(each, 80)) + "\n"
    normalised = normalise_log(wrapped)
    assert normalised.text.splitlines() == log.splitlines()
    assert first_family(wrapped) == family


def _wrap(line: str, width: int) -> list[str]:
    return [line[i:i + width] for i in range(0, len(line), width)] or [""]


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400))
def test_normalising_is_idempotent_and_keeps_line_origins_in_order(text: str) -> None:
    once = normalise_log(text)
    assert normalise_log(once.text).text == once.text
    pasted_lines = text.replace("\r\n", "\n").replace("\r", "\n").count("\n") + 1
    origin = once.origin or tuple(range(1, pasted_lines + 1))  # (): every line stays where it was
    assert list(origin) == sorted(set(origin))
    assert len(origin) == once.text.count("\n") + 1
    assert all(1 <= line <= pasted_lines for line in origin)


def test_a_finding_quotes_the_pasted_logs_line_after_a_wrap_is_undone() -> None:
    message = ("RuntimeError: CUDA error: no kernel image is available for execution on the device. Compile with "
               "TORCH_USE_CUDA_DSA to enable device-side assertions.")
    filler = "x" * 80
    pasted = "\n".join([filler[:40], *_wrap(filler + filler[:40], 80), *_wrap(message, 80)]) + "\n"
    report = explain_text(pasted)
    assert report.findings[0].rule == "explain.cuda.no-kernel-image"
    assert report.findings[0].location is not None and report.findings[0].location.line == 4


def test_nvidia_smis_table_is_not_taken_for_wrapped_lines() -> None:
    border = "+" + "-" * 77 + "+"
    row = "| NVIDIA-SMI 535.54.03   Driver Version: 535.54.03   CUDA Version: 12.2      |".ljust(78) + "|"
    normalised = normalise_log(f"{border}\n{row}\n{border}\n")
    assert normalised.text.splitlines() == [border, row, border]


def test_pytest_and_rank_prefixes_go_and_the_rest_of_the_line_stays() -> None:
    pasted = "E   RuntimeError: boom\n[rank1]:[W socket.cpp:464] [c10d] refused\n\tat line two\n"
    assert normalise_log(pasted).text.splitlines() == ["RuntimeError: boom", "[W socket.cpp:464] [c10d] refused",
                                                       "    at line two"]

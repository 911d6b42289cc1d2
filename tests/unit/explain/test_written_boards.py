"""GPU boards as people write them (builder/explain/boards.py): without NVIDIA's brand words, a bare GeForce
number with its series put back by gpus.yaml's naming rule, short data-centre names, read only as boards the GPU
table knows and only beside a word that makes them a board; versions, ports, dates and layer names are not."""

from __future__ import annotations

import pytest

from builder.explain.boards import boards_in
from builder.explain.report import explain_text

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("text", "name"), [
    ("I have an RTX 5070 here", "RTX 5070"),
    ("it fails on a 5080 GPU", "RTX 5080"),
    ("my 4090 crashes", "RTX 4090"),
    ("works with a 3060 Ti", "RTX 3060 Ti"),
    ("3060 Ti", "RTX 3060 Ti"),
    ("training on A100 nodes", "A100"),
    ("H100 80GB nodes", "H100 80GB"),
    ("served on L4", "L4"),
    ("GTX 1080Ti", "GTX 1080 Ti"),
    ("a Jetson Orin board", "Jetson Orin"),
    ("rtx3090", "RTX 3090"),
    ("NVIDIA GeForce RTX 4070 SUPER", "RTX 4070 SUPER"),
    ("2x 4090", "RTX 4090"),
])
def test_a_board_as_written_is_the_tables_board(text: str, name: str) -> None:
    assert [board.name for board in boards_in(text)][:1] == [name]


@pytest.mark.parametrize("text", [
    "torch 2.4090", "listening on port 5080", "port 5080", "2024-05-08", "released 2080-01-01", "version 2080",
    "at 10:50", "L4 cache", "layer L4 of the model", "see 1080p video", "$ 4090", "A7 is the key", "id 3070x",
])
def test_numbers_and_words_that_are_not_boards_are_not_read(text: str) -> None:
    assert list(boards_in(text)) == []


def test_a_written_board_is_the_logs_gpu_fact_with_its_capability() -> None:
    facts = explain_text(b"RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
                         b"same here on a 5080 GPU with the nightly\n", "log").facts
    assert facts.get("gpu") == "RTX 5080" and facts.get("sm") == "sm_120"
    assert facts.facts["gpu"].line == 2 and "5080 GPU" not in facts.facts["gpu"].value


def test_a_stated_gpu_line_in_words_takes_the_board_in_them() -> None:
    facts = explain_text(b"GPU: my 4090\n", "log").facts
    assert facts.get("gpu") == "RTX 4090" and facts.get("sm") == "sm_89"


def test_an_nvidia_smi_name_still_wins_over_prose() -> None:
    log = b"|   0  NVIDIA A100-SXM4-40GB          On  | 00000000:00:04.0 Off |\nmy 4090 at home works\n"
    assert explain_text(log, "log").facts.get("gpu") == "NVIDIA A100-SXM4-40GB"

"""The GPU table (builder/data/gpus.yaml) against NVIDIA's own list: every board NVIDIA lists reads back as the
capability it lists, however nvidia-smi spells the brand; cut names and generation rules decide only when sure."""

from __future__ import annotations

import pytest

from builder.specs.gpus import listed_boards, model_capability, vgpu_board

pytestmark = pytest.mark.unit

BOARDS = listed_boards()
# NVIDIA lists these names under two capabilities (a memory variant nvidia-smi does not print).
AMBIGUOUS = {"GeForce GT 640 (GDDR5)", "GeForce GT 640 (GDDR3)", "GeForce GT 730", "GeForce GT 730 DDR3,128bit"}


def test_the_table_is_nvidias_whole_list() -> None:
    capabilities = {capability for _, capability in BOARDS}
    # Every capability NVIDIA's two pages list, Fermi to Blackwell.
    assert capabilities == {(2, 0), (2, 1), (3, 0), (3, 2), (3, 5), (3, 7), (5, 0), (5, 2), (5, 3), (6, 0), (6, 1),
                            (6, 2), (7, 0), (7, 2), (7, 5), (8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3),
                            (11, 0), (12, 0), (12, 1)}
    assert len(BOARDS) >= 230  # 231 names on 2026-12-07


@pytest.mark.parametrize(("name", "capability"), BOARDS, ids=[name for name, _ in BOARDS])
def test_every_listed_board_reads_as_listed(name: str, capability: tuple[int, int]) -> None:
    plain = name.replace(" (DGX Spark)", "")
    spellings = {plain, f"NVIDIA {plain.removeprefix('NVIDIA ')}", plain.upper()}
    for spelling in spellings:
        told = model_capability(spelling)
        if name in AMBIGUOUS:
            assert told.capability is None and capability in told.candidates, spelling
        else:
            assert told.capability == capability, (spelling, told)


@pytest.mark.parametrize(("cut", "capability"), [
    # As the blind captures show them (tests/corpus/nvidia-smi-blind): every board with that prefix agrees.
    ("GeForce GTX 105...", (6, 1)), ("GeForce GTX 108...", (6, 1)), ("Tesla V100-PCIE...", (7, 0)),
    ("NVIDIA A100-SXM...", (8, 0)), ("NVIDIA RTX PRO 6000 Blac...", (12, 0)), ("GeForce RTX 207...", (7, 5)),
    ("NVIDIA GeForce RTX 4050 ...", (8, 9)),
    # Boards of several capabilities fit: none is picked.
    ("NVIDIA GeForce ...", None), ("NVIDIA RTX 6000 ...", None), ("Quadro K...", None),
])
def test_cut_names_decide_only_when_every_candidate_agrees(cut: str, capability) -> None:
    told = model_capability(cut)
    assert told.capability == capability
    assert (told.how == "name prefix") == (capability is not None)
    if capability is None:
        assert len(told.candidates) > 1


@pytest.mark.parametrize(("name", "capability"), [
    ("NVIDIA GeForce GTX 1650", (7, 5)), ("NVIDIA GeForce GTX 1660 SUPER", (7, 5)),
    ("NVIDIA GeForce RTX 2080 SUPER", (7, 5)), ("NVIDIA GeForce RTX 5050 Laptop GPU", (12, 0)),
    ("NVIDIA RTX PRO 3000 Blackwell Generation Laptop GPU", (12, 0)), ("NVIDIA RTX 3500 Ada Generation", (8, 9)),
    ("NVIDIA RTX A1000", (8, 6)), ("NVIDIA GeForce GTX 1030", (6, 1)),
])
def test_boards_newer_than_the_table_follow_their_generation(name: str, capability: tuple[int, int]) -> None:
    told = model_capability(name)
    assert told.capability == capability
    assert told.how is not None and (told.how == "model name" or told.how.startswith("generation "))


def test_names_no_rule_knows_stay_unknown() -> None:
    for name in ("NVIDIA GeForce MX130", "Radeon RX 7900", "NVIDIA Mystery GPU"):
        assert model_capability(name).capability is None


@pytest.mark.parametrize(("name", "board", "capability"), [
    # A vGPU guest's nvidia-smi names the vGPU type: the board, an edition letter, frame buffer and series.
    ("GRID A100D-20C", "A100", (8, 0)), ("GRID A100-40C", "A100", (8, 0)), ("GRID P40-4Q", "P40", (6, 1)),
    ("NVIDIA A100-1-5C", "A100", (8, 0)), ("T4-16Q", "T4", (7, 5)), ("NVIDIA H100XM-80C", "H100", (9, 0)),
    ("V100DX-32C", "V100", (7, 0)), ("L40S-48Q", "L40S", (8, 9)), ("RTX6000-24Q", "RTX 6000", (7, 5)),
])
def test_a_vgpu_type_tells_the_capability_of_its_board(name: str, board: str, capability: tuple[int, int]) -> None:
    told = model_capability(name)
    assert vgpu_board(name) == board
    assert told.capability == capability and told.how == f"vGPU type of {board}"


def test_board_names_with_dashes_are_not_vgpu_types() -> None:
    for name in ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB", "Tesla V100-SXM2-32GB", "GRID K520",
                 "NVIDIA H100 80GB HBM3", "Tesla V100-PCIE..."):
        assert vgpu_board(name) is None, name
    assert model_capability("NVIDIA A100-SXM4-80GB").how == "model name"


@pytest.mark.parametrize(("name", "capability"), [
    # Notebook boards public pastes name that NVIDIA's pages no longer list (the data's not_listed, sourced).
    ("GeForce 920M", (3, 5)), ("GeForce GT 540M", (2, 1)), ("GeForce GTX 870M", (3, 0)),
    ("NVIDIA GeForce MX450", (7, 5)), ("NVIDIA GeForce MX570", (8, 6)),
])
def test_notebook_boards_outside_nvidias_pages_read_from_the_data(name: str, capability: tuple[int, int]) -> None:
    assert model_capability(name).capability == capability
    # A name made from two chips of different capabilities stays unknown.
    assert model_capability("NVIDIA GeForce GTX 860M").capability is None

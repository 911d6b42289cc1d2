"""Every row of data/ngc_pytorch.yaml names its CUDA and where it was read; torch and Python are versions or null."""

from __future__ import annotations

import re

import pytest
import yaml

from builder.yamlio import data_text

pytestmark = pytest.mark.unit

ROWS = yaml.safe_load(data_text("ngc_pytorch.yaml"))["releases"]
RELEASE_NOTES = re.compile(r"https://docs\.nvidia\.com/deeplearning/frameworks/pytorch-release-notes/rel[-_]\d\d-\d\d\.html")
VERSION = re.compile(r"\d+\.\d+(\.\d+)?([a-z]\w*)?(\+\w+)?")


@pytest.mark.parametrize("release", sorted(ROWS))
def test_an_ngc_row_names_its_cuda_and_nvidia_page(release: str) -> None:
    row = ROWS[release]
    assert re.fullmatch(r"\d\d\.\d\d", release)
    assert re.fullmatch(r"\d+\.\d+", str(row["cuda"]))
    source = str(row["source"])
    assert RELEASE_NOTES.fullmatch(source) or row.get("via"), source
    assert release.replace(".", "-") in source  # the page of this release, not a neighbour's
    for field in ("torch", "python"):
        assert row[field] is None or VERSION.fullmatch(str(row[field])), (field, row[field])

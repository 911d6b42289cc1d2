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

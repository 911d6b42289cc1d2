"""Where the tests' files are, named once: a test reads the checkout and the data folders under tests/
through these, so where the test file itself sits in tests/ does not matter."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
CORPUS = TESTS / "corpus"
FIXTURES = TESTS / "fixtures"
SNAPSHOTS = TESTS / "snapshots"

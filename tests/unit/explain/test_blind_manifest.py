"""The blind corpus (tests/corpus/realworld-blind): every log is in the manifest, sourced from a repository of
its batch's frozen list, scored on answers, and held out by the manifest's split_rule, not by hand.

Batch 1 (b001-b081) was sampled from `repositories`; batch 2 (b082-b110, `batch: 2`) is a fresh sample from
`repositories_batch2`, batch 3 (b111-b137, `batch: 3`) one from `repositories_batch3` and batch 4 (b138 onward,
`batch: 4`) one from `repositories_batch4`; each list is disjoint from the earlier ones and
was fixed before any of its issues was read."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import yaml

from bench.answers import has_answer
from bench.realworld import BLIND_CORPUS, judge, load_cases

pytestmark = pytest.mark.unit

MANIFEST = yaml.safe_load((BLIND_CORPUS / "manifest.yaml").read_text(encoding="utf-8"))
CASES: list[dict[str, Any]] = MANIFEST["cases"]
# Repositories renamed upstream: the stored threads carry the new owner, the frozen list the old one.
RENAMED = {"deepspeedai/DeepSpeed": "microsoft/DeepSpeed", "bitsandbytes-foundation/bitsandbytes":
           "TimDettmers/bitsandbytes"}


def _held_out(file: str) -> bool:
    return int(hashlib.sha256(file.encode()).hexdigest(), 16) % 2 == 1


def test_every_log_is_in_the_manifest_once() -> None:
    files = [case["file"] for case in CASES]
    assert len(files) == len(set(files))
    assert sorted(files) == sorted(path.name for path in BLIND_CORPUS.glob("*.log"))


def test_the_split_is_the_split_rule_of_the_file_name() -> None:
    assert "sha256" in MANIFEST["split_rule"]
    for case in CASES:
        assert case["split"] == ("heldout" if _held_out(case["file"]) else "dev"), case["file"]


BATCH_LISTS = {1: "repositories", 2: "repositories_batch2", 3: "repositories_batch3", 4: "repositories_batch4"}
FIRST_NUMBER = {1: 1, 2: 82, 3: 111, 4: 138}  # a batch's cases are numbered from here, up to the next batch's first


def test_the_repository_lists_are_frozen_apart() -> None:
    lists = [set(MANIFEST[key]) for key in BATCH_LISTS.values()]
    for later, listed in enumerate(lists[1:], start=1):
        assert len(listed) >= 10 and not listed & set().union(*lists[:later])


@pytest.mark.parametrize("case", CASES, ids=lambda case: case["file"])
def test_a_case_comes_from_its_batch_list_with_an_answer_to_meet(case: dict[str, Any]) -> None:
    batch = case.get("batch", 1)
    assert batch in BATCH_LISTS
    listed = MANIFEST[BATCH_LISTS[batch]]
    assert RENAMED.get(case["repository"], case["repository"]) in listed, case["repository"]
    assert case["source"].startswith("https://github.com/")
    assert case["resolution"].strip()
    assert has_answer(case["expect"]) and case["expect"].get("fix_must") is not None
    number = int(case["file"][1:4])
    assert FIRST_NUMBER[batch] <= number < FIRST_NUMBER.get(batch + 1, 1000), case["file"]


def test_the_bench_reads_the_batch_of_every_case() -> None:
    outcomes = [judge(case, BLIND_CORPUS) for case in load_cases(BLIND_CORPUS) if case["split"] == "dev"]
    assert {outcome.batch for outcome in outcomes} == set(BATCH_LISTS)

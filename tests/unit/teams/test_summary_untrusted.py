"""`envbuild summary` reads reports a pull request's job may have written: a field of the wrong type is one
line of the page (never exit 70), and no text of a report becomes HTML, a link or an image on it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from builder.reports import json_document
from builder.teams.summary import code, markdown_summary, read_report

pytestmark = pytest.mark.unit

MALFORMED = {
    "lock-without-target": [{"status": "fresh", "input_hash": "x"}],
    "lock-target-a-list": json_document("lock", [{"status": "fresh", "input_hash": "x", "target": ["a"]}]),
    "matrix-summary-a-string": [{"stage": "smoke", "result": "ok", "checks": [], "target": "cpu", "summary": "lots"}],
    "matrix-checks-a-string": [{"stage": "smoke", "result": "ok", "checks": "abc", "target": "cpu"}],
    "image-tags-a-number": [{"image_id": "x", "tags": 5, "target": "cpu"}],
    "image-size-a-word": [{"image_id": "x", "tags": [], "target": "cpu", "size": "big"}],
    "smoke-summary-a-list": {"report_version": 1, "summary": [1], "checks": 5},
    "report-name-a-list": {"schema_version": 1, "report": ["lock"]},
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_report_is_a_line_of_the_page(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(MALFORMED[name]))
    report = read_report(path)
    assert report.kind == "unreadable" and report.problem
    assert markdown_summary([report]).count("\n") == 1


def test_deeply_nested_json_is_a_line_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert "nested too deeply" in read_report(path).problem


def test_the_command_exits_cleanly_on_every_malformed_report(tmp_path: Path) -> None:
    for name, document in MALFORMED.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(document))
    done = subprocess.run([sys.executable, "-m", "builder", "summary", *sorted(str(p) for p in tmp_path.iterdir())],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr and done.stdout.count("wrong type") >= 6


HOSTILE = "<img src=https://evil.example/x.png onerror=alert(1)> [click](https://evil.example) ![i](https://e/x) ` |"


def test_report_texts_become_no_html_link_or_image(tmp_path: Path) -> None:
    rows = [{"target": HOSTILE, "status": "stale", "input_hash": "h", "message": HOSTILE, "hint": "<script>x</script>"}]
    path = tmp_path / f"{HOSTILE[:4]}`lock`.json"
    path.write_text(json.dumps(json_document("lock", rows)))
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown_summary([read_report(path)]))
    assert "<img" not in html and "<a " not in html and "<script" not in html
    assert "evil.example" in html  # shown, as text


def test_a_code_span_cannot_be_closed_by_its_text() -> None:
    rendered = MarkdownIt("commonmark", {"html": True}).render(code("a `` <b>x</b> ``"))
    assert "<b>" not in rendered and rendered.count("<code>") == 1

"""Unicode that changes what a line means (U+2028, U+0085, bidi controls) and mistyped spec values,
refused where envbuild reads them and escaped where it writes them, checked with libyaml itself."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from builder.errors import EnvbuildError, UsageError
from builder.safe_io.text import escape_unsafe, unsafe_characters
from builder.specs.model import parse_spec
from builder.specs.reference import check_label_text
from builder.teams.install_source import checked_install_from
from builder.templates import comment_text, yaml_str

pytestmark = pytest.mark.unit

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
LINE_BREAKERS = ["\u2028", "\u2029", "\u0085"]
BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200f"]
HOSTILE = st.text(alphabet=st.sampled_from([*LINE_BREAKERS, *BIDI, "\n", "\r", ":", "#", " ", "a", "\"", "\\"]))


def test_the_characters_that_break_lines_or_reorder_text_are_named() -> None:
    assert unsafe_characters("a\u2028b\u2029c\u0085d\u202ee\u2066") == ["U+2028", "U+2029", "U+0085", "U+202E", "U+2066"]
    assert unsafe_characters("café ü 日本 torch>=2.7") == []


def test_a_line_separator_in_install_from_is_refused_before_it_reaches_a_ci_file() -> None:
    crafted = "envbuild==1.0\u2028evil:\u2028  script: [\"curl x | sh\"]"
    with pytest.raises(UsageError):
        checked_install_from(crafted)


@pytest.mark.parametrize("character", LINE_BREAKERS + BIDI)
def test_a_label_with_a_line_or_bidi_character_is_refused(character: str) -> None:
    with pytest.raises(UsageError):
        check_label_text("--label", f"team{character}x")


def test_a_crafted_name_in_a_header_comment_adds_no_yaml_key() -> None:
    crafted = "vision\u2028injected:\u2028  script: [\"curl x | sh\"]"
    document = f"# Generated from the spec {comment_text(crafted)}\nname: {yaml_str(crafted)}\n"
    assert yaml.load(document, Loader=LOADER) == {"name": crafted}


@given(HOSTILE)
def test_hostile_text_written_as_a_yaml_value_or_comment_reads_back_as_itself(text: str) -> None:
    document = f"# from {comment_text(text)}\nvalue: {yaml_str(text)}\n"
    assert yaml.load(document, Loader=LOADER) == {"value": text}
    assert unsafe_characters(escape_unsafe(text)) == []


BASE = {"name": "vision", "python": "3.11", "torch": "2.13.0", "targets": [{"cuda": "cpu"}]}


@pytest.mark.parametrize("uid", [True, False, "1000", 1000.0])
def test_a_uid_that_is_not_an_integer_is_refused(uid: object) -> None:
    with pytest.raises(EnvbuildError, match="uid"):
        parse_spec({**BASE, "user": {"uid": uid}}, "envs/vision.yaml")


def _spec_file(tmp_path, text: str):
    path = tmp_path / "vision.yaml"
    path.write_text("name: vision\npython: '3.11'\ntorch: '2.13.0'\ntargets: [{cuda: cpu}]\n" + text)
    return path


@given(st.integers(min_value=4301, max_value=20000))
def test_a_number_of_thousands_of_digits_is_one_error_line_not_an_internal_error(digits: int) -> None:
    import tempfile
    from pathlib import Path

    from builder.specs.model import load_spec

    with tempfile.TemporaryDirectory() as folder:
        path = _spec_file(Path(folder), "user: {uid: " + "9" * digits + "}\n")
        with pytest.raises(EnvbuildError, match="number too long"):
            load_spec(path)


def test_a_binary_name_is_refused(tmp_path) -> None:
    from builder.specs.model import load_spec

    path = tmp_path / "vision.yaml"
    path.write_text("name: !!binary dmlzaW9u\npython: '3.11'\ntorch: '2.13.0'\ntargets: [{cuda: cpu}]\n")
    with pytest.raises(EnvbuildError, match="binary"):
        load_spec(path)


def test_the_cli_says_one_line_and_no_internal_error_for_a_huge_number(tmp_path) -> None:
    import subprocess
    import sys

    path = _spec_file(tmp_path, "user: {uid: " + "9" * 5000 + "}\n")
    done = subprocess.run([sys.executable, "-m", "builder", "lint", str(path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode not in (0, 70)
    assert "internal error" not in done.stderr + done.stdout
    assert "number too long" in done.stderr + done.stdout


def test_explain_quotes_a_log_without_its_terminal_escapes(tmp_path) -> None:
    import subprocess
    import sys

    log = tmp_path / "train.log"
    # OSC 52 would write the reader's clipboard; the colour codes are harmless but noise too.
    log.write_bytes(b"step 1\n\x1b]52;c;ZWNobyBwd25lZA==\x07RuntimeError: CUDA error: no kernel image is available "
                    b"for execution on the device \x1b[31mred\x1b[0m \xe2\x80\xae\n")
    done = subprocess.run([sys.executable, "-m", "builder", "explain", str(log)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert "no kernel image" in done.stdout
    assert "\x1b" not in done.stdout + done.stderr
    assert "\u202e" not in done.stdout


@given(st.text(alphabet=st.sampled_from(["\x1b", "]", "[", "5", "2", ";", "\x07", "\\", "\x9b", "\x9d", "a", "m"])))
def test_terminal_safe_leaves_no_escape_character(text: str) -> None:
    from builder.safe_io.text import terminal_safe

    assert not {"\x1b", "\x9b", "\x9d", "\x07"} & set(terminal_safe(text))


@pytest.mark.parametrize("key", ["io.envbuild.lock-hash", "io.envbuild.target"])
def test_a_spec_label_cannot_replace_envbuilds_own(key: str) -> None:
    with pytest.raises(EnvbuildError, match="io.envbuild"):
        parse_spec({**BASE, "labels": {key: "forged"}}, "envs/vision.yaml")


@pytest.mark.parametrize("character", LINE_BREAKERS + BIDI)
def test_a_spec_description_or_label_value_with_a_line_or_bidi_character_is_refused(character: str) -> None:
    with pytest.raises(EnvbuildError):
        parse_spec({**BASE, "description": f"a{character}b"}, "envs/vision.yaml")
    with pytest.raises(EnvbuildError):
        parse_spec({**BASE, "labels": {"team": f"a{character}b"}}, "envs/vision.yaml")
    assert parse_spec({**BASE, "description": "café, 日本"}, "envs/vision.yaml").description == "café, 日本"


@pytest.mark.parametrize(("channels", "mirrors"), [
    (("https://mirror.example/conda-forge\u2028evil: 1",), ()),
    (("https://mirror.example/conda forge",), ()),
    (("conda-forge\x1b]52;c;eA==\x07",), ()),
    (("ftp://mirror.example/conda-forge",), ()),
    ((), ("conda-forge=https://mirror.example/x\u0085y",)),
    ((), ("conda forge=https://mirror.example/x",)),
    ((), ("conda-forge=https://mirror.example/x\ty",)),
])
def test_a_channel_or_mirror_that_is_no_channel_is_refused_before_it_is_rendered(channels, mirrors) -> None:
    from builder.specs.target import Sources

    with pytest.raises(UsageError, match="--channel|--mirror") as refused:
        Sources.parse(channels, mirrors)
    assert unsafe_characters(refused.value.message) == []


def test_channel_names_and_urls_pass() -> None:
    from builder.specs.target import Sources

    parsed = Sources.parse(("conda-forge", "http://127.0.0.1:8765/conda/conda-forge"),
                           ("conda-forge=file:///srv/channels/conda-forge",))
    assert parsed.apply(("nvidia",)) == ("file:///srv/channels/conda-forge", "http://127.0.0.1:8765/conda/conda-forge")


OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"


def _run(tmp_path, *args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, check=False)


def test_a_table_cell_is_printed_without_its_terminal_escapes(capsys) -> None:
    from builder.reports import print_table

    print_table("t\x1b[2J", ["line", "why"], [[f"torch{OSC52}==2.7", "a\nb \x1b[31mred\x1b[0m"]])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "torch==2.7" in out and "red" in out


def test_the_error_line_drops_what_the_user_gave_as_escapes(tmp_path) -> None:
    done = _run(tmp_path, "targets", "--cuda", f"12.9{OSC52}")
    assert done.returncode == 2 and "\x1b" not in done.stderr and "\x07" not in done.stderr
    spec = tmp_path / "team.yaml"
    spec.write_text(f"name: team\npython: '3.11'\ntorch: '2.13.0'\ntargets: [{{cuda: cpu}}]\nbogus{OSC52}: 1\n")
    done = _run(tmp_path, "lint", "team.yaml")
    assert done.returncode != 0 and "\x1b" not in done.stderr + done.stdout


def test_lint_findings_of_a_foreign_file_are_printed_without_escapes(tmp_path) -> None:
    (tmp_path / "requirements.txt").write_text(f"torch==2.13.0\nnumpy{OSC52}\n--bogus-option{OSC52}\n")
    done = _run(tmp_path, "lint", "requirements.txt")
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout + done.stderr

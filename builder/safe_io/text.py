"""Characters that change what a line means without looking like it: refused in names, URLs, labels
and CI inputs, escaped wherever such text is echoed into a generated file.

Checking `ord(ch) < 32` misses most of them: U+0085 (NEL) and U+2028/U+2029 end a line for YAML 1.1
readers (libyaml), so inside a generated header comment they start a new line of YAML; the bidi
controls (U+202A..U+202E, U+2066..U+2069) make a terminal or a review page show other text than the
file holds. Unicode's own categories name them all: Cc (controls, C1 included), Cf (format), Zl, Zp.
"""

from __future__ import annotations

import re
import unicodedata

UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def unsafe_characters(text: str, *, allow: str = "") -> list[str]:
    """The characters of `text` that no name, URL, label or CI input may hold, as `U+XXXX`."""
    return [f"U+{ord(ch):04X}" for ch in dict.fromkeys(text)
            if ch not in allow and unicodedata.category(ch) in UNSAFE_CATEGORIES]


def has_unsafe_characters(text: str, *, allow: str = "") -> bool:
    return bool(unsafe_characters(text, allow=allow))


def escape_unsafe(text: str, *, allow: str = "") -> str:
    r"""`text` with each unsafe character (but those in `allow`) written as `\uXXXX` (valid in JSON and YAML
    double quotes)."""
    return "".join(f"\\u{ord(ch):04x}" if ch not in allow and unicodedata.category(ch) in UNSAFE_CATEGORIES else ch
                   for ch in text)


# ECMA-48 sequences a log may carry: CSI (colours, cursor moves), OSC (window titles, OSC 52 which
# writes the clipboard, OSC 8 links) ended by BEL or ST, and the other two-character escapes.
_TERMINAL_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x9b[0-?]*[ -/]*[@-~]"
                                r"|\x9d[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x1b[@-Z\\-_]")


def terminal_safe(text: str, *, allow: str = "") -> str:
    """Text quoted from a log or a file, fit for a terminal: escape sequences dropped, other unsafe characters
    (but those in `allow`, e.g. the newlines of a table cell) escaped."""
    return escape_unsafe(_TERMINAL_SEQUENCE.sub("", text), allow=allow)


def terminal_line(text: str) -> str:
    """Terminal text of one line or several (an error with a log's tail, a folded cell): newlines and tabs stay."""
    return terminal_safe(text, allow="\n\t")


# Python refuses to turn a string of more digits than this into an int (sys.get_int_max_str_digits, 3.11+);
# packaging's Version, tomllib and json all do that conversion, and fail with a ValueError none of them wraps.
MAX_NUMBER_DIGITS = 4300
_OVERLONG_NUMBER = re.compile(rf"\d{{{MAX_NUMBER_DIGITS + 1},}}")


def overlong_number(text: str) -> tuple[int, int] | None:
    """(line, digits) of the first number in `text` longer than MAX_NUMBER_DIGITS, or None."""
    match = _OVERLONG_NUMBER.search(text)
    if match is None:
        return None
    return text.count("\n", 0, match.start()) + 1, len(match[0])

"""Build variables of a Dockerfile (ARG and ENV) and their substitution, by buildkit's rules.

Upstream: moby/buildkit `frontend/dockerfile/shell/lex.go` (the `$VAR`, `${VAR}`, `${VAR:-word}`,
`${VAR-word}`, `${VAR:+word}`, `${VAR+word}` forms) and the Dockerfile reference's "Scope" of ARG: an ARG
declared before the first FROM is in scope for FROM lines only, and a stage sees it when it declares the
same ARG again without a value; ENV in a stage wins over an ARG of the same name; every FROM starts a
stage afresh. A variable the file never gives a value (a `--build-arg` at build time) is left as written,
so a line that needs it stays recognisably unread instead of reading as an empty version.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from builder.errors import UsageError

# ARGs that name each other several times grow tenfold a line: 889 bytes reached 24 GB. Real files
# expand a line to a few hundred bytes; these caps stop a chain long before memory or time runs out.
MAX_EXPANDED_CHARS = 64 * 1024  # one expanded value or line
MAX_GROWTH_CHARS = 1024 * 1024  # all that substitution adds over the whole file


@dataclass
class BuildVariables:
    global_args: dict[str, str] = field(default_factory=dict)
    stage: dict[str, str] = field(default_factory=dict)
    in_stage: bool = False
    source: str = "Dockerfile"  # named in the error of a chain that expands too far
    grown: int = 0  # what substitution added so far

    def start_stage(self) -> None:
        self.stage = {}
        self.in_stage = True

    def declare_args(self, words: tuple[str, ...]) -> None:
        """`ARG NAME`, `ARG NAME=default`, several on one line."""
        scope = self.stage if self.in_stage else self.global_args
        for word in words:
            name, sep, default = word.partition("=")
            if sep:
                scope[name] = unquote(self.expand(default))
            elif self.in_stage and name in self.global_args:
                scope[name] = self.global_args[name]

    def set_env(self, words: tuple[str, ...]) -> None:
        """ENV as the parser gives it: name and value, alternating (both `ENV A=1 B=2` and `ENV A 1`)."""
        for name, value in zip(words[::2], words[1::2], strict=False):  # a name without a value sets nothing
            self.stage[name] = unquote(self.expand(value))

    def expand(self, text: str, in_from: bool = False) -> str:
        """`text` with its references substituted (`in_from`: a FROM line's, which sees the ARGs declared
        before the first FROM, whatever stage came before); a UsageError once a line or the file's
        substitutions grow past their cap (checked at each reference, so a chain never gets to build its
        huge string)."""
        known = self.stage if self.in_stage and not in_from else self.global_args
        grown = 0

        def substitute(reference: _Reference) -> str:
            nonlocal grown
            word = unquote_word(_scan(reference.word, substitute)) if reference.word is not None else ""
            value = _substitute(reference, word, known)
            grown += len(value) - len(reference.text)
            if grown > 0 and (len(text) + grown > MAX_EXPANDED_CHARS or self.grown + grown > MAX_GROWTH_CHARS):
                raise UsageError(f"{self.source}: its ARG/ENV references expand past {MAX_EXPANDED_CHARS // 1024} KiB "
                                 f"a line or {MAX_GROWTH_CHARS // (1024 * 1024)} MiB in all (values that repeat each "
                                 "other); envbuild stops reading there: write the values out")
            return value

        expanded = _scan(text, substitute)
        self.grown += max(0, grown)
        return expanded


@dataclass(frozen=True)
class _Reference:
    """One `$NAME`, `${NAME}` or `${NAME<op>word}` as written; `word` (its own references not yet
    substituted) may hold quotes and further references, as buildkit's lexer allows."""

    text: str
    name: str
    operator: str = ""
    word: str | None = None


def _scan(text: str, substitute: Callable[[_Reference], str]) -> str:
    """`text` with each reference replaced by `substitute`; a `${` without its closing brace stays as written."""
    out: list[str] = []
    position = 0
    while position < len(text):
        reference = _reference_at(text, position) if text[position] == "$" else None
        if reference is None:
            out.append(text[position])
            position += 1
            continue
        out.append(substitute(reference))
        position += len(reference.text)
    return "".join(out)


def _reference_at(text: str, start: int) -> _Reference | None:
    plain = re.compile(r"\$(\w+)").match(text, start)
    if plain:
        return _Reference(plain[0], plain[1])
    braced = re.compile(r"\$\{(\w+)(:?[-+])?").match(text, start)
    if not braced:
        return None
    depth, position = 1, braced.end()
    while position < len(text) and depth:
        if text.startswith("${", position):
            depth, position = depth + 1, position + 2
            continue
        depth -= text[position] == "}"
        position += 1
    if depth:
        return None
    body = text[braced.end():position - 1]
    if not braced[2] and body:
        return None  # `${NAME...}` with other text after the name: not a form envbuild reads
    return _Reference(text[start:position], braced[1], braced[2] or "", body if braced[2] else None)


def _substitute(reference: _Reference, word: str, known: dict[str, str]) -> str:
    value = known.get(reference.name)
    if reference.operator == ":-":
        return value if value else word
    if reference.operator == "-":
        return value if value is not None else word
    if reference.operator == ":+":
        return word if value else ""
    if reference.operator == "+":
        return word if value is not None else ""
    return value if value is not None else reference.text


def unquote_word(text: str) -> str:
    """The word of `${NAME:+"word"}` as the shell lexer gives it: its quotes removed."""
    return re.sub(r"\"([^\"]*)\"|'([^']*)'", lambda m: m[1] if m[1] is not None else m[2], text)


def unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text

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
from dataclasses import dataclass, field

from builder.errors import UsageError

REFERENCE = re.compile(r"\$\{(\w+)(?:(:?[-+])([^}]*))?\}|\$(\w+)")
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

    def expand(self, text: str) -> str:
        """`text` with its references substituted; a UsageError once a line or the file's substitutions
        grow past their cap (checked at each reference, so a chain never gets to build its huge string)."""
        known = self.stage if self.in_stage else self.global_args
        grown = 0

        def substitute(match: re.Match[str]) -> str:
            nonlocal grown
            value = _substitute(match, known)
            grown += len(value) - len(match[0])
            if grown > 0 and (len(text) + grown > MAX_EXPANDED_CHARS or self.grown + grown > MAX_GROWTH_CHARS):
                raise UsageError(f"{self.source}: its ARG/ENV references expand past {MAX_EXPANDED_CHARS // 1024} KiB "
                                 f"a line or {MAX_GROWTH_CHARS // (1024 * 1024)} MiB in all (values that repeat each "
                                 "other); envbuild stops reading there: write the values out")
            return value

        expanded = REFERENCE.sub(substitute, text)
        self.grown += max(0, grown)
        return expanded


def _substitute(match: re.Match[str], known: dict[str, str]) -> str:
    name = match[1] or match[4]
    operator, word = match[2], match[3] or ""
    value = known.get(name)
    if operator == ":-":
        return value if value else word
    if operator == "-":
        return value if value is not None else word
    if operator == ":+":
        return word if value else ""
    if operator == "+":
        return word if value is not None else ""
    return value if value is not None else match[0]


def unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text

"""A pip requirements file by pip's own grammar: logical lines, their options, what pip would reject.

pip-requirements-parser carries pip's `req_file` module (line joining, comment splitting, the split of a
line into its arguments and its options, the option parser of every option pip accepts in a file); pip's
own copy is not a public API. Upstream: pip 22.x `src/pip/_internal/req/req_file.py`, as packaged by
pip-requirements-parser 32.0.1. What each line means to a spec is read elsewhere
(builder/init/reading.py); this module only says what pip sees.

pip's rules that matter here (req_file.handle_line): a line with arguments is one requirement, and of its
options only the per-requirement ones (`--hash`, `--global-option`, `--install-option`,
`--config-settings`) have an effect; an index or find-links option there is silently ignored. A line
whose arguments are not one requirement (`torch==2.0.1 torchvision==0.15.2`) makes pip stop with
"Invalid requirement".
"""

from __future__ import annotations

import optparse
import shlex
from dataclasses import dataclass
from pathlib import Path

import pip_requirements_parser as pip_grammar
from packaging.requirements import InvalidRequirement, Requirement

# option dests that name where packages come from, as the flag envbuild reads them with
INDEX_OPTIONS = {"index_url": "--index-url", "extra_index_urls": "--extra-index-url", "find_links": "--find-links"}
INCLUDE_OPTIONS = {"requirements": "-r", "constraints": "-c"}
PER_REQUIREMENT = {"hashes", "global_options", "install_options", "config_settings"}
MAX_INCLUDE_DEPTH = 5


@dataclass(frozen=True)
class PipLine:
    """One logical line of a requirements file, as pip parses it."""

    number: int
    text: str
    requirements: tuple[str, ...] = ()  # the requirements on it: one, or several that pip refuses
    options: tuple[str, ...] = ()  # "--extra-index-url URL", "-r FILE", "-e TARGET", ... that take effect
    ignored: tuple[str, ...] = ()  # options pip ignores on a requirement line
    rejected: str | None = None  # why pip stops at this line


def parse_requirements_text(text: str) -> list[PipLine]:
    lines: list[PipLine] = []
    for numbered in pip_grammar.preprocess(text):
        if isinstance(numbered, pip_grammar.TextLine):
            lines.append(parse_line(numbered.line_number, numbered.line))
    return lines


def parse_line(number: int, text: str) -> PipLine:
    arguments, option_text = pip_grammar.break_args_options(text)
    parser = pip_grammar.build_parser()
    try:
        options = parser.parse_args(shlex.split(option_text), parser.get_default_values())[0]
    except (pip_grammar.OptionParsingError, ValueError) as error:
        said = str(getattr(error, "msg", error)).strip().rsplit("error: ", 1)[-1]
        return PipLine(number, text, rejected=f"pip cannot parse its options ({said})")
    given = _given_options(options)
    if not arguments.strip():
        editable = [f"-e {target}" for target in getattr(options, "editables", None) or []]
        return PipLine(number, text, options=tuple(given + editable))
    requirements, rejected = _requirements(arguments)
    ignored = tuple(option for option in given if not option.startswith("--hash"))
    return PipLine(number, text, tuple(requirements), (), ignored, rejected)


def _given_options(options: optparse.Values) -> list[str]:
    given: list[str] = []
    for dest, flag in (*INDEX_OPTIONS.items(), *INCLUDE_OPTIONS.items()):
        value = getattr(options, dest, None)
        for item in ([value] if isinstance(value, str) else value or []):
            given.append(f"{flag} {item}")
    given += [f"--hash {h}" for h in getattr(options, "hashes", None) or []]
    return given


def _requirements(arguments: str) -> tuple[list[str], str | None]:
    """The requirement (or requirements, when pip refuses them) that a line's arguments hold."""
    try:
        Requirement(arguments)
        return [arguments.strip()], None
    except InvalidRequirement as error:
        reason = str(error).splitlines()[0]
    if ";" not in arguments and "@" not in arguments:
        words = arguments.split()
        if len(words) > 1 and all(_is_requirement(word) for word in words):
            return words, (f"{len(words)} requirements on one line; pip reads one requirement a line "
                           f"(Invalid requirement: {reason})")
    if arguments.startswith(("git+", "hg+", "svn+", "bzr+", "http://", "https://", "file:", ".", "/")):
        return [arguments.strip()], None  # a URL or a path: pip installs it, a spec cannot carry it
    return [arguments.strip()], f"Invalid requirement: {reason}"


def _is_requirement(word: str) -> bool:
    try:
        Requirement(word)
    except InvalidRequirement:
        return False
    return True


def included_path(source: Path, target: str) -> Path | None:
    """The file a `-r`/`-c` line names, beside the file that names it; None for a URL."""
    if "://" in target:
        return None
    return (source.parent / target) if not Path(target).is_absolute() else Path(target)

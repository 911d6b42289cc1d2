"""A requirements file (or a `conda create --file` list) into a `Reading`, line by line as pip reads it.

pip's grammar comes from builder/init/requirements_file.py; each requirement and option it finds is read
by builder/init/reading.py's pip readers, the same as in an environment.yml's `pip:` list. What pip would
refuse or ignore is kept on the reading for `envbuild lint`, and the requirements are still read as the
author meant them (`torch==2.0.1+cu118 torchvision==0.15.2+cu118` on one line gives both).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pip_requirements_parser as pip_grammar

from builder.errors import UsageError
from builder.init.reading import Reading, read_conda_text, read_pip_text, read_text_file
from builder.init.requirements_file import MAX_INCLUDE_DEPTH, PipLine, included_path, parse_requirements_text
from builder.safe_io.confine import OutsideFolder, confined

CONDA_LIST_LINE = re.compile(r"[A-Za-z0-9_.\-]+=[^=<>]+(=\S+)?")


def read_requirements(path: Path, allow_outside: bool = False) -> Reading:
    return read_requirements_text(read_text_file(path, "requirements file"), str(path), allow_outside)


def read_requirements_text(text: str, source: str, allow_outside: bool = False) -> Reading:
    """pip's requirements format; a `conda create --file` list (`name=version` lines) is read as conda lines.
    A `-r`/`-c` file must lie inside the folder of the file that names it, unless `allow_outside`."""
    reading = Reading(source, kind="requirements.txt")
    if any(line.strip() == "@EXPLICIT" for line in text.splitlines()):
        raise reading.fail("an explicit conda package list (`conda list --explicit`); give envbuild the "
                           "environment.yml it was made from, or a conda-lock.yml")
    raw = [n.line for n in pip_grammar.preprocess(text) if isinstance(n, pip_grammar.TextLine)]
    if not raw:
        raise reading.fail("no requirements in it, so there is nothing to import")
    if sum(bool(CONDA_LIST_LINE.fullmatch(line)) for line in raw) * 2 > len(raw):
        reading.kind = "conda list"
        for line in raw:
            read_conda_text(reading, line)
        return reading
    reading.has_pip_section = True
    includes = _Includes(frozenset({Path(source).resolve()}), allow_outside)
    _read_lines(reading, Path(source), parse_requirements_text(text), includes)
    return reading


@dataclass(frozen=True)
class _Includes:
    seen: frozenset[Path]  # the files being read, to stop at a cycle
    allow_outside: bool  # a `-r`/`-c` file may lie outside the folder of the file that names it


def _read_lines(reading: Reading, source: Path, lines: list[PipLine], includes: _Includes) -> None:
    for line in lines:
        if line.rejected:
            reading.rejected_lines.append((line.text, line.rejected))
        for option in line.ignored if not line.rejected else ():  # pip stops at a rejected line anyway
            reading.ignored_options.append((line.text, option))
        # an index on a requirement's line is read as the author meant it (lint says that pip ignores it)
        for option in (*line.options, *line.ignored):
            if option.startswith(("-r ", "-c ")) and _include(reading, source, option, includes):
                continue
            read_pip_text(reading, option)
        for requirement in line.requirements:
            read_pip_text(reading, requirement)


def _include(reading: Reading, source: Path, option: str, includes: _Includes) -> bool:
    """The lines of a `-r` file beside this one, read in its place; False (left to a note) when it cannot be:
    a URL, a constraints file (`-c`), a file not there, one already being read (a cycle), or too deep a chain.
    A file outside the folder of `source` is refused (a pull request's `-r /proc/self/environ` would put
    the CI's secrets into the spec and the job log) unless the user allowed it."""
    flag, _, target = option.partition(" ")
    path = included_path(source, target)
    if path is None:
        return False
    if not includes.allow_outside:
        _confine(source, flag, target)
    seen = includes.seen
    if flag != "-r" or len(seen) > MAX_INCLUDE_DEPTH or not path.is_file() or path.resolve() in seen:
        return False
    try:
        text = read_text_file(path, "requirements file")
    except UsageError:
        return False
    reading.note(f"-r {target}", "derived", "its requirements were read in its place")
    deeper = _Includes(seen | {path.resolve()}, includes.allow_outside)
    _read_lines(reading, path, parse_requirements_text(text), deeper)
    return True


def _confine(source: Path, flag: str, target: str) -> None:
    try:
        confined(source.parent, target)
    except OutsideFolder as outside:
        raise UsageError(f"{source}: `{flag}` {outside}; an included file is read only inside the folder of the "
                         "file that names it: move it there, or pass --allow-outside to read it anyway") from None


def include_requirements(reading: Reading, source: Path, line: str, allow_outside: bool = False) -> bool:
    """A `-r FILE` line of another file's pip list (an environment.yml's `pip:`, which conda runs from the
    env file's folder): the file read in its place, held to that folder unless `allow_outside`; False (left
    to the line's own reading) when the line is no `-r` or the file cannot be read."""
    found = re.fullmatch(r"(?:-r|--requirement)(?:\s+|=)?(\S+)", line.strip())
    if found is None:
        return False
    return _include(reading, source, f"-r {found[1]}", _Includes(frozenset({source.resolve()}), allow_outside))


def read_included_requirements(reading: Reading, path: Path, entry: str) -> bool:
    """A requirements file another file installs (a Dockerfile's `pip install -r FILE`), read into `reading`
    in its place; False (left to a note) when it cannot be read."""
    try:
        text = read_text_file(path, "requirements file")
    except UsageError:
        return False
    reading.note(entry, "derived", f"its requirements ({path.name}) were read in its place")
    # the Dockerfile's build context confined `path`; its own `-r` lines are held to its folder
    _read_lines(reading, path, parse_requirements_text(text), _Includes(frozenset({path.resolve()}), False))
    return True

"""TOML as envbuild writes it for the manifests it exports (pixi.toml, uv's pyproject.toml): a header of
comments, then tables in the order given. The models of those files (pixi_toml.py, uv_pyproject.py) say
what the tables hold; this says how a table looks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# (table name, its keys): a dotted name nests (`feature.cuda12-6.dependencies`), a name in brackets is
# one entry of an array of tables (`[tool.uv.index]`)
Tables = Sequence[tuple[str, Mapping[str, Any]]]


def toml_text(header: Sequence[str], tables: Tables) -> str:
    """The document as TOML, by tomlkit: tables in order, a mapping inside a table inline, `platforms`
    one per line."""
    import tomlkit

    doc = tomlkit.document()
    for line in header:
        doc.add(tomlkit.comment(line))
    for name, table in tables:
        *parents, last = name.strip("[]").split(".")
        node: Any = doc
        for part in parents:
            if part not in node:
                node.add(part, tomlkit.table(is_super_table=True))
            node = node[part]
        body = _table(table)
        if name.startswith("["):
            if last not in node:
                node.add(last, tomlkit.aot())
            node[last].append(body)
        else:
            node.add(last, body)
    return tomlkit.dumps(doc)


def _table(table: Mapping[str, Any]) -> Any:
    """A table of the document, built in one pass: each `key = value` line written by tomlkit on its own, the
    lines parsed back as the table's body. (tomlkit's Table.add looks through the whole body for every key it
    adds, so a table of n keys took n^2 steps: a 4,000-package spec took 6 s to export, a 90,000-line one hours.)"""
    import tomlkit
    from tomlkit.items import Table, Trivia

    lines = "".join(tomlkit.dumps({key: _toml_item(value, one_per_line=key == "platforms")})
                    for key, value in table.items())
    return Table(tomlkit.parse(lines), Trivia(), is_aot_element=False)


def _toml_item(value: Any, one_per_line: bool = False) -> Any:
    """A value inside a table: mappings inline (`{ version = "==2.7.1", build = "cuda126*" }`), lists as arrays."""
    import tomlkit

    if isinstance(value, Mapping):
        inline = tomlkit.inline_table()
        inline.update({key: _toml_item(item) for key, item in value.items()})
        return inline
    if isinstance(value, (list, tuple)):
        array = tomlkit.array()
        array.extend(_toml_item(item) for item in value)
        return array.multiline(one_per_line and bool(value))
    return value

"""Every place in a parsed document (JSON, TOML, YAML) as the keys and indexes that lead to it: what the tests
that retype one value at a time walk over."""

from __future__ import annotations


def value_paths(node: object, path: tuple = ()) -> list[tuple]:
    """The paths to every value below `node`, parents before their children (the root itself excluded)."""
    found = [path] if path else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += value_paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += value_paths(value, (*path, index))
    return found

"""YAML reading for envbuild's own data files and specs: libyaml's loader where PyYAML has it.

PyYAML's pure-Python loader takes a few hundred milliseconds on compat.yaml alone, most of a no-op
`envbuild lock`; the C loader reads the same documents (safe subset) in a few milliseconds.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=SafeLoader)  # a safe loader, C or Python


def data_text(name: str) -> str:
    """The text of one of envbuild's data files (builder/data/NAME), wherever the package is installed."""
    return resources.files("builder").joinpath(f"data/{name}").read_text(encoding="utf-8")


def load_data(name: str) -> Any:
    """One of envbuild's data files, parsed."""
    return load_yaml(data_text(name))


class SourceFloat(float):
    """A YAML float that remembers how it was written: `cuda: 12.10` is 12.1 as a number, but the
    user meant CUDA 12.10."""

    text: str

    def __new__(cls, value: float, text: str) -> SourceFloat:
        number = super().__new__(cls, value)
        number.text = text
        return number


class DuplicateKey(yaml.constructor.ConstructorError):
    """A mapping that gives one key twice: YAML readers keep the last silently, a spec must not."""

    def __init__(self, key: str, first_line: int, node: yaml.Node) -> None:
        super().__init__(None, None, f"the key {key!r} is given twice (first at line {first_line}); keep one",
                         node.start_mark)
        self.key = key
        self.line = node.start_mark.line + 1


class SpecLoader(SafeLoader):  # type: ignore[misc, valid-type]
    """The safe loader, with floats that keep their source text (specs name versions, never numbers),
    and a key given twice in one mapping refused (the last would win without a word)."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[tuple[str, str], int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise DuplicateKey(key_node.value, seen[key], key_node)
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _source_float(loader: Any, node: yaml.ScalarNode) -> float:
    return SourceFloat(loader.construct_yaml_float(node), node.value)


SpecLoader.add_constructor("tag:yaml.org,2002:float", _source_float)

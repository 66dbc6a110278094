"""JSON with bare keys and strings between delimiters as a grammar (FunctionGemma's
`{city:<escape>Paris<escape>,days:3}`): EBNF for xgrammar's `grammar` format, values typed by the tool's JSON schema,
and the canonical text of such a value."""

from __future__ import annotations

import math
import re
from typing import Any

from .ebnf import ValueRules, quoted
from .patterns import _Dead

# A key written bare: the parser reads a key up to its `:`, so none of the JSON punctuation, and no whitespace at its
# ends (it would be stripped).
_BARE_KEY = re.compile(r"[^\s:,{}\[\]\"'<>](?:[^:,{}\[\]\"'<>]*[^\s:,{}\[\]\"'<>])?")
_CONSTANTS = {True: ('"true" | "True"', "true"), False: ('"false" | "False"', "false"), None: ('"null" | "None"', "null")}


def write_delimited(value: Any, delimiters: tuple) -> str:
    """`value` as the grammar writes it: bare keys, strings between the delimiters, JSON's constants."""
    if isinstance(value, str):
        return delimiters[0] + value + delimiters[1]
    if value is True or value is False or value is None:
        return _CONSTANTS[value][1]
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Dead(f"{value!r} cannot be written as a number")
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(write_delimited(item, delimiters) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{key}:{write_delimited(item, delimiters)}" for key, item in value.items()) + "}"
    raise _Dead(f"{type(value).__name__} values cannot be written")


class DelimitedJsonRules(ValueRules):
    """The EBNF of one value typed by `schema`: objects' properties in any order (see `ValueRules`; the root's in the
    schema's order if `ordered_root`) with bare keys, strings between `delimiters` holding none of `markers` (nor
    the closing delimiter, nor a marker that would run from the string into it), numbers and constants as JSON
    writes them (and Python's `True`/`False`/`None`, which the parser reads too)."""

    dialect = "delimited JSON"

    def __init__(self, seed: str, schema: Any, delimiters: tuple, markers: list, ordered_root: bool = False):
        super().__init__(seed)
        self.ordered_root = ordered_root
        self.delimiters = delimiters
        self.ends = [text for text in [*markers, delimiters[1]] if text]
        text = self.text_without(self.ends, delimiters[1])
        key = self._rule('[A-Za-z_] [A-Za-z0-9_]*')
        string = self._rule(f"{quoted(delimiters[0])} {text} {quoted(delimiters[1])}")
        self._json_values(string, f'{key} ":"', tuple(spelling for spelling, _ in _CONSTANTS.values()))
        self.root = self.value(schema, 0)

    def constant(self, value: Any) -> str:
        if isinstance(value, (bool, type(None))):
            return f"({_CONSTANTS[value][0]})"
        if isinstance(value, str) and any(end in value for end in self.ends):
            raise _Dead(f"the value {value!r} holds a marker of the format")
        return quoted(write_delimited(value, self.delimiters))

    def key(self, key: str) -> str:
        if not _BARE_KEY.fullmatch(key):
            raise _Dead(f"the key {key!r} cannot be written bare")
        return quoted(key + ":")

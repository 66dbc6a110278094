"""JSON on one line as a grammar: single spaces after `:` and `,` (as chat templates' `tojson` writes them), never a
line break, for formats whose closer also matches where nested arguments end before one (Llama's `}` `}`). EBNF for
xgrammar's `grammar` format, values typed by the tool's JSON schema."""

from __future__ import annotations

import json
from typing import Any

from .ebnf import ValueRules, quoted
from .patterns import _Dead

# JSON strings hold no raw quote, backslash or control character: those are written escaped.
_RAW_EXCLUDED = ['"', "\\"] + [chr(code) for code in range(32)]


class SpacedJsonRules(ValueRules):
    """The EBNF of one JSON value typed by `schema`, on one line: objects' properties in the schema's order (the
    required ones always), strings holding none of `markers`, a space at most after each `:` and `,`."""

    dialect = "JSON on one line"

    def __init__(self, seed: str, schema: Any, markers: list):
        super().__init__(seed)
        self.markers = [text for text in markers if text]
        escape = self._rule('"\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])')
        text = self.text_without(self.markers + _RAW_EXCLUDED, '"', escape)
        self.string = self._rule(f'"\\"" {text} "\\""')
        self.integer = self._rule('"-"? ("0" | [1-9] [0-9]*)')
        # (an exponent of two digits at most: a number past a float's range would read as infinity)
        self.number = self._rule(f'{self.integer} ("." [0-9]+)? ([eE] [+\\-]? [0-9] [0-9]?)?')
        self.separator = self._rule('"," " "?')
        self.any_value = self._rule("")  # filled below: values hold values
        self.any_object = self._rule(f'"{{" ({self.string} ":" " "? {self.any_value} '
                                     f'({self.separator} {self.string} ":" " "? {self.any_value})*)? "}}"')
        self.rules[self.any_value] = (
            f'{self.string} | {self.number} | "true" | "false" | "null" '
            f'| "[" ({self.any_value} ({self.separator} {self.any_value})*)? "]" | {self.any_object}')
        self.scalars = {"string": self.string, "integer": self.integer, "number": self.number,
                        "boolean": '("true" | "false")', "null": '"null"'}
        self.root = self.value(schema, 0)

    def grammar(self) -> str:
        return "\n".join([f"root ::= {self.root}"] + [f"{name} ::= {body}" for name, body in self.rules.items()])

    def constant(self, value: Any) -> str:
        written = json.dumps(value, ensure_ascii=False)
        if any(marker in written for marker in self.markers) or "\n" in written:
            raise _Dead(f"the value {value!r} holds a marker of the format")
        return quoted(written)

    def key(self, key: str) -> str:
        written = json.dumps(key, ensure_ascii=False)
        if any(marker in written for marker in self.markers):
            raise _Dead(f"the key {key!r} holds a marker of the format")
        return f'{quoted(written + ":")} " "?'

"""JSON on one line as a grammar: single spaces after `:` and `,` (as chat templates' `tojson` writes them), never a
line break, for formats whose closer also matches where nested arguments end before one (Llama's `}` `}`). EBNF for
xgrammar's `grammar` format, values typed by the tool's JSON schema."""

from __future__ import annotations

import json
from typing import Any

from .ebnf import ValueRules, quoted
from .patterns import _Dead

# JSON strings hold no raw quote, backslash or control character: those are written escaped.
RAW_EXCLUDED = ['"', "\\"] + [chr(code) for code in range(32)]


class SpacedJsonRules(ValueRules):
    """The EBNF of one JSON value typed by `schema`, on one line: objects' properties in any order (see
    `ValueRules`; the root's in the schema's order if `ordered_root`), strings holding none of `markers` (nor
    `forbidden`), a space at most after each `:` and `,`."""

    dialect = "JSON on one line"
    forbidden: tuple = ()  # what strings, keys and constants may not hold besides the markers

    def __init__(self, seed: str, schema: Any, markers: list, ordered_root: bool = False):
        super().__init__(seed)
        self.ordered_root = ordered_root
        self.markers = [text for text in markers if text]
        self.escape = self._rule('"\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])')
        text = self.text_without(self.markers + RAW_EXCLUDED + list(self.forbidden), '"', self.escape)
        string = self._rule(f'"\\"" {text} "\\""')
        self._json_values(string, f'{string} ":" " "?', ('"true"', '"false"', '"null"'))
        self.root = self._root(schema)

    def _root(self, schema: Any) -> str:
        return self.value(schema, 0)

    def _written(self, value: Any, what: str) -> str:
        written = json.dumps(value, ensure_ascii=False)
        held = [text for text in [*self.markers, *self.forbidden] if text in written]
        if held:
            raise _Dead(f"the {what} {value!r} holds {held[0]!r}, which {self.dialect} cannot write there")
        return written

    def constant(self, value: Any) -> str:
        return quoted(self._written(value, "value"))

    def key(self, key: str) -> str:
        return f'{quoted(self._written(key, "key") + ":")} " "?'

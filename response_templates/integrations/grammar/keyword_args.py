"""Keyword arguments as a grammar (OLMo 3's `get_weather(city="Paris", days=3)`, read by an xml-inline tag pattern
`KEY=VALUE` whose value runs to the next `, KEY=`): the arguments in the schema's order, the required ones always,
`, ` between them, every value JSON on one line typed by its schema. EBNF for xgrammar's `grammar` format, and the
canonical text of such arguments."""

from __future__ import annotations

import json
import re
from typing import Any

from .ebnf import quoted
from .patterns import _Dead
from .spaced_json import RAW_EXCLUDED, SpacedJsonRules

# A keyword as the tag pattern reads it: a name, then `=`.
_KEYWORD = re.compile(r"[A-Za-z_]\w*")


def write_keyword_arguments(arguments: dict) -> str:
    """`arguments` as the grammar writes them: `key=value` with JSON values, `, ` between them."""
    return ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items())


class KeywordArgsRules(SpacedJsonRules):
    """The EBNF of a tool's keyword arguments, `parameters` being its schema. A top-level string is one JSON string
    (the parser reads it whole) or raw text between single quotes; a top-level boolean is JSON's or Python's;
    objects and arrays are read up to the next `, KEY=` wherever it stands, so the strings inside them hold no `=`.
    No string holds one of `markers`, a raw quote, backslash or control character (those are written escaped)."""

    dialect = "keyword arguments"
    forbidden = ("=",)

    def _root(self, parameters: Any) -> str:
        text = self.text_without(self.markers + RAW_EXCLUDED, '"', self.escape)
        # (or between single quotes, raw, as chat templates write it: holding no quote, line break nor marker)
        raw = self.text_without(self.markers + ["'", "\n", "\r"], "'")
        self.top_string = self._rule(f'"\\"" {text} "\\"" | "\'" {raw} "\'"')
        required = set(parameters.get("required") or [])
        members = []
        for key, schema in (parameters.get("properties") or {}).items():
            if not isinstance(key, str) or not _KEYWORD.fullmatch(key):
                raise _Dead(f"the argument {key!r} is not a keyword")
            members.append((f"{quoted(key + '=')} {self.value(schema, 1)}", key in required))
        return self._members(members, self.separator)

    def _typed(self, kind: str, schema: dict, depth: int) -> str:
        if depth == 1 and kind == "string":
            return self.top_string
        if depth == 1 and kind == "boolean":  # (the pattern reads Python's spelling too, as chat templates write it)
            return '("true" | "false" | "True" | "False")'
        return super()._typed(kind, schema, depth)

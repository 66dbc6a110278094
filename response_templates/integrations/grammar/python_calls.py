"""Python call lists as a grammar: `[name(key=value, ...), ...]`, each value a Python literal typed by the tool's JSON
schema (EBNF, for xgrammar's `grammar` format), and the canonical text of such calls (Gemma 3, Llama 4's pythonic
template, LFM2)."""

from __future__ import annotations

import math
import re
from typing import Any

from .ebnf import ValueRules, quoted
from .patterns import _Dead

# A function or keyword name as the parser reads it (content.py's python-call-list reader).
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[-.][A-Za-z0-9_]+)*")
# Strings are quoted with ' or "; they cannot hold the characters the formats' markers are made of (a `)]` or a
# `<|tool_call_end|>` inside a string would end the calls for the parser) nor raw line breaks.
_RULES = {
    "py_str": r""""'" ([^'\\\r\n<>|\[\]{}`｜] | "\\" ["'\\nrt])* "'" | "\"" ([^"\\\r\n<>|\[\]{}`｜] | "\\" ["'\\nrt])* "\"" """.strip(),
    "py_int": r'''"-"? ("0" | [1-9] [0-9]*)''',
    # (an exponent of two digits at most: a number past a float's range would read as infinity)
    "py_num": r'''py_int ("." [0-9]+)? ([eE] [+\-]? [0-9] [0-9]?)?''',
    "py_sep": r'''"," " "?''',
    "py_any": r'''py_str | py_num | "True" | "False" | "None" | "true" | "false" | "null" | py_list | py_dict''',
    "py_list": r'''"[" (py_any (py_sep py_any)*)? "]"''',
    "py_dict": r'''"{" (py_str ": " py_any (py_sep py_str ": " py_any)*)? "}"''',
}


def python_literal(value: Any) -> str:
    """`value` written as a Python literal, as the grammar writes it (single-quoted strings)."""
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r")
        return "'" + escaped.replace("\t", "\\t") + "'"
    if value is True or value is False or value is None:
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Dead(f"{value!r} has no Python literal a call list can hold")
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(python_literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{python_literal(key)}: {python_literal(item)}" for key, item in value.items()) + "}"
    raise _Dead(f"{type(value).__name__} values have no Python literal")


def _spellings(value: Any) -> str:
    """A constant as EBNF: a string in either quote, as models write them (`unit="c"` beside `city='Paris'`)."""
    single = quoted(python_literal(value))
    if not isinstance(value, str):
        return single
    double = '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") \
        .replace("\t", "\\t") + '"'
    return single if double == python_literal(value) else f"({single} | {quoted(double)})"


def python_call(tool: str, arguments: dict) -> str:
    return f"{tool}(" + ", ".join(f"{key}={python_literal(value)}" for key, value in arguments.items()) + ")"


class PythonLiteralRules(ValueRules):
    """Python literals typed by a JSON schema: strings in either quote, True/False/None (and JSON's spellings,
    which the parsers read and LFM2 writes), lists and dicts written as repr() writes them."""

    dialect = "a Python call list"
    separator = "py_sep"
    any_value, any_object = "py_any", "py_dict"
    scalars = {"string": "py_str", "integer": "py_int", "number": "py_num",
               "boolean": '("True" | "False" | "true" | "false")', "null": '("None" | "null")'}

    def constant(self, value: Any) -> str:
        return _spellings(value)

    def key(self, key: str) -> str:
        return quoted(python_literal(key) + ": ")

    def grammar(self) -> str:
        return "\n".join([f"root ::= {self.root}"]
                         + [f"{name} ::= {body}" for name, body in {**_RULES, **self.rules}.items()])


class PythonCallRules(PythonLiteralRules):
    """The EBNF rules of one tool's call, `name(key=value, ...)`: keyword arguments in the schema's order, the
    required ones always, values typed by their schemas. `call` names the rule of the whole call."""

    def __init__(self, tool: str, parameters: dict):
        if not _IDENTIFIER.fullmatch(tool):
            raise _Dead(f"the tool name {tool!r} is not a name a Python call list can hold")
        super().__init__(tool)
        properties = parameters.get("properties") or {}
        required = set(parameters.get("required") or [])
        members = []
        for key, schema in properties.items():
            if not _IDENTIFIER.fullmatch(key):
                raise _Dead(f"the argument {key!r} of {tool!r} is not a keyword a Python call can take")
            members.append((f"{quoted(key + '=')} {self.value(schema, 1)}", key in required))
        self.call = self._rule(f"{quoted(tool + '(')} {self._members(members, 'py_sep')} \")\"")


def python_value_grammar(seed: str, schema: Any) -> str:
    """The EBNF of one Python literal typed by `schema` (a value chat templates write with Python's str())."""
    rules = PythonLiteralRules(seed)
    rules.root = rules.value(schema, 1)
    return rules.grammar()


def call_list_grammar(tools: list, parallel: bool) -> str:
    """The EBNF of a list of calls of the given tools (PythonCallRules), one call at most unless `parallel`."""
    rules: dict[str, str] = {}
    for tool in tools:
        rules.update(tool.rules)
    any_call = "(" + " | ".join(tool.call for tool in tools) + ")"
    # (a space may stand inside the brackets: `[ get_time() ]`)
    root = f'"[" " "? {any_call} (py_sep {any_call})* " "? "]"' if parallel else f'"[" " "? {any_call} " "? "]"'
    return "\n".join([f"root ::= {root}"] + [f"{name} ::= {body}" for name, body in {**_RULES, **rules}.items()])

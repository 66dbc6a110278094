"""Python call lists as a grammar: `[name(key=value, ...), ...]`, each value a Python literal typed by the tool's JSON
schema (EBNF, for xgrammar's `grammar` format), and the canonical text of such calls (Gemma 3, Llama 4's pythonic
template, LFM2)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

from .patterns import _Dead

# A function or keyword name as the parser reads it (content.py's python-call-list reader).
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[-.][A-Za-z0-9_]+)*")
# Schema keywords a grammar of Python literals does not enforce: such a tool is refused, never given a grammar whose
# arguments could break its schema ("oneOf" too: its alternatives may overlap).
_UNSUPPORTED = (
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern",
    "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "patternProperties", "propertyNames",
    "prefixItems", "contains", "allOf", "oneOf", "not", "if", "then", "else", "$ref", "dependentRequired",
    "dependentSchemas",
)
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
_MAX_DEPTH = 8


def _quoted(text: str) -> str:
    """`text` as an EBNF string literal."""
    return json.dumps(text, ensure_ascii=False)


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


def python_call(tool: str, arguments: dict) -> str:
    return f"{tool}(" + ", ".join(f"{key}={python_literal(value)}" for key, value in arguments.items()) + ")"


class PythonCallRules:
    """The EBNF rules of one tool's call, `name(key=value, ...)`: keyword arguments in the schema's order, the
    required ones always, values typed by their schemas. `call` names the rule of the whole call."""

    def __init__(self, tool: str, parameters: dict):
        if not _IDENTIFIER.fullmatch(tool):
            raise _Dead(f"the tool name {tool!r} is not a name a Python call list can hold")
        self.prefix = "c" + hashlib.sha256(tool.encode()).hexdigest()[:10]
        self.rules: dict[str, str] = {}
        properties = parameters.get("properties") or {}
        required = set(parameters.get("required") or [])
        members = []
        for key, schema in properties.items():
            if not _IDENTIFIER.fullmatch(key):
                raise _Dead(f"the argument {key!r} of {tool!r} is not a keyword a Python call can take")
            members.append((f"{_quoted(key + '=')} {self.value(schema, 1)}", key in required))
        self.call = self._rule(f"{_quoted(tool + '(')} {self._members(members)} \")\"")

    def _rule(self, body: str) -> str:
        name = f"{self.prefix}_{len(self.rules)}"
        self.rules[name] = body
        return name

    def _members(self, members: list) -> str:
        """The members in order, separated by commas, the optional ones left out or not: `head[i]` writes them
        from i on when none came before, `tail[i]` when one did."""
        head, tail = ['""'] * (len(members) + 1), ['""'] * (len(members) + 1)
        for at in range(len(members) - 1, -1, -1):
            text, required = members[at]
            after = tail[at + 1]
            tail[at] = self._rule(f"py_sep {text} {after}" if required else f"(py_sep {text} {after}) | {after}")
            head[at] = self._rule(f"{text} {after}" if required else f"({text} {after}) | {head[at + 1]}")
        return head[0]

    def value(self, schema: Any, depth: int) -> str:
        if depth > _MAX_DEPTH:
            raise _Dead(f"argument schemas nested more than {_MAX_DEPTH} levels deep")
        if schema is True or schema == {}:
            return "py_any"
        if not isinstance(schema, dict):
            raise _Dead(f"an argument schema {schema!r} is not compiled for a Python call list")
        for key in _UNSUPPORTED:
            if key in schema:
                raise _Dead(f"a Python call list whose argument schemas use {key!r} is not compiled")
        if "const" in schema:
            return _quoted(python_literal(schema["const"]))
        if "enum" in schema:
            return "(" + " | ".join(_quoted(python_literal(item)) for item in schema["enum"]) + ")"
        if "anyOf" in schema:
            return "(" + " | ".join(self.value(item, depth + 1) for item in schema["anyOf"]) + ")"
        kind = schema.get("type")
        kinds = kind if isinstance(kind, list) else [kind] if kind else []
        if not kinds:
            kinds = ["object"] if "properties" in schema else ["array"] if "items" in schema else []
        if not kinds:
            return "py_any"
        typed = [self._typed(item, schema, depth) for item in kinds]
        return typed[0] if len(typed) == 1 else "(" + " | ".join(typed) + ")"

    def _typed(self, kind: str, schema: dict, depth: int) -> str:
        # (the JSON spellings of the constants too, which the parser reads and LFM2 writes)
        simple = {"string": "py_str", "integer": "py_int", "number": "py_num",
                  "boolean": '("True" | "False" | "true" | "false")', "null": '("None" | "null")'}
        if kind in simple:
            return simple[kind]
        if kind == "array":
            item = self.value(schema.get("items", {}), depth + 1)
            return self._rule(f'"[" ({item} (py_sep {item})*)? "]"')
        if kind == "object":
            properties = schema.get("properties")
            if not properties:
                return '"{}"' if schema.get("additionalProperties", True) is False else "py_dict"
            required = set(schema.get("required") or [])
            members = [(f'{_quoted(python_literal(key) + ": ")} {self.value(item, depth + 1)}', key in required)
                       for key, item in properties.items()]
            return self._rule(f'"{{" {self._members(members)} "}}"')
        raise _Dead(f"argument type {kind!r} is not compiled for a Python call list")


def call_list_grammar(tools: list, parallel: bool) -> str:
    """The EBNF of a list of calls of the given tools (PythonCallRules), one call at most unless `parallel`."""
    rules: dict[str, str] = {}
    for tool in tools:
        rules.update(tool.rules)
    any_call = "(" + " | ".join(tool.call for tool in tools) + ")"
    root = f'"[" {any_call} (py_sep {any_call})* "]"' if parallel else f'"[" {any_call} "]"'
    return "\n".join([f"root ::= {root}"] + [f"{name} ::= {body}" for name, body in {**_RULES, **rules}.items()])

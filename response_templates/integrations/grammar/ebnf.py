"""What the EBNF grammars built per tool share (xgrammar's `grammar` format): named rules, members written in any
order (or the schema's) with the optional ones left out or not, and text that holds none of a list of markers."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from .patterns import _Dead

# Schema keywords a grammar of literals does not enforce: such a tool is refused, never given a grammar whose
# arguments could break its schema ("oneOf" too: its alternatives may overlap).
UNSUPPORTED_KEYWORDS = (
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern",
    "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "patternProperties", "propertyNames",
    "prefixItems", "contains", "allOf", "oneOf", "not", "if", "then", "else", "$ref", "dependentRequired",
    "dependentSchemas",
)
MAX_DEPTH = 8
# Objects of this many members or fewer may write them in any order (a rule per subset: 2**n rules).
ANY_ORDER_MOST = 5


def quoted(text: str) -> str:
    """`text` as an EBNF string literal."""
    return json.dumps(text, ensure_ascii=False)


def _class(chars: set) -> str:
    """An EBNF character class matching any character but `chars` (runs of three or more consecutive characters
    written as a range: the control characters strings exclude are one `\\x00-\\x1f`)."""
    def escaped(char: str) -> str:
        if ord(char) < 32:  # (control characters by their code)
            return f"\\x{ord(char):02x}"
        return "\\" + char if char in "\\]^-[" else char

    runs: list = []  # [first, last] code points
    for code in sorted(ord(char) for char in chars):
        if runs and code == runs[-1][1] + 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    parts = [escaped(chr(first)) + ("-" + escaped(chr(last)) if last > first + 1 else
                                    escaped(chr(last)) if last > first else "") for first, last in runs]
    return "[^" + "".join(parts) + "]"


@dataclass(frozen=True)
class _SearchState:
    """A state of the search for markers in a text: the text's longest end that starts a marker."""

    text: str
    may_end: bool  # the text may end here (no marker would run on into what follows it)
    leaving: frozenset  # the characters that do not lead back to the start state (they go on, or end a marker)
    moves: tuple  # (character, next state's text) for the characters that go on with a marker


@functools.lru_cache(maxsize=32)
def _marker_search(markers: tuple, before: str) -> list:
    """The states of the search for `markers` (_SearchState), the start state "" first."""
    # (a marker holding another one is found by that one)
    markers = tuple(m for m in markers if m and not any(o != m and o and o in m for o in markers))
    starts = {m[:size] for m in markers for size in range(len(m))} or {""}
    alphabet = sorted({char for m in markers for char in m})

    def step(state: str, char: str) -> str | None:
        text = state + char
        if any(text.endswith(m) for m in markers):
            return None  # a marker would be complete
        return next(text[at:] for at in range(len(text) + 1) if text[at:] in starts)

    states = []
    for state in sorted(starts, key=lambda text: (len(text), text)):
        ahead = state + before
        may_end = not any(0 <= ahead.find(m) < len(state) for m in markers)
        moves = {char: step(state, char) for char in alphabet}
        states.append(_SearchState(state, may_end, frozenset(char for char, after in moves.items() if after != ""),
                                   tuple((char, after) for char, after in moves.items() if after)))
    return states


class EbnfRules:
    """Rules named after a seed (a tool's name), so that the rules of several tools live in one grammar."""

    def __init__(self, seed: str):
        self.prefix = "c" + hashlib.sha256(seed.encode()).hexdigest()[:10]
        self.rules: dict[str, str] = {}

    def _rule(self, body: str) -> str:
        name = f"{self.prefix}_{len(self.rules)}"
        self.rules[name] = body
        return name

    def text_without(self, markers: list, before: str, escape: str = "") -> str:
        """A rule for any text that holds none of `markers`, nor one that would start in it and end in `before`
        (the text that follows it): one rule per state of the search for the markers (the longest end of the text
        read so far that starts a marker). `escape`, a rule for an escape sequence (JSON's `\\n`), which holds no
        marker and starts the search afresh."""
        states = _marker_search(tuple(sorted(set(markers))), before)
        names = {state.text: f"{self.prefix}_{len(self.rules)}_{at}" for at, state in enumerate(states)}
        for state in states:
            choices = ['""'] if state.may_end else []
            choices.append(f"{_class(state.leaving)} {names['']}")
            if escape:
                choices.append(f"{escape} {names['']}")
            choices += [f"{quoted(char)} {names[after]}" for char, after in state.moves]
            self.rules[names[state.text]] = " | ".join(choices)
        return names[""]

    def _members(self, members: list, separator: str, any_order: bool = True) -> str:
        """The members (text, required), `separator` between them, the optional ones left out or not, each at most
        once: in any order where there are ANY_ORDER_MOST of them or fewer (a model writes arguments in the order
        it learnt, which need not be the schema's: chat templates that sort keys, or the caller's order), else (or
        unless `any_order`) in the given order."""
        if any_order and len(members) <= ANY_ORDER_MOST:
            return self._members_any_order(members, separator)
        head, tail = ['""'] * (len(members) + 1), ['""'] * (len(members) + 1)
        for at in range(len(members) - 1, -1, -1):
            text, required = members[at]
            after = tail[at + 1]
            tail[at] = self._rule(f"{separator} {text} {after}" if required
                                  else f"({separator} {text} {after}) | {after}")
            head[at] = self._rule(f"{text} {after}" if required else f"({text} {after}) | {head[at + 1]}")
        return head[0]

    def _members_any_order(self, members: list, separator: str) -> str:
        """The members in any order: a rule per set of members written so far (a bit mask), which writes one of the
        others next or ends once every required one is written."""
        if not members:
            return '""'
        needed = sum(1 << at for at, (_, required) in enumerate(members) if required)
        full = (1 << len(members)) - 1
        names = {mask: f"{self.prefix}_{len(self.rules)}_{mask}" for mask in range(full + 1)}
        for mask in range(full + 1):
            choices = ['""'] if mask & needed == needed else []
            lead = f"{separator} " if mask else ""
            choices += [f"{lead}{text} {names[mask | 1 << at]}" for at, (text, _) in enumerate(members)
                        if not mask & 1 << at]
            self.rules[names[mask]] = " | ".join(f"({choice})" for choice in choices)
        return names[0]


class ValueRules(EbnfRules):
    """Values typed by a JSON schema, in a literal syntax a subclass spells: its `dialect` (for messages), the
    `separator` rule between items and members, rules for a value and an object of any type, a rule per JSON type of
    scalar, and how a constant and a member's key are written. Objects' members are written in any order (see
    `_members`), the required ones always."""

    dialect = ""
    separator = '","'
    ordered_root = False  # the root object's members in the schema's order (a call object the parser reads so)
    any_value = any_object = root = ""
    scalars: dict[str, str] = {}

    def constant(self, value: Any) -> str:
        raise NotImplementedError

    def key(self, key: str) -> str:
        raise NotImplementedError

    def _json_values(self, string: str, object_key: str, constants: tuple) -> None:
        """The rules of the JSON-like dialects: `string`, the rule of a string; `object_key`, how a key and its colon
        are written in an object of any members; `constants`, how true, false and null are written."""
        self.string = string
        self.integer = self._rule('"-"? ("0" | [1-9] [0-9]*)')
        # (an exponent of two digits at most: a number past a float's range would read as infinity)
        self.number = self._rule(f'{self.integer} ("." [0-9]+)? ([eE] [+\\-]? [0-9] [0-9]?)?')
        self.separator = self._rule('"," " "?')
        self.any_value = self._rule("")  # filled below: values hold values
        member = f"{object_key} {self.any_value}"
        self.any_object = self._rule(f'"{{" ({member} ({self.separator} {member})*)? "}}"')
        true, false, null = constants
        self.rules[self.any_value] = (
            f'{string} | {self.number} | {true} | {false} | {null} '
            f'| "[" ({self.any_value} ({self.separator} {self.any_value})*)? "]" | {self.any_object}')
        self.scalars = {"string": string, "integer": self.integer, "number": self.number,
                        "boolean": f"({true} | {false})", "null": f"({null})"}

    def grammar(self) -> str:
        """The grammar of the value (`root`, set by a subclass), with every rule made so far."""
        return "\n".join([f"root ::= {self.root}"] + [f"{name} ::= {body}" for name, body in self.rules.items()])

    def value(self, schema: Any, depth: int) -> str:
        if depth > MAX_DEPTH:
            raise _Dead(f"argument schemas nested more than {MAX_DEPTH} levels deep")
        if schema is True or schema == {}:
            return self.any_value
        if not isinstance(schema, dict):
            raise _Dead(f"an argument schema {schema!r} is not compiled for {self.dialect}")
        for keyword in UNSUPPORTED_KEYWORDS:
            if keyword in schema:
                raise _Dead(f"{self.dialect} whose argument schemas use {keyword!r} is not compiled")
        if "const" in schema:
            return self.constant(schema["const"])
        if "enum" in schema:
            return "(" + " | ".join(self.constant(item) for item in schema["enum"]) + ")"
        if "anyOf" in schema:
            return "(" + " | ".join(self.value(item, depth + 1) for item in schema["anyOf"]) + ")"
        kind = schema.get("type")
        kinds = kind if isinstance(kind, list) else [kind] if kind else []
        if not kinds:
            kinds = ["object"] if "properties" in schema else ["array"] if "items" in schema else []
        if not kinds:
            return self.any_value
        typed = [self._typed(item, schema, depth) for item in kinds]
        return typed[0] if len(typed) == 1 else "(" + " | ".join(typed) + ")"

    def _typed(self, kind: str, schema: dict, depth: int) -> str:
        if kind in self.scalars:
            return self.scalars[kind]
        if kind == "array":
            item = self.value(schema.get("items", {}), depth + 1)
            return self._rule(f'"[" ({item} ({self.separator} {item})*)? "]"')
        if kind == "object":
            properties = schema.get("properties")
            if not properties:
                # (members the schema does not list are not written, as xgrammar's JSON schemas do not: an object of
                # any members is one without "properties")
                free = "properties" not in schema and schema.get("additionalProperties", True) is not False
                return self.any_object if free else '"{}"'
            required = set(schema.get("required") or [])
            members = [(f"{self.key(key)} {self.value(item, depth + 1)}", key in required)
                       for key, item in properties.items()]
            members_rule = self._members(members, self.separator, any_order=depth > 0 or not self.ordered_root)
            return self._rule(f'"{{" {members_rule} "}}"')
        raise _Dead(f"argument type {kind!r} is not compiled for {self.dialect}")

"""Constrained decoding from a response template: xgrammar structural tags that force tool calls.

`structural_tag(template, tools, tool_choice=...)` returns the JSON form of an xgrammar structural tag (what
vLLM's `structured_outputs`, SGLang's `response_format` and `xgrammar.Grammar.from_structural_tag` accept). The
template already says how a call opens, how its body is written and how it closes; the compiler reads one
canonical writing of each out of the template's patterns:

- delimiter patterns are walked (Python's own regex parser) taking the first alternative that spells literal
  text, skipping optional parts and lookarounds, and keeping `\\s*` as optional whitespace;
- a call's body is the tool's JSON schema written in the region's syntax: JSON (the whole `{"name", "arguments"}`
  object, or the arguments after a name the opener spells), or xml-inline parameters (one tag per property,
  string values as raw text up to the tag's end, other values as JSON);
- reasoning and content stay free text, kept free of the template's markers so that they cannot open, close or
  swallow a call; where the parser drops text outside messages (gpt-oss's harmony), the answer is written as the
  format's content message instead.

Every grammar is checked before it is returned: calls written in the canonical form (one and two calls, text
before and after, after the reasoning) are parsed with our own parser and must give exactly the calls meant. A
template the compiler cannot express raises `GrammarError` naming the reason; it never returns a grammar whose
strings parse to other calls. The property test (tests/test_grammar.py) walks each grammar at random with
xgrammar's matcher and parses what it admits.

xgrammar itself is not imported here: the result is plain JSON.
"""

from __future__ import annotations

import copy
import importlib
import json
import re as _re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import regex

from ..core.errors import GrammarError
from ..core.parse_whole import parse_response
from ..core.template import CompiledTemplate, load_template, spelled_literals

__all__ = ["GrammarError", "explain", "structural_tag"]


def _regex_internals() -> tuple:
    """Python's own regex parser (its module names changed in 3.11)."""
    try:
        return importlib.import_module("re._parser"), importlib.import_module("re._constants")
    except ImportError:  # pragma: no cover - Python 3.10
        return importlib.import_module("sre_parse"), importlib.import_module("sre_constants")


_sre_parse, _sre = _regex_internals()


# Optional whitespace where a pattern has \s*: a few characters at most (models write a newline or a space; an
# unbounded run would only let a sampler ramble).
_WS_MAX = 4
# Characters that make a literal run a marker worth keeping out of free text and argument strings.
_MARKER_CHARS = set("<>|[]{}`\uff5c")
# The character classes an optional part may use, as a regex element spells them.
_CLASSES = {_sre.CATEGORY_DIGIT: "0-9", _sre.CATEGORY_WORD: "A-Za-z0-9_", _sre.CATEGORY_SPACE: " \\t\\r\\n"}
# How many spellings of one literal run the marker search follows (optional letters multiply them).
_RUN_VARIANTS = 8


class _Dead(Exception):
    """This alternative of a pattern cannot be written as canonical text."""


@dataclass(frozen=True)
class _Piece:
    kind: str  # "lit", "ws" (whitespace, at least `size` characters), "group" (a named group's text), "opt" (an
    # optional part the grammar allows but the canonical writing leaves out: `text` is its regex)
    text: str = ""  # the literal, the group's name, or for "ws" the whitespace characters the pattern allows
    size: int = 0
    most: int = -1  # for "ws": the most characters the pattern allows there (-1: no bound)
    sample: str = ""  # for "opt": one text it matches, for the compiler's check


@dataclass
class _CallForm:
    """How one tool's call is written: `begin` (literal), then `elements` (structural-tag formats), then `end`."""

    tool: str
    begin: str
    elements: list
    end: str
    write: Callable[[dict], str]  # the canonical text of a call with these arguments
    # the optional parts the grammar allows (their element in `elements`) and how a call is written with each
    optional: list = field(default_factory=list)


@dataclass
class _Plan:
    """What the compiler read from the template: enough to build any tool_choice mode."""

    template: CompiledTemplate
    prefix: str
    tools: list
    calls: dict  # tool name -> _CallForm
    triggers: list
    markers: list
    reasoning_open: str | None  # the prompt left the reasoning open: the text that closes it
    reasoning_tag: tuple | None  # (open, close) when the answer may start with a reasoning block
    separator: str
    notes: list = field(default_factory=list)
    wrappers: list = field(default_factory=list)  # (open, close) markers a group of calls may be written between
    # plain text that starts a call in another writing of the opener (gpt-oss's `to=`): kept out of free text
    # (inside a message or an argument string it opens nothing: the message's markers are kept out of them)
    plain_starts: list = field(default_factory=list)
    # an optional part a call's opener starts with, in a format whose messages each open with a header (gpt-oss's
    # `<|start|>assistant`): allowed after the reasoning block and written between calls, where the model writes it
    lead: _Piece | None = None
    # content messages opened by their own marker, in a format that drops text outside messages:
    # (open, [closes], what free text writes to open one)
    messages: list = field(default_factory=list)


# ---------------------------------------------------------------------------------------------------------------
# Reading patterns


def _unique_groups(pattern: str) -> str:
    """Python's parser refuses a group name used twice (the `regex` module allows it): number the copies."""
    seen: dict = {}

    def rename(match: Any) -> str:
        name = match.group(1)
        seen[name] = seen.get(name, 0) + 1
        return match.group(0) if seen[name] == 1 else f"(?P<{name}__{seen[name]}>"

    return regex.sub(r"\(\?P<([A-Za-z_]\w*)>", rename, pattern)


def _parse_pattern(pattern: str) -> tuple:
    try:
        parsed = _sre_parse.parse(_unique_groups(pattern))
    except (_re.error, RecursionError) as error:  # the regex module's syntax beyond Python's (rare in templates)
        raise _Dead(f"pattern {pattern!r} is beyond Python's regex syntax ({error})") from None
    names = {number: name.rsplit("__", 1)[0] for name, number in parsed.state.groupdict.items()}
    return parsed, names


def _space_chars(items: Any) -> str:
    """For a one-character class of whitespace only (\\s, [ \\t], \\n): its characters; else ""."""
    items = list(items)
    if len(items) != 1:
        return ""
    op, av = items[0]
    if op is _sre.LITERAL:
        return chr(av) if chr(av).isspace() else ""
    if op is _sre.IN:
        chars = ""
        for kind, value in av:
            if kind is _sre.LITERAL and chr(value).isspace():
                chars += chr(value)
            elif kind is _sre.CATEGORY and value is _sre.CATEGORY_SPACE:
                chars += " \t\r\n"
            else:
                return ""
        return "".join(sorted(set(chars)))
    return ""


def _negated_space(items: Any) -> str:
    """For a negated class of a few literal characters (`[^<]`), the whitespace it lets through; else ""."""
    items = list(items)
    if len(items) == 1 and items[0][0] is _sre.NOT_LITERAL:  # how Python's parser reads `[^<]`
        items = [(_sre.IN, [(_sre.NEGATE, None), (_sre.LITERAL, items[0][1])])]
    if len(items) != 1 or items[0][0] is not _sre.IN:
        return ""
    av = items[0][1]
    if not av or av[0][0] is not _sre.NEGATE or any(kind is not _sre.LITERAL for kind, _ in av[1:]):
        return ""
    return "".join(char for char in " \t" if all(chr(value) != char for _, value in av[1:]))


def _is_anything(items: Any) -> bool:
    """`.` or `[\\s\\S]`: a repeat of it eats the rest of the text."""
    items = list(items)
    if len(items) != 1:
        return False
    op, av = items[0]
    if op is _sre.ANY:
        return True
    if op is _sre.IN:
        categories = {value for kind, value in av if kind is _sre.CATEGORY}
        return {_sre.CATEGORY_SPACE, _sre.CATEGORY_NOT_SPACE} <= categories
    return False


def _walk(items: Any, names: dict, out: list, fill: dict | None = None) -> None:
    """Pieces of the canonical writing of `items`. `fill`: named groups written as the given text (the optional
    part around such a group is then written too)."""
    for op, av in items:
        if op is _sre.LITERAL:
            out.append(_Piece("lit", chr(av)))
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
            continue
        elif op is _sre.AT:
            if av in (_sre.AT_END, _sre.AT_END_STRING):
                raise _Dead("matches only at the end of the text")
        elif op is _sre.SUBPATTERN:
            group, _, _, body = av
            name = names.get(group)
            if fill and name in fill:
                out.append(_Piece("lit", fill[name]))
            elif name is not None:
                out.append(_Piece("group", name))
            else:
                _walk(body, names, out, fill)
        elif op is _sre.BRANCH:
            reasons = []
            for alternative in av[1]:
                attempt: list = []
                try:
                    _walk(alternative, names, attempt, fill)
                except _Dead as dead:
                    reasons.append(str(dead))
                    continue
                out.extend(attempt)
                break
            else:
                raise _Dead("; ".join(reasons))
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)):
            low, high, body = av
            if _space_chars(body):
                out.append(_Piece("ws", _space_chars(body), size=low, most=-1 if high is _sre.MAXREPEAT else high))
            elif not low and _negated_space(body):  # `[^<]*` (gpt-oss's header): optional whitespace is written
                out.append(_Piece("ws", _negated_space(body), size=0, most=-1 if high is _sre.MAXREPEAT else high))
            elif _is_anything(body):
                raise _Dead("eats the rest of the text")
            elif low or fill and _holds_group(body, names, fill):
                for _ in range(max(low, 1)):
                    _walk(body, names, out, fill)
            else:  # an optional part, left out of the canonical writing; the grammar allows it where it can say it
                optional = _as_regex(body, names) if high == 1 else None
                if optional:
                    out.append(_Piece("opt", f"({optional[0]})?", sample=optional[1]))
        elif op is _sre.GROUPREF_EXISTS:
            _group, _yes, no = av
            if no:  # the optional groups were left out, so the "no" branch is the one taken
                _walk(no, names, out, fill)
        elif op is _sre.IN and _space_chars([(op, av)]):
            out.append(_Piece("ws", _space_chars([(op, av)]), size=1, most=1))
        else:
            raise _Dead(f"needs a character the compiler cannot choose ({op})")


def _holds_group(items: Any, names: dict, wanted: Any) -> bool:
    """`items` hold a named group among `wanted`."""
    for op, av in items:
        if op is _sre.SUBPATTERN:
            if names.get(av[0]) in wanted or _holds_group(av[3], names, wanted):
                return True
        elif op is _sre.BRANCH:
            if any(_holds_group(alternative, names, wanted) for alternative in av[1]):
                return True
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)):
            if _holds_group(av[2], names, wanted):
                return True
    return False


def _as_regex(items: Any, names: dict) -> tuple | None:
    """(an optional part as xgrammar's regex element spells it, one text it matches), for literals, digit and word
    classes, bounded repeats of them, groups and alternatives; None for anything else (a named group, a lookaround,
    an open-ended run of any character). The compiler's check keeps it only where the parser reads a
    call written with it as the same call."""
    out, sample = "", ""
    for op, av in items:
        if op is _sre.LITERAL:
            out += _re.escape(chr(av))
            sample += chr(av)
        elif op is _sre.IN or op is _sre.NOT_LITERAL:
            if op is _sre.NOT_LITERAL:
                av = [(_sre.NEGATE, None), (_sre.LITERAL, av)]
            if av and av[0][0] is _sre.NEGATE:
                # any character but a few punctuation marks (`[^<]`): the grammar writes word characters there
                if any(kind is not _sre.LITERAL or chr(value).isalnum() or chr(value) == "_" for kind, value in av[1:]):
                    return None
                out += "[A-Za-z0-9_]"
                sample += "a"
                continue
            parts, first = [], ""
            for kind, value in av:
                if kind is _sre.LITERAL:
                    parts.append(_re.escape(chr(value)))
                    first = first or chr(value)
                elif kind is _sre.RANGE:
                    parts.append(f"{_re.escape(chr(value[0]))}-{_re.escape(chr(value[1]))}")
                    first = first or chr(value[0])
                elif kind is _sre.CATEGORY and value in _CLASSES:
                    parts.append(_CLASSES[value])
                    first = first or _CLASSES[value][0]
                else:
                    return None
            out += "[" + "".join(parts) + "]"
            sample += first
        elif op is _sre.SUBPATTERN:
            inner = None if names.get(av[0]) is not None else _as_regex(av[3], names)
            if inner is None:
                return None
            out += f"({inner[0]})"
            sample += inner[1]
        elif op is _sre.BRANCH:
            alternatives = [_as_regex(alternative, names) for alternative in av[1]]
            if any(alternative is None for alternative in alternatives):
                return None
            out += "(" + "|".join(alternative[0] for alternative in alternatives) + ")"  # type: ignore[index]
            sample += alternatives[0][1]  # type: ignore[index]
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
            low, high, body = av
            inner = None if _is_anything(body) else _as_regex(body, names)
            if inner is None:
                return None
            most = _WS_MAX * 4 if high is _sre.MAXREPEAT else high  # a model writes an index, not an essay
            out += f"({inner[0]}){{{low},{max(low, most)}}}"
            sample += inner[1] * max(low, 1)
        else:
            return None
    return out, sample


def _merge(pieces: list) -> list:
    merged: list = []
    for piece in pieces:
        if merged and piece.kind == merged[-1].kind == "lit":
            merged[-1] = _Piece("lit", merged[-1].text + piece.text)
        elif merged and piece.kind == merged[-1].kind == "ws" and piece.text == merged[-1].text:
            most = -1 if -1 in (piece.most, merged[-1].most) else piece.most + merged[-1].most
            merged[-1] = _Piece("ws", piece.text, size=merged[-1].size + piece.size, most=most)
        else:
            merged.append(piece)
    return merged


def _skeleton(delimiter: Any, what: str, fill: dict | None = None) -> list:
    """The canonical writing of a field's open or close delimiter (its spec: a literal, a list or a pattern)."""
    return _skeletons(delimiter, what, fill)[0]


def _skeletons(delimiter: Any, what: str, fill: dict | None = None, spread: bool = False) -> list:
    """Every top-level alternative of a delimiter that can be written, in the template's order. With `spread`, an
    alternation inside the top-level sequence counts too (gpt-oss's `(?:<\\|start\\|>assistant)?(?:A|B|...)<...`)."""
    if delimiter is None:
        raise _Dead(f"{what}: none")
    if isinstance(delimiter, list):
        return [[_Piece("lit", text)] for text in delimiter]
    if isinstance(delimiter, str) and not delimiter.startswith("\0pattern:"):
        return [[_Piece("lit", delimiter)]]
    pattern = delimiter[len("\0pattern:"):]
    parsed, names = _parse_pattern(pattern)
    items = list(parsed)
    alternatives = [items]
    if len(items) == 1 and items[0][0] is _sre.BRANCH:
        alternatives = items[0][1][1]
    elif spread:
        alternatives = _spread(items)
    reasons, found = [], []
    for alternative in alternatives:
        out: list = []
        try:
            _walk(alternative, names, out, fill)
        except _Dead as dead:
            reasons.append(str(dead))
            continue
        if any(piece.kind == "lit" for piece in out):
            found.append(_merge(out))
        else:
            reasons.append("spells no literal text")
    if found:
        return found
    raise _Dead(f"{what} {pattern!r}: no alternative can be written ({'; '.join(reasons)})")


def _spread(items: list) -> list:
    """The sequences `items` spells with each of its top-level alternations replaced by one of its alternatives,
    in the template's order (a few at most)."""
    sequences: list = [[]]
    for op, av in items:
        if op is _sre.BRANCH and len(sequences) * len(av[1]) <= _RUN_VARIANTS:
            sequences = [sequence + list(alternative) for sequence in sequences for alternative in av[1]]
        else:
            sequences = [sequence + [(op, av)] for sequence in sequences]
    return sequences


def _delimiter_spec(spec: dict, literal_key: str, pattern_key: str) -> Any:
    if spec.get(pattern_key) is not None:
        return "\0pattern:" + spec[pattern_key]
    return spec.get(literal_key)


def _literal_runs(pattern: str, spellings: bool = True) -> list:
    """Every maximal run of literal text anywhere in the pattern (all alternatives). Optional whitespace and
    lookarounds do not break a run: `(?<=\\})\\s*\\]` spells `}]`, text that closes a region wherever it is.
    With `spellings`, a few literal spellings do not break one either (`s?`: both runs); the pieces between them
    are runs too (`invoke>` of `</｜DSML｜ ?invoke>` stays a marker)."""
    try:
        parsed, _ = _parse_pattern(pattern)
    except _Dead:
        return []
    runs: list = []

    # `active`: the runs still growing; optional whitespace keeps each of them and starts a new one beside them,
    # since the parser matches the text with or without it (`}\\s*</tool_call>`: `}</tool_call>` and `</tool_call>`)
    def visit(items: Any, active: list) -> list:
        for op, av in items:
            if op is _sre.LITERAL:
                active = [run + chr(av) for run in active]
                continue
            choices = spelled_literals([(op, av)], optional=True, most=_RUN_VARIANTS) if spellings else None
            if choices is not None and len(active) * len(choices) <= _RUN_VARIANTS:
                # a few literal spellings (`s?`, `(?:functions\\.)?`, `(?:a|b)`) go on with each run: Kimi's
                # `<\\|tool_calls?_section_begin\\|>` is the marker `<|tool_calls_section_begin|>`, not two pieces
                active = [run + choice for run in active for choice in choices]
                continue
            if op is _sre.ASSERT:
                active = visit(av[1], active)
                continue
            if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT) and av[0] == 0 and _space_chars(av[2]):
                runs.extend(active)
                active = active + [""]
                continue
            if op is _sre.AT:
                continue
            runs.extend(active)
            active = [""]
            if op is _sre.SUBPATTERN:
                runs.extend(visit(av[3], [""]))
            elif op is _sre.BRANCH:
                for alternative in av[1]:
                    runs.extend(visit(alternative, [""]))
            elif op is _sre.ASSERT_NOT:
                runs.extend(visit(av[1], [""]))
            elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)):
                runs.extend(visit(av[2], [""]))
            elif op is _sre.GROUPREF_EXISTS:
                runs.extend(visit(av[1], [""]))
                if av[2]:
                    runs.extend(visit(av[2], [""]))
        return active

    runs.extend(visit(list(parsed), [""]))
    found = [run for run in runs if run]
    return found + [run for run in _literal_runs(pattern, False) if run not in found] if spellings else found


def _markers(source: dict) -> list:
    """The template's marker texts (`<tool_call>`, `<|im_end|>`, `</think>`...): kept out of free text and
    argument strings so that they can neither open, close nor end anything the grammar did not mean."""
    texts: list = []
    anchor = source.get("start_anchor_pattern")
    if anchor:
        texts += _literal_runs(anchor)
    elif source.get("start_anchor"):
        texts.append(source["start_anchor"])
    for spec in source.get("fields", {}).values():
        for key in ("open", "close"):
            value = spec.get(key)
            texts += value if isinstance(value, list) else ([value] if value else [])
        for key in ("open_pattern", "close_pattern"):
            if spec.get(key):
                texts += _literal_runs(spec[key])
        tag_pattern = (spec.get("content_args") or {}).get("tag_pattern")
        if tag_pattern:
            texts += _literal_runs(tag_pattern)
        for pair in (spec.get("content_args") or {}).get("string_delims") or []:
            texts += list(pair)
    markers = []
    for text in texts:
        text = text.strip()
        if len(text) >= 2 and any(char in _MARKER_CHARS or ord(char) > 127 for char in text) and text not in markers:
            markers.append(text)
    return markers


# ---------------------------------------------------------------------------------------------------------------
# Formats


def _const(text: str) -> dict:
    return {"type": "const_string", "value": text}


def _ws(size: int, chars: str = " \t\r\n", most: int = -1) -> dict:
    escaped = chars.replace("\t", "\\t").replace("\r", "\\r").replace("\n", "\\n")
    upper = _WS_MAX if most < 0 else min(most, _WS_MAX)
    return {"type": "regex", "pattern": f"[{escaped}]{{{size},{max(size, upper)}}}"}


def _free_text(excludes: list) -> dict:
    return {"type": "any_text", "excludes": list(excludes)}


def _split(pieces: list, name: str | None, include: Any = None, elements: dict | None = None) -> tuple:
    """Pieces -> (leading literal text, the rest as formats, the canonical text). A `name` group reads `name`.
    The canonical text leaves optional parts out, but for the piece `include` (written with its sample);
    `elements`, when given, maps each optional piece's id to its format."""
    lead, formats, text = "", [], ""
    leading = True
    for piece in pieces:
        if piece.kind == "group":
            if piece.text != "name" or name is None:
                raise _Dead(f"has a group {piece.text!r} the compiler cannot fill")
            piece = _Piece("lit", name)
        if piece.kind == "lit":
            text += piece.text
            if leading:
                lead += piece.text
            else:
                formats.append(_const(piece.text))
        elif piece.kind == "opt":  # allowed by the grammar, left out of the canonical text
            leading = False
            formats.append({"type": "regex", "pattern": piece.text})
            if elements is not None:
                elements[id(piece)] = formats[-1]
            if piece is include:
                text += piece.sample
        else:
            leading = False
            formats.append(_ws(piece.size, piece.text, piece.most))
            text += _space(piece.text) * piece.size
    return lead, formats, text


def _space(chars: str) -> str:
    """The whitespace character written where a pattern requires some: a space when it may, else a newline."""
    return " " if " " in chars else "\n" if "\n" in chars else chars[0]


def _strip_ws(pieces: list, leading: bool) -> list:
    pieces = list(pieces)
    # optional whitespace, and optional parts, at the edge: the tag's begin and end are literal text
    while pieces and (pieces[0 if leading else -1].kind == "opt"
                      or pieces[0 if leading else -1].kind == "ws" and pieces[0 if leading else -1].size == 0):
        pieces.pop(0 if leading else -1)
    # an optional part inside the literal text at that edge (Hunyuan's `<tool_call(?::opensource)?>`) is left out,
    # so that the begin or end stays the whole literal, written as the canonical spelling
    order = pieces if leading else pieces[::-1]
    kept: list = []
    at = 0
    while at < len(order):
        if order[at].kind == "lit":
            kept.append(order[at])
        elif not (order[at].kind == "opt" and kept and at + 1 < len(order) and order[at + 1].kind == "lit"):
            break
        at += 1
    kept += order[at:]
    return _merge(kept if leading else kept[::-1])


def _sample(schema: Any, depth: int = 0) -> Any:
    """A value valid for a (simple) JSON schema, for the compiler's self-check."""
    if not isinstance(schema, dict):
        return "x"
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _sample(schema[key][0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else None
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties") or {}
        return {key: _sample(value, depth + 1) for key, value in properties.items()} if depth < 4 else {}
    if kind == "array":
        return [_sample(schema.get("items"), depth + 1)] if depth < 4 else []
    simple: dict = {"integer": 3, "number": 2.5, "boolean": True, "null": None}
    return simple.get(kind, "Paris, 'FR' \"x\"") if isinstance(kind, str) else "Paris, 'FR' \"x\""


def _tool_list(tools: Any) -> list:
    """[(name, parameters schema)] from OpenAI-style or bare function schemas."""
    out = []
    for index, tool in enumerate(tools or []):
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise GrammarError(f"tools[{index}] is not a function schema with a name")
        parameters = function.get("parameters")
        if not isinstance(parameters, dict):
            parameters = {"type": "object", "properties": {}}
        out.append((function["name"], parameters))
    return out


# JSON numbers past a float's range (`7e639`) read as infinity, which no parser keeps as a number: numbers get
# bounds (xgrammar then writes them without an exponent) unless the schema sets its own.
_NUMBER_BOUND = 1e300


def _finite_numbers(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_finite_numbers(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _finite_numbers(value) for key, value in schema.items()}
    kind = schema.get("type")
    if kind == "number" or (isinstance(kind, list) and "number" in kind):
        if "minimum" not in out and "exclusiveMinimum" not in out:
            out["minimum"] = -_NUMBER_BOUND
        if "maximum" not in out and "exclusiveMaximum" not in out:
            out["maximum"] = _NUMBER_BOUND
    return out


def _json_body(schema: dict, args: dict, markers: list) -> tuple:
    """JSON content: the format, and (style) how a value is written."""
    style = "json"
    unquoted = bool(args.get("unquoted_keys"))
    delims = args.get("string_delims")
    if unquoted or delims:
        if unquoted and delims and [list(pair) for pair in delims] == [['<|"|>', '<|"|>']]:
            style = "gemma"
        else:
            raise _Dead("JSON with string_delims/unquoted_keys other than Gemma 4's (<|\"|>) is not supported yet")
    body = {"type": "json_schema", "json_schema": _finite_numbers(schema), "style": style, "excludes": list(markers),
            "max_whitespace_cnt": _WS_MAX}
    return body, style


def _write_json(value: Any, style: str) -> str:
    if style == "json":
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):  # gemma: unquoted keys, <|"|> strings
        return "{" + ",".join(f"{key}:{_write_json(item, style)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_write_json(item, style) for item in value) + "]"
    if isinstance(value, str):
        return f'<|"|>{value}<|"|>'
    return json.dumps(value)


def _group_required(pattern: str, group: str) -> bool:
    """Whether every canonical writing passes through the named group (it is not inside an optional part)."""
    parsed, names = _parse_pattern(pattern)
    out: list = []
    renamed = {number: ("value" if name == group else "_other") for number, name in names.items()}
    try:
        _walk(list(parsed), renamed, out)
    except _Dead:
        return True
    return any(p.kind == "group" and p.text == "value" for p in out)


def _xml_body(parameters: dict, args: dict, markers: list) -> tuple:
    """xml-inline content: one tag per property, in the schema's order (optional ones may be left out)."""
    pattern = args.get("tag_pattern")
    if not pattern:
        raise _Dead("xml-inline without tag_pattern")
    if args.get("nested_elements"):
        # the parser reads any value that looks like child elements as a dict or list: a grammar that writes string
        # values as free text could not keep them strings, and nested tags per schema are not compiled
        raise _Dead("xml-inline values read as nested child elements (nested_elements) are not supported")
    parser = args.get("value_parser") or {"name": "text"}
    if parser.get("name") not in ("text", "json") or (parser.get("args") or {}).get("string_delims"):
        raise _Dead(f"xml-inline values read by {parser.get('name')!r} are not supported yet")
    # a json value_parser reads every value as JSON: strings are written quoted
    json_values = parser.get("name") == "json"

    def skeleton(fill: dict | None = None) -> list:  # (optional parts of a tag are left out)
        return [piece for piece in _skeleton("\0pattern:" + pattern, "tag_pattern", fill) if piece.kind != "opt"]

    pieces = skeleton()
    by = args.get("value_parser_by")
    # a value parser picked by a group (DSML's string="true|false"): a string parameter is written with the value
    # that picks the text parser (raw text), the others with the one that picks JSON, as the format's models do
    picked: dict = {}
    if by:
        _, names = _parse_pattern(pattern)
        group = by.get("group")
        chosen = {(parser or {}).get("name"): value for value, parser in (by.get("parsers") or {}).items()}
        if "text" in chosen and "json" in chosen and group in names.values():
            picked = {"string": skeleton({group: chosen["text"]}), "other": skeleton({group: chosen["json"]})}
        # else the canonical writing leaves the selecting group out (it is optional), so value_parser applies
        elif any(p.kind == "group" and p.text == group for p in pieces) or group not in names.values():
            raise _Dead(f"xml-inline values whose parser is picked by the group {group!r} are not supported yet")
        elif _group_required(pattern, group):
            raise _Dead(f"the group {group!r} that picks the value parser is not optional")

    def layout(pieces: list) -> tuple:
        """(tag opener: text before the key, text after it; the formats and text between the key and the value;
        the tag's closer; the whitespace format allowed after a JSON value)"""
        kinds = [piece.text for piece in pieces if piece.kind == "group"]
        if kinds != ["key", "value"]:
            raise _Dead(f"tag_pattern {pattern!r}: expected a key group then a value group, found {kinds}")
        # optional whitespace before the key is left out; after it (`>\\n?` before the value, `\\n?</parameter>`
        # after it) it is kept where the pattern allows it, as models write it there
        at_key = next(i for i, p in enumerate(pieces) if p.kind == "group")
        before = [_Piece("lit", _space(p.text) * p.size) if p.kind == "ws" else p
                  for p in pieces[:at_key] if not (p.kind == "ws" and p.size == 0)]
        at_value = next(i for i, p in enumerate(pieces) if p.kind == "group" and p.text == "value")
        between, after = pieces[at_key + 1:at_value], pieces[at_value + 1:]
        if any(p.kind != "lit" for p in before) or any(p.kind == "group" for p in between):
            raise _Dead(f"tag_pattern {pattern!r}: the key must follow literal text")
        lead, between_formats, between_text = _split(between, None) if between else ("", [], "")
        ahead = [p for p in after if p.kind == "ws"][:1] if after and after[0].kind == "ws" else []
        rest = after[len(ahead):]
        if not rest or rest[0].kind != "lit":
            raise _Dead(f"tag_pattern {pattern!r}: the value must end at literal text")
        closer = ""
        for piece in rest:  # the tag's end: its literal text, optional whitespace inside it left out
            if piece.kind == "group":
                break
            closer += piece.text if piece.kind == "lit" else _space(piece.text) * piece.size
        value_ws = [_ws(ahead[0].size, ahead[0].text, ahead[0].most)] if ahead else []
        return ("".join(p.text for p in before), lead), between_formats, between_text, closer, value_ws

    layouts = {kind: layout(kind_pieces) for kind, kind_pieces in picked.items()} or {"": layout(pieces)}

    def is_string(schema: Any) -> bool:
        return isinstance(schema, dict) and schema.get("type") == "string" and (not json_values or bool(picked))

    def layout_of(schema: Any) -> tuple:
        return layouts[""] if "" in layouts else layouts["string" if is_string(schema) else "other"]

    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    elements: list = []
    for key, schema in properties.items():
        if not isinstance(key, str) or not key or any(char.isspace() or char in "<>\"=" for char in key):
            raise _Dead(f"parameter name {key!r} cannot be written in a tag")
        opener, between_formats, _, closer, value_ws = layout_of(schema)
        value: dict
        if is_string(schema) and schema.get("enum"):  # the value is one of the strings, written raw
            value = {"type": "or", "elements": [_const(str(choice)) for choice in schema["enum"]]}
        elif is_string(schema):
            value = _free_text([m for m in markers if m != closer])
        else:
            value = {"type": "json_schema", "json_schema": _finite_numbers(schema), "excludes": list(markers),
                     "max_whitespace_cnt": _WS_MAX}
        # a raw string runs to the tag's end; JSON may be followed by the whitespace the pattern allows there
        content = between_formats + [value] + ([] if is_string(schema) else value_ws)
        content = content[0] if len(content) == 1 else {"type": "sequence", "elements": content}
        tag = {"type": "tag", "begin": opener[0] + key + opener[1], "content": content, "end": closer}
        item = {"type": "sequence", "elements": [_ws(0), tag]}
        elements.append(item if key in required else {"type": "optional", "content": item})

    def write(arguments: dict) -> str:
        out = ""
        for key, schema in properties.items():
            if key not in arguments:
                continue
            opener, _, between_text, closer, _ = layout_of(schema)
            value = arguments[key]
            text = value if is_string(schema) else json.dumps(value, ensure_ascii=False)
            out += opener[0] + key + opener[1] + between_text[len(opener[1]):] + text + closer
        return out

    return elements, write


def _content_keys(function: Any) -> tuple | None:
    """("name", "args") for a transform function {"name": "{content.name}", "arguments": "{content.args}"}."""
    if not isinstance(function, dict) or set(function) != {"name", "arguments"}:
        return None
    found = []
    for field_name in ("name", "arguments"):
        value = function[field_name]
        match = _re.fullmatch(r"\{content\.([A-Za-z_]\w*)\}", value) if isinstance(value, str) else None
        if match is None:
            return None
        found.append(match.group(1))
    return tuple(found) if found[0] != found[1] else None


def _plain(text: str) -> bool:
    """Text too plain to tell a call from prose: no marker character (it is also JSON syntax or a word)."""
    return len(text) < 2 or not any(char in _MARKER_CHARS or ord(char) > 127 for char in text)


def _leading_literal(pieces: list) -> str:
    lead = ""
    for piece in pieces:
        if piece.kind != "lit":
            break
        lead += piece.text
    return lead


def _opener(field_spec: dict) -> tuple:
    """(the writing of a call's opener the grammar uses, the plain starts of its other writings, the optional part
    that writing starts with or None). The first writing is taken unless it starts with plain text and another
    starts with a marker (gpt-oss: not the header's `to=functions.NAME<|channel|>commentary` but
    `<|channel|>commentary to=functions.NAME`); the other writings' plain starts (`to=`) are kept out of free text,
    where the parser would read them as a call."""
    raw = _skeletons(_delimiter_spec(field_spec, "open", "open_pattern"), "open", spread=True)
    writings = [_strip_ws(pieces, leading=True) for pieces in raw]
    at = 0
    if _plain(_leading_literal(writings[0])):
        at = next((index for index, pieces in enumerate(writings) if not _plain(_leading_literal(pieces))), 0)
    starts = [_leading_literal(pieces) for pieces in writings if _plain(_leading_literal(pieces))] if at else []
    starts = [start for start in starts if start and not any(other in start and other != start for other in starts)]
    # an optional literal the opener may start with (gpt-oss's `<|start|>assistant`, which begins every message)
    lead = next((piece for piece in raw[at] if piece.kind != "ws"), None)
    return writings[at], list(dict.fromkeys(starts)), lead if lead is not None and lead.kind == "opt" else None


def _call_form(field_spec: dict, name: str, parameters: dict, markers: list) -> _CallForm:
    opener = _opener(field_spec)[0]
    closer = _strip_ws(_skeleton(_delimiter_spec(field_spec, "close", "close_pattern"), "close"), leading=False)
    has_name = any(p.kind == "group" and p.text == "name" for p in opener)
    content = field_spec.get("content", "text")
    transform = field_spec.get("transform")
    if field_spec.get("transform_each"):
        raise _Dead("a region holding a list of calls (transform_each) is not supported yet")
    function = transform.get("function") if isinstance(transform, dict) else None
    # the whole call as one JSON object: {"name": ..., "arguments": ...}, or other keys read by "{content.KEY}"
    keys = ("name", "arguments") if function == "{content}" else _content_keys(function)
    whole = keys is not None
    if whole:
        if has_name:
            raise _Dead("the opener names the tool but the transform reads the name from the content")
    elif function != {"name": "{name}", "arguments": "{content}"} or not has_name:
        raise _Dead(f"transform {transform!r}: expected function '{{content}}' or {{name: '{{name}}', "
                    "arguments: '{content}'}} with the name in the opener")
    optional_elements: dict = {}
    begin, open_formats, open_text = _split(opener, name, elements=optional_elements)
    if not begin:
        raise _Dead("the opener does not start with literal text")
    # the closer's last literal is the tag's end; what comes before it belongs to the content
    last = max(i for i, p in enumerate(closer) if p.kind == "lit")
    leading_close, close_formats, close_text = _split(closer[:last], None, elements=optional_elements)
    close_formats = ([_const(leading_close)] if leading_close else []) + close_formats
    end = closer[last].text
    trailing = closer[last + 1:]
    if any(p.kind not in ("ws", "opt") for p in trailing):
        raise _Dead("the closer ends with a group")
    if content == "json":
        args = field_spec.get("content_args") or {}
        schema = parameters
        if keys is not None:
            schema = {"type": "object", "properties": {keys[0]: {"const": name}, keys[1]: parameters},
                      "required": list(keys), "additionalProperties": False}
        body, style = _json_body(schema, args, markers)
        body_elements = [_ws(0), body, _ws(0)]

        def write_body(arguments: dict) -> str:
            value = {keys[0]: name, keys[1]: arguments} if keys else arguments
            return _write_json(value, style)
    elif content == "xml-inline":
        if whole:
            raise _Dead("xml-inline content with the name inside it")
        body_elements, write_body = _xml_body(parameters, field_spec.get("content_args") or {}, markers)
        body_elements = body_elements + [_ws(0)]
    else:
        raise _Dead(f"content {content!r} in a tool-call region is not supported yet")

    def writer(opened: str, closed: str) -> Callable[[dict], str]:
        return lambda arguments: begin + opened[len(begin):] + write_body(arguments) + closed + end

    # a call written with each optional part, for the check that the parser reads it as the same call
    optional = []
    for piece in opener:
        if piece.kind == "opt":
            optional.append((optional_elements[id(piece)], writer(_split(opener, name, piece)[2], close_text)))
    for piece in closer[:last]:
        if piece.kind == "opt":
            optional.append((optional_elements[id(piece)], writer(open_text, _split(closer[:last], None, piece)[2])))
    return _CallForm(name, begin, open_formats + body_elements + close_formats, end, writer(open_text, close_text),
                     optional)


# ---------------------------------------------------------------------------------------------------------------
# Planning and checking


def _probe(template: CompiledTemplate, text: str, prefix: str, tools: list | None = None) -> dict | None:
    try:
        return parse_response(text, template, prefix=prefix, tools=tools)
    except ValueError:  # a text the template cannot parse (TemplateError, TransformError...): the probe failed
        return None


def _literal_text(pieces: list) -> str | None:
    return None if any(p.kind == "group" for p in pieces) else "".join(p.text for p in pieces if p.kind == "lit")


def _calls_read(message: Any) -> list:
    """The (name, arguments) of each call a parsed message holds (none for no message)."""
    return [((call.get("function") or {}).get("name"), (call.get("function") or {}).get("arguments"))
            for call in (message or {}).get("tool_calls") or []]


def _drops_bare_text(template: CompiledTemplate, prefix: str, before: str = "") -> bool:
    """Text written outside any region (after `before`) is dropped, not content (gpt-oss's harmony: every message
    opens with its channel)."""
    message = _probe(template, before + "Answer.", prefix)
    return message is not None and message == _probe(template, before, prefix)


def _reasoning(template: CompiledTemplate, prefix: str, markers: list) -> tuple:
    """(the text closing a reasoning block the prompt left open, or None; (open, close) of a reasoning block the
    answer may start with, or None), each the first writing of the template's delimiters our parser reads so."""
    spec = template.source.get("fields", {}).get("reasoning_content")
    if not spec:
        return None, None
    try:
        written = [_literal_text(p) for p in _skeletons(_delimiter_spec(spec, "close", "close_pattern"), "close")]
    except _Dead:
        return None, None
    closes: list[str] = [text for text in written if text]
    dropped = _drops_bare_text(template, "")  # the format's own way, whatever the prompt left open

    def reads(text: str) -> bool:
        message = _probe(template, text, prefix)
        # where text outside the format's messages is dropped (harmony), the block must leave it dropped
        return message is not None and message.get("reasoning_content") == "Thinking." and (
            message.get("content") == "Answer." or dropped and not message.get("content"))

    for close in closes:
        if reads("Thinking." + close + "Answer."):
            return close, None
    try:
        opens = [_literal_text(p) for p in _skeletons(_delimiter_spec(spec, "open", "open_pattern"), "open")]
    except _Dead:
        return None, None
    for opener in opens:
        for close in closes:
            if opener and reads(opener + "Thinking." + close + "Answer."):
                return None, (opener, close)
    return None, None


def _plan(template: Any, tools: Any, prefix: str) -> _Plan:
    if isinstance(template, str):
        from ..library import get_template

        template = get_template(template)
    compiled = load_template(template)
    source = compiled.source
    markers = _markers(source)
    fields = source.get("fields", {})
    reasoning_open, reasoning_tag = _reasoning(compiled, prefix, markers)
    tool_list = _tool_list(tools)
    calls: dict = {}
    spec = fields.get("tool_calls")
    if tool_list:
        if spec is None:
            raise GrammarError("the template has no tool_calls field: it cannot write a tool call")
        for name, parameters in tool_list:
            try:
                calls[name] = _call_form(spec, name, parameters, markers)
            except _Dead as dead:
                raise GrammarError(f"tool_calls of this template cannot be compiled: {dead}") from None
    triggers = []
    for form in calls.values():
        trigger = _trigger(form.begin, [other.begin for other in calls.values()])
        if trigger not in triggers:
            triggers.append(trigger)
    for trigger in triggers:
        if _plain(trigger):
            raise GrammarError(f"the call opener {trigger!r} is too plain to tell a call from text (it is also "
                               "JSON syntax or a word): free text could not be kept from opening calls")
    plan = _Plan(compiled, prefix, tool_list, calls, triggers, markers, reasoning_open, reasoning_tag, "\n")
    if calls:
        _, plan.plain_starts, lead = _opener(spec)
        # only where every message opens with its own header (text outside one is dropped): elsewhere an optional
        # start of the opener is markup of calls (DeepSeek's section marker), not of messages
        after_reasoning = "Let me think." + reasoning_open if reasoning_open is not None else ""
        if lead is not None and _drops_bare_text(compiled, prefix, after_reasoning):
            plan.lead = lead
    if calls:
        _self_check(plan)
        plan.wrappers = _wrappers(plan)
    if plan.plain_starts:
        plan.notes.append(f"calls open with {triggers[0]!r}; the template's other spellings of a call, which start "
                          f"with plain text ({', '.join(map(repr, plan.plain_starts))}), are not written and that "
                          "text is kept out of free text")
    plan.messages, like_calls = _messages(plan)
    if plan.messages:
        opener, ends, _ = plan.messages[0]
        plan.notes.append(f"text outside messages is dropped: under \"auto\" and \"none\" the answer is a "
                          f"{opener!r}...{' or '.join(map(repr, ends))} message")
    if like_calls:
        plan.notes.append(f"a message that opens like a call ({', '.join(map(repr, like_calls))}) cannot be written")
    header = plan.separator if plan.separator != "\n" else plan.lead.sample if plan.lead is not None else None
    places = (["after the reasoning block"] if plan.lead is not None and (
        plan.reasoning_tag is not None or plan.reasoning_open is not None) else []) + (
        ['between calls (not under "auto")'] if plan.separator != "\n" else [])
    if header and places:
        plan.notes.append(f"{header!r} is written only {' and '.join(places)}")
    return plan


def _messages(plan: _Plan) -> tuple:
    """([(open, [closes], trigger)] of the content message a format writes where it drops text outside its messages
    (gpt-oss's `<|channel|>final<|message|>`...`<|end|>` or `<|return|>`): free text there is lost, so the answer
    must be written as such a message. Found by parsing: the message alone, before and after a call, reads as
    content beside exactly the call. Second: the openers left out because they open like a call."""
    spec = plan.template.source.get("fields", {}).get("content")
    lead = _reasoning_text(plan) if plan.reasoning_open is not None else ""
    if not spec or not _drops_bare_text(plan.template, plan.prefix, lead):
        return [], []
    try:
        opens = [_literal_text(p) for p in _skeletons(_delimiter_spec(spec, "open", "open_pattern"), "open", spread=True)]
        closes = [_literal_text(p) for p in _skeletons(_delimiter_spec(spec, "close", "close_pattern"), "close",
                                                        spread=True)]
    except _Dead:
        return [], []
    tools = _as_tools(plan.tools)
    forms = list(plan.calls.values())
    one = forms[0].write(_sample(dict(plan.tools)[forms[0].tool])) if forms else ""
    wanted = [(forms[0].tool, _sample(dict(plan.tools)[forms[0].tool]))] if forms else []

    def reads(text: str, calls: list) -> bool:
        message = _probe(plan.template, lead + text, plan.prefix, tools)
        got = _calls_read(message)
        return message is not None and message.get("content") == "Answer." and got == calls and not (
            message.get("reasoning_content") and not lead)

    for opener in opens:
        # a message that opens like a call (`<|channel|>commentary<|message|>`, a preamble) would be read as one
        if not opener or _plain(opener) or any(_overlaps(opener, trigger) for trigger in plan.triggers):
            continue
        # text after the close is outside the message again (a citation marker inside the answer is no close)
        ends = [close for close in closes if close and not _plain(close)
                and reads(opener + "Answer." + close, []) and reads(opener + "Answer." + close + "More.", [])
                and (not forms or reads(opener + "Answer." + close + one, wanted)
                     and reads(one + opener + "Answer." + close, wanted))]
        if ends:
            like_calls = [other for other in opens if other and any(_overlaps(other, t) for t in plan.triggers)]
            return [(opener, ends, _message_trigger(opener, plan.markers))], like_calls
    return [], []


def _wrappers(plan: _Plan) -> list:
    """Section markers around a group of calls that the template reads as markup (Kimi K2's
    `<|tool_calls_section_begin|>`...`<|tool_calls_section_end|>`, DeepSeek's `<｜tool▁calls▁begin｜>`...), found by
    parsing: calls written between them must parse to exactly those calls, with no content, and text after the
    closing marker must stay content. Models write them, so the grammar under "auto" admits them too."""
    forms = list(plan.calls.values())
    samples = {form.tool: _sample(dict(plan.tools)[form.tool]) for form in forms}
    first, second = forms[0], forms[-1]
    one, two = first.write(samples[first.tool]), second.write(samples[second.tool])
    lead = _reasoning_text(plan) if plan.reasoning_open is not None else ""
    tools = _as_tools(plan.tools)
    reserved = [form.begin for form in forms] + [form.end for form in forms] + list(plan.triggers)
    if plan.reasoning_open:
        reserved.append(plan.reasoning_open)
    if plan.reasoning_tag:
        reserved.extend(plan.reasoning_tag)
    # a call's own text (`<|tool_call_argument_begin|>`) is no section marker either
    # (a marker that spells out a call's begin further, DSML's `<｜DSML｜tool_calls>` after the begin `<｜DSML｜`,
    # is one: the grammar tells them apart by what follows the begin)
    begins = [form.begin for form in forms]
    candidates = [m for m in plan.markers
                  if not any(_overlaps(m, text) for text in reserved if not _extends(m, text, begins))
                  and m not in one and m not in two]

    def calls_of(text: str) -> Any:
        message = _probe(plan.template, lead + text, plan.prefix, tools)
        if message is None or message.get("reasoning_content") and not lead:
            return None
        got = _calls_read(message)
        return got, message.get("content") or ""

    wanted = [(first.tool, samples[first.tool]), (second.tool, samples[second.tool])]
    opens = [m for m in candidates if calls_of(m + one) == (wanted[:1], "")]
    closes = [m for m in candidates if calls_of(one + m + "After.") == (wanted[:1], "After.")]
    def wraps(opener: str, closer: str) -> bool:
        if opener == closer or calls_of(opener + one + two + closer + "After.") != (wanted, "After."):
            return False
        # and the section leaves the parser where it was: a call after it is still a call
        after = calls_of(opener + one + two + closer + "After. " + one)
        return after is not None and after[0] == wanted + wanted[:1] and after[1].strip() == "After."

    def neutral(marker: str) -> bool:  # a reasoning delimiter is no section marker, whatever the parser drops
        message = _probe(plan.template, lead + "Before." + marker + "After.", plan.prefix, tools)
        return message is not None and not (message.get("reasoning_content") and not lead)


    found: list = []
    for opener in opens:
        if any(_overlaps(opener, other) for other, _ in found) or not neutral(opener):
            continue
        # the closer that spells the opener most closely (`<|tool_calls_section_begin|>`: its own `_end|>`, not the
        # singular spelling's)
        for closer in sorted(closes, key=lambda closer: -_kinship(opener, closer)):
            if not neutral(closer) or not wraps(opener, closer):
                continue
            # markup that reads the same either way round (Kimi drops its section markers wherever they are) is
            # a section only as a pair spelled alike whose closer says it closes
            if wraps(closer, opener) and not _closes(opener, closer):
                continue
            found.append((opener, closer))
            break
    return found


def _closes(opener: str, closer: str) -> bool:
    """`closer` is `opener`'s closing marker as markup spells one: alike (half of the shorter shared at the start
    and end) and saying it closes (`/`, `end`, `close`) where the opener does not."""
    said = [word for word in ("/", "end", "close") if word in closer.lower() and word not in opener.lower()]
    return bool(said) and 2 * _kinship(opener, closer) >= min(len(opener), len(closer))


def _extends(marker: str, text: str, begins: list) -> bool:
    """`marker` is a call's begin `text` spelled out further (and the overlap is only that)."""
    return text in begins and marker.startswith(text) and len(marker) > len(text) and not any(
        marker.endswith(text[:size]) for size in range(1, len(text)))


def _kinship(one: str, other: str) -> int:
    """How many characters two markers share at their start and at their end."""
    start = 0
    while start < min(len(one), len(other)) and one[start] == other[start]:
        start += 1
    end = 0
    while end < min(len(one), len(other)) - start and one[-1 - end] == other[-1 - end]:
        end += 1
    return start + end


def _trigger(begin: str, begins: list) -> str:
    """The longest literal start the begins of the calls share (so one trigger serves tools named in the opener)."""
    common = begin
    for other in begins:
        size = 0
        while size < min(len(common), len(other)) and common[size] == other[size]:
            size += 1
        common = common[:size]
    return common or begin


def _reasoning_text(plan: _Plan) -> str:
    if plan.reasoning_open is not None:
        return "Let me think." + plan.reasoning_open
    if plan.reasoning_tag is not None:
        return plan.reasoning_tag[0] + "Let me think." + plan.reasoning_tag[1]
    return ""


def _as_tools(tool_list: list) -> list:
    return [{"type": "function", "function": {"name": name, "parameters": parameters}} for name, parameters in tool_list]


def _self_check(plan: _Plan) -> None:
    """Calls written the canonical way must parse back to exactly those calls, or the grammar would lie."""
    forms = list(plan.calls.values())
    samples = {form.tool: _sample(dict(plan.tools)[form.tool]) for form in forms}
    first, second = forms[0], forms[-1]
    one = first.write(samples[first.tool])
    # the grammar closes a reasoning block the prompt left open before anything else
    lead = _reasoning_text(plan) if plan.reasoning_open is not None else ""
    if plan.lead is not None:  # the header every message starts with separates calls too (`<|start|>assistant`)
        joined = _probe(plan.template, lead + one + plan.lead.sample + second.write(samples[second.tool]),
                        plan.prefix, _as_tools(plan.tools))
        if _calls_read(joined) == [
                (first.tool, samples[first.tool]), (second.tool, samples[second.tool])]:
            plan.separator = plan.lead.sample
    two = one + plan.separator + second.write(samples[second.tool])
    cases = [
        ("one call", lead + one, [first.tool]),
        ("two calls", lead + two, [first.tool, second.tool]),
        ("text before a call", lead + "Sure, let me check. " + one, [first.tool]),
        ("text after a call", lead + one + " Done.", [first.tool]),
        ("reasoning then a call", _reasoning_text(plan) + one, [first.tool]),
    ]
    if plan.lead is not None:
        reasoning = _reasoning_text(plan) + plan.lead.sample
        cases += [("reasoning, the opener's optional start, then a call", reasoning + one, [first.tool]),
                  ("reasoning, the opener's optional start, text, then a call", reasoning + "Sure. " + one, [first.tool])]
    for what, text, names in cases:
        message = _probe(plan.template, text, plan.prefix, _as_tools(plan.tools))
        calls = (message or {}).get("tool_calls") or []
        got = [(call.get("function") or {}).get("name") for call in calls]
        wanted_args = [samples[name] for name in names]
        got_args = [(call.get("function") or {}).get("arguments") for call in calls]
        if got != names or got_args != wanted_args:
            if what.startswith("reasoning, the opener's optional start"):
                plan.lead = None
                continue
            if what == "text after a call":
                plan.notes.append("calls end the answer: no text after them")
                continue
            raise GrammarError(
                f"the canonical writing of a call does not parse back ({what}): {text!r} gives "
                f"{calls if message is not None else 'a parse error'}")
    # an optional part stays allowed only where a call written with it parses as the same call, alone, after
    # another call and before text (DSML's self-closing `/` after the tool's name does not: parameters follow)
    for form in forms:
        for element, write in form.optional:
            text = write(samples[form.tool])
            for before, after, names in (("", "", [form.tool]), (one + plan.separator, "", [first.tool, form.tool]),
                                         ("", plan.separator + one, [form.tool, first.tool]),
                                         ("", " Done.", [form.tool])):
                message = _probe(plan.template, lead + before + text + after, plan.prefix, _as_tools(plan.tools))
                read = _calls_read(message)
                if read != [(name, samples[name]) for name in names] and not (
                        after == " Done." and "calls end the answer: no text after them" in plan.notes):
                    form.elements[:] = [kept for kept in form.elements if kept is not element]
                    break


# ---------------------------------------------------------------------------------------------------------------
# Building


def _tags(plan: _Plan, names: list) -> list:
    """One tag per distinct begin (tools whose calls open alike share a tag whose content picks the tool)."""
    by_begin: dict = {}
    for name in names:
        form = plan.calls[name]
        by_begin.setdefault((form.begin, form.end), []).append({"type": "sequence", "elements": form.elements or [_const("")]})
    tags = []
    for (begin, end), contents in by_begin.items():
        content = contents[0] if len(contents) == 1 else {"type": "or", "elements": contents}
        tags.append({"type": "tag", "begin": begin, "content": content, "end": end})
    return tags


def _overlaps(marker: str, text: str) -> bool:
    """`marker` shares text with `text` where one could run into the other (inside it, or end-to-start)."""
    if marker in text or text in marker:
        return True
    return any(text.endswith(marker[:size]) or marker.endswith(text[:size]) for size in range(1, len(marker)))


def _excludes(plan: _Plan, extra: tuple | list = ()) -> list:
    """Markers kept out of free text. Free text also spells the start of a call's opener before the grammar knows a
    call began, so markers that overlap an opener are left out (the opener itself is the call)."""
    begins = ([form.begin for form in plan.calls.values()] + [opener for opener, _ in plan.wrappers]
              + [trigger for _, _, trigger in plan.messages])
    found = [marker for marker in plan.markers if not any(_overlaps(marker, begin) for begin in begins)]
    return found + [text for text in [*extra, *plan.plain_starts] if text not in found]


def _build(plan: _Plan, tool_choice: Any, parallel: bool) -> dict:
    elements: list = []
    after = [{"type": "regex", "pattern": plan.lead.text}] if plan.lead is not None else []
    if plan.reasoning_open is not None:
        inner = [m for m in plan.markers if m != plan.reasoning_open] + plan.triggers
        elements.append({"type": "tag", "begin": "", "content": _free_text(inner), "end": plan.reasoning_open})
        elements.extend(after)
    elif plan.reasoning_tag is not None:
        inner = [m for m in plan.markers if m not in plan.reasoning_tag] + plan.triggers
        elements.append(_ws(0))  # layout before the block (GLM-4.5 writes "\n<think>")
        block = {"type": "tag", "begin": plan.reasoning_tag[0], "content": _free_text(inner), "end": plan.reasoning_tag[1]}
        elements.append({"type": "optional", "content": {"type": "sequence", "elements": [block, *after]}
                         if after else block})
    names = list(plan.calls)
    if isinstance(tool_choice, dict):
        names = [tool_choice["function"]["name"]]
    # the answer as a message, where text outside messages is dropped (gpt-oss's final channel)
    messages = [{"type": "tag", "begin": opener, "end": ends if len(ends) > 1 else ends[0],
                 "content": _free_text([m for m in plan.markers if m not in ends])} for opener, ends, _ in plan.messages]
    message_triggers = [trigger for _, _, trigger in plan.messages]
    if tool_choice == "none" or not names:
        if messages:
            elements.append({"type": "triggered_tags", "triggers": message_triggers, "tags": messages,
                             "at_least_one": False, "stop_after_first": False,
                             "excludes": _excludes(plan, plan.triggers)})
        else:
            elements.append(_free_text(_excludes(plan, plan.triggers)))
    elif tool_choice == "auto":
        if "calls end the answer: no text after them" in plan.notes:
            raise GrammarError("this template reads text written after a call as part of the call: "
                               'tool_choice="auto" cannot leave the text after calls free')
        tags = _tags(plan, names)
        for opener, closer in plan.wrappers:
            group: dict = {"type": "sequence", "elements": [_ws(0), {"type": "or", "elements": _tags(plan, names)}]}
            if parallel:
                group = {"type": "plus", "content": group}
            tags.append({"type": "tag", "begin": opener, "end": closer,
                         "content": {"type": "sequence", "elements": [group, _ws(0)]}})
        # a section opener that starts with a call's trigger is reached through that trigger (xgrammar wants each
        # tag under one trigger)
        triggers = plan.triggers + [opener for opener, _ in plan.wrappers
                                    if not any(opener.startswith(trigger) for trigger in plan.triggers)]
        tags += messages
        triggers += message_triggers
        elements.append({"type": "triggered_tags", "triggers": triggers, "tags": tags,
                         "at_least_one": False, "stop_after_first": not parallel, "excludes": _excludes(plan)})
    else:
        elements.append(_ws(0))
        elements.append({"type": "tags_with_separator", "tags": _tags(plan, names), "separator": plan.separator,
                         "at_least_one": True, "stop_after_first": not parallel})
    fmt = elements[0] if len(elements) == 1 else {"type": "sequence", "elements": elements}
    _exclude_triggers(fmt, plan.triggers)
    return {"type": "structural_tag", "format": fmt}


def _message_trigger(begin: str, excluded: list) -> str:
    """What free text writes to open a message: its begin up to the first marker after its start
    (`<|channel|>final` of `<|channel|>final<|message|>`): free text may not hold that marker, and xgrammar never
    fires a trigger that holds text free text may not hold."""
    cut = min([begin.find(marker, 1) for marker in excluded if begin.find(marker, 1) > 0], default=len(begin))
    return begin[:cut]


def _exclude_triggers(node: Any, triggers: list) -> None:
    """Argument strings and tag contents must not hold a call opener either: the text would count one more call
    to a reader (and to some parsers) than the grammar opened."""
    if isinstance(node, dict):
        if node.get("type") in ("json_schema", "any_text"):
            node["excludes"] = node.get("excludes", []) + [t for t in triggers if t not in node.get("excludes", [])]
        for value in node.values():
            _exclude_triggers(value, triggers)
    elif isinstance(node, list):
        for item in node:
            _exclude_triggers(item, triggers)


def _check_choice(tool_choice: Any, names: list) -> None:
    if tool_choice in ("auto", "required", "none"):
        if tool_choice == "required" and not names:
            raise GrammarError('tool_choice="required" needs at least one tool')
        return
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        name = (tool_choice.get("function") or {}).get("name")
        if name in names:
            return
        raise GrammarError(f"tool_choice names {name!r}, which is not among the tools {names}")
    raise GrammarError(f'tool_choice must be "auto", "required", "none" or {{"type": "function", "function": '
                       f'{{"name": ...}}}}, got {tool_choice!r}')


def structural_tag(template: Any, tools: Any = None, *, prefix: str = "", tool_choice: Any = "auto",
                   parallel_tool_calls: bool = True, _after_reasoning: bool = False) -> dict:
    """An xgrammar structural tag (JSON form) that constrains a model writing with `template` to call `tools`.

    `template`: a template dict, a compiled template or a library name. `prefix`: the prompt, as for the parser
    (tells whether the prompt left a reasoning block open). `tool_choice`: "auto" (the model chooses; a call, once
    opened, must be complete and valid), "required" (at least one call), "none" (no call), or
    {"type": "function", "function": {"name": ...}} (that call). `parallel_tool_calls=False`: at most one call.
    Raises `GrammarError` when the template cannot be expressed (the message says why)."""
    # `_after_reasoning`, for engines that apply a constraint only once the reasoning is over (vLLM with a reasoning
    # parser): a reasoning block the prompt left open counts as closed, so the grammar starts after it.
    tool_names = [name for name, _ in _tool_list(tools)]
    _check_choice(tool_choice, tool_names)
    prefix = prefix if prefix is not None else ""
    tools = tools if tool_choice != "none" else None
    plan = _plan(template, tools, prefix)
    if _after_reasoning and plan.reasoning_open is not None:
        plan = _plan(template, tools, prefix + plan.reasoning_open)
    return copy.deepcopy(_build(plan, tool_choice, bool(parallel_tool_calls)))


def explain(template: Any, tools: Any = None, *, prefix: str = "") -> list:
    """Notes on how the template was compiled (for the coverage table): empty when nothing is restricted."""
    return list(_plan(template, tools, prefix).notes)

"""Structural-tag formats, and how each tool's call is written in the template's syntax: its opener, its body
(JSON or xml-inline parameters, following the tool's schema) and its closer."""

from __future__ import annotations

import json
import re as _re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import GrammarError
from .patterns import (
    _JSON_WS_MAX,
    _MARKER_CHARS,
    _WS_MAX,
    _Dead,
    _delimiter_spec,
    _literal_runs,
    _merge,
    _parse_pattern,
    _Piece,
    _skeleton,
    _skeletons,
    _walk,
    _writes_nothing,
)
from .delimited_json import DelimitedJsonRules, write_delimited
from .keyword_args import KeywordArgsRules, write_keyword_arguments
from .spaced_json import SpacedJsonRules
from .python_calls import PythonCallRules, call_list_grammar, python_call, python_literal, python_value_grammar


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
    # a region holding a list of calls (transform_each: Mistral v3's `[TOOL_CALLS][{...}, {...}]`): this tool's item
    # schema, the index in `elements` of the list's format, how that format is built for a set of items (the tools
    # of one tag) and parallel_tool_calls, and the canonical text of one region holding [(tool, arguments)]
    list_item: Any = None
    list_at: int = -1
    list_body: Callable[[list, bool], dict] | None = None
    write_list: Callable[..., str] | None = None  # (calls, call_id=None): a call id key written in each item
    list_ids: list = field(default_factory=list)
    # for JSON arguments: a call written with a line break around every JSON token, as the grammar allows
    write_laid_out: Callable[[dict], str] | None = None
    # other writings the grammar allows beside the canonical one, each kept only where a call written so parses
    # back: ([(a format choosing between writings, the other writing's format)], a call written so) -- a call
    # object's keys in the other order (Inkling), parameter tags in the other spelling (DeepSeek V4.1)
    variants: list = field(default_factory=list)
    # a region that holds one call object or, with the optional brackets its opener and closer allow, a JSON list
    # of them (Nemotron's `<TOOLCALL>[{...}, {...}]</TOOLCALL>`): the formats of a list region of the given call
    # objects (for parallel_tool_calls), and the canonical text of one region holding [(tool, arguments)]
    list_region: Callable[[list, bool], list] | None = None
    write_list_region: Callable[[list], str] | None = None
    # xml-inline calls whose body may be one JSON object (content_args.json_body): the formats of such a call, and
    # its canonical text
    json_body: list | None = None
    write_json_body: Callable[[dict], str] | None = None
    # the region is a block of calls, one per line (MiniMax M1's `<tool_calls>`, OLMo 3's `<function_calls>`): the
    # items of its list are the calls, separated by line breaks
    block_lines: bool = False


def _const(text: str) -> dict:
    return {"type": "const_string", "value": text}


def _ws(size: int, chars: str = " \t\r\n", most: int = -1) -> dict:
    escaped = chars.replace("\t", "\\t").replace("\r", "\\r").replace("\n", "\\n")
    upper = _WS_MAX if most < 0 else min(most, _WS_MAX)
    return {"type": "regex", "pattern": f"[{escaped}]{{{size},{max(size, upper)}}}"}


_WS_CLASS = _re.compile(r"\[((?:\\[trn]| )+)\](\{\d+,\d+\})")


def _on_one_line(node: Any) -> Any:
    """`node` with its runs of whitespace (_ws) holding spaces and tabs only."""
    if isinstance(node, list):
        return [_on_one_line(item) for item in node]
    if not isinstance(node, dict):
        return node
    found = _WS_CLASS.fullmatch(node.get("pattern", "")) if node.get("type") == "regex" else None
    if found:
        kept = "".join(char for char in ("\\t", " ") if char in found.group(1))
        return {**node, "pattern": f"[{kept or ' '}]{found.group(2)}"}
    return {key: _on_one_line(value) for key, value in node.items()}


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


def _sample(schema: Any, depth: int = 0, pairs: bool = False) -> Any:
    """A value valid for a (simple) JSON schema, for the compiler's self-check (arrays of two with `pairs`)."""
    if not isinstance(schema, dict):
        return "x"
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _sample(schema[key][0], depth + 1, pairs)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else None
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties") or {}
        if pairs and "properties" not in schema and schema.get("additionalProperties", True) is not False:
            # an object of any members: the grammar may write any JSON there, so JSON's closers meeting too (an
            # object ending in an object, then another opening with one: `}}, {"k": {`)
            return {"k": [{"k": {"k": 1}}, {"k": {"k": [1]}}]}
        return {key: _sample(value, depth + 1, pairs) for key, value in properties.items()} if depth < 4 else {}
    if kind == "array":
        return [_sample(schema.get("items"), depth + 1, pairs)] * (2 if pairs else 1) if depth < 4 else []
    simple: dict = {"integer": 3, "number": 2.5, "boolean": True, "null": None}
    return simple.get(kind, "Paris, 'FR' \"x\"") if isinstance(kind, str) else "Paris, 'FR' \"x\""


def _stress_samples(schema: Any) -> list:
    """Arguments where JSON's closing characters meet: every property, arrays of two, and each object- or
    array-valued property last in turn (the optional properties after it left out)."""
    full = _sample(schema, pairs=True)
    if not isinstance(full, dict):
        return [full]
    required = set(schema.get("required") or []) if isinstance(schema, dict) else set()
    samples = [full]
    for at, (key, value) in enumerate(full.items()):
        if isinstance(value, (dict, list)):
            cut = {other: item for index, (other, item) in enumerate(full.items()) if index <= at or other in required}
            if cut not in samples:
                samples.append(cut)
    return samples


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


def _json_body(schema: dict, args: dict, markers: list, seed: str = "", one_line: bool = False,
               call_object: bool = False) -> tuple:
    """JSON content: the format, and (style) how a value is written: "json", "json-one-line" (`one_line`: no line
    break between tokens, through an EBNF grammar), "gemma" (Gemma 4's unquoted keys and `<|"|>` strings,
    xgrammar's own style) or the pair of string delimiters of other JSON with bare keys (FunctionGemma's `<escape>`,
    through an EBNF grammar). `seed` names an EBNF grammar's rules. `call_object`: the schema is a whole call
    (`{"name": ..., "arguments": ...}`), whose keys an EBNF grammar keeps in the schema's order (the order the
    parser was found to read; the arguments inside may come in any order)."""
    style: Any = "json"
    unquoted = bool(args.get("unquoted_keys"))
    delims = [tuple(pair) for pair in args.get("string_delims") or []]
    if unquoted or delims:
        if unquoted and delims == [('<|"|>', '<|"|>')]:
            style = "gemma"
        elif unquoted and len(delims) == 1 and all(delims[0]):
            rules = DelimitedJsonRules(seed, schema, delims[0], markers, call_object)
            return {"type": "grammar", "grammar": rules.grammar()}, delims[0]
        else:
            raise _Dead("JSON with several string delimiters, or with delimited strings but quoted keys, is not "
                        "supported")
    elif one_line:
        one_line_rules = SpacedJsonRules(seed, schema, markers, call_object)
        return {"type": "grammar", "grammar": one_line_rules.grammar()}, "json-one-line"
    body = {"type": "json_schema", "json_schema": _finite_numbers(schema), "style": style, "excludes": list(markers),
            "max_whitespace_cnt": _JSON_WS_MAX}
    return body, style


def _write_json(value: Any, style: str) -> str:
    if style in ("json", "json-one-line"):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(style, tuple):
        return write_delimited(value, style)
    if isinstance(value, dict):  # gemma: unquoted keys, <|"|> strings
        return "{" + ",".join(f"{key}:{_write_json(item, style)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_write_json(item, style) for item in value) + "]"
    if isinstance(value, str):
        return f'<|"|>{value}<|"|>'
    return json.dumps(value)


def _laid_out_json(value: Any) -> str:
    """JSON with a line break around each of its tokens (the whitespace JSON allows between them)."""
    if isinstance(value, dict):
        members = [f"{json.dumps(key, ensure_ascii=False)}\n:\n{_laid_out_json(item)}" for key, item in value.items()]
        return "{\n" + "\n,\n".join(members) + "\n}" if members else "{\n}"
    if isinstance(value, list):
        return "[\n" + "\n,\n".join(_laid_out_json(item) for item in value) + "\n]" if value else "[\n]"
    return json.dumps(value, ensure_ascii=False)


# JSON schema's value types, as a format may name them in a tag (Kimi K3's `type="number"`).
_JSON_TYPES = ("number", "integer", "boolean", "null", "object", "array")


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


def _nested_elements_body(parameters: dict, nested: Any, markers: list) -> tuple:
    """xml-inline content read as nested child elements (MiniMax M3): each value is an element `PREFIX<key>` ...
    `PREFIX</key>` written after the format's namespace token; an object's members are its children, an array's items
    `<item>` children, a scalar its text (a string raw, others as JSON), as the parser reads them back by the schema.
    Strings hold neither the namespace (where a leaf's text ends) nor the format's markers."""
    if not isinstance(nested, dict) or not nested.get("prefix"):
        raise _Dead("xml-inline values read as nested child elements without a namespace prefix are not supported")
    prefix, item_tag = nested["prefix"], nested.get("item_tag", "item")
    in_strings = [*markers, prefix] if prefix not in markers else list(markers)

    def element(key: str, schema: Any, depth: int = 0) -> dict:
        return {"type": "tag", "begin": f"{prefix}<{key}>", "content": value(schema, depth), "end": f"{prefix}</{key}>"}

    def value(schema: Any, depth: int) -> dict:
        if depth > 8:
            raise _Dead("a schema nested deeper than 8 levels is not compiled for nested elements")
        if not isinstance(schema, dict):
            schema = {}
        kind = schema.get("type")
        if any(key in schema for key in ("anyOf", "oneOf", "allOf", "$ref", "not")) or isinstance(kind, list):
            raise _Dead("nested-element values whose schema combines types (anyOf, oneOf, a list of types, $ref) "
                        "are not compiled")
        if "enum" in schema or "const" in schema:
            choices = schema["enum"] if "enum" in schema else [schema["const"]]
            return {"type": "or", "elements": [_const(choice if isinstance(choice, str) else json.dumps(choice))
                                               for choice in choices]}
        # (layout after the last child only where there is one: an empty element holding a space is a string)
        if kind == "object":
            held = members(schema, depth + 1)
            layout = [_ws(0)] if set(schema.get("required") or []) & set(schema.get("properties") or {}) else []
            return {"type": "sequence", "elements": [*held, *layout]} if held else _const("")
        if kind == "array":
            item = {"type": "sequence", "elements": [_ws(0), element(item_tag, schema.get("items"), depth + 1)]}
            low, high = int(schema.get("minItems", 0)), schema.get("maxItems")
            if high is not None and int(high) < 1:
                return _const("")
            items = {"type": "sequence", "elements": [
                {"type": "repeat", "content": item, "min": max(low, 1), "max": -1 if high is None else int(high)}, _ws(0)]}
            return items if low > 0 else {"type": "or", "elements": [_const(""), items]}
        if kind in ("integer", "number", "boolean", "null"):
            return {"type": "json_schema", "json_schema": _finite_numbers(schema), "max_whitespace_cnt": _WS_MAX}
        return _free_text(in_strings)  # a string, or a value of any type (the parser reads its text as a string)

    def members(schema: dict, depth: int) -> list:
        required = set(schema.get("required") or [])
        out = []
        for key, child in (schema.get("properties") or {}).items():
            if not isinstance(key, str) or not key or any(char.isspace() or char in "<>/" for char in key):
                raise _Dead(f"property name {key!r} cannot be written as an element")
            item = {"type": "sequence", "elements": [_ws(0), element(key, child, depth)]}
            out.append(item if key in required else {"type": "optional", "content": item})
        return out

    def write(arguments: Any, spaced: bool = False) -> str:
        return "".join(written(key, item) for key, item in arguments.items())

    def written(key: str, item: Any) -> str:
        if isinstance(item, dict):
            inner = write(item)
        elif isinstance(item, list):
            inner = "".join(written(item_tag, each) for each in item)
        else:
            inner = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
        return f"{prefix}<{key}>{inner}{prefix}</{key}>"

    return members(parameters, 0), write, [], []


def _keyword_arguments(pattern: str) -> bool:
    """Whether a tag pattern reads keyword arguments, `KEY=VALUE` with no text before the key (OLMo 3's), whose
    value runs to the next argument."""
    try:
        pieces = [piece for piece in _skeleton("\0pattern:" + pattern, "tag_pattern") if piece.kind != "ws"]
    except _Dead:
        return False
    return (len(pieces) >= 2 and (pieces[0].kind, pieces[0].text) == ("group", "key") and pieces[1].kind == "lit"
            and pieces[1].text.startswith("="))


def _keyword_body(parameters: dict, markers: list) -> tuple:
    """Keyword arguments (KeywordArgsRules): the formats, the writer, no other spelling nor Python literals."""
    rules = KeywordArgsRules(json.dumps(parameters, sort_keys=True), parameters, markers)
    return [{"type": "grammar", "grammar": rules.grammar()}], lambda arguments, spaced=False: (
        write_keyword_arguments(arguments)), [], []


def _python_literal_value(key: str, schema: Any) -> dict | None:
    """A dict, list or boolean argument as a Python literal typed by its schema (an EBNF grammar), or None (another
    type, or a schema the grammar of literals does not enforce)."""
    if not isinstance(schema, dict) or schema.get("type") not in ("object", "array", "boolean"):
        return None
    try:
        return {"type": "grammar", "grammar": python_value_grammar(key, schema)}
    except _Dead:
        return None


def _xml_body(parameters: dict, args: dict, markers: list) -> tuple:
    """xml-inline content: one tag per property, in the schema's order (optional ones may be left out). (The
    formats, the writer, the choices between a tag's spellings and its other spelling, the choices between a value's
    JSON and its Python literal and the literal.)"""
    pattern = args.get("tag_pattern")
    if not pattern:
        raise _Dead("xml-inline without tag_pattern")
    if args.get("nested_elements"):
        return _nested_elements_body(parameters, args["nested_elements"], markers)
    if _keyword_arguments(pattern):
        return _keyword_body(parameters, markers)
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
            # a value of the group that names a JSON type (Kimi K3's type="number"): written for values of that type
            for kind, parser in (by.get("parsers") or {}).items():
                if (parser or {}).get("name") == "json" and kind in _JSON_TYPES:
                    picked[kind] = skeleton({group: kind})
        # else the canonical writing leaves the selecting group out (it is optional), so value_parser applies
        elif any(p.kind == "group" and p.text == group for p in pieces) or group not in names.values():
            raise _Dead(f"xml-inline values whose parser is picked by the group {group!r} are not supported yet")
        elif _group_required(pattern, group):
            raise _Dead(f"the group {group!r} that picks the value parser is not optional")

    def layout(pieces: list, spaced: bool = False) -> tuple:
        """(tag opener: text before the key, text after it; the formats and text between the key and the value;
        the tag's closer; the whitespace format allowed after a JSON value). `spaced`: the tag's other spelling,
        an optional space inside its literal text (` ?`, not `\\s*`) written (DeepSeek V4.1's `<｜DSML｜ parameter`)."""
        if spaced:
            pieces = [_Piece("lit", " ") if piece.kind == "ws" and piece.size == 0 and piece.text == " "
                      and piece.most == 1 and 0 < at < len(pieces) - 1
                      and pieces[at - 1].kind == pieces[at + 1].kind == "lit" else piece
                      for at, piece in enumerate(pieces)]
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
    spaced_layouts = ({kind: layout(kind_pieces, True) for kind, kind_pieces in picked.items()}
                      or {"": layout(pieces, True)})

    def is_string(schema: Any) -> bool:
        return isinstance(schema, dict) and schema.get("type") == "string" and (not json_values or bool(picked))

    def layout_of(schema: Any, spaced: bool = False) -> tuple:
        chosen = spaced_layouts if spaced else layouts
        if "" in chosen:
            return chosen[""]
        kind = schema.get("type") if isinstance(schema, dict) else None
        kind = "number" if kind == "integer" and "integer" not in chosen else kind
        return chosen[kind if isinstance(kind, str) and kind in chosen and kind != "string" else
                      "string" if is_string(schema) else "other"]

    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    elements: list = []
    spellings: list = []  # (the choice between a tag's spellings, its other spelling)
    literals: list = []  # (the choice between a value's JSON and its Python literal, the literal)
    literal_keys: set = set()
    for key, schema in properties.items():
        if not isinstance(key, str) or not key or any(char.isspace() or char in "<>\"=" for char in key):
            raise _Dead(f"parameter name {key!r} cannot be written in a tag")
        tags = []
        # (a dict, list or boolean as Python's str() writes it: Seed-OSS's and MiniCPM5's chat templates; kept where
        # the planner finds that a call written so parses back)
        literal = _python_literal_value(key, schema) if not is_string(schema) and not json_values else None
        if literal is not None:
            literal_keys.add(key)
        for spaced in (False, True):
            opener, between_formats, _, closer, value_ws = layout_of(schema, spaced)
            value: dict
            if is_string(schema) and schema.get("enum"):  # the value is one of the strings, written raw
                value = {"type": "or", "elements": [_const(str(choice)) for choice in schema["enum"]]}
            elif is_string(schema):
                value = _free_text([m for m in markers if m != closer])
            else:
                value = {"type": "json_schema", "json_schema": _finite_numbers(schema), "excludes": list(markers),
                         "max_whitespace_cnt": _WS_MAX}
                if literal is not None:
                    value = {"type": "or", "elements": [value, literal]}
                    literals.append((value, literal))
            # a raw string runs to the tag's end; JSON may be followed by the whitespace the pattern allows there
            content = between_formats + [value] + ([] if is_string(schema) else value_ws)
            content = content[0] if len(content) == 1 else {"type": "sequence", "elements": content}
            tags.append({"type": "tag", "begin": opener[0] + key + opener[1], "content": content, "end": closer})
        tag = tags[0]
        if (tags[1]["begin"], tags[1]["end"]) != (tags[0]["begin"], tags[0]["end"]):
            tag = {"type": "or", "elements": tags}
            spellings.append((tag, tags[1]))
        item = {"type": "sequence", "elements": [_ws(0), tag]}
        elements.append(item if key in required else {"type": "optional", "content": item})

    def write(arguments: dict, spaced: bool = False, python: bool = False) -> str:
        out = ""
        for key, schema in properties.items():
            if key not in arguments:
                continue
            opener, _, between_text, closer, _ = layout_of(schema, spaced)
            value = arguments[key]
            text = (value if is_string(schema) else python_literal(value) if python and key in literal_keys
                    else json.dumps(value, ensure_ascii=False))
            out += opener[0] + key + opener[1] + between_text[len(opener[1]):] + text + closer
        return out

    return elements, write, spellings, literals


def _transform_keys(function: Any, scope: str) -> tuple | None:
    """The keys a transform function {"name": "{SCOPE.KEY}", "arguments": "{SCOPE.KEY}"} reads ("name", "args"):
    scope "content." for a call read from one JSON object, "" for each call of a list (Cohere: "{tool_name}")."""
    if not isinstance(function, dict) or set(function) != {"name", "arguments"}:
        return None
    found = []
    for field_name in ("name", "arguments"):
        value = function[field_name]
        match = _re.fullmatch(r"\{" + _re.escape(scope) + r"([A-Za-z_]\w*)\}", value) if isinstance(value, str) else None
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


@dataclass
class _Block:
    """Calls written as the lines of one block (MiniMax M1's `<tool_calls>` of call objects, OLMo 3's
    `<function_calls>` of `NAME(...)` lines): the first opens with the block's opener, the next ones with what
    follows it there (nothing, or the tool's name), at the start of a line. Or as the items of one list (Apertus's
    `<|tools_prefix|>[{"NAME": {...}}, {"NAME": {...}}]<|tools_suffix|>`): the next ones open with a separator
    (`, `) and what follows the block's opener (`{"NAME": `)."""

    begin: str  # the block's opener (`<tool_calls>`, `<|tools_prefix|>`)
    head: list  # the opener's pieces after it, which open each call (the name and `(`, or none)
    item_close: str  # the text that ends each call: before its line break (`)`, or none), before a separator (`}`)
    ends: list  # the markers that may end the block (`</tool_calls>`), in the template's order
    opening: list = field(default_factory=list)  # the pieces after `begin` that open the list (`[`)
    separator: list | None = None  # the pieces between two calls of a list (`,` between whitespace); None: lines


def _solid(pieces: list) -> list:
    """The pieces but whitespace, as (kind, text): what two writings must share to spell the same."""
    return [(piece.kind, piece.text) for piece in pieces if piece.kind != "ws"]


def _block(field_spec: dict, open_spec: Any, opener: list, writings: list) -> _Block | None:
    """The block the calls are lines of, or None: the opener has another writing that is its own without the
    leading marker (or one that writes nothing), the closer's first writing ends with a line break, and the block's
    end is a marker the closer writes after a call's end (or looks ahead to after its line break)."""
    at = next((index for index, piece in enumerate(opener) if piece.kind != "lit"), len(opener))
    begin, head = "".join(piece.text for piece in opener[:at]), [piece for piece in opener[at:] if piece.kind != "ws"]
    if not begin or not writings or field_spec.get("transform_each"):
        return None
    try:
        others = _skeletons(open_spec, "open", spread=True)
    except _Dead:
        others = []
    spelled = _solid(head)
    if not (not head and _writes_nothing(open_spec) or any(_solid(other) == spelled for other in others)):
        return None
    closing = [piece for piece in writings[0] if piece.kind != "ws"]
    if not closing or any(piece.kind != "lit" for piece in closing) or closing[-1].text != "\n":
        return None
    item_close = "".join(piece.text for piece in closing[:-1])
    ends = [run[len(item_close) + 1:] for run in _literal_runs(field_spec.get("close_pattern") or "")
            if run.startswith(item_close + "\n")]
    for other in writings[1:]:
        texts = [piece.text for piece in other if piece.kind != "ws"]
        if any(piece.kind not in ("lit", "ws") for piece in other) or "".join(texts[:-1]) != item_close:
            continue
        ends += texts[-1:]
    ends = [end for end in dict.fromkeys(ends) if not _plain(end)]
    return _Block(begin, head, item_close, ends) if ends else None


def _listed_block(field_spec: dict, open_spec: Any, opener: list, writings: list) -> _Block | None:
    """The list the calls are items of, or None: the opener has another writing that is a separator and the same
    head (`, {"NAME": ` beside `<|tools_prefix|>[{"NAME": `), the closer's first writing is literal text (`}`,
    before the next item) and another writing is that text and the list's end, a marker (`}]<|tools_suffix|>`)."""
    def cut(pieces: list, kept: int) -> int:  # where the last `kept` solid pieces start
        solids = [at for at, piece in enumerate(pieces) if piece.kind != "ws"]
        return solids[len(solids) - kept]

    if not writings or field_spec.get("transform_each"):
        return None
    try:
        others = _skeletons(open_spec, "open", spread=True)
    except _Dead:
        return None
    mine = _solid(opener)
    for other in others:
        theirs = _solid(other)
        size = 0
        while size < min(len(mine), len(theirs)) and mine[-1 - size] == theirs[-1 - size]:
            size += 1
        if not 0 < size < min(len(mine), len(theirs)) or ("group", "name") not in mine[-size:]:
            continue
        if any(kind != "lit" for kind, _ in mine[:-size] + theirs[:-size]):
            continue
        at = next((index for index, piece in enumerate(opener) if piece.kind != "lit"), len(opener))
        start = cut(opener, size)
        begin = "".join(piece.text for piece in opener[:min(at, start)])
        closing = _solid(writings[0])
        if not begin or not closing or any(kind != "lit" for kind, _ in closing):
            return None
        item_close = "".join(text for _, text in closing)
        ends = []
        for ending in writings[1:]:
            texts = _solid(ending)
            text = "".join(piece for _, piece in texts)
            if all(kind == "lit" for kind, _ in texts) and text.startswith(item_close) and text != item_close:
                ends.append(text[len(item_close):])
        ends = [end for end in dict.fromkeys(ends) if not _plain(end)]
        if not ends:
            return None
        return _Block(begin, opener[start:], item_close, ends, opening=opener[min(at, start):start],
                      separator=other[:cut(other, size)])
    return None


def _list_separator(field_spec: dict) -> str | None:
    """Where the calls are the items of a list (_listed_block), the literal text their separator starts with (`,`):
    the parser opens the next call wherever that text follows a call's end (Apertus's `}`), in free text too. None
    where they are not."""
    try:
        opener = _opener(field_spec)[0]
        writings = _skeletons(_delimiter_spec(field_spec, "close", "close_pattern"), "close", spread=True)
    except _Dead:
        return None
    block = _listed_block(field_spec, _delimiter_spec(field_spec, "open", "open_pattern"), opener, writings)
    if block is None or block.separator is None:
        return None
    return _split(block.separator, None)[2].strip() or None


def _block_form(field_spec: dict, name: str, parameters: dict, in_strings: list, block: _Block,
                end: str, one_line: bool = False) -> _CallForm:
    """The call of a tool as one line of a block (_Block) that ends with `end`: the block is one region holding
    the list of calls, a call per line, each on one line (a line break would end it); or, where its calls are
    the items of a list, the calls between separators (`one_line`: JSON arguments hold no line break)."""
    content = field_spec.get("content")
    transform = field_spec.get("transform")
    function = transform.get("function") if isinstance(transform, dict) else None

    def head(tool: str) -> tuple:  # (the formats and text that open the tool's call inside the block)
        lead, formats, text = _split(block.head, tool)
        return ([_const(lead)] if lead else []) + formats, text

    lines = block.separator is None
    laid_out = False  # whether the JSON arguments may hold line breaks (a list's items, not a block's lines)
    item: dict
    if not lines and content == "json" and function == {"name": "{name}", "arguments": "{content}"}:
        # `{"NAME": ` then the arguments, then the item's end
        formats, _ = head(name)
        body, style = _json_body(parameters, field_spec.get("content_args") or {}, in_strings, name, one_line)
        item = {"type": "sequence", "elements": [*formats, body, _ws(0), _const(block.item_close)]}
        laid_out = style == "json"

        def line(tool: str, arguments: dict, spread: bool = False) -> str:
            written = "\n" + _laid_out_json(arguments) + "\n" if spread else _write_json(arguments, style)
            return head(tool)[1] + written + block.item_close
    elif not lines:
        raise _Dead("a list of calls with separators is compiled for JSON arguments only")
    elif content == "json" and function == "{content}" and not block.head:
        # a call object per line, {"name": ..., "arguments": ...}
        schema = {"type": "object", "properties": {"name": {"const": name}, "arguments": parameters},
                  "required": ["name", "arguments"], "additionalProperties": False}
        item = _json_body(schema, field_spec.get("content_args") or {}, in_strings, name, True, True)[0]

        def line(tool: str, arguments: dict, spread: bool = False) -> str:
            return json.dumps({"name": tool, "arguments": arguments}, ensure_ascii=False)
    elif (content == "xml-inline" and function == {"name": "{name}", "arguments": "{content}"}
          and _keyword_arguments((field_spec.get("content_args") or {}).get("tag_pattern") or "")):
        # `NAME(key=value, ...)` per line
        formats, _ = head(name)
        body = _keyword_body(parameters, in_strings)[0][0]
        item = {"type": "sequence", "elements": [*formats, body, *([_const(block.item_close)] if block.item_close
                                                                   else [])]}

        def line(tool: str, arguments: dict, spread: bool = False) -> str:
            return head(tool)[1] + write_keyword_arguments(arguments) + block.item_close
    else:
        raise _Dead("a block of calls, one per line, is compiled for call objects and keyword arguments only")

    sep_lead, sep_formats, sep_text = _split(block.separator, None) if block.separator is not None else (
        "\n", [], "\n")
    open_lead, open_formats, open_text = _split(block.opening, None)

    def list_body(items: list, parallel: bool) -> dict:
        one = items[0] if len(items) == 1 else {"type": "or", "elements": items}
        if not parallel:
            return one
        more = {"type": "sequence", "elements": [*([_const(sep_lead)] if sep_lead else []), *sep_formats, one]}
        return {"type": "sequence", "elements": [one, {"type": "repeat", "content": more, "min": 0, "max": -1}]}

    def write_list(calls: list, call_id: str | None = None, spread: bool = False) -> str:
        return block.begin + open_text + sep_text.join(line(tool, arguments, spread) for tool, arguments in calls) + end

    opening = ([_const(open_lead)] if open_lead else []) + open_formats
    form = _CallForm(name, block.begin, [_ws(0), *opening, list_body([item], True), _ws(0)], end,
                     lambda arguments: write_list([(name, arguments)]), block_lines=lines)
    form.list_item, form.list_at, form.list_body, form.write_list = item, 1 + len(opening), list_body, write_list
    if laid_out:  # (the arguments with a line break around every JSON token, as the grammar allows)
        form.write_laid_out = lambda arguments: write_list([(name, arguments)], spread=True)
    elif content == "json":  # (on one line, the most whitespace the grammar allows is the canonical writing's)
        form.write_laid_out = form.write
    return form


def _call_form(field_spec: dict, name: str, parameters: dict, markers: list, closing: int = 0,
               string_excludes: list | None = None, one_line: bool = False) -> _CallForm:
    """How a call of the tool is written. `closing`: which writing of the closer (in the template's order; the
    planner tries the next one when calls written with one do not parse back: Apertus's `}` needs another call
    after it, its `}]<|tools_suffix|>` does not). Raises IndexError past the last. `string_excludes`: what
    argument strings may not hold (the markers, unless the planner found which of them the parser reads there).
    `one_line`: JSON arguments hold no line break (the planner's choice where one would end a call early)."""
    in_strings = markers if string_excludes is None else string_excludes
    open_spec = _delimiter_spec(field_spec, "open", "open_pattern")
    try:
        opener = _opener(field_spec)[0]
    except _Dead:
        if not _writes_nothing(open_spec):
            raise
        # the opener writes nothing (a lookahead for `[name(`: Gemma 3's and Llama 4's Python call lists): the call
        # is its body alone, which only a grammar without free text can write
        opener = []
    close_spec = _delimiter_spec(field_spec, "close", "close_pattern")
    silent = _writes_nothing(close_spec)
    # the writings of the closer, in the template's order; a call that opens with no text tries ending with none
    # first (Gemma 3's bare list, not the fence its closer also spells for a list that opened with one)
    try:
        writings = _skeletons(close_spec, "close", spread=True)
    except _Dead:
        if not silent:
            raise
        writings = []
    if silent and (not opener or not writings):
        # the closer writes nothing: a call ends where the next one opens or where the turn ends (Mistral's
        # `[TOOL_CALLS]name[ARGS]{...}`); the self-check parses calls written so, and the grammar lets no text follow
        writings = [[]] + writings if not opener else writings + [[]]
    block = _block(field_spec, open_spec, opener, writings) or _listed_block(field_spec, open_spec, opener, writings)
    if block is not None:
        if closing >= len(block.ends):
            raise IndexError(closing)
        return _block_form(field_spec, name, parameters, in_strings, block, block.ends[closing], one_line)
    if closing >= len(writings):
        raise IndexError(closing)
    closer = _strip_ws(writings[closing], leading=False)
    has_name = any(p.kind == "group" and p.text == "name" for p in opener)
    content = field_spec.get("content", "text")
    transform = field_spec.get("transform")
    function = transform.get("function") if isinstance(transform, dict) else None
    each = bool(field_spec.get("transform_each"))
    # the whole call as one JSON object: {"name": ..., "arguments": ...}, or other keys read by "{content.KEY}"
    keys = ("name", "arguments") if function == "{content}" else _transform_keys(function, "content.")
    if each:
        # a list of call objects, each read by the transform: {"name": "{KEY}", "arguments": "{KEY}"}
        keys = _transform_keys(function, "")
        if content not in ("json", "python-call-list"):
            raise _Dead(f"a list of calls written as {content!r} is not compiled (JSON and Python lists are)")
        if content == "python-call-list" and keys != ("name", "arguments"):
            raise _Dead(f"transform {transform!r} of a Python call list: expected {{name: '{{name}}', arguments: '{{arguments}}'}}")
        if keys is None:
            raise _Dead(f"transform {transform!r} of each call of a list: expected {{name: '{{KEY}}', arguments: '{{KEY}}'}}")
    whole = keys is not None
    if whole:
        if has_name:
            raise _Dead("the opener names the tool but the transform reads the name from the content")
    elif function != {"name": "{name}", "arguments": "{content}"} or not has_name:
        raise _Dead(f"transform {transform!r}: expected function '{{content}}' or {{name: '{{name}}', "
                    "arguments: '{content}'}} with the name in the opener")
    optional_elements: dict = {}
    begin, open_formats, open_text = _split(opener, name, elements=optional_elements)
    if not begin and opener:
        raise _Dead("the opener does not start with literal text")
    # the closer's last literal is the tag's end; what comes before it belongs to the content
    last = max((i for i, p in enumerate(closer) if p.kind == "lit"), default=-1)
    leading_close, close_formats, close_text = _split(closer[:last] if last >= 0 else [], None, elements=optional_elements)
    close_formats = ([_const(leading_close)] if leading_close else []) + close_formats
    end = closer[last].text if last >= 0 else ""
    trailing = closer[last + 1:]
    if any(p.kind not in ("ws", "opt") for p in trailing):
        raise _Dead("the closer ends with a group")
    item: Any = None  # the item of a list of calls: a JSON schema, or a Python call's rules
    list_body = write_items = None
    if content == "json":
        args = field_spec.get("content_args") or {}
        schema = parameters
        if keys is not None:
            schema = {"type": "object", "properties": {keys[0]: {"const": name}, keys[1]: parameters},
                      "required": list(keys), "additionalProperties": False}
        if each and keys is not None:
            # call objects of a list may carry a call id where chat templates write one (Cohere's "tool_call_id"
            # first, Mistral's "id" last); the parser ignores it
            ids = {"tool_call_id": {"type": "string"}} if "tool_call_id" not in keys else {}
            ids_after = {"id": {"type": "string"}} if "id" not in keys else {}
            item = {**schema, "properties": {**ids, **schema["properties"], **ids_after}}

            def list_body(items: list, parallel: bool) -> dict:
                listed = {"type": "array", "items": items[0] if len(items) == 1 else {"anyOf": items}, "minItems": 1}
                return _json_body({**listed, **({} if parallel else {"maxItems": 1})}, args, in_strings)[0]

            schema = {"type": "array", "items": item, "minItems": 1}
        body, style = _json_body(schema, args, in_strings, name, one_line and not each, keys is not None)
        body_elements = [_ws(0), body, _ws(0)]
        if keys is not None and not each and style == "json":
            # the call object's keys in the other order too (Inkling's chat template writes "args" before "name"),
            # kept where the planner's check reads a call written so
            swapped = {**schema, "properties": {keys[1]: parameters, keys[0]: {"const": name}}}
            body_elements[1] = {"type": "or", "elements": [body, _json_body(swapped, args, in_strings)[0]]}

        def write_items(calls: list, call_id: str | None = None) -> str:
            assert keys is not None
            before = {"tool_call_id": "0"} if call_id == "tool_call_id" else {}
            after = {"id": "call0"} if call_id == "id" else {}
            return _write_json([{**before, keys[0]: tool, keys[1]: arguments, **after} for tool, arguments in calls],
                               style)

        def write_body(arguments: dict, laid_out: bool = False) -> str:
            value: Any = {keys[0]: name, keys[1]: arguments} if keys else arguments
            if each:
                assert keys is not None
                value = [value]
            if laid_out:  # the grammar's JSON whitespace at its worst: a line break around every token
                return "\n" + _laid_out_json(value) + "\n"
            return _write_json(value, style)
    elif content == "python-call-list" and each:
        rules = PythonCallRules(name, parameters)
        item = rules

        def list_body(items: list, parallel: bool) -> dict:
            return {"type": "grammar", "grammar": call_list_grammar(items, parallel)}

        body_elements = [_ws(0), list_body([rules], True), _ws(0)]

        def write_items(calls: list, call_id: str | None = None) -> str:
            return "[" + ", ".join(python_call(tool, arguments) for tool, arguments in calls) + "]"

        def write_body(arguments: dict, laid_out: bool = False) -> str:
            return write_items([(name, arguments)])
    elif content == "xml-inline":
        if whole:
            raise _Dead("xml-inline content with the name inside it")
        body_elements, write_xml, tag_spellings, literals = _xml_body(
            parameters, field_spec.get("content_args") or {}, in_strings)
        body_elements = body_elements + [_ws(0)]

        def write_body(arguments: dict, laid_out: bool = False) -> str:
            return write_xml(arguments)
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
    if content == "json" and style == "json-one-line":
        # (the whole call on one line: the closer's whitespace after nested arguments could end it early too)
        open_formats, body_elements, close_formats = (
            _on_one_line(open_formats), _on_one_line(body_elements), _on_one_line(close_formats))
    form = _CallForm(name, begin, open_formats + body_elements + close_formats, end, writer(open_text, close_text),
                     optional)
    if content == "json" and style in ("json", "json-one-line"):
        # (on one line, the most whitespace the grammar allows is the canonical writing's)
        form.write_laid_out = lambda arguments: (begin + open_text[len(begin):]
                                                 + write_body(arguments, style == "json") + close_text + end)
        if keys is not None and not each and style == "json":
            choice = body_elements[1]
            form.variants.append(([(choice, choice["elements"][1])], lambda arguments: (
                begin + open_text[len(begin):] + _write_json({keys[1]: arguments, keys[0]: name}, style)
                + close_text + end)))
    json_body = (field_spec.get("content_args") or {}).get("json_body") if content == "xml-inline" else None
    if json_body is not None:
        # the body written as one JSON object instead of tags (DSML's direct JSON calls), which the planner admits
        # where a call written so parses back (inside a section of calls: DeepSeek's reads one only before another
        # invoke or the section's end)
        opening, closing_text = json_body.get("open", ""), json_body.get("close", "")
        # (its strings hold none of the markers: what xml values may hold was probed in values, not in JSON)
        body = _json_body(parameters, {}, markers)[0]
        form.json_body = (open_formats + [_ws(0), *([_const(opening)] if opening else []), body,
                                          *([_const(closing_text)] if closing_text else []), _ws(0)] + close_formats)
        form.write_json_body = lambda arguments: (begin + open_text[len(begin):] + "\n" + opening
                                                  + json.dumps(arguments, ensure_ascii=False) + closing_text + "\n"
                                                  + close_text + end)
    if content == "xml-inline" and tag_spellings:
        form.variants.append((tag_spellings, lambda arguments: (
            begin + open_text[len(begin):] + write_xml(arguments, True) + close_text + end)))
    if content == "xml-inline" and literals:
        form.variants.append((literals, lambda arguments: (
            begin + open_text[len(begin):] + write_xml(arguments, python=True) + close_text + end)))
    brackets = [piece for piece in opener if piece.kind == "opt" and piece.sample.strip() == "["] + [
        piece for piece in closer[:last] if piece.kind == "opt" and piece.sample.strip() == "]"]
    if content == "json" and style == "json" and keys is not None and not each and len(brackets) == 2:
        # the optional `[`...`]` around the call object: the region may hold a list of call objects instead
        form.list_item = schema
        left, right = (optional_elements[id(piece)] for piece in brackets)

        def list_region(items: list, parallel: bool) -> list:
            listed = {"type": "array", "items": items[0] if len(items) == 1 else {"anyOf": items}, "minItems": 1}
            body = _json_body({**listed, **({} if parallel else {"maxItems": 1})}, args, in_strings)[0]
            return ([element for element in open_formats if element is not left] + [_ws(0), body, _ws(0)]
                    + [element for element in close_formats if element is not right])

        form.list_region = list_region
        form.write_list_region = lambda calls: begin + open_text[len(begin):] + _write_json(
            [{keys[0]: tool, keys[1]: arguments} for tool, arguments in calls], style) + close_text + end
    if item is not None and write_items is not None:
        form.list_item, form.list_at, form.list_body = item, len(open_formats) + 1, list_body
        form.write_list = lambda calls, call_id=None: (begin + open_text[len(begin):] + write_items(calls, call_id)
                                                      + close_text + end)
        if isinstance(item, dict):  # the call ids the item allows, each kept only if the parser reads a call with it
            form.list_ids = [key for key in ("tool_call_id", "id") if key in item["properties"] and key not in (keys or ())]
    return form

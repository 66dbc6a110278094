"""Content parsers (the text of a region -> a value) and transforms (a value -> the shape the message wants).

Each parser takes the raw text of one region and its `content_args`. The semantics follow transformers 5.25's
response parser exactly, since templates published to the Hub are read by both implementations.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

import regex

from .backtracking import risk
from .errors import (
    QUOTE_LIMIT,
    RegexTimeoutError,
    TransformError,
    TransformKeyError,
    close_budget,
    excerpt,
    open_budget,
    regex_time_left,
    retry_after_timeout,
    timeout_message,
)
from .limits import MAX_CALL_LIST_NESTING, JSONTooDeepError, load_json


def parse_text(text: str, args: dict) -> str:
    return text.strip() if args.get("strip", True) else text


def _number(kind: type, text: str) -> Any:
    try:
        return kind(text)
    except ValueError as error:
        if len(str(error)) <= 2 * QUOTE_LIMIT:
            raise
        # Python quotes the whole text: keep the message short
        raise ValueError(f"{kind.__name__}: cannot read {excerpt(text)} as a number") from None


def parse_int(text: str, args: dict) -> int:
    return _number(int, parse_text(text, args))


def parse_float(text: str, args: dict) -> float:
    return _number(float, parse_text(text, args))


def parse_bool(text: str, args: dict) -> bool:
    return parse_text(text, args).lower() in ("true", "1")


# Placeholders for strings cut out by `string_delims`: control characters that model output does not contain.
_SLOT_START, _SLOT_END = "\x01", "\x02"
# A whole JSON string (kept as it is), or a bare identifier used as an object key (to be quoted).
_BARE_KEY = regex.compile(r'"(?:\\.|[^"\\])*"|(?<=[{,])(\s*)(\w+)(\s*):')
# What a bare key needs somewhere in the text (strings included): without it, quoting keys changes nothing.
_MAYBE_BARE_KEY = regex.compile(r"[{,]\s*\w+\s*:")


def _quote_bare_key(match: Any) -> str:
    if match.group(2) is None:
        return match.group(0)
    return f'{match.group(1)}"{match.group(2)}"{match.group(3)}:'


# Compiled regexes of template arguments (string_delims pairs, tag_pattern), by their text: a parse compiles none.
_COMPILED: dict = {}
_COMPILED_LIMIT = 512


def _compiled(key: Any, source: Any) -> Any:
    """The compiled regex cached under `key`; `source` is its text, or a function giving it."""
    found = _COMPILED.get(key)
    if found is None:
        found = regex.compile(source() if callable(source) else source, regex.DOTALL)
        if len(_COMPILED) >= _COMPILED_LIMIT:
            _COMPILED.clear()
        _COMPILED[key] = found
    return found


def _delims_finder(opener: str, closer: str) -> Any:
    return _compiled(("delims", opener, closer), lambda: regex.escape(opener) + r"(.*?)" + regex.escape(closer))


def _cut_between_twins(text: str, marker: str, cut: list) -> str:
    """What `_delims_finder(marker, marker).sub` does, without a regex: the text between each pair of consecutive
    markers (first and second, third and fourth...) goes to `cut` and is replaced with a slot; a last marker without a
    partner stays as written. (The lazy pattern ends each string at the next marker, as `split` cuts.)"""
    parts = text.split(marker)
    markers = len(parts) - 1
    out = [parts[0]]
    for pair in range(markers // 2):
        cut.append(parts[2 * pair + 1])
        out.append(f"{_SLOT_START}{len(cut) - 1}{_SLOT_END}")
        out.append(parts[2 * pair + 2])
    if markers % 2:
        out.append(marker)
        out.append(parts[-1])
    return "".join(out)


def _restore(working: str, cut: list) -> str:
    for index, piece in enumerate(cut):
        working = working.replace(f"{_SLOT_START}{index}{_SLOT_END}", json.dumps(piece))
    return working


# In the unquoted-key dialect, after the first reading failed: a JSON string (kept), a Python constant, or a bare key
# that holds spaces or other non-word characters (`{Basic LLM Chain:{...}}`), up to its ':'. The key may be empty:
# the chat templates write the empty key as nothing (`{:1}` for {"": 1}).
_PYTHONIC = regex.compile(
    r'"(?:\\.|[^"\\])*"'
    r"|(?<![\w.])(True|False|None)(?![\w.])"
    r'|(?<=[{,])(\s*)((?:[^\s"{}\[\],:\x01\x02](?:[^"{}\[\],:\x01\x02\n]*[^\s"{}\[\],:\x01\x02])?)?)(\s*):'
)
_JSON_WORDS = {"True": "true", "False": "false", "None": "null"}


def _json_word(match: Any) -> str:
    if match.group(1) is not None:
        return _JSON_WORDS[match.group(1)]
    if match.group(3) is not None:
        return f"{match.group(2)}{json.dumps(match.group(3))}{match.group(4)}:"
    return match.group(0)


def parse_json(text: str, args: dict) -> Any:
    """JSON, with dialect switches for what models write: `string_delims` (strings between custom markers),
    `unquoted_keys` (bare identifiers as keys) and `allow_non_json` (fall back to the stripped text); with
    `unquoted_keys`, `braceless_members` (ours, docs/differences.md) reads members written without their braces."""
    delims = args.get("string_delims") or []
    working = text
    cut: list[str] = []
    if delims and '"' in text:
        # Text that is JSON as written is read so: a delimiter inside its strings is text (Olmo 3 writes dict
        # arguments as JSON, where a single quote is an apostrophe). transformers cuts the delimiters first.
        try:
            return load_json(text)
        except (JSONTooDeepError, json.JSONDecodeError):
            pass
    if delims:
        if _SLOT_START in text or _SLOT_END in text:
            raise ValueError("json: the text holds the reserved characters \\x01 or \\x02 and cannot be parsed safely")
        for opener, closer in delims:
            if opener not in working:
                continue  # nothing to cut
            if opener == closer:
                working = _cut_between_twins(working, opener, cut)
                continue

            def keep(match: Any) -> str:
                cut.append(match.group(1))
                return f"{_SLOT_START}{len(cut) - 1}{_SLOT_END}"

            finder = _delims_finder(opener, closer)
            working = finder.sub(keep, working)
    lax = args.get("unquoted_keys", False)
    if lax and _MAYBE_BARE_KEY.search(working) is not None:
        working = _BARE_KEY.sub(_quote_bare_key, working)
    shaped = working
    working = _restore(working, cut)
    try:
        return load_json(working)
    except (JSONTooDeepError, json.JSONDecodeError) as error:
        failure: ValueError = error
    if lax and not isinstance(failure, JSONTooDeepError):
        # The unquoted-key dialect (Gemma 4, FunctionGemma) also writes Python's None/True/False and keys with
        # spaces; transformers reads neither (a deliberate difference, docs/differences.md). Only text that failed
        # as it is gets this second reading, so every value transformers reads stays the same.
        try:
            return load_json(_restore(_PYTHONIC.sub(_json_word, shaped), cut))
        except ValueError:
            pass
        members = _braceless_members(text, args) if args.get("braceless_members") else None
        if members is not None:
            return members
    if args.get("allow_non_json"):
        return parse_text(text, args)
    if isinstance(failure, JSONTooDeepError):
        raise ValueError(
            f"json: the region ({len(text)} characters) is not parsed: {failure} (see MAX_JSON_DEPTH in "
            f"response_templates.core.limits).\nText: {excerpt(text)}"
        ) from None
    position = getattr(failure, "pos", 0)
    detail = (
        f"\nText: {excerpt(text, position)}"
        if working == text
        else f"\nText: {excerpt(text)}\nAfter the dialect rewrites: {excerpt(working, position)}"
    )
    raise ValueError(f"json: the region is not valid JSON ({failure}).{detail}") from failure


def _braceless_members(text: str, args: dict) -> dict | None:
    """An object's members written without its braces (`city:<|"|>Paris<|"|>`, a Gemma 4 call that lost them), as
    that object (no members at all, `{}`); None when the text starts like a value of its own or does not read so."""
    body = text.strip()
    if not body:
        return {}
    if body[0] in "{[\"" or ":" not in body:
        return None
    try:
        value = parse_json("{" + body + "}", {**args, "allow_non_json": False, "braceless_members": False})
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _value_with(raw: str, value_parser: dict | None) -> Any:
    if value_parser is None:
        return raw
    return parse_content(raw, value_parser.get("name", "text"), value_parser.get("args", {}))


# A region at most this long is read with a tag_pattern that cannot backtrack badly (`backtracking.risk(...)`, safe:
# each anchored try is linear) without `regex`'s per-call timeout, which costs microseconds a call (each step of
# `finditer`); the matches are found by at most one try per character, so their cost is bounded by the square of
# this length. So is a pattern whose only risk is a pair (or chain of three) of repeats sharing a few characters,
# on a region without a long run of those (`scan.quiet`: each try then costs at most 16 linear tries). Longer
# regions, and other patterns, keep the timeout.
_UNTIMED_MOST = 512
_TAG_RISKS: dict = {}


def _tag_risk(pattern: str) -> tuple | None:
    """(safe, quiet) of a tag_pattern (`scan.risk`), or None when it cannot be read."""
    if pattern not in _TAG_RISKS:
        if len(_TAG_RISKS) >= _COMPILED_LIMIT:
            _TAG_RISKS.clear()
        _TAG_RISKS[pattern] = risk(pattern)
    return _TAG_RISKS[pattern]


def _safe_tags(pattern: str) -> bool:
    verdict = _tag_risk(pattern)
    return verdict is not None and verdict[0]


def _untimed_tags(pattern: str, text: str) -> bool:
    """Whether `text` (short) is read with `pattern` without the per-call timeout (see `_UNTIMED_MOST`)."""
    if len(text) > _UNTIMED_MOST:
        return False
    verdict = _tag_risk(pattern)
    if verdict is None:
        return False
    safe, quiet = verdict
    return safe or (quiet is not None and quiet(text))


def _finditer(pattern: str, text: str) -> list:
    """Every match of a template's tag_pattern, within the regex time budget of the call in progress (a budget of
    its own, for the text's size, when called outside one)."""
    opened = open_budget(len(text))
    try:
        compiled = _compiled(("tags", pattern), pattern)
        if _untimed_tags(pattern, text):
            regex_time_left()  # the budget of the call may already be spent
            return list(compiled.finditer(text))
        while True:
            try:
                return list(compiled.finditer(text, timeout=regex_time_left()))
            except TimeoutError:
                if not retry_after_timeout():  # (other threads advanced regex's clock: run it again)
                    raise
    except TimeoutError:
        raise RegexTimeoutError(timeout_message(f"xml-inline: tag_pattern {excerpt(pattern)}")) from None
    finally:
        if opened:
            close_budget()


_ATTRIBUTE_ESCAPE = regex.compile(r"&(amp|quot|apos|lt|gt);")
_ATTRIBUTE_CHARS = {"amp": "&", "quot": '"', "apos": "'", "lt": "<", "gt": ">"}


def unescape_attribute(text: str) -> str:
    """An XML attribute value as written (`a &amp; &quot;b&quot;` -> `a & "b"`), in one pass so that `&amp;quot;`
    gives `&quot;`. Only the five predefined entities: chat templates escape no more (Kimi K3 escapes & and ")."""
    if "&" not in text:
        return text
    return _ATTRIBUTE_ESCAPE.sub(lambda match: _ATTRIBUTE_CHARS[match.group(1)], text)


class _NotElements(Exception):
    """The text is not a sequence of well-formed child elements (the caller falls back to `tag_pattern`)."""


def read_nested_elements(text: str, prefix: str, item_tag: str) -> dict | None:
    """`<k>v</k>` elements, each tag written after `prefix` (a namespace token such as `]<]minimax[>[`), into a dict;
    an element whose children are all `<item_tag>` elements is a list, one whose children are other elements a
    dict, any other a string (its text as written, which may not hold `prefix`). Whitespace between elements, and
    between `prefix` and its tag, is layout. None when the text is anything else (a cut or malformed body), so the
    caller can read it another way. Read with an explicit stack, in one pass: a leaf's text ends at the next
    `prefix`."""
    root: list = []  # (tag, value) pairs of the top-level elements
    stack: list[tuple[str, list]] = [("", root)]  # the open elements: (tag, its children so far)
    at, end = 0, len(text)
    try:
        while True:
            at = _skip_layout(text, at)
            if at == end:
                if len(stack) != 1:
                    raise _NotElements
                return _as_mapping(root, item_tag)
            closing, tag, at = _tag_at(text, at, prefix)
            if closing:
                if len(stack) == 1 or tag != stack[-1][0]:
                    raise _NotElements
                _, children = stack.pop()
                stack[-1][1].append((tag, _element_value(children, item_tag)))
                continue
            if _opens_element(text, _skip_layout(text, at), prefix):
                if len(stack) >= MAX_CALL_LIST_NESTING:  # (the leaf inside is one level more)
                    raise _NotElements
                stack.append((tag, []))  # its children follow
                continue
            leaf_end = text.find(prefix, at)
            if leaf_end == -1:
                raise _NotElements
            closing, close_tag, after = _tag_at(text, leaf_end, prefix)
            if not closing or close_tag != tag:
                raise _NotElements
            stack[-1][1].append((tag, text[at:leaf_end]))
            at = after
    except _NotElements:
        return None


def _skip_layout(text: str, at: int) -> int:
    while at < len(text) and text[at] in _SPACE_CHARS:
        at += 1
    return at


def _tag_at(text: str, at: int, prefix: str) -> tuple[bool, str, int]:
    """(whether it is a closing tag, the tag name, where the text after it starts) for the tag written at `at`."""
    if not text.startswith(prefix, at):
        raise _NotElements  # text between elements
    at = _skip_layout(text, at + len(prefix))
    if text[at:at + 1] != "<":
        raise _NotElements
    closing = text[at + 1:at + 2] == "/"
    at += 2 if closing else 1
    close = text.find(">", at)
    if close == -1:
        raise _NotElements
    tag = text[at:close]  # (an empty name is the empty key, which the chat template writes as `<>`)
    if "<" in tag:
        raise _NotElements
    return closing, tag, close + 1


def _opens_element(text: str, at: int, prefix: str) -> bool:
    if not text.startswith(prefix, at):
        return False
    at = _skip_layout(text, at + len(prefix))
    return text[at:at + 1] == "<" and text[at + 1:at + 2] != "/"


def _element_value(children: list, item_tag: str) -> Any:
    if all(tag == item_tag for tag, _ in children):
        return [value for _, value in children]
    return _as_mapping(children, item_tag)


def _as_mapping(children: list, item_tag: str) -> dict:
    """Children into a dict; a key written twice (the chat templates never do) gathers its values in a list."""
    mapping: dict[str, Any] = {}
    repeated: set[str] = set()
    for tag, value in children:
        _gather(mapping, repeated, tag, value)
    return mapping


def _gather(mapping: dict, repeated: set, key: str, value: Any) -> None:
    """`value` under `key`; a key met again gathers its values in a list (`repeated` holds the keys that have one)."""
    if key not in mapping:
        mapping[key] = value
        return
    if key not in repeated:
        mapping[key] = [mapping[key]]
        repeated.add(key)
    mapping[key].append(value)


def parse_xml_inline(text: str, args: dict) -> dict:
    """Shallow tags read by `tag_pattern` (named groups `key` and `value`) into a dict; `value_parser` parses the
    values, `value_parser_by` picks the parser from another group, `merge_duplicates` lists repeated keys.
    `unescape_attributes` (our extension, which transformers ignores) decodes XML entities in the keys.
    `nested_elements` (ours too) reads the whole text as nested elements first (`read_nested_elements`), and
    uses `tag_pattern` only when that fails. `json_body` (ours too) reads a text that holds no tag as one JSON
    object (`read_json_body`)."""
    pattern = args.get("tag_pattern")
    if pattern is None:
        raise ValueError("xml-inline: the content_arg 'tag_pattern' is required")
    nested = args.get("nested_elements")
    if nested is not None:
        elements = read_nested_elements(text, nested.get("prefix", ""), nested.get("item_tag", "item"))
        if elements is not None:
            return elements
    value_parser = args.get("value_parser")
    by = args.get("value_parser_by")
    by_group, by_parsers = None, {}
    if by is not None:
        by_group, by_parsers = by.get("group"), by.get("parsers")
        if not isinstance(by_group, str) or not isinstance(by_parsers, dict):
            raise ValueError(
                "xml-inline: 'value_parser_by' needs 'group' (a named group of tag_pattern) and 'parsers' "
                f"(what that group captures -> a value parser), got {by!r}"
            )
    merge = args.get("merge_duplicates", False)
    unescape = args.get("unescape_attributes", False)
    result: dict[str, Any] = {}
    listed: set[str] = set()
    # the groups are read by number (a lookup by name costs seven times more)
    matches = _finditer(pattern, text)
    numbers = _compiled(("tags", pattern), pattern).groupindex
    key_number, value_number, by_number = numbers.get("key"), numbers.get("value"), numbers.get(by_group)
    for match in matches:
        key = None if key_number is None else match.group(key_number)
        if key is None:
            raise ValueError(f"xml-inline: tag_pattern {pattern!r} has no named group 'key'")
        if unescape:
            key = unescape_attribute(key)
        parser = value_parser
        if by_group is not None:
            if by_number is None:
                raise ValueError(f"xml-inline: value_parser_by names the group {by_group!r}, which tag_pattern {pattern!r} lacks")
            parser = by_parsers.get(match.group(by_number), value_parser)
        value = _value_with("" if value_number is None else match.group(value_number), parser)
        if merge:
            _gather(result, listed, key, value)
        else:
            result[key] = value
    json_body = args.get("json_body")
    if json_body is not None and not matches:
        return read_json_body(text, json_body.get("open", ""), json_body.get("close", ""))
    return result


def read_json_body(text: str, opener: str, closer: str) -> dict:
    """The arguments of a call whose body is one JSON object instead of tags (SGLang's "direct JSON" DSML calls,
    Kimi K3's `<|open|>json type="object"<|sep|>{...}<|close|>json<|sep|>`), between the literals `opener` and
    `closer` and whitespace. A body that starts like one (the opener, then `{`) but is not one JSON object is
    malformed, not silently `{}`; any other body without tags (blank, or a tag cut short) is no arguments, as
    transformers reads it."""
    body = text.strip()
    if not body.startswith(opener) or not body[len(opener):].lstrip().startswith("{"):
        return {}
    inner = body[len(opener):len(body) - len(closer)] if body.endswith(closer) and len(body) >= len(opener) + len(closer) else None
    try:
        value = load_json(inner) if inner is not None else None
    except (JSONTooDeepError, ValueError):
        value = None
    if not isinstance(value, dict):
        around = f" between {opener!r} and {closer!r}" if opener or closer else ""
        raise ValueError(f"xml-inline: the call's body holds no tag and is not one JSON object{around}.\nText: {excerpt(body)}")
    return value


def parse_kv_lines(text: str, args: dict) -> dict:
    """`key<kv_sep>value` lines (split on `line_sep`) into a dict; lines without the separator are skipped."""
    line_sep = args.get("line_sep", "\n")
    kv_sep = args.get("kv_sep", ":")
    value_parser = args.get("value_parser")
    result: dict[str, Any] = {}
    for line in text.split(line_sep):
        line = parse_text(line, args)
        if not line or kv_sep not in line:
            continue
        key, value = line.split(kv_sep, 1)
        result[parse_text(key, args)] = _value_with(parse_text(value, args), value_parser)
    return result


# ---------------------------------------------------------------------------------------------------------------
# python-call-list: `[name(key=value, ...), ...]` with Python/JSON literals, read by a small strict recursive-descent
# reader so that every implementation of the format accepts exactly the same inputs.

_SPACE = regex.compile(r"[ \t\n\r]*")
_SPACE_CHARS = frozenset(" \t\n\r")
_IDENTIFIER = regex.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[-.][A-Za-z0-9_]+)*")
_NUMBER = regex.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
# A raw line break inside quotes is read as itself (transformers rejects it): chat templates that paste string
# arguments between quotes unescaped (LFM2.5) write it so, and so do the models trained on them.
_QUOTED = regex.compile(r"""'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)\"""", regex.DOTALL)
_HEX4 = regex.compile(r"u([0-9a-fA-F]{4})")
_HEX2 = regex.compile(r"x([0-9a-fA-F]{2})")
_HEX8 = regex.compile(r"U([0-9a-fA-F]{8})")
_LOW_SURROGATE_ESCAPE = regex.compile(r"\\u([dD][c-fC-F][0-9a-fA-F]{2})")
# Where a string pasted raw between quotes ends, when its own quotes are not escaped (LFM2.5's chat template writes
# `command='sed -n '1,5p' f'`): at a quote the call goes on after, with the next keyword argument or the call's end.
_RAW_STRING_END = regex.compile(
    r"[ \t\n\r]*(?:,[ \t\n\r]*[A-Za-z_][A-Za-z0-9_]*[ \t\n\r]*=|\)[ \t\n\r]*(?:\]|,[ \t\n\r]*[A-Za-z_{]))")
# The characters after a backslash that start an escape in a Python string (a backslash before any other stays).
_PYTHON_ESCAPE_STARTS = frozenset("\\'\"abfnrtvxuUN01234567\n")
_RAW_SURROGATE = regex.compile(r"[\ud800-\udfff]")
_SIMPLE_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_KEYWORDS = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}
# Digits (and sign) of the longest integer a Python literal may hold: Python's own int() limit for decimal text.
_LONGEST_PYTHON_INTEGER = 4300
_MIXED_CALLS = "a list of calls holds Python calls or JSON call objects, not both (its first item decides)"


class _CallListReader:
    """Reads Python literals and call lists as Python writes them: beyond transformers' python-call-list grammar, the
    \\xNN and \\UNNNNNNNN escapes repr() writes for unprintable characters, and integers of any size. Chat templates
    that write values with str() produce both (Seed-OSS, MiniCPM5, LFM2.5, Llama 4's pythonic template), and
    transformers refuses them: a deliberate difference (docs/differences.md)."""

    def __init__(self, text: str, json_calls: bool = False, raw_strings: bool = False):
        self.text = text
        self.at = 0
        self.json_calls = json_calls  # the list may hold JSON call objects instead (content_args.json_calls)
        # keyword arguments' strings may be pasted raw: quotes of their own kind unescaped, a backslash before
        # anything but an escape kept as written (as Python keeps `'\,'`); the reading tried when the strict one fails
        self.raw_strings = raw_strings

    def error(self, what: str, at: int | None = None) -> ValueError:
        at = self.at if at is None else at
        return ValueError(f"python-call-list: {what} at position {at}.\nContent: {excerpt(self.text, at)}")

    def skip_space(self) -> None:
        # most places hold no space: a look at one character costs far less than the regex match
        if self.text[self.at:self.at + 1] in _SPACE_CHARS:
            self.at = _SPACE.match(self.text, self.at).end()

    def peek(self, char: str) -> bool:
        self.skip_space()
        return self.text.startswith(char, self.at)

    def next_char(self) -> str:
        """The character after any space ("" at the end), which the reader is now at."""
        self.skip_space()
        return self.text[self.at:self.at + 1]

    def take(self, char: str) -> None:
        if not self.peek(char):
            raise self.error(f"expected {char!r}")
        self.at += 1

    def sequence(self, closer: str, read_item: Callable[[], Any]) -> list:
        items: list = []
        if self.peek(closer):
            self.at += 1
            return items
        while True:
            items.append(read_item())
            if self.peek(closer):
                self.at += 1
                return items
            self.take(",")

    def no_repeats(self, pairs: list) -> dict:
        result: dict = {}
        for key, value in pairs:
            if key in result:
                raise self.error(f"repeated name {key!r}")
            result[key] = value
        return result

    def identifier(self, expected: str) -> str:
        self.skip_space()
        match = _IDENTIFIER.match(self.text, self.at)
        if match is None:
            raise self.error(f"expected {expected}")
        self.at = match.end()
        return match.group()

    def string(self) -> str:
        match = _QUOTED.match(self.text, self.at)
        if match is None:
            raise self.error("invalid string")
        body = match.group(1) if match.group(1) is not None else match.group(2)
        text = self.decoded(body)
        self.at = match.end()
        return text

    def raw_string(self) -> str:
        """A keyword argument's string pasted raw: it ends at the first quote of its kind that the call goes on
        after (`, next=` or the call's `)` then `]` or another call)."""
        quote = self.text[self.at]
        end = self.at
        while True:
            end = self.text.find(quote, end + 1)
            if end == -1:
                raise self.error("invalid string")
            if _RAW_STRING_END.match(self.text, end + 1):
                break
        text = self.decoded(self.text[self.at + 1:end], keep_unknown=True)
        self.at = end + 1
        return text

    def decoded(self, body: str, keep_unknown: bool = False) -> str:
        """The text a string literal's body stands for. `keep_unknown`: a backslash before a character that starts
        no escape in Python stays, as Python keeps it (`'\\,'`)."""
        if _RAW_SURROGATE.search(body):
            raise self.error("lone surrogate in the string starting")
        pieces: list[str] = []
        done = 0
        while (slash := body.find("\\", done)) != -1:
            pieces.append(body[done:slash])
            code_char = body[slash + 1]
            if code_char in _SIMPLE_ESCAPES:
                pieces.append(_SIMPLE_ESCAPES[code_char])
                done = slash + 2
                continue
            if code_char in "xU":
                python_hex = (_HEX2 if code_char == "x" else _HEX8).match(body, slash + 1)
                if python_hex is not None and int(python_hex.group(1), 16) <= 0x10FFFF:
                    code, done = int(python_hex.group(1), 16), python_hex.end()
                    if 0xD800 <= code <= 0xDFFF:
                        raise self.error("lone surrogate escape in the string starting")
                    pieces.append(chr(code))
                    continue
            hex4 = _HEX4.match(body, slash + 1)
            if hex4 is None and keep_unknown and code_char not in _PYTHON_ESCAPE_STARTS:
                pieces.append("\\")
                done = slash + 1
                continue
            if hex4 is None:
                raise self.error(f"unsupported escape {body[slash:slash + 2]!r} in the string starting")
            code, done = int(hex4.group(1), 16), hex4.end()
            if 0xD800 <= code <= 0xDBFF:
                low = _LOW_SURROGATE_ESCAPE.match(body, done)
                if low is not None:
                    code = 0x10000 + ((code - 0xD800) << 10) + (int(low.group(1), 16) - 0xDC00)
                    done = low.end()
            if 0xD800 <= code <= 0xDFFF:
                raise self.error("lone surrogate escape in the string starting")
            pieces.append(chr(code))
        pieces.append(body[done:])
        return "".join(pieces)

    def value(self, depth: int) -> Any:
        opener = self.next_char()
        if opener == "'" or opener == '"':
            return self.string()
        if opener == "[" or opener == "{":
            if depth >= MAX_CALL_LIST_NESTING:
                raise self.error(f"lists and dicts nested more than {MAX_CALL_LIST_NESTING} levels deep")
            self.at += 1
            if opener == "[":
                return self.sequence("]", lambda: self.value(depth + 1))
            return self.no_repeats(self.sequence("}", lambda: self.pair(depth + 1)))
        number = _NUMBER.match(self.text, self.at)
        if number is not None:
            literal = number.group()
            if number.group(1) is None and number.group(2) is None:
                # Count digits first so that a huge literal never reaches int().
                if len(literal.lstrip("-")) > _LONGEST_PYTHON_INTEGER:
                    raise self.error(f"integer of more than {_LONGEST_PYTHON_INTEGER} digits")
                self.at = number.end()
                return int(literal)
            if math.isinf(float(literal)):
                raise self.error("number too large")
            self.at = number.end()
            return float(literal)
        word = _IDENTIFIER.match(self.text, self.at)
        if word is not None and word.group() in _KEYWORDS:
            self.at = word.end()
            return _KEYWORDS[word.group()]
        raise self.error("expected a string, number, list, dict, True, False or None")

    def pair(self, depth: int) -> tuple:
        quote = self.next_char()
        if quote != "'" and quote != '"':
            raise self.error("dict keys must be strings")
        key = self.string()
        self.take(":")
        return key, self.value(depth)

    def keyword_argument(self) -> tuple:
        key = self.identifier("a keyword argument (positional arguments and trailing commas are not supported)")
        if not self.peek("="):
            raise self.error("expected '=' (positional arguments are not supported)")
        self.at += 1
        if self.raw_strings and self.next_char() in ("'", '"'):
            return key, self.raw_string()
        return key, self.value(0)

    def call(self) -> dict:
        if self.json_calls and self.next_char() == "{":
            raise self.error(_MIXED_CALLS)
        name = self.identifier("a function name")
        self.take("(")
        return {"name": name, "arguments": self.no_repeats(self.sequence(")", self.keyword_argument))}

    def json_call(self) -> dict:
        """`{"name": "f", "arguments": {...}}`, read with the value grammar (JSON is part of it). `parameters` may
        stand for `arguments`, and arguments may be a string holding a JSON object (OpenAI's wire form); missing
        arguments are empty; other members (an "id", a "type") are ignored, as SGLang and vLLM ignore them."""
        if self.next_char() != "{":
            raise self.error(_MIXED_CALLS if _IDENTIFIER.match(self.text, self.at) else "expected '{' (a JSON call object)")
        start = self.at
        self.at += 1
        members = self.no_repeats(self.sequence("}", lambda: self.pair(0)))
        name = members.get("name")
        if not isinstance(name, str) or not name:
            raise self.error(f"a JSON call needs a 'name' (a non-empty string), got {name!r:.80}", start)
        if "arguments" in members and "parameters" in members:
            raise self.error(f"the JSON call of {name!r} has both 'arguments' and 'parameters'", start)
        arguments = members.get("arguments", members.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = load_json(arguments)
            except ValueError as problem:  # (JSONTooDeepError is one)
                raise self.error(f"the arguments of {name!r} are a string that is not JSON ({problem})", start) from None
        if not isinstance(arguments, dict):
            raise self.error(f"the arguments of {name!r} must be an object, got {type(arguments).__name__}", start)
        return {"name": name, "arguments": arguments}

    def read(self) -> list:
        self.take("[")
        # the first item says which kind the list holds
        calls = self.sequence("]", self.json_call if self.json_calls and self.next_char() == "{" else self.call)
        self.skip_space()
        if self.at != len(self.text):
            raise self.error("unexpected content after the closing ']'")
        return calls


def parse_python_call_list(text: str, args: dict) -> list:
    """`[get_weather(city="Paris", days=3)]` -> `[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]`.
    Values are read as Python writes them (`\\xNN` escapes, integers of any size), beyond transformers' grammar.
    With `json_calls` (our extension, which transformers ignores), the list may instead hold JSON call objects,
    `[{"name": "get_weather", "arguments": {"city": "Paris"}}]`, giving the same calls: LFM2 writes them when its
    system prompt asks for JSON function calls. One list holds one kind; its first item decides which.
    With `raw_strings` (ours too), a list the strict reading refuses is read again with keyword arguments' strings
    taken as pasted raw (LFM2.5's chat template writes `command='sed -n '1,5p' f'`; transformers raises); if that
    fails too, the strict reading's error is raised. Not the default: where strings are escaped, a string that lost
    its closing quote would then be read as running into the next argument."""
    try:
        return _CallListReader(text, args.get("json_calls", False)).read()
    except ValueError as strict:
        if not args.get("raw_strings"):
            raise
        try:
            return _CallListReader(text, args.get("json_calls", False), raw_strings=True).read()
        except ValueError:
            raise strict from None


def read_python_literal(text: str) -> Any:
    """One Python literal (`{'metadata': False, 'ids': [1, 2]}`), read with the python-call-list value grammar
    (strings, numbers, True/False/None, lists, dicts) plus what repr() writes beyond it (\\xNN and \\UNNNNNNNN
    escapes, integers of any size). Raises ValueError when `text` is anything else."""
    reader = _CallListReader(text)
    value = reader.value(0)
    reader.skip_space()
    if reader.at != len(text):
        raise reader.error("unexpected content after the literal")
    return value


PARSERS: dict[str, Callable[[str, dict], Any]] = {
    "text": parse_text,
    "int": parse_int,
    "float": parse_float,
    "bool": parse_bool,
    "json": parse_json,
    "xml-inline": parse_xml_inline,
    "kv-lines": parse_kv_lines,
    "python-call-list": parse_python_call_list,
}

# Parsers whose chunks are part of the final value (streamed with dirty=False); the others only make sense once
# the region closes.
TEXT_LIKE = frozenset({"text", "int", "float", "bool"})
# Parsers whose syntax tells strings from typed literals: tool schemas never re-type their string parameters.
TYPED_SYNTAX = frozenset({"json", "python-call-list"})


def parse_content(text: str, name: str, args: dict) -> Any:
    try:
        parser = PARSERS[name]
    except KeyError:
        raise ValueError(f"unknown content parser {name!r}; known: {sorted(PARSERS)}") from None
    return parser(text, args)


# ---------------------------------------------------------------------------------------------------------------
# Transforms

PLACEHOLDER = regex.compile(r"\{(\w+(?:\.\w+)*)\}")


def compile_transform(shape: Any) -> Callable[[dict], Any]:
    """Turn a transform into a function of the scope (named captures and the parsed content) that builds the
    value: every whole-string `{path}` is replaced by what it names, everything else is kept as written."""
    if isinstance(shape, dict):
        members = [(key, compile_transform(item)) for key, item in shape.items()]

        def build_dict(scope: dict) -> dict:
            built = {}
            for key, build in members:
                built[key] = build(scope)
            return built

        return build_dict
    if isinstance(shape, list):
        items = [compile_transform(item) for item in shape]
        return lambda scope: [build(scope) for build in items]
    if isinstance(shape, str):
        whole = PLACEHOLDER.fullmatch(shape)
        if whole is not None:
            path = whole.group(1)
            root, *steps = path.split(".")
            if not steps:
                # the common case, a top-level name: one lookup (a missing name gets `_resolve`'s error)
                def lookup(scope: dict) -> Any:
                    try:
                        return scope[root]
                    except KeyError:
                        return _resolve(path, root, steps, scope)

                return lookup
            return lambda scope: _resolve(path, root, steps, scope)
    return lambda scope: shape


def _resolve(path: str, root: str, steps: list[str], scope: dict) -> Any:
    if root not in scope:
        raise TransformKeyError(f"transform placeholder '{{{path}}}': {root!r} is not defined; available: {_names(scope)}")
    value = scope[root]
    for step in steps:
        if not isinstance(value, dict):
            raise TransformError(f"transform placeholder '{{{path}}}' cannot index into {type(value).__name__} at {step!r}")
        if step not in value:
            raise TransformError(f"transform placeholder '{{{path}}}' is missing key {step!r}. Available: {_names(value)}")
        value = value[step]
    return value


def _names(keys: dict, most: int = 20) -> str:
    """The sorted keys of a dict for a message: the first `most`, each cut to 60 characters (the dict may come
    from model output)."""
    names = [name if len(name) <= 60 else name[:60] + "…" for name in sorted(map(str, keys))[:most]]
    return str(names) if len(keys) <= most else f"{names} and {len(keys) - most} more"


def mixed_placeholder(shape: Any) -> str | None:
    """The first string of a transform that mixes a placeholder with other text (not supported), or None."""
    if isinstance(shape, dict):
        shape = list(shape.values())
    if isinstance(shape, list):
        for item in shape:
            found = mixed_placeholder(item)
            if found is not None:
                return found
        return None
    if isinstance(shape, str) and PLACEHOLDER.search(shape) and not PLACEHOLDER.fullmatch(shape):
        return shape
    return None

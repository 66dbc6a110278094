"""Size limits on response templates and on what the parser reads.

Templates come from Hub repositories and outputs from models: both may be hostile or just huge. Every shipped
template is far below these limits (at the time of writing: 3 fields, 2 literals in a list, literals of 47
characters, patterns of 449 characters, 8 levels of nesting); a template past one is refused with a
`TemplateError` naming the field and key, before any other work, so loading stays linear in the template's size.
The README's "Limits" section lists them.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from itertools import accumulate
from typing import Any

from .errors import JSONTooDeepError, TemplateError

MAX_FIELDS = 64  # entries of `fields`
MAX_LITERALS = 64  # literals in one `open` / `close` / `start_anchor` list, pairs in one `string_delims`
MAX_DELIMITER_LENGTH = 256  # characters of one literal delimiter (and of each side of a `string_delims` pair)
MAX_PATTERN_LENGTH = 4096  # characters of one regex: open_pattern, close_pattern, start_anchor_pattern, tag_pattern
MAX_NESTING = 32  # levels of dicts and lists in the template, the template itself being the first
MAX_VALUES = 10_000  # values in the whole template (every dict entry, list item and the template itself)
# characters of all the strings of the template (keys included): bounds the regex compilation of its delimiters
MAX_TEMPLATE_CHARS = 32_768
# What compiling a template's regexes may cost. `regex` unrolls a counted repeat (`x{1000}` is compiled much as 1,000
# copies of x), so a pattern of a few characters may compile to gigabytes: `(?:a|b|ab|ba){99999}x` took 280 MB and a
# second. `pattern_size` counts what a pattern unrolls to (see there); both bounds apply before anything is compiled.
MAX_PATTERN_SIZE = 20_000  # unrolled size of one regex (the shipped templates' largest is about 2,000)
MAX_TEMPLATE_PATTERN_SIZE = 50_000  # unrolled size of all the regexes of a template together
# Content read from model output: levels of arrays and objects a `json` region (or a JSON-typed tool argument) may
# nest. Deeper JSON is not parsed (a ValueError, or the text itself with `allow_non_json`).
MAX_JSON_DEPTH = 512
# Template: counted repeats ({m,n}) multiplied together in one regex, and value parsers nested in value parsers.
MAX_REPEAT_PRODUCT = 100_000
MAX_VALUE_PARSER_NESTING = 20
# Model output: lists and dicts nested in a python-call-list value.
MAX_CALL_LIST_NESTING = 100
# Token ids held back at most behind a text that ends with U+FFFD: a UTF-8 character has at most four bytes and an
# id decodes to at least one, so whatever lies before the last few ids is settled.
MAX_HELD_IDS = 8

_PATTERN_KEYS = ("open_pattern", "close_pattern", "start_anchor_pattern")
_LITERAL_KEYS = ("open", "close", "start_anchor")


def template_location(field_name: Any, key: str) -> str:
    """Where a key sits in a template, as error messages name it: `response_template.fields['x'].open`."""
    return f"response_template.{key}" if field_name is None else f"response_template.fields[{field_name!r}].{key}"


def _short(text: str, size: int = 60) -> str:
    return repr(text) if len(text) <= size else f"{text[:size]!r}… ({len(text)} characters)"


def check_limits(spec: dict) -> None:
    """Refuse a template past one of the limits above (raises `TemplateError`). Types are not checked here: what
    is not of the expected type is left to the validation that follows."""
    _sizes.total = 0
    fields = spec.get("fields")
    fields = fields if isinstance(fields, dict) else {}
    if len(fields) > MAX_FIELDS:
        raise TemplateError(f"response_template.fields has {len(fields)} fields; at most {MAX_FIELDS} are allowed")
    _check_delimiters(spec, None)
    for name, field in fields.items():
        if isinstance(field, dict):
            _check_delimiters(field, name)
    _check_shape(spec)
    for name, field in fields.items():
        args = field.get("content_args") if isinstance(field, dict) else None
        if isinstance(args, dict):
            _check_content_args(args, template_location(name, "content_args"))


def _check_shape(spec: dict) -> None:
    """Nesting depth, number of values and characters, walked without recursion (a template nested thousands of
    levels deep, or one that contains itself, must not exhaust the Python stack)."""
    count = chars = 0
    stack: list[tuple[Any, int, str]] = [(spec, 1, "response_template")]
    items: Iterable[tuple[Any, Any]]  # (key, value) of a dict, (index, item) of a list
    while stack:
        value, depth, where = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise TemplateError(f"response_template holds more than {MAX_VALUES} values (dict entries and list items)")
        if isinstance(value, str):
            chars += len(value)
        if isinstance(value, dict):
            chars += sum(len(key) for key in value if isinstance(key, str))
            items = value.items()
        elif isinstance(value, list):
            items = enumerate(value)
        else:
            continue
        if chars > MAX_TEMPLATE_CHARS:
            raise TemplateError(
                f"response_template holds more than {MAX_TEMPLATE_CHARS} characters of text (keys and strings)"
            )
        if depth > MAX_NESTING:
            raise TemplateError(f"{where} nests dicts and lists more than {MAX_NESTING} levels deep (or contains itself)")
        under_fields = where == "response_template.fields"
        for key, item in items:
            # name the path of the first levels only, so the message stays short
            if depth == 1 or (depth == 3 and where.startswith("response_template.fields[")):
                inner = f"{where}.{key}" if isinstance(key, str) and key.isidentifier() else f"{where}[{_short(str(key), 40)}]"
            elif depth < 4 or under_fields:
                inner = f"{where}[{_short(key, 40) if isinstance(key, str) else repr(key)}]"
            else:
                inner = where
            stack.append((item, depth + 1, inner))
    if chars > MAX_TEMPLATE_CHARS:
        raise TemplateError(f"response_template holds more than {MAX_TEMPLATE_CHARS} characters of text (keys and strings)")


def _check_delimiters(spec: dict, field_name: Any) -> None:
    keys = _LITERAL_KEYS[2:] if field_name is None else _LITERAL_KEYS[:2]
    for key in keys:
        raw = spec.get(key)
        literals = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
        if len(literals) > MAX_LITERALS:
            raise TemplateError(f"{template_location(field_name, key)} lists {len(literals)} literals; at most {MAX_LITERALS} are allowed")
        for index, literal in enumerate(literals):
            if isinstance(literal, str) and len(literal) > MAX_DELIMITER_LENGTH:
                at = "" if isinstance(raw, str) else f"[{index}]"
                raise TemplateError(
                    f"{template_location(field_name, key)}{at} is {len(literal)} characters long; a literal delimiter may have at "
                    f"most {MAX_DELIMITER_LENGTH}: {_short(literal)}"
                )
    keys = _PATTERN_KEYS[2:] if field_name is None else _PATTERN_KEYS[:2]
    for key in keys:
        _check_pattern(spec.get(key), template_location(field_name, key))


class _Sizes(threading.local):
    total = 0  # unrolled size of the regexes of the template being checked, so far


_sizes = _Sizes()


def _check_pattern(pattern: Any, where: str) -> None:
    if not isinstance(pattern, str):
        return
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise TemplateError(
            f"{where} is {len(pattern)} characters long; a regex may have at most {MAX_PATTERN_LENGTH}: {_short(pattern)}"
        )
    size = pattern_size(pattern)
    if size > MAX_PATTERN_SIZE:
        raise TemplateError(
            f"{where} unrolls to {size} units when compiled (each counted repeat such as {{1000}} copies what it "
            f"repeats); a regex may unroll to at most {MAX_PATTERN_SIZE} (MAX_PATTERN_SIZE): {_short(pattern)}"
        )
    _sizes.total += size
    if _sizes.total > MAX_TEMPLATE_PATTERN_SIZE:
        raise TemplateError(
            f"{where}: the regexes of response_template unroll to more than {MAX_TEMPLATE_PATTERN_SIZE} units "
            f"together when compiled (MAX_TEMPLATE_PATTERN_SIZE; counted repeats such as {{1000}} copy what they repeat)"
        )


_COUNTED = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")
_BRACED_ESCAPE = re.compile(r"\\[pPNxuUgk][{<]")


def pattern_size(pattern: str) -> int:
    """About how large `regex` compiles `pattern`, counted without compiling it: every character 1 (an escape, a
    character class: 1), a group the sum of what it holds, and what a counted repeat (`{m}`, `{m,n}`, `{m,}`,
    `{,n}`) applies to, that many times (the larger bound), nested repeats multiplying. Text the count cannot read
    precisely is counted on the high side (a brace in a class counts as a repeat)."""
    totals = [0]  # the size so far of each group open around the position
    last = 0  # the size of the atom or group before the position (what a repeat applies to)
    position, end = 0, len(pattern)
    while position < end:
        char = pattern[position]
        if char == "\\":
            braced = _BRACED_ESCAPE.match(pattern, position)
            if braced is not None:
                closer = pattern.find("}" if pattern[braced.end() - 1] == "{" else ">", braced.end())
                position = end if closer < 0 else closer + 1
            else:
                position += 2
            last = 1
        elif char == "[":
            # the class ends at the first "]" that can end it (the earliest: what follows is counted, not skipped)
            inner = position + 1
            if inner < end and pattern[inner] == "^":
                inner += 1
            if inner < end and pattern[inner] == "]":
                inner += 1
            while inner < end and pattern[inner] != "]":
                inner += 2 if pattern[inner] == "\\" else 1
            position, last = inner + 1, 1
        elif char == "(":
            totals.append(0)
            position += 1
            continue
        elif char == ")":
            if len(totals) > 1:
                last = max(1, totals.pop())
            else:
                last = 1
            position += 1
        elif char == "{":
            counted = _COUNTED.match(pattern, position)
            if counted is None or not (counted.group(1) or counted.group(3)):
                position, last = position + 1, 1
            else:
                low = int(counted.group(1) or 0)
                high = int(counted.group(3)) if counted.group(3) else low
                copies = max(low, high, 1)
                totals[-1] += last * (copies - 1)
                last *= copies
                position = counted.end()
                continue
        else:
            position, last = position + 1, 1
        totals[-1] += last
    return sum(totals)


def _check_content_args(args: dict, where: str) -> None:
    """tag_pattern and string_delims, also inside nested value parsers (the depth is already bounded)."""
    _check_pattern(args.get("tag_pattern"), f"{where}.tag_pattern")
    delims = args.get("string_delims")
    if isinstance(delims, list):
        if len(delims) > MAX_LITERALS:
            raise TemplateError(f"{where}.string_delims lists {len(delims)} pairs; at most {MAX_LITERALS} are allowed")
        for index, pair in enumerate(delims):
            for side in pair if isinstance(pair, list) else ():
                if isinstance(side, str) and len(side) > MAX_DELIMITER_LENGTH:
                    raise TemplateError(
                        f"{where}.string_delims[{index}] holds a delimiter of {len(side)} characters; at most "
                        f"{MAX_DELIMITER_LENGTH} are allowed: {_short(side)}"
                    )
    parsers = []
    if isinstance(args.get("value_parser"), dict):
        parsers.append((args["value_parser"], f"{where}.value_parser"))
    by = args.get("value_parser_by")
    if isinstance(by, dict) and isinstance(by.get("parsers"), dict):
        parsers += [(parser, f"{where}.value_parser_by.parsers[{_short(str(capture), 40)}]") for capture, parser in by["parsers"].items()]
    for parser, inner in parsers:
        if isinstance(parser, dict) and isinstance(parser.get("args"), dict):
            _check_content_args(parser["args"], f"{inner}.args")


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str) -> int:
    """How many levels of arrays and objects `text` nests (brackets inside strings do not count)."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def load_json(text: str) -> Any:
    """`json.loads`, refusing nesting past `MAX_JSON_DEPTH` with `JSONTooDeepError` (a ValueError) instead of
    exhausting the Python stack (json.loads raises RecursionError near 1,000 levels)."""
    if not isinstance(text, str):  # (no text, as json.loads says: an optional group that matched nothing)
        return json.loads(text)
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and json_depth(text) > MAX_JSON_DEPTH:
        raise JSONTooDeepError(f"arrays and objects nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        return json.loads(text)
    except RecursionError:  # within the limit, but called from deep in the stack
        raise JSONTooDeepError("arrays and objects nested too deeply for the Python stack") from None

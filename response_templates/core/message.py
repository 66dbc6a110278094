"""Turning regions into the message: a closed region's text parsed by its field's content parser and transform
(`settle`), under the `malformed=` policy (`settle_checked`: raise, keep the raw text as content, or drop it), and the
finished message (`finish_message`). Shared by the streaming parser and the one-shot `parse_response`.
"""

from __future__ import annotations

import logging
import reprlib
import weakref
from typing import Any

from .content import TYPED_SYNTAX, unescape_attribute
from .delimiters import CONTEXT_KEPT, pattern_scan_item, timed_call
from .errors import (
    RegexTimeoutError,
    excerpt,
    grow_regex_budget,
)
from .template import CompiledTemplate
from .token_ids import strip_markers
from .tools import call_problem, type_tool_calls

logger = logging.getLogger("response_templates")

# What to do with a structured region whose text does not parse (see `malformed=`).
MALFORMED_POLICIES = ("raise", "content", "drop")
# Characters of a parse error quoted in a region_discard event.
ERROR_CHARS = 500

PREFIX_REQUIRED = (
    "prefix= is required: pass the prompt the model continued from, as text or token ids (chat templates often "
    "write the start of the assistant message, such as an opening <think>, and the parser must see it). If the "
    'output already holds the whole message, pass prefix="" (or []) to opt out.'
)


def trigger_hit(found: Any) -> bool:
    """A trigger search found something (`regex` reports an empty partial match at the end: not a hit)."""
    return found is not None and found.end() > found.start()


def field_value(field: Any, body: str, captures: dict) -> Any:
    """Parse a region's text with its field's content parser, then apply the field's transform."""
    grow_regex_budget(len(body))  # the content parser reads the whole region, however small the last chunk was
    try:
        value = field.parse(body, field.content_args)
    except RegexTimeoutError as error:
        raise RegexTimeoutError(f"field {field.name!r}: content_args.{error}") from None
    if field.build is None:
        return value
    if captures and field.content_args.get("unescape_attributes"):
        # the tool name is an attribute too (`<|open|>call tool="a&amp;b"<|sep|>`)
        captures = {name: unescape_attribute(text) for name, text in captures.items()}
    if not field.transform_each:
        return field.build({**captures, "content": value})
    if not isinstance(value, list):
        raise ValueError(f"field {field.name!r}: transform_each needs the parsed content to be a list, got {type(value).__name__}")
    shaped = []
    for item in value:
        if not isinstance(item, dict):
            raise ValueError(f"field {field.name!r}: transform_each needs every list item to be a dict, got {type(item).__name__}")
        shaped.append(field.build({**captures, **item}))
    return shaped


def check_malformed(policy: Any) -> str:
    """Validate a `malformed=` policy."""
    if not isinstance(policy, str) or policy not in MALFORMED_POLICIES:
        raise ValueError(f"malformed= must be one of {', '.join(map(repr, MALFORMED_POLICIES))}; got {policy!r}")
    return policy


# Compiled templates whose one-shot parses already warned of a prompt without the start anchor: id -> weak reference.
_WARNED: dict = {}


def prompt_tail(compiled: CompiledTemplate, prefix: str, *, once_per_template: bool) -> str:
    """What follows the last start anchor in the prompt, with a logged warning when the prompt holds none: the whole
    prompt is then parsed as if the model had written it (a wrong string passed as `prefix`, or prompt and output
    passed together), which would otherwise go by without a word. A streaming parser warns once (it reads one
    prompt); one-shot parses warn once per template, not once per message of a batch."""
    tail = compiled.truncate_prefix(prefix)
    if len(tail) == len(prefix):  # (a tail is what follows an anchor: as long as the prompt only when none was found)
        if once_per_template:
            seen = _WARNED.get(id(compiled))
            if seen is not None and seen() is compiled:
                return tail
            if len(_WARNED) >= 1024:
                _WARNED.clear()
            _WARNED[id(compiled)] = weakref.ref(compiled)
        anchor = compiled.start_anchor
        named = (
            "start_anchor " + " / ".join(excerpt(literal) for literal in anchor.literals)
            if anchor.literals is not None
            else f"start_anchor_pattern {excerpt(anchor.regex.pattern)}"
        )
        logger.warning(
            "the prefix (%d characters) does not contain the template's %s, so all of it is parsed as the start of "
            "the response; pass the prompt the model continued from (ending with the anchor), or prefix=\"\" to parse "
            "the output alone%s",
            len(prefix),
            named,
            " (said once per template for one-shot parses)" if once_per_template else "",
        )
    return tail


def check_truncated(truncated: Any) -> bool:
    """Validate a `truncated=` flag: True or False only (a list or a string such as "no" would read as true)."""
    if not isinstance(truncated, bool):
        raise TypeError(f"truncated= must be True or False, got {type(truncated).__name__} {reprlib.repr(truncated)}")
    return truncated


def discard_event(name: str, reason: str, raw: str, **extra: Any) -> dict:
    """The event that ends a region whose value is not returned (instead of its region_close)."""
    return {"type": "region_discard", "field": name, "reason": reason, "raw": raw, **extra}


def settle_checked(
    compiled: CompiledTemplate,
    field: Any,
    body: str,
    open_text: str,
    close_text: str,
    captures: dict,
    output: dict,
    tool_params: dict,
    strip: bool,
    malformed: str,
) -> tuple[Any, list | None]:
    """`settle` a closed region under the `malformed=` policy. Returns `(value, None)`, or `(None, events)` when the
    region's text does not parse and the policy is "content" or "drop": a `region_discard` event, followed with
    "content" by the events of the content region that received the region's raw text (delimiters included)."""
    try:
        # (under "content" and "drop", a call without a name or with arguments that are JSON of something other than
        # an object is malformed too: a client cannot run it; under "raise", as transformers, it is kept as parsed)
        return settle(field, body, captures, output, tool_params, strip, malformed != "raise"), None
    except RegexTimeoutError:
        raise  # a hostile template, not a damaged output
    except (ValueError, RecursionError) as error:
        if malformed == "raise":
            raise
        problem = str(error) or type(error).__name__
    raw = open_text + body + close_text
    shown = strip_markers(raw) if strip else raw
    if len(problem) > ERROR_CHARS:
        problem = problem[:ERROR_CHARS] + "…"
    logger.debug("malformed %r region %s (malformed=%r): %s", field.name, "kept as content" if malformed == "content" else "dropped", malformed, problem)
    events = [discard_event(field.name, "malformed", shown, error=problem, policy=malformed)]
    if malformed == "content":
        target, value = keep_as_content(compiled, raw, output, strip)
        events += [
            {"type": "region_open", "field": target},
            {"type": "region_chunk", "field": target, "text": shown, "dirty": False},
            {"type": "region_close", "field": target, "value": value},
        ]
    return None, events


def keep_as_content(compiled: CompiledTemplate, raw: str, output: dict, strip: bool) -> tuple[str, Any]:
    """Store a malformed region's raw text as a region of the `content` field (or of the implicit field when that is
    the text field), in order with the rest of it. Returns (the field's name, the region's value)."""
    target = compiled.fields.get("content")
    if target is None or target.content != "text":
        implicit = compiled.fields.get(compiled.implicit) if compiled.implicit is not None else None
        target = implicit if implicit is not None and implicit.content == "text" else None
    if target is not None:
        return target.name, settle(target, raw, {}, output, {}, strip)
    # No text field to hold it: a plain "content" string, regions joined by a blank line.
    value = (strip_markers(raw) if strip else raw).strip()
    earlier = output.get("content")
    output["content"] = earlier + "\n\n" + value if isinstance(earlier, str) and earlier else value
    return "content", value


def cut_safe(found: tuple, text: str, pos: int) -> bool:
    """Whether a close delimiter found in a truncated output is a close whatever text would have followed: no
    continuation may drop it or change its named groups (its end may still grow). Only closes that end within
    `CONTEXT_KEPT` characters of the cut are examined, from their start (a match that could begin earlier is not
    looked for)."""
    item, start, end, groups = found
    if item.kind != "close":
        return True
    delimiter = item.delimiter
    length = len(text)
    if delimiter.literals is not None:
        # a longer literal that starts before this one and runs to the end could still win
        longest = max(map(len, delimiter.literals))
        for at in range(max(pos, length - longest + 1), start):
            tail = text[at:]
            if any(len(literal) > len(tail) and literal.startswith(tail) for literal in delimiter.literals):
                return False
        return True
    if length - end > CONTEXT_KEPT:
        return True  # far from the cut: library patterns look ahead a few characters at most
    match, hold = pattern_scan_item(item, text, start, False)
    if match is not None and match.start() == start and hold > start:
        return True  # final as it stands (what streaming commits before the end)
    # Undecided: fine if only its end may still grow. Every continuation the pattern spells must leave a match at
    # the same place with the same named groups.
    pattern = delimiter.regex
    offset = max(0, start - CONTEXT_KEPT)
    window = text[offset:]
    for probe in delimiter.probes or ("\x00",):
        extended = timed_call(item, pattern.match, window + probe, start - offset)
        if extended is None or (groups is not None and extended.groupdict() != groups):
            return False
    return True


def settle(
    field: Any, body: str, captures: dict, output: dict, tool_params: dict, strip: bool, check_calls: bool = False
) -> Any:
    """Compute a closed region's value and store it in the message (set, appended, or joined). Returns the value.
    With `check_calls`, a `tool_calls` value holding a call a client cannot run raises ValueError (see call_problem)."""
    value = field_value(field, body, captures)
    if strip:
        value = strip_markers(value)
    if tool_params and "value_parser_by" not in field.content_args:
        value = type_tool_calls(
            value, tool_params, field.content in TYPED_SYNTAX, nested="nested_elements" in field.content_args
        )
    name = field.name
    if check_calls and name == "tool_calls":
        problem = call_problem(value, shaped_only=True)
        if problem is not None:
            raise ValueError(problem)
    if field.join is not None:
        if not isinstance(value, str):
            raise ValueError(f"field {name!r}: 'join' needs each match to parse to a string, got {type(value).__name__}")
        earlier = output.get(name)
        output[name] = value if earlier is None else earlier + field.join + value
    elif field.repeats:
        output.setdefault(name, []).append(value)
    else:
        output[name] = value
    return value


def finish_message(compiled: CompiledTemplate, output: dict) -> dict:
    """Enforce `optional: false` fields, then drop empty values (defaults are always kept)."""
    if compiled.required:
        missing = [name for name in compiled.required if name not in output]
        if missing:
            raise ValueError(f"required field(s) {missing} (optional: false) did not appear in the output")
    for value in output.values():
        if not value:
            break
    else:
        return output  # nothing empty to drop (the common case)
    defaults = compiled.defaults
    return {
        key: value
        for key, value in output.items()
        if key in defaults or not (value is None or (not value and isinstance(value, (str, list, dict))))
    }

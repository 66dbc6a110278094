"""Tool-call syntax written as markup: special-token envelopes, Python calls (`[f(a=1)]`), XML-like parameters
(`<parameter=city>`, `<arg_key>`), and grounded answers (cited spans).
"""

from __future__ import annotations

import re
from typing import Any

from ...core.errors import InferenceError
from .probes import (
    CALL_A,
    CALL_B,
    TOKEN,
    Renderer,
    alternation,
    common_prefix_len,
    common_suffix_len,
    esc,
    esc_loose,
    generalise,
    optional,
    split_repeat,
    text_tail,
    user_message,
)
from .turns import Calls, Reasoning, Turn

# A special token: a marker the tokenizer writes as one piece (<|tool_call_end|>, <｜tool▁call▁end｜>), which a model
# cannot spell out character by character inside a JSON string.
_SPECIAL_TOKEN = re.compile(r"<\|[^<>|\s]+\|>|<｜[^<>]+｜>")


def special_token_close(call_close: str, block_close: str) -> str:
    """Damaged output: a call closed by a special token ends there even when its arguments do not end in '}'.

    The '}' guard of JSON arguments keeps closing markup written inside a string value in the arguments; a special
    token cannot be written there, so when the close is one, arguments cut short before it (broken JSON) end at it
    and are kept as the text the model wrote (allow_non_json), and the calls after it are still read.
    """
    close = call_close.strip()
    if not _SPECIAL_TOKEN.fullmatch(close):
        return ""
    return r"|(?<!\})\s*" + esc(close) + text_tail(block_close)


def stray_call_tokens(calls: Calls | None, turn: Turn, reasoning: Reasoning | None) -> list[str]:
    """Damaged output: the special tokens that separate or close the parts of a call, met in the content outside any
    call, are markup the model emitted by mistake: dropped from the content, the text around them kept.

    Only special tokens (no text spelling) the chat template writes in calls alone: not the ones that open a call,
    nor the ones of the turn's other markup (its header and end, the content and reasoning sections), which keep
    their meaning. A policy of every inferred template whose calls use such tokens (Kimi K2's library entry does
    the same).
    """
    tokens = _stray_tokens(calls, turn, reasoning)
    return [r"\s*" + alternation(tokens)] if tokens else []


def _stray_tokens(calls: Calls | None, turn: Turn, reasoning: Reasoning | None) -> list[str]:
    if calls is None:
        return []
    other = [calls.literal.get("block_open") or "", calls.literal.get("call_open") or "", turn.end, *turn.extra_ends,
             *turn.anchors, turn.prefill, turn.content_open, turn.content_close]
    if reasoning is not None:
        other += [reasoning.open, reasoning.close] + [x for pair in reasoning.also for x in pair]
    other_text = "\n".join(o for o in other if o)
    tokens = []
    for key in ("after_name", "call_close", "block_close"):
        for token in _SPECIAL_TOKEN.findall(calls.literal.get(key) or ""):
            if token not in other_text and token not in tokens:
                tokens.append(token)
    return tokens


def damaged_output_reasons(calls: Calls | None, turn: Turn, reasoning: Reasoning | None, reasons: list[str]) -> None:
    """Say which robustness policies apply to this template (not verified: the chat template does not write them)."""
    if calls is None:
        return
    if calls.literal.get("empty_call"):
        reasons.append(f"tool calls: by policy (XML) a call without parameters may be written as an empty element "
                       f"({calls.literal['empty_call']!r}; not verified)")
    if calls.kind == "name_json" and special_token_close(calls.literal.get("call_close") or "", ""):
        reasons.append(f"tool calls: by policy a call also ends at {calls.literal['call_close'].strip()!r} when its "
                       "JSON arguments are broken (kept as text; not verified)")
    tokens = _stray_tokens(calls, turn, reasoning)
    if tokens:
        reasons.append(f"content: by policy the call tokens {', '.join(tokens)} met outside a call are dropped from "
                       "the content (not verified)")


# Keyword arguments of a Python call (key=value, ...), for xml-inline: the group `t` says how the value is written.
# A single-quoted value ends at the quote before the next keyword (chat templates do not escape inner quotes).
_KWARG = (r"(?P<key>[A-Za-z_]\w*)\s*=\s*(?:(?P<t>')(?P<value>.*?)'|(?P<value>(?P<t>\")(?:[^\"\\]|\\.)*\")"
          r"|(?P<value>(?P<t>True|False|None))|(?P<t>)(?P<value>.*?))\s*(?=,\s*[A-Za-z_]\w*\s*=|\Z)")
_KWARG_VALUES = {
    "'": {"name": "text", "args": {"strip": False}},
    '"': {"name": "json", "args": {"allow_non_json": True}},
    "True": {"name": "bool"}, "False": {"name": "bool"},
    "None": {"name": "json", "args": {"string_delims": [["None", "None"]], "allow_non_json": True}},
    "": {"name": "json", "args": {"string_delims": [["'", "'"]], "allow_non_json": True}},
}


def python_lines(one, two, start, reasons) -> Calls | None:
    """Python calls written one per line inside a block (<function_calls>\nname(key=value)\n</function_calls>):
    each line is a call, its keyword arguments read one by one."""
    end = one.rindex(")") + 1
    before, after = one[:start], one[end:]
    # (the caller found CALL_B's line in `two`)
    between = two[two.index(")") + 1: re.search(r"(?m)^[ \t]*" + re.escape(CALL_B[0]) + r"\(", two).start()]  # type: ignore[union-attr]
    if not before.strip() or not after.strip() or between.strip():
        return None  # only calls in a block, one per line
    block_open, block_close = esc(before.strip()), esc(after.strip())
    ident = r"[A-Za-z_][\w.-]*"
    calls = Calls(kind="python", content="xml-inline")
    calls.open = (r"\s*" + block_open + r"\s*(?P<name>" + ident + r")\(|(?<=\)[ \t]*\n)[ \t]*(?P<name>" + ident
                  + r")\((?<=" + block_open + "(?:(?!" + block_close + r")[\s\S])*)")
    calls.close = r"\)[ \t]*(?:\n(?=[ \t]*" + ident + r"\()|\s*" + block_close + ")"
    calls.end_guard = r"\)"
    calls.partial_open = block_open + r"\s*(?:" + ident + r"\([^\n)]*)?"
    calls.content_args = {"tag_pattern": _KWARG, "value_parser_by": {"group": "t", "parsers": _KWARG_VALUES}}
    calls.transform = {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}
    calls.literal = {"block_open": before, "block_close": after, "arguments": "Python calls, one per line"}
    return calls


def python_calls(one, start) -> Calls:
    end = one.rindex("]") + 1
    before, after = one[:start], one[end:]
    calls = Calls(kind="python", content="python-call-list", repeats=False, transform_each=True)
    lead = r"(?=\[\s*[A-Za-z_][A-Za-z0-9_.-]*\s*\()"
    if re.search(r"\[\s*[A-Za-z_][\w.-]*\s*\(\s*[A-Za-z_]\w*\s*=", one[start:end]):
        # The chat template writes keyword arguments: a call list starts with name( and a keyword or ')', so a
        # bracketed expression in prose ([f(x)]) is not a call.
        lead = r"(?=\[\s*[A-Za-z_][A-Za-z0-9_.-]*\s*\(\s*(?:\)|[A-Za-z_][A-Za-z0-9_]*\s*=))"
    calls.open = r"\s*" + (esc(before.strip()) + r"\s*" if before.strip() else "") + lead
    calls.close = r"(?<=\)\s*\])" + (r"\s*" + esc(after.strip()) if after.strip() else "")
    if before.strip():
        calls.partial_open = esc(before.strip()) + r"\s*"
    calls.transform = {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}}
    calls.end_guard = r"(?<=\])"
    calls.literal = {"block_open": before, "block_close": after, "arguments": "Python call list"}
    _python_close_outside_strings(calls, one[start:end])
    return calls


def _python_close_outside_strings(calls: Calls, rendered: str) -> None:
    """A Python call list with no closing markup ends at its ')]', but string values may hold ')]' too.

    The chat template writes string values quoted ("Paris" or 'Paris'), and a quoted value may contain any text. A
    ')]' ends the list when the text after it, up to the next quote, reaches a line break or the end of the text, or
    a quote that does not end a value (one followed by ',', ')', ']' or '}' ends a value: that ')]' was inside a
    string). Text after a real end rarely starts that way (a model writing text after its calls writes words). Past
    200 characters without a quote or a line break, the ')]' ends the list. Written as a lookahead that holds (not
    one that must fail), so a stream cut right after ')]' waits for the text that decides. Only when no markup closes
    the list: closing markup after ')]' is evidence enough.
    """
    quoted = re.escape(CALL_A[1]["city"])
    if calls.close != r"(?<=\)\s*\])" or not re.search(r"=\s*([\"'])" + quoted + r"\1", rendered):
        return  # closing markup follows the list, or string values are not written quoted
    text = r"(?:[^\"'\\\n]|\\.)"  # up to the next quote or line break
    calls.close += r"(?=" + text + r"{0,200}(?:\n|\Z|[\"']\s*(?:[^\s,)\]}]|\Z))|" + text + "{200})"


def xml_calls(r, turn, one, two, reasons) -> Calls:
    """Parameters as markup around each key and value, e.g. <parameter=city>Paris</parameter>."""
    name, arguments = CALL_A
    at = one.index(name)
    keys = list(arguments)
    k1 = one.index(keys[0], at + len(name))
    v1 = one.index(str(arguments[keys[0]]), k1 + len(keys[0]))
    k2 = one.index(keys[1], v1)
    v2 = one.index(str(arguments[keys[1]]), k2 + len(keys[1]))
    t0 = one[at + len(name):k1]  # header tail + key prefix
    t1 = one[v1 + len(str(arguments[keys[0]])):k2]  # value suffix + separator + key prefix
    t2 = one[v2 + len(str(arguments[keys[1]])):]  # value suffix + call close
    infix1 = one[k1 + len(keys[0]):v1]
    infix2 = one[k2 + len(keys[1]):v2]
    key_prefix = _cut_after_token(t1[len(t1) - common_suffix_len(t0, t1):])
    value_suffix = _cut_to_token(t1[:common_prefix_len(t1, t2)])
    if not key_prefix.strip() or not value_suffix.strip():
        raise InferenceError(f"tool calls: parameter markup not found around keys and values in {one!r}")
    key_prefix = _after_value_suffix(t1, value_suffix, key_prefix)
    header_tail = t0[: t0.rindex(key_prefix.strip())]
    call_close_all = t2[t2.index(value_suffix.strip()) + len(value_suffix.strip()):]
    head = one[:at]
    infix = _infix_pattern(infix1, infix2)
    if not re.search(r"</|\|>", infix1) and not infix.endswith(r"\n?"):
        infix += r"\n?"
    # One newline on each side of a value is markup (<parameter=x>\nvalue\n</parameter>); the rest is the value.
    # A parameter ends at its closing markup followed by the next parameter, the call's closing markup or the
    # end, so the same markup written inside a value does not end it.
    followers = [esc(key_prefix.strip())] + [re.escape(t.group(0)) for t in TOKEN.finditer(call_close_all)]
    followers += [re.escape(t.group(0)) for t in TOKEN.finditer(head)][-1:]
    follow = "(?=\\s*(?:" + "|".join(dict.fromkeys(followers)) + r"|\Z))"
    # Models sometimes drop a parameter's closing markup: the next parameter or the call's end ends it too.
    value = r"(?P<value>.*?)"
    if "<![CDATA[" in r.source:
        # The chat template wraps values holding markup in a CDATA section: its content is the value.
        value = r"(?:<!\[CDATA\[(?P<value>.*?)\]\]>(?=\n?" + esc(value_suffix.strip()) + r")|(?P<value>.*?))"
    # A newline the chat template writes after a value is markup; otherwise whitespace at the end of a value is
    # the value's own.
    # When the key sits in the value's opening tag (<parameter=city>, <parameter name="city">), models of that
    # lineage put the value on lines of its own whatever the chat template writes: one newline on each side is
    # markup. When key and value are separate elements (<arg_key>city</arg_key><arg_value>...), it is data.
    own_tag = not re.search(r"</|\|>", infix1)
    newline = r"\n?" if value_suffix.startswith("\n") or own_tag else ""
    # A key may hold spaces (<parameter=first name>), not at its ends.
    tag = (esc(key_prefix.strip()) + r"(?P<key>[^\s<>\"'=|](?:[^\n<>\"'=|]*[^\s<>\"'=|])?)" + infix + value + r"(?:" + newline
           + esc(value_suffix.strip()) + follow + r"|\s*(?=" + esc(key_prefix.strip()) + r"|\Z))")
    # Split the head and the close into what each call repeats and what wraps them all.
    block_open, call_head, call_close, block_close = "", head, call_close_all, ""
    between = ""
    if two is not None and CALL_B[0] in two:
        b = two.index(CALL_B[0])
        last_value = two.rfind(value_suffix.strip(), 0, b)
        if last_value >= 0:
            mid = two[last_value + len(value_suffix.strip()):b]
            block_open, call_head, call_close, block_close = split_repeat(head, call_close_all, mid)
            between = mid[len(call_close): len(mid) - len(call_head)]
    if not call_head.strip() and not block_open.strip():
        raise InferenceError("tool calls: no marker before the call's name")
    calls = Calls(kind="xml", content="xml-inline")
    stop = header_tail.strip()[:1]
    name_chars = "[^\\s<>\"'" + (re.escape(stop) if stop and stop not in "<>\"'" else "") + "]+"
    calls.open = (r"\s*" + optional(block_open) + generalise(call_head.strip()) + r"\s*(?P<name>" + name_chars + ")"
                  + _header_tail_pattern(header_tail))
    parts = call_head.split()
    if len(parts) > 1 and not block_open.strip():
        # Models sometimes drop the outer opener (<tool_call>) and write the inner one (<function=...>) alone:
        # accept it when parameters or the call's closing markup follow.
        first_close = TOKEN.search(call_close)
        ahead = [esc(key_prefix.strip())] + ([re.escape(first_close.group(0))] if first_close else [])
        calls.open = (r"\s*(?:" + esc(parts[0]) + r"\s*" + generalise(" ".join(parts[1:])) + "|"
                      + generalise(" ".join(parts[1:])) + r"(?=[^\n<>]*" + _header_tail_pattern(header_tail, name_chars)
                      + r"\s*(?:" + "|".join(ahead) + r")))\s*(?P<name>" + name_chars + ")"
                      + _header_tail_pattern(header_tail))
    self_closing = _self_closing_call(calls, call_head, header_tail, call_close, block_close, name_chars)
    calls.open = _after_separator(calls.open, between)
    ending = esc(call_close.strip())
    # A call ends at its closing markup right after a complete parameter (or right after the header when it has
    # none), so the same markup written inside a value does not end it.
    calls.close = (r"\s*" + ending + text_tail(block_close)) if ending else r"\s*" + text_tail(block_close)
    guards = [f"(?<={re.escape(g)})" for g in dict.fromkeys([value_suffix.strip()[-1],
                                                              (header_tail.strip() or call_head.strip())[-1:]]) if g]
    if not header_tail.strip():
        # No markup after the name: a call without parameters closes right after its name.
        guards.append("(?<=" + generalise(call_head.strip()) + r"\s*" + name_chars + r"\s*)")
    if len(TOKEN.findall(call_close)) < 2:
        # A one-marker close could be written inside a value; a sequence of markers (</function></tool_call>)
        # is specific enough on its own.
        calls.close = "(?:" + "|".join(guards) + ")" + calls.close
    # A call the model did not close before opening the next one still ends there.
    calls.close += "|" + "(?:" + "|".join(guards) + r")\s*(?=" + generalise(call_head.strip()) + ")"
    calls.close += self_closing
    calls.close = _outside_cdata(calls.close, r.source)
    # A generation cut inside the call's header leaves no markup behind: the block opener alone, or the header cut
    # after any of its words (<｜GCML｜invoke na).
    words = call_head.split()
    heads = [generalise(" ".join(words[:i])) for i in range(len(words), 0, -1)]
    calls.partial_open = ("(?:" + optional(block_open) + "(?:" + "|".join(heads) + r")[^<>\n]*"
                          + ("|" + esc(block_open.strip()) if block_open.strip() else "") + ")")
    # Values stay text as written (the tools' schemas type them); _check retries with JSON values if verify
    # needs them.
    calls.content_args = {"tag_pattern": tag, "value_parser": {"name": "text", "args": {"strip": False}}}
    typed = _typed_infix(infix1, infix2) if infix1 != infix2 else None
    if typed is not None:
        # The markup says which values are strings (the probe's first value is a string, its second a number):
        # those stay text, the others are JSON.
        json_values = {"name": "json", "args": {"allow_non_json": True}}
        calls.content_args["value_parser"] = json_values
        calls.content_args["value_parser_by"] = {"group": "vtype", "parsers": {
            typed[1]: {"name": "text", "args": {"strip": False}}, typed[2]: json_values}}
    calls.transform = {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}
    calls.literal = {"block_open": block_open, "call_open": call_head, "after_name": header_tail,
                     "parameter_open": key_prefix, "key_value_separator": infix1, "parameter_close": value_suffix,
                     "call_close": call_close, "block_close": block_close, "arguments": "XML-style parameters"}
    if self_closing:
        calls.literal["empty_call"] = call_head.strip() + "NAME" + header_tail.rstrip()[:-1] + "/>"
    return calls


def _after_value_suffix(between: str, value_suffix: str, key_prefix: str) -> str:
    """The key's opening markup, without a marker it shares with the value's closing markup: between two
    parameters (`<|close|>argument<|sep|><|open|>argument key="`) the common prefix and the common suffix may both
    claim the same marker (`<|sep|>`); it closes the value."""
    at = between.find(value_suffix.strip())
    rest = between[at + len(value_suffix.strip()):] if at >= 0 else between
    if at < 0 or rest.rstrip().endswith(key_prefix.strip()) or not rest.strip():
        return key_prefix
    return _cut_after_token(rest)


def _self_closing_call(calls: Calls, call_head: str, header_tail: str, call_close: str, block_close: str,
                       name_chars: str) -> str:
    """XML: a call header that is an element's start tag (<invoke name="NAME">) closed by that element's end tag
    (</invoke>) may be written as an empty element (<invoke name="NAME"/>): a call without parameters.

    Widens calls.open to accept the empty-element form and returns the close alternative for it (right after such a
    header), or "" when the markup is not an element with its end tag.
    """
    head, tail, close = call_head.strip(), header_tail.rstrip(), call_close.strip()
    element = re.match(r"<([^\s<>/=\"']+)\s", head)
    if not element or not tail.endswith(">") or tail.endswith("/>") or CALL_A[0] in tail:
        return ""
    if not re.fullmatch(r"</" + re.escape(element.group(1)) + r"\s*>", close):
        return ""
    full, empty = _header_tail_pattern(header_tail), generalise(tail[:-1]) + r"\s*/>"
    if not calls.open.endswith(full):
        return ""
    calls.open = calls.open[: len(calls.open) - len(full)] + generalise(tail[:-1]) + r"\s*/?>"
    return "|(?<=" + generalise(head) + r"\s*" + name_chars + empty + ")" + text_tail(block_close)


def _header_tail_pattern(header_tail: str, name_chars: str | None = None) -> str:
    """A regex for the markup after a call's name. The header may write the name again (to=NAME<|message|>
    <invoke name="NAME">): the second time it is the same name (a backreference, or `name_chars` where the name
    has not been read yet)."""
    text, name = header_tail.rstrip(), CALL_A[0]
    if name not in text:
        return generalise(text)
    return ("(?P=name)" if name_chars is None else name_chars).join(generalise(part) for part in text.split(name))


def _after_separator(open_pattern: str, between: str) -> str:
    """Markup the chat template writes between two calls besides each call's own (a message end and a new message
    header, <|eom|><|start|>assistant): accepted before a call's opener, whole or from any of its markers on (an
    earlier section may have ended with the first of them)."""
    if not between.strip() or not open_pattern.startswith(r"\s*"):
        return open_pattern
    text = between.strip()
    starts = [m.start() for m in TOKEN.finditer(text)] or [0]
    tails = [esc_loose(text[at:]) for at in dict.fromkeys([0] + starts)]
    return r"\s*(?:(?:" + "|".join(tails) + r")\s*)?" + open_pattern[len(r"\s*"):]


def _outside_cdata(close: str, source: str) -> str:
    """When the chat template wraps values in CDATA sections, markup inside an open section is data: the call's
    closing markup counts only outside one (checked after it matched, so only where that markup is)."""
    if "<![CDATA[" not in source:
        return close
    return "(?:" + close + r")(?<!<!\[CDATA\[(?:(?!\]\]>)[\s\S])*)"


def _infix_pattern(a: str, b: str) -> str:
    # A newline the chat template writes before a value is markup (models may leave it out); whitespace between
    # two markers is layout.
    if a == b:
        return esc_loose(a.rstrip("\n")) + (r"\n?" if a.endswith("\n") else "")
    typed = _typed_infix(a, b)
    if typed is not None:
        head, first, second, tail = typed
        # Any type word is accepted: the probes show the string one and one other; the other types a schema names
        # (boolean, array, object) are JSON values like the number.
        return esc_loose(head) + r"(?P<vtype>\w+)" + esc(tail)
    p = common_prefix_len(a, b)
    s = min(common_suffix_len(a, b), min(len(a), len(b)) - p)
    return esc(a[:p]) + "[^<>]*?" + esc(a[len(a) - s:])


def _typed_infix(a: str, b: str) -> tuple[str, str, str, str] | None:
    """(head, word for a string value, word for another value, tail) when the markup between a key and its value
    differs by one word with the value's type (string="true" / string="false"), else None."""
    p = common_prefix_len(a, b)
    s = min(common_suffix_len(a, b), min(len(a), len(b)) - p)
    while p and a[p - 1].isalnum():
        p -= 1
    while s and a[len(a) - s].isalnum():
        s -= 1
    first, second = a[p:len(a) - s], b[p:len(b) - s]
    if re.fullmatch(r"\w+", first) and re.fullmatch(r"\w+", second) and first != second:
        return a[:p], first, second, a[len(a) - s:]
    return None


def _cut_to_token(text: str) -> str:
    """Trim a common prefix back to the end of its last complete marker ('</x>\\n<' -> '</x>')."""
    stripped = text.rstrip()
    ends = [m.end() for m in TOKEN.finditer(stripped)]
    return stripped[: ends[-1]] if ends and ends[-1] < len(stripped) else stripped


def _cut_after_token(text: str) -> str:
    """Trim a common suffix forward to the start of its first complete marker ('>\\n<parameter=' -> '<parameter=')."""
    stripped = text.lstrip()
    starts = [m.start() for m in re.finditer(r"[<\[｜]", stripped)]
    if starts and starts[0] > 0:
        return stripped[starts[0]:]
    return stripped


# Render switches that turn on grounded answers (cited spans), tried only when the chat template reads them, with
# documents: the prompt then describes the citation markup the model writes. (A short list of switch names seen in
# chat templates, not read from the rendering: a template with another name for it keeps its citations as text.)
_GROUNDING_SWITCHES = (("enable_citations", True), ("grounding", "enabled"), ("citation_mode", "accurate"))
_DOCUMENTS = [{"title": "DOCUMENT_TITLE_PROBE", "text": "DOCUMENT_TEXT_PROBE"}]


def citation_markup(r: Renderer, reasons: list[str]) -> tuple:
    """(span open tag, close tag head) when the prompt, rendered with documents and grounding on, shows an example
    of cited span markup: a tag pair whose closing tag lists the sources (<co>span</co: 0:[1,2]>)."""
    kwargs: dict[str, Any] = {"documents": _DOCUMENTS}
    kwargs.update({k: v for k, v in _GROUNDING_SWITCHES if re.search(r"\b%s\b" % k, r.source)})
    other = Renderer(r.source, dict(r.kwargs, **kwargs))
    other.tools_always = r.tools_always
    try:
        text = other.render([user_message()], True, True)
    except Exception:
        return ()
    match = re.search(r"<(\w+)>\w+</\1(:[^<>\"\n]*)>", text)
    if not match:
        return ()
    reasons.append(f"content: grounded answers mark cited spans as {match.group(0)!r} (described by the prompt "
                   "with documents): the markers are dropped, the cited text kept in place")
    return f"<{match.group(1)}>", f"</{match.group(1)}:"


def citation_spans(turn: Turn, content: dict, closes: list[str]) -> None:
    """Cited-span markers end a piece of content (no whitespace taken: it is the text's own) and the text after
    them continues it, so 'foo <co>bar</co: 0:[1]>.' reads 'foo bar.'."""
    if not turn.citation:
        return
    opening, closing = re.escape(turn.citation[0]), re.escape(turn.citation[1]) + r"[^<>\n]{0,200}>"
    closes += [opening, closing]
    if "open_pattern" in content:  # an explicit field: the text after a marker opens it again
        content["open_pattern"] += "|(?<=" + opening + ")|(?<=" + closing + ")"

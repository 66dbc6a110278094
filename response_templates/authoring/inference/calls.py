"""Tool-call syntax written as JSON: a call object (`{"name": ..., "arguments": ...}`) or a list of them, in a
block or not, or a name followed by JSON arguments; found by rendering one and two calls and reading the envelope
around the known arguments.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...core.errors import InferenceError
from .markup import python_calls, python_lines, special_token_close, xml_calls
from .probes import (
    CALL_A,
    CALL_B,
    CONTENT,
    TOKEN,
    Renderer,
    alternation,
    esc,
    generalise,
    optional,
    split_repeat,
    text_tail,
)
from .turns import Calls, Turn, call_generation


def _json_values(text: str):
    """(start, end, value) of every JSON object or array that starts somewhere in `text`."""
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                value, end = decoder.raw_decode(text, i)
            except ValueError:
                continue
            yield i, end, value


def _call_object_keys(value: Any, name: str, arguments: dict) -> tuple[str, str] | None:
    """(name key, arguments key) if `value` is one call written as a JSON object."""
    if not isinstance(value, dict):
        return None
    name_key = next((k for k, v in value.items() if v == name), None)
    args_key = next((k for k, v in value.items() if v == arguments), None)
    if name_key and args_key:
        return name_key, args_key
    return None


def infer_calls(r: Renderer, turn: Turn, reasons: list[str]) -> Calls | None:
    calls: Calls | None
    one = call_generation(r, turn, [CALL_A])
    try:
        two = call_generation(r, turn, [CALL_A, CALL_B])
        if CALL_B[0] not in two:
            raise InferenceError("the second call is not rendered")
    except Exception as error:
        reasons.append(f"parallel calls: not rendered by the chat template ({error})")
        two = None
    name, arguments = CALL_A
    # 1. A JSON object or array holding name and arguments together.
    for start, end, value in _json_values(one):
        keys = _call_object_keys(value, name, arguments)
        if keys:
            return _json_object_calls(one, two, start, end, keys, reasons)
        if isinstance(value, list) and value and _call_object_keys(value[0], name, arguments):
            return _json_array_calls(one, start, end, _call_object_keys(value[0], name, arguments))
    # 2. The name in the call's header, JSON arguments after it.
    for start, end, value in _json_values(one):
        if value == arguments and name in one[:start]:
            return _name_json_calls(one, two, start, end, reasons)
    # 2b. The name in the header, arguments in a JSON-like object (unquoted keys, custom string quotes).
    loose = _loose_json_arguments(one, name, arguments)
    if loose is not None:
        start, end, content_args = loose
        calls = _name_json_calls(one, two, start, end, reasons)
        calls.content_args = content_args
        calls.literal["arguments"] = f"JSON-like object after the name ({content_args})"
        return calls
    # 3. A Python call list.
    match = re.search(r"\[\s*" + re.escape(name) + r"\(", one)
    if match:
        return python_calls(one, match.start())
    # 3b. Python calls one per line in a block, without list brackets.
    match = re.search(r"(?m)^[ \t]*" + re.escape(name) + r"\(\s*[A-Za-z_]\w*\s*=", one)
    if match and two is not None and re.search(r"(?m)^[ \t]*" + re.escape(CALL_B[0]) + r"\(", two):
        calls = python_lines(one, two, match.start(), reasons)
        if calls is not None:
            return calls
    # 4. XML-style parameters: the keys and values appear as text.
    if name in one and all(k in one for k in arguments) and "Paris" in one:
        return xml_calls(r, turn, one, two, reasons)
    reasons.append(f"tool calls: argument syntax not recognised in {one!r}")
    return None


def _loose_json_arguments(one: str, name: str, arguments: dict):
    """(start, end, json content_args) when the arguments after the name are JSON with unquoted keys and/or
    custom string delimiters (Gemma's {city:<|"|>Paris<|"|>}), checked by parsing them back."""
    from ...core.content import parse_json

    brace = one.find("{", one.index(name) + len(name))
    last = one.rfind("}")
    if brace < 0 or last < brace:
        return None
    text = one[brace:last + 1]
    key = next(k for k, v in arguments.items() if isinstance(v, str))
    match = re.search(re.escape(key) + r'"?\s*:\s*(.*?)' + re.escape(arguments[key]) + r"(.*?)\s*[,}]", text)
    if not match:
        return None
    args: dict = {}
    if re.search(r"[{,]\s*" + re.escape(key) + r"\s*:", text):
        args["unquoted_keys"] = True
    if match.group(1) != '"':
        args["string_delims"] = [[match.group(1), match.group(2)]]
    try:
        parsed = parse_json(text, args)
    except ValueError:
        return None
    if parsed != arguments or not args:
        return None
    # In such a dialect the model may write keys it cannot express (city-name:): keep those arguments as text
    # rather than losing the call.
    return brace, last + 1, dict(args, allow_non_json=True)


def _envelope(one: str, start: int, end: int, two: str | None, second: tuple[int, int] | None):
    """(block open, call open, call close, block close) around one call at one[start:end]."""
    before, after = one[:start], one[end:]
    if two is None or second is None:
        return "", before, after, ""
    return split_repeat(before, after, two[second[0]:second[1]])


def _json_object_calls(one, two, start, end, keys, reasons) -> Calls:
    name_key, args_key = keys
    second = None
    if two is not None:
        spans = [(s, e) for s, e, v in _json_values(two) if _call_object_keys(v, CALL_A[0], CALL_A[1])
                 or _call_object_keys(v, CALL_B[0], CALL_B[1])]
        if len(spans) >= 2:
            second = (spans[0][1], spans[1][0])
    block_open, call_open, call_close, block_close = _envelope(one, start, end, two, second)
    calls = Calls(kind="json_object")
    head = optional(block_open) + esc(call_open.strip())
    lead = r"\{\s*" + re.escape(json.dumps(name_key)) + r"\s*:" if not call_open.strip() else ""
    if lead and not block_open.strip() and list(json.loads(one[start:end]))[:2] == [name_key, args_key]:
        # No markup at all: the object opens a call only when it starts as the chat template writes a call (the
        # name, then the arguments key), so a JSON answer with a "name" key stays content.
        lead += r'\s*"(?:[^"\\]|\\.)*"\s*,\s*' + re.escape(json.dumps(args_key)) + r"\s*:"
    if call_open.strip():
        calls.open = r"\s*" + head + r"\s*(?:```(?:json)?\s*)?(?=\{)"
    elif block_open.strip() and block_close.strip():
        # Calls listed inside a block with no markup of their own: the block's opener opens the first; the next
        # objects open calls only after a block was opened (a JSON object in plain text is not a call; the block's
        # closing markup may also be written inside an argument, so it is not looked for).
        inside = esc(block_open.strip()) + r"[\s\S]*"
        calls.open = (r"\s*" + esc(block_open.strip()) + r"\s*(?=" + lead + r")|(?<=\}\s*)\s*(?=" + lead + ")(?<="
                      + inside + ")")
    else:  # no per-call markup: the object itself, starting with its name key, opens a call
        calls.open = r"\s*" + head + r"(?=" + lead + ")"
    guard = r"(?<=\})"
    calls.end_guard = guard
    closing = esc(call_close.strip())
    if closing:
        calls.close = guard + r"\s*(?:```\s*)?" + closing + text_tail(block_close)
        # A call the model did not close before opening the next one still ends there.
        calls.close += "|" + guard + r"\s*(?=" + esc(call_open.strip()) + ")"
    else:
        # No closing markup: only the end of the generation (or of the turn) ends the call, since a '}' can
        # end a nested value.
        calls.close = guard + r"\s*" + optional(block_close) + r"\Z"
        # ... or a blank line after it: the model went on writing text.
        calls.close += "|" + guard + r"(?=[ \t]*\n[ \t]*\n)"
        if block_close.strip():
            # Calls listed inside a block: one ends at the block's end or where the next object starts.
            calls.close = guard + r"\s*" + esc(block_close.strip()) + "|" + guard + r"(?=\s*\{)"
        elif second is not None and not call_open.strip():
            # Bare objects one after the other: a call also ends at the separator the chat template writes
            # between two (",", a line break, or none at all) when the next call's object follows.
            separator = two[second[0]:second[1]]
            shape = (r"\{\s*" + re.escape(json.dumps(name_key)) + r'\s*:\s*"(?:[^"\\]|\\.)*"\s*,\s*'
                     + re.escape(json.dumps(args_key)) + r"\s*:")  # a whole call's start, not a nested object
            calls.close += "|" + guard + r"\s*" + esc(separator.strip()) + r"\s*(?=" + shape + ")"
            calls.literal["separator"] = separator
    if call_open.strip():
        # (a generation cut inside the opener's ```json fence is still the opener)
        calls.partial_open = optional(block_open) + esc(call_open.strip()) + r"\s*(?:`{1,3}(?:j(?:s(?:on?)?)?)?\s*)?"
    calls.transform = {"type": "function", "function": "{content}"} if keys == ("name", "arguments") else {
        "type": "function", "function": {"name": "{content.%s}" % name_key, "arguments": "{content.%s}" % args_key}}
    calls.literal.update({"block_open": block_open, "call_open": call_open, "call_close": call_close,
                          "block_close": block_close, "arguments": f"JSON object with keys {name_key!r}/{args_key!r}"})
    return calls


def call_object_head(r: Renderer, turn: Turn, calls: Calls, reasons: list[str]) -> None:
    """Bare JSON call objects read by their head: the name and the arguments key open the call, the arguments
    object is the content, and the object's own closing brace closes it.

    For calls the chat template writes as a bare object with the name first and the arguments second
    ({"name": "f", "parameters": {...}}) and no markup of their own. Reading the head makes each call a region of
    its own: two objects back to back (}{, as Llama 4 writes parallel calls) no longer look like one.

    Robustness policy for every such template (not read from the chat template; flagged as guesses from the habits
    of models that write bare call objects, Llama 3.x / 4 among them):
    - an OpenAI-style "type": "function" member may come first, and the arguments may be under "arguments" or
      "parameters" whichever key the chat template writes;
    - calls may be separated by ';' or ',' besides the separator the chat template writes (or whitespace);
    - a call followed on the same line by a space and a capital letter (a new sentence) has ended: that text is
      content. (Lower-case text after '}}' may still be inside a string value, so it does not end the call.)
    - as for calls opened by markup, whitespace right after a call that starts the message is markup.
    """
    if calls.kind != "json_object" or (calls.literal.get("call_open") or "").strip():
        return
    if (calls.literal.get("block_close") or "").strip():
        return  # calls listed inside a block: its closing markup ends them
    one = call_generation(r, turn, [CALL_A])
    keys = None
    for _, _, value in _json_values(one):
        keys = _call_object_keys(value, *CALL_A)
        if keys and list(value) == list(keys):
            break
        keys = None
    if keys is None:
        return
    name_key, args_key = keys
    block_open = calls.literal.get("block_open") or ""
    aliases = alternation([args_key, "arguments", "parameters"])
    head = (r'\{\s*(?:"type"\s*:\s*"function"\s*,\s*)?' + re.escape(json.dumps(name_key)) + r'\s*:\s*"(?P<name>[^"\\\n]{1,200})"'
            r'\s*,\s*"' + aliases + r'"\s*:\s*(?=\{)')
    wrapper = calls.literal.get("content_wrapper")
    calls.open = r"\s*" + (optional(wrapper[0]) + optional(wrapper[1]) if wrapper else optional(block_open)) + head
    separators = [";", ","] + ([calls.literal["separator"].strip()] if (calls.literal.get("separator") or "").strip() else [])
    after = [r"\s*(?:" + "|".join(dict.fromkeys(re.escape(x) for x in separators)) + r")?\s*(?=\{\s*\"(?:type|"
             + re.escape(name_key) + r')\")', r"\s*\Z", r"(?=[ \t]*\n[ \t]*\n)", r"(?=[ \t]+[A-Z])"]
    calls.end_guard = r"(?<=\})\s*\}" + (r"(?:\s*" + esc(wrapper[1]) + ")?" if wrapper else "")
    calls.close = calls.end_guard + "(?:" + "|".join(after) + ")"
    # A call that starts the message (after markup only): the whitespace after it is markup, as build makes it for
    # calls whose opener is a special token.
    calls.close = ("(?:" + calls.close + r")(?:(?<=(?<![\s\S])\s*(?:(?:" + TOKEN.pattern + r")\s*)*\{[\s\S]{0,200})"
                   r"\s*)?")
    # A generation cut inside the head (before the arguments' brace) leaves nothing of it behind.
    calls.partial_open = r'\{\s*(?:"type"[^{}\n]*)?' + re.escape(json.dumps(name_key)) + r"\s*:[^{}\n]*"
    calls.content_args = None
    calls.transform = {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}
    calls.literal["arguments"] = (f"JSON object: {name_key!r} then {args_key!r} (read by its head; also 'arguments' "
                                  "/ 'parameters' and a leading \"type\": \"function\")")
    reasons.append("tool calls: bare JSON objects; by policy also read with a leading \"type\": \"function\", the "
                   "other arguments key ('arguments' / 'parameters'), ';' or ',' between calls, and a new sentence "
                   "right after a call (not verified: the chat template does not write them)")


def content_wrapper_in_call_turn(r: Renderer, turn: Turn, calls: Calls, reasons: list[str]) -> None:
    """Markup the chat template writes around the content of a turn with calls, before the calls.

    Llama 4 writes <|python_start|>{content}<|python_end|> and then the calls: with no content the probe shows
    <|python_start|><|python_end|> as the calls' opener, and with content the same markup holds the text. Read from
    the call probe rendered with content: its two halves are dropped from the content, either half may precede a
    call (a model may put the call inside them), and the closing half may follow one.
    """
    block_open = (calls.literal.get("block_open") or "").strip()
    tokens = list(TOKEN.finditer(block_open))
    if calls.kind != "json_object" or len(tokens) < 2:
        return
    try:
        text = call_generation(r, turn, [CALL_A], content=CONTENT)
    except Exception:
        return
    if CONTENT not in text:
        return
    at = text.index(CONTENT)
    for token in tokens[1:]:
        first, second = block_open[: token.start()].strip(), block_open[token.start():].strip()
        if text[:at].strip().endswith(first) and text[at + len(CONTENT):].lstrip().startswith(second):
            calls.literal["content_wrapper"] = (first, second)
            turn.dropped += [esc(first), esc(second)]
            reasons.append(f"content: in a turn with calls the chat template writes it between {first!r} and "
                           f"{second!r} (dropped from the content; either may come right before a call)")
            return


def _json_array_calls(one, start, end, keys) -> Calls:
    name_key, args_key = keys
    before, after = one[:start], one[end:]
    if before.strip() and after.strip():
        first = list(json.loads(one[start:end])[0])
        return _json_list_in_block(before, after, keys, first[:2])
    calls = Calls(kind="json_array", content="json", repeats=False, transform_each=True)
    calls.open = r"\s*" + esc(before.strip()) + r"\s*(?=\[)" if before.strip() else r"\s*(?=\[\s*\{)"
    # Without closing markup only the end ends the list: a ']' may end a nested value.
    calls.close = r"(?<=\])\s*" + esc(after.strip()) if after.strip() else r"(?<=\])\s*\Z"
    if not after.strip():
        # Text the model writes after the list starts on a new line.
        # (not inside a pretty-printed list: the next line must not continue the JSON)
        calls.close += r"|(?<=\}\])[ \t]*(?=\n\s*[^\s,}\]\"])"
    calls.end_guard = r"(?<=\])"
    if before.strip():
        calls.partial_open = esc(before.strip()) + r"\s*"
    calls.transform = {"type": "function", "function": {"name": "{%s}" % name_key, "arguments": "{%s}" % args_key}}
    calls.literal = {"block_open": before, "block_close": after,
                     "arguments": f"JSON array of objects with keys {name_key!r}/{args_key!r}"}
    return calls


def _json_list_in_block(before: str, after: str, keys: tuple[str, str], leading: list) -> Calls:
    """A JSON list of call objects between block markers (<TOOLCALL>[{...}, {...}]</TOOLCALL>): each object is a
    call of its own, so the model may write several blocks, a bare object without the list's brackets, or stop
    in the middle of the list and keep the calls it completed."""
    name_key, args_key = keys
    block_open, block_close = esc(before.strip()), esc(after.strip())
    # Where the next call's object starts (not a nested object): its first key as the chat template writes it,
    # and the arguments key after the name when the name comes first.
    shape = r"\{\s*" + re.escape(json.dumps(leading[0])) + r"\s*:"
    if leading == [name_key, args_key]:
        shape += r'\s*"(?:[^"\\]|\\.)*"\s*,\s*' + re.escape(json.dumps(args_key)) + r"\s*:"
    calls = Calls(kind="json_array", content="json", repeats=True)
    inside = block_open + "(?:(?!" + block_close + r")[\s\S])*"
    calls.open = (r"\s*" + block_open + r"\s*\[?\s*(?=\{)|(?<=\})\s*,\s*(?=" + shape + ")(?<=" + inside + ")")
    calls.close = r"(?<=\})\s*\]?\s*" + block_close + r"|(?<=\})(?=\s*,\s*" + shape + ")"
    calls.end_guard = r"(?<=\})\s*\]?"
    calls.partial_open = block_open + r"\s*\[?\s*"
    calls.transform = {"type": "function", "function": "{content}"} if keys == ("name", "arguments") else {
        "type": "function", "function": {"name": "{content.%s}" % name_key, "arguments": "{content.%s}" % args_key}}
    calls.literal = {"block_open": before, "block_close": after,
                     "arguments": f"JSON list of objects with keys {name_key!r}/{args_key!r}, one call per object"}
    return calls


def opener_regex(opener: str) -> str:
    """A regex for a reasoning opener. An opener made of a special token and a label (<|channel>thought) is also
    accepted without the label, and with the token repeated (models stutter on it)."""
    match = TOKEN.match(opener)
    if match and match.end() < len(opener) and re.fullmatch(r"\w+", opener[match.end():]):
        token = re.escape(match.group(0))
        return "(?:" + token + r"\s*)*" + token + "(?:" + re.escape(opener[match.end():]) + ")?"
    return re.escape(opener)


def _token_style(token: str) -> str:
    """A regex for any special token written like `token` ([ARGS] -> [NAME], <|x|> -> <|name|>)."""
    for head, tail in (("<|", "|>"), ("<｜", "｜>"), ("[", "]"), ("<", ">")):
        if token.startswith(head) and token.endswith(tail):
            return re.escape(head) + r"/?[A-Za-z_][^\s<>\[\]{}|｜]*" + re.escape(tail)
    return re.escape(token)


def _name_json_calls(one, two, start, end, reasons) -> Calls:
    name = CALL_A[0]
    before, after = one[:start], one[end:]
    at = before.rindex(name)
    head, tail = before[:at], before[at + len(name):]
    second = None
    if two is not None and CALL_B[0] in two and one[start:end] in two:
        # The first call's arguments are written the same way in the parallel rendering.
        second = (two.index(one[start:end]) + end - start, two.index(CALL_B[0]))
    if second is not None:
        block_open, call_head, call_close, block_close = split_repeat(head, after, two[second[0]:second[1]])
    else:
        block_open, call_head, call_close, block_close = "", head, after, ""
    if not call_head.strip() and not block_open.strip():
        raise InferenceError("tool calls: a name followed by JSON arguments with no marker before it")
    calls = Calls(kind="name_json")
    name_chars, header_tail = r"[^\s<>\"'{}]+?", generalise(tail).replace("```json", "```(?:json)?")
    marker = TOKEN.match(tail)
    if marker:
        # The name is followed by special-token markup ([ARGS]): the name stops before it, other markers of the
        # same kind with their values may come first (a call id the chat template does not write), and the markup
        # may be missing altogether (output decoded without it), since the arguments' '{' ends the name anyway.
        name_chars = r"[^\s<>\"'{}" + re.escape(marker.group(0)[0]) + "]+?"
        style = _token_style(marker.group(0))
        header_tail = "(?:(?:\\s*" + style + r"[^\s<>\[\]{}|]*)*?" + header_tail + ")?"
    head_pattern = generalise(call_head.strip())
    lead = TOKEN.match(call_head.strip())
    bare = call_head.strip()[lead.end():] if lead else ""
    if bare.strip() and not TOKEN.search(bare):
        # After the opening special token, which alone commits the model to a call, a stray punctuation mark
        # before the header word (<|tool_call>:call:) is tolerated.
        head_pattern = (generalise(call_head.strip()[: lead.end()]) + r"\s*(?:[:;,.]\s*)?"  # type: ignore[union-attr]  # bare is set: lead matched
                        + generalise(bare.strip()))
    if bare.strip() and not TOKEN.search(bare) and not block_open.strip() and not tail.strip():
        # The call header is a special token and a word (<|tool_call>call:name{...}): models sometimes write the
        # word alone. Accepted at the start, on a line of its own or right after markup, and only when a name and
        # the arguments' '{' follow at once.
        head_pattern = ("(?:" + head_pattern + r"|(?:(?<![\s\S])|(?<=\n)|(?<=>))[ \t]*" + esc(bare.strip())
                        + r"(?=[A-Za-z_][\w.-]*\{))")
        calls.literal["bare_call_open"] = bare.strip()
    calls.open = (r"\s*" + optional(block_open) + head_pattern + r"\s*(?P<name>" + name_chars + ")"
                  + header_tail + r"(?=\s*[\[{])")
    guard = r"(?<=\})"  # arguments are a JSON object: a call ends only right after a '}'
    calls.end_guard = guard
    if call_close.strip():
        calls.close = guard + r"\s*" + generalise(call_close.strip()) + text_tail(block_close)
        # The header names the function and markup closes the call: arguments that are not valid JSON (damaged
        # output) are kept as the text the model wrote rather than failing the whole message.
        calls.content_args = {"allow_non_json": True}
        calls.close += special_token_close(call_close, block_close)
    else:
        # No closing markup: the call ends at the end of the generation (a '}' may end a nested value).
        calls.close = guard + r"\s*" + optional(block_close) + r"\Z"
        # ... or a blank line after it: the model went on writing text.
        calls.close += "|" + guard + r"(?=[ \t]*\n[ \t]*\n)"
    calls.close += "|" + guard + r"\s*(?=" + generalise(call_head.strip()) + ")"
    if block_close.strip():
        calls.close += "|" + guard + r"\s*(?:```\s*)?" + esc(block_close.strip())
    calls.partial_open = optional(block_open) + generalise(call_head.strip()) + r"[^\[{]*"
    calls.transform = {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}
    calls.literal.update({"block_open": block_open, "call_open": call_head, "after_name": tail,
                          "call_close": call_close, "block_close": block_close,
                          "arguments": "JSON object after the name"})
    return calls

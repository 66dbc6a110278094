"""Serve parsed messages in the OpenAI chat-completions format, whole or streamed.

`to_openai_message(message)` turns a parsed message into an OpenAI assistant message: `role`, `content` (None when
absent), `reasoning_content` when present, and `tool_calls` with an `id`, `type` and `function.name` /
`function.arguments`, the arguments as a JSON string (`json.dumps(..., ensure_ascii=False)`).

`OpenAIStreamAdapter` drives a `ResponseParser` and turns its events into `chat.completion.chunk` dicts. The
contract: concatenating the deltas the way OpenAI clients do (strings appended; `tool_calls[index]` entries
merged by `index`, their `id` and `function.name` sent once, `function.arguments` appended) gives exactly
`to_openai_message(parse_response(...))`, however the generation was split into pieces, with no delimiter
text in any delta.

How each field is streamed:

* Text fields (`content`, `reasoning_content`, ...) stream as the model writes them. Leading whitespace and the
  whitespace at the current end are held back, because the parser strips them from the final value; they go
  out as soon as more text follows. A `join` separator goes out when the next region of a repeated field opens.
  Non-text values (an `int` field, a `json` content field) are sent whole when their region closes.

* Tool calls. A generation cut by a token limit (`finish(truncated=True)`, finish_reason `"length"`) must not
  deliver a call the model did not finish, and a streamed delta can never be taken back. So the adapter has two
  modes, chosen with `may_truncate`:

  - `may_truncate=True` (the default, safe for any request): each call is held until its region closes, then
    sent as one delta with `id`, `type` and `function.name` (arguments `""`) followed by one delta with the
    whole arguments text. A call whose region is still open when the generation is cut is never sent.
  - `may_truncate=False` (for generations that cannot be cut: no token limit, or you will never pass
    `truncated=True`): the name goes out as soon as it is known and the arguments stream while the model
    writes them. Only argument pairs that are final are sent, serialized exactly as `json.dumps` writes them
    (`{"city": "Paris"` then `, "days": 3`), and at the region close the remainder (often just `}`) makes the
    text exactly `json.dumps(final_arguments)`. This early path is taken only where it is right (repeated JSON
    keys aside, see below): a `json` tool-call field without dialect options, whose transform is `{"type":
    "function", "function": "{content}"}` or `{"type": "function", "function": {"name": "{content.<key>}",
    "arguments": "{content.<key>}"}}` (or absent), and whose body is one JSON object. Nothing of a call goes out
    before its name is complete, so a body that writes the arguments first sends them once the name is read.
    An argument the tool schema would recast (a string for an integer parameter, ...) stops the early
    streaming of that call; the rest is sent at its close. Other formats (names in the opening delimiter,
    XML-style parameters, several calls in one array) are sent whole at their region close, as in the first
    mode. If a generation is cut anyway, the part of an unfinished call already sent stays sent.

Damaged output: with `malformed="content"` or `"drop"` (passed to the parser, see the README's "Damaged output"), a
call whose text does not parse is not sent (its raw text goes out as `content` with "content"); the parser ends it
with a `region_discard` event, as it does a call cut off by `finish(truncated=True)`. Calls are then always held
until their close: `may_truncate=False` is refused with those policies, since a call already streamed could turn
out malformed.

Known limits, inherent to append-only deltas: the parsed message keeps only the last region of a field that
does not repeat (`<think>a</think><think>b</think>` parses to `"b"`), and a JSON object that repeats a key keeps
the last value; text already streamed cannot follow such a rewrite. The adapter notices it, logs a warning
and sets `adapter.mismatch`; the final message is always available as `adapter.message`.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, cast

from ..core.message import check_truncated

logger = logging.getLogger(__name__)

__all__ = ["OpenAIStreamAdapter", "to_openai_message", "accumulate_chunks", "finish_reason_for"]

# Message keys that are not streamed as text deltas.
_ROLE = "role"
_TOOL_CALLS = "tool_calls"


def default_id_factory(index: int) -> str:
    """A random OpenAI-style tool call id."""
    return "call_" + uuid.uuid4().hex[:24]


def render_text(value: Any) -> str | None:
    """How a message field's value appears in an OpenAI message: strings as they are, a list of strings (a
    repeated field without `join`) concatenated, anything else as JSON text. None stays None."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "".join(value)
    return json.dumps(value, ensure_ascii=False)


def _as_calls(value: Any) -> list:
    """The tool calls in a field value: one call (a dict), or a list of calls (possibly nested one level when a
    repeated field's regions each hold a list)."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [value]
    calls: list = []
    if isinstance(value, list):
        for item in value:
            calls.extend(item if isinstance(item, list) else [item])
    return calls


def arguments_text(arguments: Any) -> str:
    """function.arguments as OpenAI sends it: a JSON string (text the model wrote is passed through)."""
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return "{}"
    return json.dumps(arguments, ensure_ascii=False)


def _call_parts(call: Any) -> tuple[str | None, str, Any, str]:
    """(id, type, name, arguments text) of one parsed call. Calls are normally `{"type": "function", "function":
    {"name", "arguments"}}`; a bare `{"name", "arguments"}` (a template without a transform) is read too."""
    if not isinstance(call, dict):
        return None, "function", None, arguments_text(call)
    # (the casts: each value is the type the isinstance check beside it saw)
    function = cast(dict, call.get("function")) if isinstance(call.get("function"), dict) else call
    call_id = cast(str, call.get("id")) if isinstance(call.get("id"), str) else None
    kind = cast(str, call.get("type")) if isinstance(call.get("type"), str) else "function"
    return call_id, kind, function.get("name"), arguments_text(function.get("arguments"))


def _openai_call(call: Any, index: int, id_factory: Callable[[int], str]) -> dict:
    call_id, kind, name, arguments = _call_parts(call)
    return {"id": call_id or id_factory(index), "type": kind, "function": {"name": name, "arguments": arguments}}


def to_openai_message(message: dict, *, id_factory: Callable[[int], str] | None = None) -> dict:
    """An OpenAI chat-completions assistant message from a parsed message dict.

    `id_factory(index)` makes the id of each tool call that has none (default: `"call_"` + random hex); ids the
    parsed message already carries are kept. Fields other than role, content, reasoning_content and tool_calls
    are passed through, rendered as text like content."""
    if not isinstance(message, dict):
        raise TypeError(f"to_openai_message: message must be a dict, got {type(message).__name__}")
    id_factory = id_factory or default_id_factory
    result: dict[str, Any] = {"role": message.get(_ROLE) or "assistant", "content": render_text(message.get("content"))}
    for key, value in message.items():
        if key in (_ROLE, "content", _TOOL_CALLS) or value is None:
            continue
        result[key] = render_text(value)
    calls = _as_calls(message.get(_TOOL_CALLS))
    if calls:
        result[_TOOL_CALLS] = [_openai_call(call, index, id_factory) for index, call in enumerate(calls)]
    return result


def finish_reason_for(has_tool_calls: bool, truncated: bool) -> str:
    """OpenAI's finish_reason: "length" for a generation cut off (as OpenAI reports a token limit, whatever was
    written: a call cut there was not sent, and the client must be able to tell), else "tool_calls" when the message
    has a call, else "stop"."""
    return "length" if truncated else "tool_calls" if has_tool_calls else "stop"


def accumulate_chunks(chunks: Iterable[dict]) -> dict:
    """Concatenate streamed chunks into one message, as OpenAI clients do (openai-python's documented delta
    accumulation): strings appended, `tool_calls` merged by `index`, `type`/`index` replaced, `content` None when
    never sent. Handy for tests and for servers that also want the non-streaming answer."""
    message: dict[str, Any] = {}
    for chunk in chunks:
        for choice in chunk.get("choices", []):
            _merge(message, choice.get("delta") or {})
    message.setdefault("content", None)
    return message


def _merge(acc: dict, delta: dict) -> None:
    for key, value in delta.items():
        if key == "tool_calls":
            calls = acc.setdefault("tool_calls", [])
            for entry in value:
                while len(calls) <= entry["index"]:
                    calls.append({})
                _merge(calls[entry["index"]], {k: v for k, v in entry.items() if k != "index"})
            continue
        current = acc.get(key)
        if current is None or key == "type":
            acc[key] = json.loads(json.dumps(value)) if isinstance(value, dict) else value
        elif isinstance(current, str) and isinstance(value, str):
            acc[key] = current + value
        elif isinstance(current, dict) and isinstance(value, dict):
            _merge(current, value)
        else:
            acc[key] = value


# --- template introspection -------------------------------------------------------------------------------


@dataclass
class _FieldInfo:
    repeats: bool = False
    join: str | None = None
    content: str = "text"
    content_args: dict | None = None
    transform: Any = None
    transform_each: bool = False

    @property
    def live_text(self) -> bool:
        """Whether chunks are part of the final text (only the outer whitespace may be stripped)."""
        return self.content == "text"

    @property
    def strip(self) -> bool:
        return bool((self.content_args or {}).get("strip", True))


def _template_fields(template: Any) -> tuple[dict[str, _FieldInfo], dict]:
    """Field options and defaults of a template dict or of a compiled template (ours or transformers')."""
    source = template if isinstance(template, dict) else getattr(template, "source", None)
    if isinstance(source, dict):
        fields = {
            name: _FieldInfo(
                repeats=bool(spec.get("repeats", False)),
                join=spec.get("join"),
                content=spec.get("content", "text"),
                content_args=spec.get("content_args") or {},
                transform=spec.get("transform"),
                transform_each=bool(spec.get("transform_each", False)),
            )
            for name, spec in (source.get("fields") or {}).items()
            if isinstance(spec, dict)
        }
        return fields, dict(source.get("defaults") or {})
    compiled_fields = getattr(template, "fields", None)
    if not isinstance(compiled_fields, dict):
        raise TypeError(f"cannot read the fields of the response template {type(template).__name__}")
    fields = {
        name: _FieldInfo(
            repeats=bool(getattr(field, "repeats", False)),
            join=getattr(field, "join", None),
            content=getattr(field, "content", "text"),
            content_args=dict(getattr(field, "content_args", None) or {}),
            transform=getattr(field, "transform", None),
            transform_each=bool(getattr(field, "transform_each", False)),
        )
        for name, field in compiled_fields.items()
    }
    return fields, dict(getattr(template, "defaults", None) or {})


def _early_call_keys(info: _FieldInfo) -> tuple[str, str] | None:
    """(name key, arguments key) inside the raw JSON body when a call can be streamed before its close."""
    if info.content != "json" or info.content_args or info.transform_each:
        return None
    transform = info.transform
    if transform is None:
        return "name", "arguments"
    if not isinstance(transform, dict) or set(transform) != {"type", "function"} or transform["type"] != "function":
        return None
    function = transform["function"]
    if function == "{content}":
        return "name", "arguments"
    if isinstance(function, dict) and set(function) == {"name", "arguments"}:
        keys = []
        for slot in ("name", "arguments"):
            placeholder = function[slot]
            if not (isinstance(placeholder, str) and placeholder.startswith("{content.") and placeholder.endswith("}")):
                return None
            path = placeholder[len("{content.") : -1]
            if not path or "." in path:
                return None
            keys.append(path)
        return keys[0], keys[1]
    return None


def _schema_types(schema: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    declared = schema.get("type")
    if isinstance(declared, str):
        found = {declared}
    elif isinstance(declared, list):
        found = {kind for kind in declared if isinstance(kind, str)}
    else:
        found = set()
    for union in ("anyOf", "oneOf"):
        for option in schema.get(union) or []:
            found |= _schema_types(option)
    if schema.get("nullable"):
        found.add("null")
    return found


def _tool_properties(tools: list | None) -> dict[str, dict] | None:
    """Tool name -> schema properties; None when some tool is not a JSON schema (we cannot predict its casts)."""
    properties: dict[str, dict] = {}
    for tool in tools or []:
        if not isinstance(tool, dict):
            return None
        function = tool.get("function", tool)
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            params = function.get("parameters")
            props = params.get("properties") if isinstance(params, dict) else None
            properties[function["name"]] = props if isinstance(props, dict) else {}
    return properties


_RECASTING_TYPES = {"integer", "number", "boolean", "null", "object", "array"}


def _schema_keeps(value: Any, schema: Any) -> bool:
    """Whether casting by the tool schema certainly leaves this JSON argument value as it is."""
    types = _schema_types(schema)
    if not types & _RECASTING_TYPES:
        return True
    if isinstance(value, str):
        return False
    if isinstance(value, list) and "array" not in types:
        return False
    return True


# --- incremental JSON scanning ----------------------------------------------------------------------------


_STRING_STOP = re.compile(r'["\\]')


class _PairScanner:
    """Reads a JSON object as it arrives and reports each key/value pair once its value is complete (followed by
    `,` or `}`), for the top object (path `()`) and the objects nested under keys (path `(key, ...)`).

    Linear: each character is looked at once (string contents are skipped in bulk), and the text is kept as a
    list of pieces, joined only to cut out a finished key or value. `failed` is set when the text is not a plain
    JSON object."""

    def __init__(self) -> None:
        self.pieces: list[tuple[int, str]] = []  # (position of the first character, text)
        self.end = 0
        self.stack: list[dict] = []  # open containers: {"kind", "path", "state", "key", "start"}
        self.in_string = False
        self.escape = False
        self.string_start = 0
        self.started = False
        self.done = False
        self.failed = False

    def feed(self, text: str) -> list[tuple[tuple, str, str]]:
        pairs: list[tuple[tuple, str, str]] = []
        base = self.end
        self.pieces.append((base, text))
        self.end += len(text)
        i = 0
        while i < len(text) and not self.failed:
            if self.in_string and not self.escape:
                stop = _STRING_STOP.search(text, i)
                if stop is None:
                    break
                i = stop.start()
            self._step(text[i], base + i, pairs)
            i += 1
        self._forget()
        return pairs

    def _slice(self, start: int, stop: int) -> str:
        parts, first = [], None
        for position, text in self.pieces:
            if position + len(text) <= start:
                continue
            if position >= stop:
                break
            first = position if first is None else first
            parts.append(text)
        return "".join(parts)[start - first : stop - first] if parts else ""  # type: ignore[operator]  # first is set when parts is not empty

    def _forget(self) -> None:
        """Drop the text no pending key or value can need any more."""
        needed = self.string_start if self.in_string else self.end
        for container in self.stack:
            if container["path"] is not None and container["state"] == "value":
                needed = min(needed, container["start"])
        while self.pieces and self.pieces[0][0] + len(self.pieces[0][1]) <= needed:
            self.pieces.pop(0)

    def _step(self, char: str, i: int, pairs: list) -> None:
        if self.in_string:
            if self.escape:
                self.escape = False
            elif char == "\\":
                self.escape = True
            elif char == '"':
                self.in_string = False
                top = self.stack[-1]
                if top["kind"] == "object" and top["state"] == "key":
                    try:
                        top["key"] = json.loads(self._slice(self.string_start, i + 1))
                    except ValueError:
                        self.failed = True
                    top["state"] = "colon"
            return
        if char in " \t\r\n":
            return
        if not self.stack:
            if self.started or char != "{":
                self.failed = True  # not one JSON object (or text after it)
                return
            self.started = True
            self.stack.append({"kind": "object", "path": (), "state": "key", "key": None, "start": 0})
            return
        top = self.stack[-1]
        if top["kind"] == "array":
            self._value_char(char, i, path=None)
            if char == "]":
                self._pop()
            return
        state = top["state"]
        if state == "key":
            if char == '"':
                self.in_string, self.string_start = True, i
            elif char == "}":
                self._pop()
            else:
                self.failed = True
        elif state == "colon":
            if char == ":":
                top["state"] = "value_start"
            else:
                self.failed = True
        elif state == "value_start":
            top["state"], top["start"] = "value", i
            path = None if top["path"] is None else top["path"] + (top["key"],)
            self._value_char(char, i, path)
        else:  # inside a scalar value, or after a nested container closed
            if char in ",}":
                if top["path"] is not None:
                    pairs.append((top["path"], top["key"], self._slice(top["start"], i).strip()))
                top["state"] = "key"
                if char == "}":
                    self._pop()
            elif char == '"':
                self.in_string, self.string_start = True, i

    def _value_char(self, char: str, i: int, path: tuple | None) -> None:
        if char == "{":
            self.stack.append({"kind": "object", "path": path, "state": "key", "key": None, "start": 0})
        elif char == "[":
            self.stack.append({"kind": "array", "path": None, "state": "", "key": None, "start": 0})
        elif char == '"':
            self.in_string, self.string_start = True, i

    def _pop(self) -> None:
        self.stack.pop()
        if not self.stack:
            self.done = True


class _EarlyCall:
    """One tool call streamed while its JSON body arrives (mode `may_truncate=False`)."""

    def __init__(self, name_key: str, args_key: str, properties: dict[str, dict] | None) -> None:
        self.name_key, self.args_key = name_key, args_key
        self.properties = properties
        self.scanner = _PairScanner()
        self.name: str | None = None
        self.waiting: list[tuple[str, Any]] = []  # final argument pairs not sent yet
        self.stopped = False  # no more early argument text for this call
        self.args_seen = False
        self.index: int | None = None
        self.sent_args = ""

    def feed(self, text: str) -> None:
        if self.stopped:
            return
        for path, key, raw in self.scanner.feed(text):
            try:
                value = json.loads(raw)
            except ValueError:
                self.stopped = True
                return
            if path == () and key == self.name_key:
                if self.name is not None or not isinstance(value, str):
                    self.stopped = True  # a second name, or not a string: leave it to the close
                    return
                self.name = value
            elif path == () and key == self.args_key:
                if not isinstance(value, dict) or not self.args_seen:
                    self.stopped = True  # arguments are not a JSON object: sent at the close
                    return
            elif path == (self.args_key,):
                self.args_seen = True
                self.waiting.append((key, value))
        if self.scanner.failed:
            self.stopped = True
        # The arguments object has started when the scanner is inside it.
        stack = self.scanner.stack
        if len(stack) >= 2 and stack[1]["path"] == (self.args_key,):
            self.args_seen = True

    def take_argument_text(self) -> str:
        """JSON text for the final pairs that can be sent now."""
        if self.name is None or self.stopped:
            return ""
        out: list[str] = []
        schema = (self.properties or {}).get(self.name, {}) if self.properties is not None else None
        while self.waiting:
            key, value = self.waiting[0]
            if schema is None or (key in schema and not _schema_keeps(value, schema[key])):
                self.stopped = True  # the schema may recast this value: the rest waits for the close
                break
            self.waiting.pop(0)
            piece = json.dumps(key, ensure_ascii=False) + ": " + json.dumps(value, ensure_ascii=False)
            out.append(("{" if not self.sent_args and not out else ", ") + piece)
        text = "".join(out)
        self.sent_args += text
        return text


# --- the streaming adapter --------------------------------------------------------------------------------


class OpenAIStreamAdapter:
    """Turn a response parser's events into OpenAI `chat.completion.chunk` dicts.

        adapter = OpenAIStreamAdapter(template, prefix=prompt, tools=tools, model="my-model")
        for piece in generation:               # text or token ids, as the parser takes them
            for chunk in adapter.feed(piece):
                send(chunk)
        for chunk in adapter.finish(truncated=hit_max_tokens):
            send(chunk)
        adapter.message                        # the parsed message (as parse_response returns it)

    `source` is a response template (dict, compiled, or a library name such as "qwen3") or a ResponseParser
    already made (then pass `template=` unless the parser exposes it, and the `tools=` it was given).
    `may_truncate` chooses how tool calls stream, see the module docstring. `malformed` ("raise", "content" or
    "drop") is the parser's policy for a call whose text does not parse (default: "raise", or the given parser's).
    `id_factory(index)` names tool calls that carry no id; `completion_id` and `created` fill the chunk envelope.
    """

    def __init__(
        self,
        source: Any,
        prefix: Any = None,
        *,
        tools: list | None = None,
        tokenizer: Any = None,
        template: Any = None,
        model: str = "response-templates",
        id_factory: Callable[[int], str] | None = None,
        may_truncate: bool = True,
        completion_id: str | None = None,
        created: int | None = None,
        malformed: str | None = None,
    ) -> None:
        if hasattr(source, "feed") and hasattr(source, "finalize"):
            self.parser = source
            template = template if template is not None else _parser_template(source)
            # The parser's tools are not known here: without tools=, arguments wait for their close.
            self._properties = _tool_properties(tools) if tools is not None else None
            parser_policy = getattr(source, "malformed", "raise")
            if malformed is not None and malformed != parser_policy:
                raise ValueError(
                    f"OpenAIStreamAdapter: malformed={malformed!r} differs from the given parser's {parser_policy!r}; "
                    "create the parser with the policy you want"
                )
            malformed = parser_policy
        else:
            from ..core import ResponseParser
            from ..core.template import load_template

            if isinstance(source, str):  # a library template name
                from ..library import get_template

                source = get_template(source)
            template = load_template(source)
            malformed = "raise" if malformed is None else malformed
            self.parser = ResponseParser(template, prefix, tools=tools, tokenizer=tokenizer, malformed=malformed)
            self._properties = _tool_properties(tools)
        if not may_truncate and malformed != "raise":
            raise ValueError(
                f"OpenAIStreamAdapter: may_truncate=False streams a call before it is complete, so it cannot be used "
                f"with malformed={malformed!r} (a call already sent could turn out malformed and cannot be taken back)"
            )
        self.malformed = malformed
        self._fields, self._defaults = _template_fields(template)
        self.model = model
        self.id_factory = id_factory or default_id_factory
        self.may_truncate = may_truncate
        self.completion_id = completion_id or "chatcmpl-" + uuid.uuid4().hex[:24]
        self.created = int(time.time()) if created is None else created
        self._mirror: dict[str, Any] = dict(self._defaults)  # the message as the parser is building it
        self._sent: dict[str, list[str]] = {}  # pieces of text sent so far, per message key
        # The open text region: "append" (its text extends what was sent), "hold" (sent at its close) or
        # "blocked" (it replaces a value already streamed: only its close can tell what to do).
        self._mode = "hold"
        self._leading = True  # no visible character yet in this region
        self._trailing = ""  # whitespace held back at the end of the region's text
        self._current: str | None = None
        self._early: _EarlyCall | None = None
        self._calls_sent = 0
        self._started = False
        self._finished = False
        self.message: dict | None = None
        self.mismatch = False

    # public API

    def feed(self, piece: Any) -> list[dict]:
        """Feed generated text (or token ids) and get the chunks it completes."""
        if self._finished:
            raise RuntimeError("OpenAIStreamAdapter.feed called after finish")
        deltas = self._start()
        self._handle(self.parser.feed(piece), deltas)
        return self._chunks(deltas)

    def finish(self, truncated: bool = False) -> list[dict]:
        """End the generation; `truncated=True` when it was cut by a token limit. Returns the last chunks, the
        final one with `finish_reason` ("length" if truncated, else "tool_calls" if the message has a call, else
        "stop")."""
        check_truncated(truncated)
        if self._finished:
            raise RuntimeError("OpenAIStreamAdapter.finish called twice")
        deltas = self._start()
        message, events = self.parser.finalize(truncated=True) if truncated else self.parser.finalize()
        self._handle(events, deltas)
        self._finished = True
        self.message = message
        self._check(message)
        chunks = self._chunks(deltas)
        # As for the whole message: a call cut off by truncation (sent early, see may_truncate) does not count.
        chunks.append(self._chunk({}, finish_reason_for(bool(_as_calls(message.get(_TOOL_CALLS))), truncated)))
        return chunks

    @property
    def open_field(self) -> str | None:
        """The field of the region the parser is in after the last `feed` (None between regions)."""
        return self._current

    @property
    def holding(self) -> bool:
        """Whether the open region's text is held until its close instead of going out as it arrives: a tool call
        (of which at most the name and the final argument pairs go out early, see `may_truncate`), a value that is
        not text, or a region that replaces a value already sent. False between regions. A server that must give
        back the raw text of a region that turns out damaged keeps the text it fed while this is true."""
        return self._current is not None and self._mode != "append"

    def stream(self, pieces: Iterable[Any], truncated: bool = False) -> Iterable[dict]:
        """All chunks for a whole generation given as an iterable of pieces."""
        check_truncated(truncated)
        for piece in pieces:
            yield from self.feed(piece)
        yield from self.finish(truncated=truncated)

    # events -> deltas

    def _start(self) -> list[dict]:
        if self._started:
            return []
        self._started = True
        first: dict[str, Any] = {"role": self._defaults.get(_ROLE) or "assistant"}
        for key, value in self._defaults.items():
            if key not in (_ROLE, _TOOL_CALLS) and isinstance(value, str):
                first[key] = value  # a default string ("" most often) is part of the final text
                self._sent[key] = [value]
        deltas = [first]
        self._handle(getattr(self.parser, "initial_events", []) or [], deltas)
        return deltas

    def _handle(self, events: list[dict], deltas: list[dict]) -> None:
        for event in events:
            kind, field = event.get("type"), event.get("field")
            # (the ignores: region events always carry their field's name)
            if kind == "region_open":
                self._open(field, deltas)  # type: ignore[arg-type]
            elif kind == "region_chunk":
                self._chunk_text(field, event.get("text", ""), deltas)  # type: ignore[arg-type]
            elif kind == "region_close":
                self._close(field, event, deltas)  # type: ignore[arg-type]
            elif kind == "region_discard":
                # a region the parser does not return (cut off, or malformed under malformed="content"/"drop"):
                # nothing of it was sent (calls wait for their close); with "content", a content region follows
                self._early, self._current, self._mode = None, None, "hold"

    def _info(self, field: str) -> _FieldInfo:
        return self._fields.get(field) or _FieldInfo()

    def _open(self, field: str, deltas: list[dict]) -> None:
        self._current, self._early = field, None
        self._mode, self._leading, self._trailing = "hold", True, ""
        info = self._info(field)
        if field == _TOOL_CALLS:
            if not self.may_truncate:
                keys = _early_call_keys(info)
                if keys is not None:
                    self._early = _EarlyCall(keys[0], keys[1], self._properties)
            return
        if field == _ROLE or not info.live_text:
            return
        previous = self._mirror.get(field)
        if info.join is not None:
            self._mode = "append"
            if previous is not None:  # the separator is part of the value whatever this region holds
                self._send(field, info.join, deltas)
        elif info.repeats or not self._sent_text(field):
            self._mode = "append"
        else:
            self._mode = "blocked"

    def _chunk_text(self, field: str, text: str, deltas: list[dict]) -> None:
        if field != self._current:  # a chunk without its open event (should not happen): treat it as opening
            self._open(field, deltas)
        if field == _TOOL_CALLS:
            self._stream_early_call(text, deltas)
        elif self._mode == "append":
            self._stream_text(field, text, deltas)

    def _stream_text(self, field: str, text: str, deltas: list[dict]) -> None:
        """Send what is certain of a text field's final value while its region is open: the parser strips the
        value, so leading whitespace never goes out and trailing whitespace waits for more text."""
        if not self._info(field).strip:
            self._send(field, text, deltas)
            return
        if self._leading:
            text = text.lstrip()
            if not text:
                return
            self._leading = False
        text = self._trailing + text
        visible = text.rstrip()
        self._trailing = text[len(visible) :]
        self._send(field, visible, deltas)

    def _send(self, field: str, text: str, deltas: list[dict]) -> None:
        if text:
            self._sent.setdefault(field, []).append(text)
            deltas.append({field: text})

    def _sent_text(self, field: str) -> str:
        pieces = self._sent.get(field)
        if not pieces:
            return ""
        if len(pieces) > 1:
            pieces[:] = ["".join(pieces)]
        return pieces[0]

    def _settle_text(self, field: str, target: str | None, deltas: list[dict]) -> None:
        """At a region close: send whatever the field's value has beyond what was already sent."""
        sent = self._sent_text(field)
        target = target or ""
        if target.startswith(sent):
            self._send(field, target[len(sent) :], deltas)
        else:
            self._flag(f"field {field!r}: the parsed value no longer starts with the text already streamed")

    def _stream_early_call(self, text: str, deltas: list[dict]) -> None:
        early = self._early
        if early is None:
            return
        early.feed(text)
        if early.name is not None and early.index is None:
            early.index = self._calls_sent
            self._calls_sent += 1
            header = {"index": early.index, "id": self.id_factory(early.index), "type": "function"}
            header["function"] = {"name": early.name, "arguments": ""}
            deltas.append({_TOOL_CALLS: [header]})
        arguments = early.take_argument_text()
        if arguments:
            deltas.append({_TOOL_CALLS: [{"index": early.index, "function": {"arguments": arguments}}]})

    def _close(self, field: str, event: dict, deltas: list[dict]) -> None:
        early, self._early = self._early, None
        self._current, self._mode = None, "hold"
        value = event.get("value")
        info = self._info(field)
        previous = self._mirror.get(field)
        if info.join is not None:
            self._mirror[field] = value if previous is None else previous + info.join + value
        elif info.repeats:
            self._mirror[field] = (previous if isinstance(previous, list) else []) + [value]
        else:
            if field in self._mirror and field not in self._defaults and previous not in (None, "", [], {}):
                self._flag(f"field {field!r} appears twice; the parsed message keeps only the last one")
            self._mirror[field] = value
        if field == _TOOL_CALLS:
            self._send_calls(_as_calls(value), early, deltas)
        elif field != _ROLE:
            self._settle_text(field, render_text(self._mirror[field]), deltas)

    def _send_calls(self, calls: list, early: _EarlyCall | None, deltas: list[dict]) -> None:
        for position, call in enumerate(calls):
            call_id, kind, name, arguments = _call_parts(call)
            if position == 0 and early is not None and early.index is not None:
                if name != early.name or not arguments.startswith(early.sent_args):
                    self._flag("a tool call's parsed value differs from what was streamed (repeated JSON key?)")
                    continue
                rest = arguments[len(early.sent_args) :]
                if rest:
                    deltas.append({_TOOL_CALLS: [{"index": early.index, "function": {"arguments": rest}}]})
                continue
            index = self._calls_sent
            self._calls_sent += 1
            header = {"index": index, "id": call_id or self.id_factory(index), "type": kind}
            header["function"] = {"name": name, "arguments": ""}
            deltas.append({_TOOL_CALLS: [header]})
            if arguments:
                deltas.append({_TOOL_CALLS: [{"index": index, "function": {"arguments": arguments}}]})

    def _check(self, message: dict) -> None:
        """Compare what was streamed with the final message (texts only; calls were checked at their close)."""
        expected = to_openai_message(message, id_factory=lambda index: "")
        for key in set(expected) | set(self._sent):
            if key in (_ROLE, _TOOL_CALLS):
                continue
            if (expected.get(key) or "") != self._sent_text(key) and not self.mismatch:
                self._flag(f"field {key!r}: the streamed text differs from the parsed message")
        if len(expected.get(_TOOL_CALLS, [])) != self._calls_sent and not self.mismatch:
            self._flag("the number of streamed tool calls differs from the parsed message")

    def _flag(self, why: str) -> None:
        if not self.mismatch:
            logger.warning("OpenAIStreamAdapter: %s; use adapter.message for the exact result", why)
        self.mismatch = True

    # envelope

    def _chunks(self, deltas: list[dict]) -> list[dict]:
        merged: list[dict] = []
        for delta in deltas:
            # Consecutive text deltas for the same key become one chunk.
            if (
                merged
                and len(delta) == 1
                and len(merged[-1]) == 1
                and set(delta) == set(merged[-1])
                and isinstance(next(iter(delta.values())), str)
            ):
                key = next(iter(delta))
                merged[-1] = {key: merged[-1][key] + delta[key]}
            else:
                merged.append(delta)
        return [self._chunk(delta, None) for delta in merged]

    def _chunk(self, delta: dict, finish_reason: str | None) -> dict:
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }


def _parser_template(parser: Any) -> Any:
    for name in ("template", "_template", "_spec", "spec"):
        template = getattr(parser, name, None)
        if template is not None and (isinstance(template, dict) or hasattr(template, "fields")):
            return template
    raise TypeError(
        "OpenAIStreamAdapter: cannot find the response template of this parser; pass it as template=..."
    )

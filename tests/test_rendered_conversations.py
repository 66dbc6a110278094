"""Random conversations rendered with every real chat template the library claims, parsed back.

For each library entry, each chat template it lists and each of its verify scenarios, seeded random assistant
turns (reasoning, content, tool calls with arguments of every JSON type) are rendered after a random history the
way `verify` renders its canonical cases (`render_turn`: the prompt with the generation prompt, the full turn
without it, the generation cut out). The generation is parsed one-shot and streamed in random chunk sizes; the two
must agree, and the parsed message is compared with the message that was rendered: exactly, and up to whitespace
at the ends of strings (most chat templates strip the texts they write).

What a chat template cannot render is not generated, and what it leaves out (the text next to calls) is not
expected back, per template and with the reason (`SHAPES`); what a format cannot represent is left out of the
generated values, per template, with the reason (`VALUE_LIMITS`). No text holds a format's own markers (a known
limitation of every format that writes strings raw); words that merely resemble markup ('call:', '</', '<|',
'<param', '```json') are generated. Everything else must come back: no parse error, the stream equal to the
one-shot parse, every message right up to whitespace at the ends of its strings, and exactly right when no string
has whitespace at its ends. Run with `-s` for the per-template counts and the totals.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

pytest.importorskip("jinja2", reason="the chat templates are rendered with jinja2")

from response_templates import ResponseParser, library, parse_response
from response_templates.authoring.rendering import frozen_clock
from response_templates.authoring.verification import apply_source_edits, render_turn, scenario_render_kwargs, scenarios

FOLDER_VARIABLE = "RESPONSE_TEMPLATES_CHAT_TEMPLATES"
CONVERSATIONS = 40  # per chat template and verify scenario


def _folder() -> Path:
    """The folder of real chat templates: $RESPONSE_TEMPLATES_CHAT_TEMPLATES, or ../shared/chat_templates next to the
    checkout; the test skips without either."""
    folder = os.environ.get(FOLDER_VARIABLE)
    if folder:
        path = Path(folder)
        if not path.is_dir():
            pytest.fail(f"{FOLDER_VARIABLE}={folder!r} is not a folder")
        return path
    beside = Path(__file__).resolve().parents[1].parent / "shared" / "chat_templates"
    if not beside.is_dir():
        pytest.skip(f"{FOLDER_VARIABLE} is not set and there is no ../shared/chat_templates next to the checkout")
    return beside


# --- what each chat template can render -----------------------------------------------------------------------


@dataclass(frozen=True)
class Shapes:
    """The assistant turns (and histories) a chat template renders faithfully."""

    calls: bool = True  # the checked turn may carry tool calls
    parallel: bool = True  # ... more than one
    # ... and text besides its calls: "kept"; "dropped" (generated, and the chat template leaves it out: the message
    # as it reads has none); "reasoning" (the chat template writes it as the turn's reasoning); "absent" (not generated)
    text_with_calls: str = "kept"
    plain: bool = True  # the checked turn may be an answer without calls
    plain_with_tools: bool = True  # ... rendered with tool schemas
    reasoning_only: bool = True  # ... holding reasoning and no content
    history_calls: bool = True  # earlier assistant turns may carry calls
    calls_after_history_calls: bool = True  # ... also when the checked turn carries calls
    tools: str = "any"  # "any": tool schemas given when calls need them (and at random otherwise); "always"; "never"
    max_arguments: int | None = None  # top-level arguments per call
    system: bool = True  # the history may open with a system message
    union_types: bool = True  # tool schemas may give a list of types ({"type": ["integer", "null"]})
    text_after_calls_not_starting: str = ""  # characters the text of a turn with calls does not start with


_NO_TEXT_WITH_CALLS = "the chat template drops the text of an assistant message that has tool calls"

# (entry, chat template file or None for all of the entry's files): (shapes, why); a file's entry adds to its
# entry's. Most restate the entry's verify options (skip_cases / cases: the canonical shapes the chat template cannot
# render); the others are what random conversations showed the chat template cannot render (a system message, a
# list of types in a schema) or leaves out (the text next to calls).
SHAPES: dict[tuple[str, str | None], tuple[Shapes, str]] = {
    ("apriel_thinker", None): (
        Shapes(plain=False, text_with_calls="absent"),
        "the chat template renders an answer without reasoning as bare text, without the '[BEGIN FINAL RESPONSE]' "
        "marker the model writes; the scenario has no reasoning, so only calls are rendered faithfully",
    ),
    ("cohere-command", None): (Shapes(text_with_calls="dropped"), _NO_TEXT_WITH_CALLS),
    ("cohere-command", "CohereLabs--tiny-aya-earth.jinja"): (
        Shapes(calls=False, history_calls=False, tools="never"),
        "Tiny Aya's chat template renders no tools and no tool calls",
    ),
    ("deepseek_r1", None): (
        Shapes(calls_after_history_calls=False),
        "template bug: its is_first flag is never reset, so a second tool-calling assistant turn is rendered "
        "without the calls-begin marker",
    ),
    ("deepseek_r1", "deepseek-ai--DeepSeek-R1-Distill-Qwen-32B.jinja"): (
        Shapes(calls=False, history_calls=False, tools="never"),
        "the R1-Distill chat template renders no tool calls",
    ),
    ("deepseek_r1", "trl/deepseek_r1_distill.jinja"): (
        Shapes(calls=False, history_calls=False, tools="never"),
        "the R1-Distill chat template (TRL's copy) renders no tool calls",
    ),
    ("gemma-3", None): (
        Shapes(max_arguments=1, text_after_calls_not_starting="\"',)]}`"),
        "the chat template drops the commas between keyword arguments (a jinja2 loop-scoping bug): only calls "
        "with at most one argument render as valid calls; it writes the text right after the call list, with no "
        "separator, so text starting with a quote, a comma or a closing bracket cannot be told from a string "
        "argument holding ')]' (the call list only ends at ')]' followed by anything else), and text starting "
        "with ``` reads as the closing fence of a ```tool_code block",
    ),
    ("gemma-3", "google--gemma-3-1b-it.jinja"): (
        Shapes(calls=False, history_calls=False, tools="never"),
        "Gemma 3's official chat template cannot render tool calls or tool messages",
    ),
    ("gemma-3", "trl/gemma3.jinja"): (
        Shapes(calls=False, history_calls=False, tools="never"),
        "Gemma 3's original chat template (TRL's copy) cannot render tool calls or tool messages",
    ),
    ("gigachat3.5", None): (Shapes(reasoning_only=False), "the chat template raises on a turn holding only reasoning"),
    ("gpt-oss", None): (
        Shapes(text_with_calls="reasoning", parallel=False),
        "the chat template writes the text of a tool-call message as an analysis (reasoning) message, so it reads "
        "as reasoning; and it renders only the first tool call of a message",
    ),
    ("gemma-2", None): (Shapes(system=False), "the chat template raises on a system message"),
    ("granite-3", None): (
        Shapes(calls=False),
        "the Granite 3.3 chat template renders only the content of assistant turns, never their tool calls",
    ),
    ("hermes", None): (
        Shapes(text_with_calls="dropped", union_types=False),
        _NO_TEXT_WITH_CALLS + "; its json_to_python_type macro recurses forever on a list of types (it iterates "
        "over the letters of 'null')",
    ),
    ("hunyuan_a13b", None): (
        Shapes(plain_with_tools=False),
        "with tools, this chat template renders a plain assistant turn with a '助手：' (assistant:) label",
    ),
    ("kimi-k2", "moonshotai--Kimi-K2-Instruct.jinja"): (
        Shapes(calls=False, history_calls=False, tools="never"),
        "the chat template calls list.append to render tool calls, which the immutable sandbox rejects",
    ),
    ("kimi-k2", "moonshotai--Kimi-K2-Thinking.jinja"): (
        Shapes(calls=False, history_calls=False, tools="never"),
        "the chat template calls list.append to render tool calls, which the immutable sandbox rejects",
    ),
    ("lfm2", "LiquidAI--LFM2-1.2B.jinja"): (
        Shapes(calls=False, history_calls=False, tools="never"),
        "the LFM2 (v1) chat template renders no assistant tool calls",
    ),
    ("lfm2", "trl/lfm2.jinja"): (
        Shapes(calls=False, history_calls=False, tools="never"),
        "the LFM2 (v1) chat template (TRL's copy) renders no assistant tool calls",
    ),
    ("llama3.1", None): (Shapes(text_with_calls="dropped"), _NO_TEXT_WITH_CALLS),
    ("mistral", "mistralai--Mistral-Small-3.2-24B-Instruct-2506.jinja"): (
        Shapes(text_with_calls="dropped"),
        _NO_TEXT_WITH_CALLS,
    ),
    ("mistral_v3", "mistralai--Mistral-Small-3.1-24B-Instruct-2503.jinja"): (
        Shapes(text_with_calls="dropped"),
        _NO_TEXT_WITH_CALLS,
    ),
    ("mistral_v3", "mistralai--mistral-common-v3.jinja"): (
        Shapes(text_with_calls="absent"),
        "the chat template raises on an assistant message with both content and tool calls",
    ),
    ("mistral_v3", "mistralai--mistral-common-v3_spm.jinja"): (
        Shapes(text_with_calls="absent"),
        "the chat template raises on an assistant message with both content and tool calls",
    ),
    ("mistral_v3", "mistralai--Mistral-Nemo-Instruct-2407.jinja"): (
        Shapes(system=False, text_with_calls="dropped"),
        _NO_TEXT_WITH_CALLS + "; the chat template writes the system message into the [INST] of the last message when it is a user turn: "
        "the prompt (ending on that user turn) holds it there, the full rendering does not, so the prompt is not "
        "a prefix of the full rendering",
    ),
    ("minimax_m1", None): (Shapes(text_with_calls="dropped"), _NO_TEXT_WITH_CALLS),
    ("minimax_m3", None): (
        Shapes(union_types=False),
        "the chat template leaves out every None value (it never writes null), so a nullable parameter set to None "
        "does not come back",
    ),
    ("nemotron_nano_v2", None): (
        Shapes(plain=False, text_with_calls="absent"),
        "the chat template renders a final plain assistant turn as '<think>' + newline + content without closing "
        "the think block, and splits text before calls into a separate turn",
    ),
    ("olmo3", "allenai--Olmo-3-7B-Think.jinja"): (
        Shapes(calls=False),
        "the Think chat template never renders assistant tool calls",
    ),
    ("olmo3", None): (Shapes(text_with_calls="dropped"), _NO_TEXT_WITH_CALLS),
    ("phi-4-mini", None): (
        Shapes(tools="always"),
        "the llama.cpp template loops over `tools` whenever the variable is defined, so it fails with tools=None",
    ),
    ("smollm3", None): (
        Shapes(calls=False),
        "the chat template does not render assistant tool calls",
    ),
    ("solar_open", None): (Shapes(text_with_calls="dropped"), _NO_TEXT_WITH_CALLS),
    ("xlam", None): (Shapes(text_with_calls="dropped"), _NO_TEXT_WITH_CALLS),
}


@dataclass(frozen=True)
class ValueLimits:
    """What the generated argument values leave out."""

    string_chars: str = ""  # characters left out of string values
    safe_integers: bool = False  # integers only within ±(2^53 - 1)
    identifier_names: bool = False  # parameter names only ASCII identifiers
    # objects of no declared shape hold only text leaves and non-empty lists and objects
    text_free_values: bool = False


# entry: (limits, why). Each is a known limitation of a format (or of the chat template's way of writing values),
# not a parser miss; keep them narrow. Entries whose calls are python-call-list get identifier names by themselves.
VALUE_LIMITS: dict[str, tuple[ValueLimits, str]] = {
    "lfm2": (
        ValueLimits(string_chars="'\\"),
        "the chat template wraps string values in single quotes without escaping them: a backslash then reads as an "
        "escape, and a single quote is read back (raw_strings) only where no ', name=' follows it inside the value",
    ),
    "olmo3": (
        ValueLimits(identifier_names=True),
        "calls are Python calls with keyword arguments: a parameter name must be an identifier",
    ),
    "minimax_m3": (
        ValueLimits(text_free_values=True),
        "values are written as bare text inside nested elements, with no JSON syntax: a number, boolean or empty "
        "list or object is only told from text by the tool schema, which an object of no declared properties lacks",
    ),
    "llama4_pythonic": (
        ValueLimits(string_chars="'\"\\"),
        "the chat template pastes every value between double quotes with Python's %s, unescaped: strings holding "
        "a quote or a backslash end early",
    ),
}


def _value_limits(entry: dict) -> ValueLimits:
    limits = VALUE_LIMITS.get(entry["name"], (ValueLimits(), ""))[0]
    calls = entry["template"]["fields"].get("tool_calls") or {}
    if calls.get("content") == "python-call-list":
        # python-call-list (as transformers 5.25's) reads ASCII identifiers as keyword names
        limits = replace(limits, identifier_names=True)
    return limits


def _shapes(entry: dict, file: str) -> Shapes:
    supports = entry["supports"]
    shapes = Shapes(calls=bool(supports.get("tool_calls")), parallel=bool(supports.get("parallel_tool_calls")))
    for key in ((entry["name"], None), (entry["name"], file)):
        if key in SHAPES:
            given = SHAPES[key][0]
            shapes = replace(
                shapes,
                **{name: getattr(given, name) for name in given.__dataclass_fields__ if getattr(given, name) != getattr(Shapes(), name)},
            )
    if not supports.get("tool_calls"):
        shapes = replace(shapes, calls=False, history_calls=False, tools="never")
    return shapes


# --- random values ----------------------------------------------------------------------------------------------

_WORDS = [
    "alpha", "beta", "Zürich", "東京", "naïve", "🚀", "data", "x", "café", "Łódź", "résumé", "ok", "42", "true", "null",
    "None", "3.14", "-7", "the", "of", "and", "value", "Ω", "ß", "ñ", "über", "日本語", "emoji👍", "x_y", "a-b",
]
_MARKUP = [
    "**bold**", "_it_", "`code`", "# Title", "- item", "1. first", "> quote", "[link](http://a.b/c?d=e&f=g)",
    "a < b && c > d", "<b>hi</b>", "x <= y", "&amp;", "{curly}", "[square]", "(paren)", "{}", "[]", "{\"k\": 1}",
    "C:\\path\\to", "it's", 'say "hi"', "\\n", "%s", "$1", "50%", "#tag", "@user", "a|b", "~tilde~", "^", "=",
    "call:", "tool_call", "</", "<|", "[TOOL]", "functions.", "think", "<think", "json", "```json", "name=", "<param", "invoke", "{\"name\": 1}",
    "\\u00e9", "\\x41", "no\u00a0break", "zero\u200bwidth", "e\u0301", "\u05e9\u05dc\u05d5\u05dd", "line\u2028sep",
]


def _text(rng: random.Random, limits: ValueLimits | None = None, *, lines: bool = True) -> str:
    """A random non-empty text: words, markup, punctuation, line breaks and tabs."""
    parts = []
    for _ in range(rng.randint(1, 14)):
        roll = rng.random()
        if roll < 0.6:
            parts.append(rng.choice(_WORDS))
        elif roll < 0.85:
            parts.append(rng.choice(_MARKUP))
        else:
            parts.append(rng.choice([",", ".", "!", "?", ":", ";", "'", '"', "\\", "/", "*", "-", "—"]))
        if lines and rng.random() < 0.12:
            parts.append(rng.choice(["\n", "\n\n", "\n- ", "\t", "\r\n", "\n```python\nprint(1)\n```\n"]))
        else:
            parts.append(" " if rng.random() < 0.9 else rng.choice(["  ", "\t"]))
    text = "".join(parts).strip()
    if limits is not None and limits.string_chars:
        text = "".join(c for c in text if c not in limits.string_chars).strip()
    return text or "word"


def _edge_spaces(rng: random.Random, text: str) -> str:
    """Sometimes whitespace at the ends (most chat templates strip it: counted apart)."""
    if rng.random() < 0.1:
        return rng.choice([" ", "\n", "  ", "\n\n"]) + text + rng.choice(["", " ", "\n"])
    return text


_PARAM_NAMES = ["city", "query", "count", "limit", "options", "items", "flag", "note", "payload", "tags", "mode",
                "start_date", "maxResults", "user_id", "größe", "x", "config", "filters", "data", "level", "first name"]
_NESTED_KEYS = ["name", "key with space", "ünïcode", "camelCase", "snake_case", "a-b", "x.y", "", "123", "n"]


def _schema(rng: random.Random, depth: int, unions: bool) -> dict:
    kinds = ["string", "string", "integer", "number", "boolean", "enum"] + (["nullable"] if unions else [])
    if depth < 2:
        kinds += ["object", "free_object", "array_strings", "array_objects", "array_integers"]
    kind = rng.choice(kinds)
    if kind == "nullable":
        return {"type": ["integer", "null"]}
    if kind == "enum":
        return {"type": "string", "enum": ["low", "high", "very high", "ÉLEVÉ"]}
    if kind == "object":
        keys = rng.sample(_NESTED_KEYS, rng.randint(0, 3))
        return {"type": "object", "properties": {k: _schema(rng, depth + 1, unions) for k in keys}}
    if kind == "free_object":
        return {"type": "object"}
    if kind == "array_strings":
        return {"type": "array", "items": {"type": "string"}}
    if kind == "array_integers":
        return {"type": "array", "items": {"type": "integer"}}
    if kind == "array_objects":
        return {"type": "array", "items": _schema_object(rng, depth + 1, unions)}
    return {"type": kind}


def _schema_object(rng: random.Random, depth: int, unions: bool) -> dict:
    keys = rng.sample(_NESTED_KEYS, rng.randint(1, 3))
    return {"type": "object", "properties": {k: _schema(rng, depth + 1, unions) for k in keys}}


_INTEGERS = [0, 1, -1, 7, -42, 2024, 2**31, -(2**40), 10**15, 2**53 - 1, 123456789012345678, -(10**20)]
_FLOATS = [0.5, -2.25, 3.14159, 1e-07, 1.5e20, -0.001, 2.0, 100.125]


def _integer(rng: random.Random, limits: ValueLimits) -> int:
    value = rng.choice(_INTEGERS)
    return value if not limits.safe_integers or abs(value) <= 2**53 - 1 else rng.choice(_INTEGERS[:8])


def _value(rng: random.Random, schema: dict, limits: ValueLimits) -> object:
    kind = schema.get("type")
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if kind == ["integer", "null"]:
        return None if rng.random() < 0.6 else _integer(rng, limits)
    if kind == "string":
        roll = rng.random()
        if roll < 0.06:
            # strings that read as other JSON types: the schema says they stay strings
            looks = ["42", "-7", "3.14", "1e5", "true", "False", "null", "None", "[1, 2]", '{"a": 1}', "{}"]
            return rng.choice([text for text in looks if not set(text) & set(limits.string_chars)])
        if roll < 0.08:
            return rng.choice(["", " ", "\n", "\t "])
        return _edge_spaces(rng, _text(rng, limits))
    if kind == "integer":
        return _integer(rng, limits)
    if kind == "number":
        return rng.choice(_FLOATS) if rng.random() < 0.8 else _integer(rng, replace(limits, safe_integers=True))
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "object":
        properties = schema.get("properties")
        if properties is None:
            return _free_value(rng, 0, limits)
        keys = [k for k in properties if rng.random() < 0.8]
        return {k: _value(rng, properties[k], limits) for k in keys}
    if kind == "array":
        return [_value(rng, schema["items"], limits) for _ in range(rng.choice([0, 1, 2, 3]))]
    raise AssertionError(schema)


def _free_value(rng: random.Random, depth: int, limits: ValueLimits) -> dict:
    """A JSON object of no declared shape: any JSON values, nested."""
    out: dict = {}
    if limits.text_free_values:
        for key in rng.sample(_NESTED_KEYS, rng.randint(1, 3)):
            roll = rng.random()
            if roll < 0.5 or depth >= 2:
                out[key] = _text(rng, limits)
            elif roll < 0.75:
                out[key] = _free_value(rng, depth + 1, limits)
            else:
                out[key] = [_text(rng, limits) if rng.random() < 0.5 else _free_value(rng, depth + 1, limits) for _ in range(rng.randint(1, 2))]
        return out
    for key in rng.sample(_NESTED_KEYS, rng.randint(0, 3)):
        roll = rng.random()
        if roll < 0.25:
            out[key] = _text(rng, limits)
        elif roll < 0.4:
            out[key] = _integer(rng, limits) if rng.random() < 0.5 else rng.choice(_FLOATS)
        elif roll < 0.5:
            out[key] = rng.choice([True, False, None])
        elif roll < 0.7 and depth < 2:
            out[key] = _free_value(rng, depth + 1, limits)
        elif depth < 2:
            out[key] = [_free_value(rng, depth + 1, limits) if rng.random() < 0.5 else _integer(rng, limits) for _ in range(rng.randint(0, 2))]
        else:
            out[key] = []
    return out


def _tool(rng: random.Random, index: int, shapes: Shapes, limits: ValueLimits) -> dict:
    count = rng.choice([0, 1, 2, 3, 4, 5])
    if shapes.max_arguments is not None:
        count = min(count, shapes.max_arguments)
    names = rng.sample([n for n in _PARAM_NAMES if not limits.identifier_names or (n.isascii() and n.isidentifier())], count)
    properties = {name: _schema(rng, 0, shapes.union_types) for name in names}
    required = [name for name in names if rng.random() < 0.5]
    name = rng.choice(["get", "search", "create", "update", "run", "fetch", "do"]) + rng.choice("__-") + rng.choice(
        ["weather", "items", "event", "record", "query", "file", "thing2", "user_profile"]
    ) + (str(index) if index else "")
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": _text(rng, lines=False),
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


def _arguments(rng: random.Random, tool: dict, limits: ValueLimits) -> dict:
    parameters = tool["function"]["parameters"]
    return {
        name: _value(rng, schema, limits)
        for name, schema in parameters["properties"].items()
        if name in parameters["required"] or rng.random() < 0.7
    }


def _call_id(rng: random.Random) -> str:
    # Mistral chat templates insist on 9 alphanumeric characters.
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(9))


def _call(rng: random.Random, tools: list[dict], limits: ValueLimits) -> dict:
    tool = rng.choice(tools)
    return {"id": _call_id(rng), "type": "function", "function": {"name": tool["function"]["name"], "arguments": _arguments(rng, tool, limits)}}


def _conversation(rng: random.Random, shapes: Shapes, reasoning: bool, limits: ValueLimits):
    """(history, assistant message, tools) for one random conversation."""
    tools = [_tool(rng, i, shapes, limits) for i in range(rng.randint(1, 4))] if shapes.calls or shapes.history_calls else []
    # the checked turn
    kinds = []
    if shapes.plain:
        kinds.append("plain")
    if shapes.calls:
        kinds.append("calls")
    kind = rng.choice(kinds)
    message: dict = {"role": "assistant"}
    if kind == "calls":
        count = rng.choice([1, 1, 2, 3]) if shapes.parallel else 1
        message["tool_calls"] = [_call(rng, tools, limits) for _ in range(count)]
        message["content"] = _edge_spaces(rng, _text(rng)) if shapes.text_with_calls != "absent" and rng.random() < 0.5 else ""
        if message["content"].lstrip()[:1] in tuple(shapes.text_after_calls_not_starting):
            message["content"] = "so " + message["content"].lstrip()
    else:
        empty = reasoning and shapes.reasoning_only and rng.random() < 0.15
        message["content"] = "" if empty else _edge_spaces(rng, _text(rng))
    if reasoning:
        message["reasoning_content"] = _edge_spaces(rng, _text(rng))
    # the history
    history: list[dict] = []
    if shapes.system and rng.random() < 0.5:
        history.append({"role": "system", "content": _text(rng)})
    if rng.random() < 0.4:
        history.append({"role": "user", "content": _text(rng)})
        allowed = shapes.calls_after_history_calls if kind == "calls" else shapes.plain_with_tools
        if shapes.history_calls and allowed and rng.random() < 0.7:
            calls = [_call(rng, tools, limits) for _ in range(rng.choice([1, 1, 2]) if shapes.parallel else 1)]
            turn: dict = {"role": "assistant", "content": "", "tool_calls": calls}
            if reasoning:
                turn["reasoning_content"] = _text(rng)
            history.append(turn)
            for call in calls:
                result = json.dumps({"result": _text(rng)}, ensure_ascii=False)
                history.append({"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"], "content": result})
        answer: dict = {"role": "assistant", "content": _text(rng)}
        if reasoning:
            answer["reasoning_content"] = _text(rng)
        history.append(answer)
    history.append({"role": "user", "content": _text(rng)})
    uses_tools = any(m.get("tool_calls") for m in history + [message])
    if kind == "plain" and not shapes.plain_with_tools:
        given = None
    elif shapes.tools == "always" or (shapes.tools == "any" and (uses_tools or (tools and rng.random() < 0.5))):
        if not tools:
            tools = [_tool(rng, 0, shapes, limits)]
        given = tools
    else:
        given = None
    return history, message, given


# --- comparison ------------------------------------------------------------------------------------------------


def _as_read(message: dict, shapes: Shapes) -> dict:
    """The assistant message as the rendered turn says it (what a chat template leaves out is not there to read)."""
    if not message.get("tool_calls") or not message.get("content") or shapes.text_with_calls == "kept":
        return message
    read = {**message, "content": ""}
    if shapes.text_with_calls == "reasoning":
        read["reasoning_content"] = message["content"]
    return read


def _strip_all(value):
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict):
        return {k: _strip_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip_all(v) for v in value]
    return value


def _typed(value):
    # 1 == 1.0 == True in Python: compare JSON types too.
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


def _edge_spaces_in(message: dict) -> bool:
    """Whether a text of the message, or a string among its arguments, has whitespace at an end."""

    def edged(value) -> bool:
        if isinstance(value, str):
            return value != value.strip()
        if isinstance(value, dict):
            return any(edged(v) for v in value.values())
        if isinstance(value, list):
            return any(edged(v) for v in value)
        return False

    calls = [call["function"]["arguments"] for call in message.get("tool_calls") or []]
    return edged([message.get("content") or "", message.get("reasoning_content") or "", calls])


def _view(message: dict, loose: bool) -> dict:
    def text(key):
        value = message.get(key)
        if loose and isinstance(value, str):
            value = value.strip()
        return value or None

    calls = []
    for call in message.get("tool_calls") or []:
        arguments = call["function"]["arguments"]
        calls.append((call["function"]["name"], _typed(_strip_all(arguments) if loose else arguments)))
    return {"content": text("content"), "reasoning_content": text("reasoning_content"), "tool_calls": calls}


# --- the run ---------------------------------------------------------------------------------------------------


def _pairs():
    for name in library.list_templates():
        for item in library.get_entry(name)["chat_templates"]:
            yield pytest.param(name, item["file"], id=f"{name}/{item['file']}")


@dataclass
class Tally:
    """What the conversations of one chat template gave."""

    conversations: int = 0
    exact: int = 0  # parsed message == rendered message
    loose: int = 0  # ... up to whitespace at the ends of its strings (texts and string argument values)
    misses: list = field(default_factory=list)  # (where, rendered, parsed, generation) not right even so
    unexplained: list = field(default_factory=list)  # not exact, though no string has whitespace at its ends


RESULTS: dict[str, Tally] = {}


def _stream(template, generation: str, prompt: str, tools, rng: random.Random) -> dict:
    parser = ResponseParser(template, prefix=prompt, tools=tools)
    position = 0
    while position < len(generation):
        size = rng.choice([1, 1, 2, 3, 5, 8, 13, 40])
        parser.feed(generation[position : position + size])
        position += size
    message, _ = parser.finalize()
    return message


def run_template(name: str, file: str, folder: Path, conversations: int = CONVERSATIONS) -> Tally:
    """Render, parse and compare `conversations` random conversations per verify scenario of one chat template."""
    entry = library.get_entry(name)
    item = next(i for i in entry["chat_templates"] if i["file"] == file)
    data = (folder / file).read_bytes()
    assert hashlib.sha256(data).hexdigest() == item["sha256"], f"{name}: {file} changed since it was verified"
    options = {**entry.get("verify", {}), **item.get("verify", {})}
    source = apply_source_edits(data.decode("utf-8"), options.get("source_edits") or [])
    shapes = _shapes(entry, file)
    if options.get("tools_always"):
        shapes = replace(shapes, tools="always")
    limits = _value_limits(entry)
    template = entry["template"]
    tally = Tally()
    for scenario in scenarios(options):
        kwargs = scenario_render_kwargs(options, scenario)
        reasoning = scenario.get("reasoning", bool(entry["supports"].get("reasoning")))
        rng = random.Random(f"{name}/{file}/{scenario['name']}")
        for index in range(conversations):
            history, message, tools = _conversation(rng, shapes, reasoning, limits)
            where = f"{name}/{file}/{scenario['name']}#{index}"
            with frozen_clock():
                prompt, _, generation = render_turn(source, history, message, tools=tools, options=options, render_kwargs=kwargs)
            assert generation is not None, f"{where}: the prompt is not a prefix of the full rendering"
            parsed = parse_response(generation, template, prefix=prompt, tools=tools)
            streamed = _stream(template, generation, prompt, tools, rng)
            assert streamed == parsed, f"{where}: streamed {streamed!r}\none-shot {parsed!r}\ngeneration {generation!r}"
            tally.conversations += 1
            message = _as_read(message, shapes)
            case = (where, message, parsed, generation)
            if _view(parsed, False) == _view(message, False):
                tally.exact += 1
            elif not _edge_spaces_in(message):
                tally.unexplained.append(case)
            if _view(parsed, True) == _view(message, True):
                tally.loose += 1
            else:
                tally.misses.append(case)
    return tally


def _shown(cases: list) -> str:
    return "\n".join(f"{w}\n  rendered   {m!r}\n  parsed     {p!r}\n  generation {g!r}" for w, m, p, g in cases[:3])


@pytest.mark.parametrize("name, file", list(_pairs()))
def test_random_conversations_parse_back(name, file):
    folder = _folder()
    tally = run_template(name, file, folder)
    RESULTS[f"{name}/{file}"] = tally
    print(f"\n{name}/{file}: {tally.exact}/{tally.conversations} exact, {tally.loose}/{tally.conversations} up to whitespace at the ends")
    # Every conversation comes back, up to whitespace at the ends of its strings (chat templates strip most texts
    # they write, and the library templates give whitespace next to markup to the markup) ...
    assert not tally.misses, f"{name}/{file}: {len(tally.misses)} of {tally.conversations} not read back\n{_shown(tally.misses)}"
    # ... and exactly when none of its strings has whitespace at its ends: the exact-match floor.
    assert not tally.unexplained, f"{name}/{file}: not exact\n{_shown(tally.unexplained)}"


def test_the_conversations_hold_every_kind_of_value():
    """The generator really writes what the test claims to cover (seen over a few hundred conversations)."""
    rng = random.Random("coverage")
    seen: set[str] = set()

    def look(value, top=False):
        if isinstance(value, dict):
            seen.add("empty object" if not value else "object")
            for key, item in value.items():
                if " " in key:
                    seen.add("key with a space")
                look(item)
        elif isinstance(value, list):
            seen.add("empty array" if not value else "array")
            if any(isinstance(item, dict) for item in value):
                seen.add("array of objects")
            for item in value:
                look(item)
        elif isinstance(value, bool):
            seen.add("boolean")
        elif value is None:
            seen.add("null")
        elif isinstance(value, int):
            seen.add("negative integer" if value < 0 else "integer")
            if abs(value) > 2**53:
                seen.add("integer beyond 2^53")
        elif isinstance(value, float):
            seen.add("float")
        elif isinstance(value, str):
            for label, chars in [("quote", "'\""), ("backslash", "\\"), ("line break", "\n"), ("tab", "\t"),
                                 ("markup character", "<>&"), ("brace", "{}[]"), ("non-ASCII", "éü東🚀")]:
                if any(c in value for c in chars):
                    seen.add(f"string with a {label}")

    for _ in range(300):
        history, message, tools = _conversation(rng, Shapes(), True, ValueLimits())
        calls = message.get("tool_calls") or []
        seen.add(f"{min(len(calls), 2)} calls")
        if calls and message["content"]:
            seen.add("text with calls")
        if not message["content"] and not calls:
            seen.add("reasoning only")
        if any(m.get("tool_calls") for m in history):
            seen.add("calls in the history")
        for call in calls:
            look(call["function"]["arguments"], top=True)
    expected = {
        "0 calls", "1 calls", "2 calls", "text with calls", "reasoning only", "calls in the history", "object",
        "empty object", "array", "empty array", "array of objects", "key with a space", "boolean", "null", "integer",
        "negative integer", "integer beyond 2^53", "float",
    } | {f"string with a {label}" for label in ("quote", "backslash", "line break", "tab", "markup character", "brace", "non-ASCII")}
    assert expected <= seen, sorted(expected - seen)


def test_totals():
    """With -s: the totals over every chat template that ran."""
    if not RESULTS:
        pytest.skip("no chat template ran in this session")
    total = sum(t.conversations for t in RESULTS.values())
    exact = sum(t.exact for t in RESULTS.values())
    loose = sum(t.loose for t in RESULTS.values())
    print(
        f"\n{len(RESULTS)} chat templates, {total} conversations: {100 * exact / total:.1f}% exact, "
        f"{100 * loose / total:.1f}% up to whitespace at the ends"
    )

"""Infer a response template from a chat template.

A chat template already knows how its model writes a message: give it an assistant turn and it writes
the reasoning, the content and the tool calls with the model's own markers. We render probe turns whose
values are easy to find again (a content marker, a reasoning marker, calls with known names and
arguments), and read the markup around those values: the assistant header the prompt ends with (the
start anchor), what follows the content (end of turn), what surrounds the reasoning, and the envelope
and argument syntax of tool calls. This differential reading follows the idea of llama.cpp's
"autoparser"; the result here is a portable, declarative response template.

The pieces are assembled into a version-1 template that follows the library's rules (whitespace that
belongs to markup sits inside the delimiters, a call closes only after a complete value, text around
calls is kept, a generation cut inside a marker leaves no marker text behind), and the result is run
through `verify`. Whatever could not be decided is reported with its reason; a template that does not
pass verification is never returned.

    result = infer_template(chat_template_source)
    result.template        # the response template dict, or None
    result.reasons         # why it gave up, or what it could not decide
"""

from __future__ import annotations

import copy
import json
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from ..verification import _TOOLS, _common_prefix, _split, frozen_clock, render_chat_template, verify

__all__ = [
    "InferenceError",
    "InferredResponseTemplate",
    "InferredTemplate",
    "infer_for_tokenizer",
    "infer_template",
    "load_chat_template",
]

# Probe values: distinctive, so each is found exactly once in a rendering.
_USER = "USER_PROBE_TEXT"
_CONTENT = "CONTENT_PROBE_TEXT"
_REASONING = "REASONING_PROBE_TEXT"
_CALL_A = ("get_weather", {"city": "Paris", "days": 3})
_CALL_B = ("search_web", {"query": "bakeries", "max_results": 5})
_CALL_IDS = ("call00001", "call00002")  # 9 characters, alphanumeric (Mistral templates insist)


class InferenceError(Exception):
    """Inference gave up; the message says why."""


@dataclass
class InferredTemplate:
    """What `infer_template` found.

    `template` is a verified version-1 response template, or None when inference gave up (then `reasons`
    says why). `confidence` is in [0, 1]: the share of canonical verify cases that ran and passed, lowered
    when cases could not be rendered. `verified` is the verify summary, `reasons` the undecided points or
    why it gave up, `markers` the pieces found in the renderings, `options` the verify options used.
    """

    template: dict | None
    confidence: float
    verified: str
    reasons: list[str] = field(default_factory=list)
    markers: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    supports: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.template is not None

    def to_dict(self) -> dict:
        return {
            "template": self.template,
            "confidence": self.confidence,
            "verified": self.verified,
            "reasons": self.reasons,
            "markers": self.markers,
            "supports": self.supports,
            "verify_options": self.options,
        }

    def report(self) -> str:
        head = "inferred" if self.ok else "cannot infer"
        lines = [f"{head} (confidence {self.confidence:.2f})"]
        lines += [f"  {key}: {value!r}" for key, value in self.markers.items()]
        if self.verified:
            lines.append("verify: " + self.verified.replace("\n", "\n  "))
        lines += [f"- {reason}" for reason in self.reasons]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Rendering probes.


def _call(name: str, arguments: dict, call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _common_prefix_len(a: str, b: str) -> int:
    return len(_common_prefix(a, b))


def _common_suffix_len(a: str, b: str) -> int:
    n = 0
    for x, y in zip(reversed(a), reversed(b)):
        if x != y:
            break
        n += 1
    return n


class _Renderer:
    """Renders one assistant turn after a history and returns (prompt, generation)."""

    def __init__(self, chat_template: str, kwargs: dict):
        self.source = chat_template
        self.kwargs = kwargs
        self.tools_always = False
        self.arguments = "dict"
        self.synthesis: dict | None = None  # verify's reasoning_synthesis, for turns rendered without reasoning
        self.with_reasoning = False  # every probed assistant message carries reasoning
        self.reasoning_key = None  # the message key the chat template reads reasoning from, when not reasoning_content

    def _message(self, message: dict) -> dict:
        message = copy.deepcopy(message)
        if self.reasoning_key and message.get("reasoning_content") is not None:
            message[self.reasoning_key] = message.pop("reasoning_content")
        if self.arguments == "json_string":
            for call in message.get("tool_calls") or []:
                call["function"]["arguments"] = json.dumps(call["function"]["arguments"], ensure_ascii=False)
        return message

    def render(self, messages: list[dict], tools: bool, generation_prompt: bool) -> str:
        return render_chat_template(
            self.source,
            [self._message(m) for m in messages],
            tools=_TOOLS if tools or self.tools_always else None,
            add_generation_prompt=generation_prompt,
            **self.kwargs,
        )

    def turn(self, history: list[dict], message: dict, tools: bool = False) -> tuple[str, str]:
        prompt = self.render(history, tools, True)
        if self.with_reasoning:
            message = dict(message, reasoning_content=_REASONING)
        full = self.render(history + [message], tools, False)
        if not full.startswith(prompt) and self.synthesis is not None:
            generation = _split(prompt, full, message, self.synthesis)
            if generation is not None:
                return prompt, generation
        if not full.startswith(prompt):
            raise InferenceError(
                "the prompt (history + generation prompt) is not a prefix of the rendered assistant turn: the chat "
                f"template rewrites the last turn (prompt ends {prompt[-60:]!r}, rendering continues "
                f"{full[_common_prefix_len(prompt, full):][:60]!r})"
            )
        return prompt, full[len(prompt):]

    def generation_prompt(self, history: list[dict], tools: bool = False) -> str:
        """What add_generation_prompt adds after the history (empty for templates without one)."""
        with_prompt = self.render(history, tools, True)
        without = self.render(history, tools, False)
        return with_prompt[_common_prefix_len(with_prompt, without):]


def _user(text: str = _USER) -> dict:
    return {"role": "user", "content": text}


def _tool_history() -> list[dict]:
    """A history ending with a tool result (for the anchor after a tool turn)."""
    return [
        _user(),
        {"role": "assistant", "content": "", "tool_calls": [_call("get_weather", {"city": "Oslo"}, "call00009")]},
        {"role": "tool", "tool_call_id": "call00009", "name": "get_weather", "content": "TOOL_RESULT_PROBE"},
    ]


# ---------------------------------------------------------------------------------------------
# Small string helpers for building patterns.

# End-of-generation tokens of widely used tokenizers. A model may stop with its tokenizer's EOS token instead
# of the turn's end marker (Hermes on Llama writes <|eot_id|>); those the chat template never writes cannot be
# markup of this format, so they are accepted as an end too.
_COMMON_EOS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "</s>", "<eos>",
               "<end_of_turn>", "<|eot|>", "<|eom|>", "<｜end▁of▁sentence｜>", "[EOS]")

# Special-token-like markup: <|x|>, <x>, </x>, [X], <｜x｜>.
# Gemma 4 uses half-barred ones: <|turn>, <turn|>.
# A lowercase word between two special tokens (<|open|>think<|sep|>, <|channel|>final<|message|>) names a section
# and is one marker with them; a role name there (<|start|>assistant<|channel|>) belongs to the turn header instead.
_TOKEN = re.compile(r"<\|[^<>|\s]+\|>(?!(?:assistant|user|system|tool)<)[a-z][a-z_]*<\|[^<>|\s]+\|>|<\|[^<>]*?\|>|<｜[^<>]*?｜>|</?｜[^<>]*?>|<\|[^<>|\s]+>|<[A-Za-z_][^<>|\s]*\|>|</?[A-Za-z_][^<>\s]*(?:\s[^<>]*)?>"
                    r"|\[/?[A-Z_]+\]")


def _esc(text: str) -> str:
    """A regex for literal markup where any run of whitespace may vary (models are loose with it)."""
    parts = re.split(r"(\s+)", text)
    return "".join(r"\s*" if part.isspace() else re.escape(part) for part in parts if part)


def _first_token(text: str) -> str:
    """The first special-token-like marker of `text` (the end-of-turn marker), else its first line."""
    stripped = text.strip()
    match = _TOKEN.match(stripped)
    if match:
        return match.group(0)
    return stripped.split("\n")[0].strip()


def _alternation(items: list[str]) -> str:
    items = sorted({i for i in items if i}, key=len, reverse=True)
    return "(?:" + "|".join(re.escape(i) for i in items) + ")"


# ---------------------------------------------------------------------------------------------
# Finding the pieces.


@dataclass
class _Turn:
    anchor: str = ""  # literal start anchor
    anchors: list = field(default_factory=list)  # all anchors seen (after a user turn, after a tool turn)
    prefill: str = ""  # what the generation prompt writes after the anchor (e.g. "<think>\n")
    before_content: str = ""  # what the turn writes before plain content (e.g. an empty think block)
    content_open: str = ""  # markup right before content, when content has its own markers
    content_close: str = ""
    reasoning_close: str = ""
    extra_ends: list = field(default_factory=list)  # the tokenizer's EOS and common EOS tokens
    anchor_suffix: str = ""  # a reasoning close the generation prompt may write right after the anchor
    empty_reasoning: tuple = ()  # (open, close) of the reasoning markers, to drop empty blocks from call probes
    end: str = ""  # end-of-turn marker
    citation: tuple = ()  # (span open tag, close tag head) of the grounding markup the prompt describes
    unprefilled: list = field(default_factory=list)  # anchors whose generation prompt does not open the reasoning
    dropped: list = field(default_factory=list)  # markup dropped from the content where it stands (kept whitespace)
    segment: str = ""  # a marker opening each segment of the turn, the first one written by the generation prompt


@dataclass
class _Reasoning:
    open: str = ""
    close: str = ""
    prefilled: bool = False  # the generation prompt opens the reasoning block
    always: bool = False  # ... in every turn (no thinking switch)
    conventional: bool = False  # not from the chat template: the common <think> convention
    also: list = field(default_factory=list)  # conventional (open, close) pairs accepted besides the template's
    bare: bool = False  # opened by text the generation prompt writes; the rendered turn starts with the reasoning


@dataclass
class _Calls:
    kind: str = ""  # json_object | json_array | name_json | xml | python
    open: str = ""  # regex opening one call (may capture the name)
    close: str = ""  # regex closing one call
    partial_open: str = ""  # regex for a call opener cut off at the end of the generation
    content_args: dict | None = None
    transform: dict | None = None
    transform_each: bool = False
    content: str = "json"
    repeats: bool = True
    literal: dict = field(default_factory=dict)  # the literal markers found, for the report
    end_guard: str = ""  # lookbehind a call's text must satisfy before the end of the turn closes it


def _assistant(content: str, reasoning: bool, **extra) -> dict:
    message = {"role": "assistant", "content": content, **extra}
    if reasoning:
        message["reasoning_content"] = _REASONING
    return message


# Message keys chat templates read reasoning from besides reasoning_content.
_REASONING_KEYS = ("reasoning", "thinking")


def _reasoning_key(r: _Renderer, reasons: list[str]) -> None:
    """Use another message key for reasoning when the chat template ignores reasoning_content but reads that one."""
    def shows(key):
        r.reasoning_key = key
        try:
            text = r.render([_user(), _assistant(_CONTENT, True)], False, False)
        except Exception:
            return False
        return _REASONING in text[text.rfind(_USER):]

    if shows(None):
        return
    for key in _REASONING_KEYS:
        if shows(key):
            reasons.append(f"reasoning: the chat template reads it from message[{key!r}], not reasoning_content")
            return
    r.reasoning_key = None


def _find_reasoning(r: _Renderer, reasons: list[str]) -> _Reasoning | None:
    """Reasoning markers, from a turn rendered with reasoning and content."""
    _reasoning_key(r, reasons)
    try:
        prompt, generation = r.turn([_user()], _assistant(_CONTENT, True))
    except InferenceError:
        # The chat template rewrites the last turn: a reasoning opener the generation prompt writes and the
        # rendered turn drops. Rebuild the generation as the model writes it, if the closing marker is known.
        prompt = r.render([_user()], False, True)
        opener = _tail_token(prompt)
        closer = _closing_of(opener, r.source)
        if not closer:
            bare = _reasoning_after_text_prefill(r, prompt, reasons)
            if bare is not None:
                return bare
            reasons.append("reasoning: the chat template rewrites the last turn and no reasoning markers could be found")
            return None
        prefill = prompt[prompt.rindex(opener):]
        full = r.render([_user(), _assistant(_CONTENT, True)], False, False)
        rest = full[len(prompt) - len(prefill):] if full.startswith(prompt[: len(prompt) - len(prefill)]) else ""
        # The rendered turn may already start with the closing marker (DeepSeek V3.1 writes </think> + content).
        r.synthesis = {"prefill": prefill, "close": "" if rest.lstrip().startswith(closer) else "\n" + closer + "\n\n"}
        reasons.append(f"reasoning: the chat template drops reasoning from the turn it renders; the closing marker "
                       f"{closer!r} is inferred from the opener {opener!r} and its presence in the chat template source "
                       "(a weaker check)")
        try:
            prompt, generation = r.turn([_user()], _assistant(_CONTENT, True))
        except InferenceError as error:
            reasons.append(f"reasoning: not decided, {error}")
            r.synthesis = None
            return None
    if _REASONING not in generation or _CONTENT not in generation:
        return None
    at, content_at = generation.index(_REASONING), generation.index(_CONTENT)
    if content_at < at:
        reasons.append("reasoning: the chat template writes reasoning after the content; not supported")
        return None
    opener = generation[:at]
    prefilled = not opener.strip()
    if prefilled:
        opener = _tail_token(prompt)  # opened by the generation prompt
    elif _TOKEN.search(opener):
        # Keep only the opener itself: what precedes it belongs to the turn's lead-in.
        opener = opener[list(_TOKEN.finditer(opener))[-1].start():] if not _TOKEN.fullmatch(opener.strip()) else opener
        opener = _with_header(generation[:at], opener)
    closer = generation[at + len(_REASONING):content_at]
    if not opener.strip() or not closer.strip():
        reasons.append(f"reasoning: no markers around it (open {opener!r}, close {closer!r})")
        return None
    # The close is the first marker after the reasoning; what follows it belongs to the content's lead-in.
    return _Reasoning(open=opener.strip(), close=_first_token(closer), prefilled=prefilled)


def _reasoning_after_text_prefill(r: _Renderer, prompt: str, reasons: list[str]) -> _Reasoning | None:
    """A generation prompt that ends with plain text the rendered turn drops, before a turn that writes the
    reasoning bare right after its header.

    Some chat templates end the generation prompt with a sentence that opens the reasoning ('Here are my
    reasoning steps:' and a line break, Apriel 1.6) while the last turn they render writes the reasoning itself
    right after the header, then a marker, then the content: prompt = history + header + T, rendered turn =
    history + header + reasoning + X + content. T is the prompt's own text (the model never writes it: the
    rendered turn does not keep it), the model writes its reasoning after it and ends it with X. So the
    reasoning is open from the start of every generation, with T as its (optional) opener and X as its close,
    and verify reads the rendered turn after the header as the generation (reasoning_synthesis with prefill T:
    a rendered turn that starts with the reasoning is taken as it is).
    """
    try:
        full = r.render([_user(), _assistant(_CONTENT, True)], False, False)
    except Exception:
        return None
    at = full.rfind(_REASONING)
    content_at = full.find(_CONTENT, at + 1) if at >= 0 else -1
    if content_at < 0 or not prompt.startswith(full[:at]):
        return None
    head, prefill, closer = full[:at], prompt[at:], full[at + len(_REASONING):content_at]
    if not (head.endswith("\n") or _tail_token(head)):
        return None  # the reasoning does not start a line or follow markup: not a turn that starts with it
    if not prefill.strip() or _TOKEN.search(prefill) or prefill.strip() in full[at:] or not closer.strip():
        return None
    r.synthesis = {"prefill": prefill, "close": ""}
    reasons.append(f"reasoning: the generation prompt ends with {prefill!r}, which the rendered turn drops; the turn "
                   f"writes the reasoning right after its header and closes it with {_first_token(closer)!r}: the "
                   "reasoning is open from the start of the generation (verified on the rendered turn after the header)")
    return _Reasoning(open=prefill.strip(), close=_first_token(closer), prefilled=True, bare=True)


# Reasoning delimiters of well-known formats, used only when the chat template writes them in its source but never
# renders reasoning_content (so they cannot be read from a rendering).
_KNOWN_REASONING = (("<think>", "</think>"), ("[THINK]", "[/THINK]"), ("<seed:think>", "</seed:think>"),
                    ("<|START_THINKING|>", "<|END_THINKING|>"), ("<|channel>thought", "<channel|>"))


def _conventional_reasoning(turn: _Turn, reasoning: _Reasoning | None, reasons: list[str]) -> None:
    """Conventional think blocks read as reasoning besides the chat template's own markers.

    Models of one lineage keep writing the common block whatever a given chat template shows: <think> ...
    </think>, and in chat templates whose special tokens are written [LIKE_THIS], [THINK] ... [/THINK]. Only that
    exact markup is affected; it is not verified (the chat template does not write it)."""
    if reasoning is None:
        return
    pairs = [("<think>", "</think>")]
    if any(re.search(r"\[/?[A-Z_]+\]", text) for text in (*turn.anchors, turn.end)):
        pairs.append(("[THINK]", "[/THINK]"))
    for pair in pairs:
        if pair[0] != reasoning.open and pair[1] != reasoning.close:
            reasoning.also.append(pair)
    if reasoning.also:
        shown = ", ".join(f"{a} ... {b}" for a, b in reasoning.also)
        reasons.append(f"reasoning: {shown} also read as reasoning by convention (not verified)")


def _reasoning_from_source(source: str) -> _Reasoning | None:
    for opener, closer in _KNOWN_REASONING:
        if opener in source and closer in source:
            return _Reasoning(open=opener, close=closer)
    for opener, closer in _KNOWN_REASONING:
        # Only the closing marker: the chat template cuts reasoning out of earlier turns at it
        # (content.split('</think>')), so the model writes that block.
        if closer in source:
            return _Reasoning(open=opener, close=closer)
    return None


def _closing_of(opener: str, source: str) -> str:
    """The closing marker that goes with an opening one, when the chat template source writes it."""
    candidates = []
    match = re.fullmatch(r"<([A-Za-z_][\w:-]*)>", opener)
    if match:
        candidates.append(f"</{match.group(1)}>")
    for a, b in (("START", "END"), ("start", "end"), ("BEGIN", "END"), ("begin", "end"), ("open", "close")):
        if a in opener:
            candidates.append(opener.replace(a, b))
    return next((c for c in candidates if c != opener and c in source), "")


def _find_turn(r: _Renderer, reasoning: _Reasoning | None, reasons: list[str]) -> _Turn:
    turn = _Turn(reasoning_close=reasoning.close if reasoning else "")
    try:
        _, generation = r.turn([_user()], _assistant(_CONTENT, False))
    except InferenceError:
        if reasoning is None:
            raise
        # The chat template renders a consistent last turn only when it carries reasoning: probe with it.
        r.with_reasoning = True
        _, generation = r.turn([_user()], _assistant(_CONTENT, True))
        reasons.append("every probe carries reasoning: without it the chat template rewrites the last turn")
    if _CONTENT not in generation:
        raise InferenceError("the chat template does not write the assistant's content into the rendered turn")
    at = generation.index(_CONTENT)
    lead = generation[:at]
    if reasoning is not None and reasoning.close in lead:
        lead = lead[lead.index(reasoning.close) + len(reasoning.close):]
    turn.before_content = generation[:at]
    turn.content_open = _with_header(lead, _content_wrapper(lead, reasoning))
    turn.end = _first_token(generation[at + len(_CONTENT):])
    if not turn.end:
        # Nothing follows the turn itself (GLM): the model stops with the next turn's header.
        turn.end = _next_header(r)
    after_end = generation[at + len(_CONTENT):]
    if turn.content_open and turn.end:
        # Content has its own markers: the turn ends at the next marker after the content's closing one.
        rest = after_end[after_end.index(turn.end) + len(turn.end):]
        turn.content_close, turn.end = turn.end, _first_token(rest)
    anchors = []
    for history in ([_user()], _tool_history()):
        try:
            gp = r.generation_prompt(history, tools=True)
            prompt = r.render(history, True, True)
        except Exception:
            continue
        if not gp.strip():
            # No generation prompt: the assistant simply follows the last turn's closing markup.
            last = _USER if history[-1]["role"] == "user" else "TOOL_RESULT_PROBE"
            if last not in prompt:
                continue
            gp = prompt[prompt.rindex(last) + len(last):]
            gp = gp[_TOKEN.search(gp).start():] if _TOKEN.search(gp) else gp
        elif reasoning is not None and gp.strip() == reasoning.open:
            # The generation prompt only opens the reasoning (no assistant header after a tool turn): the turn
            # starts after the last marker before it.
            head = prompt[: len(prompt) - len(gp)]
            tokens = list(_TOKEN.finditer(head))
            if tokens and not head[tokens[-1].end():].strip():
                gp = head[tokens[-1].start():] + gp
        anchors.append(gp)
    if not anchors:
        raise InferenceError("could not find where the assistant turn starts (no generation prompt, no turn markup)")
    turn.anchor = anchors[0]
    turn.anchors = anchors
    eos = r.kwargs.get("eos_token") or ""
    turn.extra_ends = [e for e in (eos, *_COMMON_EOS) if e and (e == eos or e not in r.source)]
    return turn


def _tool_turn_header(r: _Renderer, calls: _Calls) -> str:
    """The first marker the chat template writes after a turn with calls when a tool result follows."""
    last = (calls.literal.get("block_close") or "").strip() or (calls.literal.get("call_close") or "").strip()
    try:
        text = r.render(_tool_history(), True, False)
    except Exception:
        return ""
    end = text.find("TOOL_RESULT_PROBE")
    at = text.rfind(last, 0, end) if last else -1
    if at < 0:
        return ""
    token = _TOKEN.match(text[at + len(last):end].lstrip())
    return token.group(0) if token else ""


def _inline_tool_results(r: _Renderer, turn: _Turn, calls: _Calls, reasons: list[str]) -> None:
    """Tool results the chat template writes inside the assistant turn, right after its calls.

    Some chat templates read the results of a turn's calls from the assistant message itself (a message key
    such as tool_responses, each item a name and a response) and write them after the calls, in the same turn
    (Gemma 4: <tool_call|><|tool_response>response:...<tool_response|>). The model stops where that markup
    starts (the runtime writes the results), and the next generation starts right after the results: the
    first marker after the calls is an end of the turn, and the prompt after the results is another anchor.
    Probed only for keys the chat template reads from the message; nothing is assumed when it renders none.
    """
    # Attribute or item names the chat template reads (m.tool_responses, message['tool_results']).
    keys = re.findall(r"(?:\.|\[['\"])(\w*tool\w*)\b", r.source)
    keys = [k for k in dict.fromkeys(keys) if re.search(r"respon|result", k)]
    last = (calls.literal.get("call_close") or "").strip() or (calls.literal.get("block_close") or "").strip()
    for key in keys:
        message = _assistant("", r.with_reasoning, tool_calls=[_call(*_CALL_A, _CALL_IDS[0])],
                             **{key: [{"name": _CALL_A[0], "response": "TOOL_RESULT_PROBE"}]})
        history = [_user(), message]
        try:
            text = r.render(history, True, False)
            prompt = r.render(history, True, True)
        except Exception:
            continue
        end = text.rfind("TOOL_RESULT_PROBE")
        at = text.rfind(last, 0, end) if last else -1
        if end < 0 or at < 0:
            continue
        marker = _TOKEN.match(text[at + len(last):end].lstrip())
        if not marker:
            continue
        if marker.group(0) not in (turn.end, *turn.extra_ends):
            turn.extra_ends.append(marker.group(0))
        # The next turn starts after the results: the closing markup of the results, plus any generation prompt.
        after = prompt[prompt.rindex("TOOL_RESULT_PROBE") + len("TOOL_RESULT_PROBE"):]
        first = _TOKEN.search(after)
        anchor = after[first.start():] if first else ""
        if anchor.strip() and anchor not in turn.anchors:
            turn.anchors.append(anchor)
        reasons.append(f"tool results: the chat template writes them in the assistant turn (message[{key!r}]) after "
                       f"{marker.group(0)!r}: the model stops there, and the next turn starts after {anchor!r}")
        return


def _builtin_tool_markup(r: _Renderer, turn: _Turn, calls: _Calls, reasons: list[str]) -> None:
    """What the chat template writes for a call in its built-in tools mode (the `builtin_tools` variable).

    Rendered with builtin_tools set, a chat template may end a turn with calls with another end marker (Llama 3.1:
    <|eom_id|>, the runtime answers), and write a call to one of the built-in tools behind a special token in
    another syntax (<|python_tag|>brave_search.call(query="...")). Read from those renderings:
    - the other end marker ends the turn too;
    - the special token is tool-call markup: accepted right before a call in the format the chat template writes
      for function calls, and dropped from the content elsewhere (a built-in tool's call is run by the runtime, not
      returned as a function call: its text stays content, as written);
    - a generation cut right after it, or inside the head of a call object after it, leaves nothing behind.
    Keyed on the variable name `builtin_tools` (Meta's Llama 3.1 convention): a chat template that names that mode
    otherwise is not probed.
    """
    if not re.search(r"\bbuiltin_tools\b", r.source) or calls.kind != "json_object":
        return
    if (calls.literal.get("block_open") or "").strip() or (calls.literal.get("call_open") or "").strip():
        return  # calls with markup of their own: nothing to learn for the opener
    name, arguments = "get_weather", {"city": "Paris"}  # string values: built-in calls concatenate them

    def generation(builtin):
        other = _Renderer(r.source, dict(r.kwargs) if builtin is None else dict(r.kwargs, builtin_tools=builtin))
        other.tools_always, other.arguments = r.tools_always, r.arguments
        other.with_reasoning, other.reasoning_key = r.with_reasoning, r.reasoning_key
        message = {"role": "assistant", "content": "", "tool_calls": [_call(name, arguments, _CALL_IDS[0])]}
        try:
            return other.turn([_user()], message, tools=True)[1]
        except Exception:
            return None

    plain, mode, builtin = generation(None), generation(["web_search_probe"]), generation([name])
    if plain is None or mode is None:
        return
    found = []
    end, usual = _tail_token(mode.strip()), _tail_token(plain.strip())  # the last marker of each turn
    if end and usual and end != usual and end not in plain and end != turn.end and end not in turn.extra_ends:
        turn.extra_ends.append(end)
        found.append(f"ends the turn with {end!r}")
    if builtin is not None and name in builtin and "Paris" in builtin:
        head = builtin[_common_prefix_len(plain, builtin):]
        marker = _TOKEN.match(head)
        if marker and marker.group(0) not in plain and head[marker.end():].lstrip().startswith(name):
            token = re.escape(marker.group(0))
            calls.open = r"(?:\s*" + token + r")?(?:" + calls.open + ")"
            cut = token + r"\s*(?:\{[^{}]*)?"
            calls.partial_open = "(?:" + calls.partial_open + "|" + cut + ")" if calls.partial_open else cut
            turn.dropped.append(token)
            calls.literal["builtin_call_marker"] = marker.group(0)
            found.append(f"writes {marker.group(0)!r} before a built-in tool's call (read as call markup)")
    if found:
        reasons.append("built-in tools mode (builtin_tools): the chat template " + "; ".join(found))


def _prefilled_segment_marker(r: _Renderer, turn: _Turn, reasons: list[str]) -> None:
    """A generation prompt that ends with the marker opening every segment of the turn.

    Some chat templates split the assistant turn into segments, each opened by the same marker followed by a
    recipient: the content as `>>>all\ntext`, each call as `>>>name\n{arguments}` (Functionary v3); the generation
    prompt writes the first marker. Read from the renderings: the text after the prompt's last special token is
    written again before each call of the parallel-calls probe, and the content probe writes a label before the
    content. Then the marker is the calls' opener (the first one sits in the prompt: the parser reads it from
    there), the marker and the label open the content, and the marker ends a segment.
    """
    tokens = list(_TOKEN.finditer(turn.anchor))
    tail = turn.anchor[tokens[-1].end():] if tokens else turn.anchor
    marker = tail.split()[-1] if tail.split() and tail == tail.rstrip() else ""  # after a line break or markup
    if not marker or re.search(r"[\w<\[]", marker):
        return
    message = {"role": "assistant", "content": "",
               "tool_calls": [_call(n, a, i) for (n, a), i in zip([_CALL_A, _CALL_B], _CALL_IDS)]}
    try:
        _, two = r.turn([_user()], message, tools=True)
        _, text = r.turn([_user()], _assistant(_CONTENT, r.with_reasoning))
    except Exception:
        return
    if not two.startswith(_CALL_A[0]) or (marker + _CALL_B[0]) not in two or _CONTENT not in text:
        return
    label = text[: text.index(_CONTENT)]
    if not label.strip() or _TOKEN.search(label) or marker in label:
        return
    if any(not a.endswith(marker) for a in turn.anchors):
        return
    turn.anchors = [a[: len(a) - len(marker)] for a in turn.anchors]
    turn.anchor = turn.anchors[0]
    turn.segment = marker
    # The content segment's opener is markup: dropped, the text after it is content.
    turn.dropped.append(r"\s*" + _esc(marker + label.strip()) + (r"[ \t]*\n?" if label.endswith("\n") else ""))
    reasons.append(f"segments: the generation prompt writes {marker!r}, which opens each segment of the turn (calls: "
                   f"{marker!r} + name; content: {marker + label.strip()!r})")


def _next_header(r: _Renderer) -> str:
    """The first marker the chat template writes after an assistant turn, when a user turn follows it."""
    try:
        text = r.render([_user(), _assistant(_CONTENT, r.with_reasoning), _user("SECOND_USER_PROBE")], False, False)
    except Exception:
        return ""
    if _CONTENT not in text:
        return ""
    return _first_token(text[text.index(_CONTENT) + len(_CONTENT):])


def _with_header(lead: str, marker: str) -> str:
    """A marker with the header words written right before it on the same line, with no other markup (the turn's
    anchor `<|start|>assistant` continues with ` to=self<|message|>`): those words address the section (reasoning
    to=self, the answer to=user) and are part of its opening marker."""
    if not marker or not lead.endswith(marker) or not _TOKEN.fullmatch(marker):
        return marker
    head = lead[: len(lead) - len(marker)]
    if head.strip() and re.fullmatch(r"[ \t]*[\w.:-]+=[\w.:-]+", head):
        return head.strip() + marker
    return marker


def _content_wrapper(lead: str, reasoning: _Reasoning | None) -> str:
    """Markup the turn writes right before plain content (e.g. <|START_RESPONSE|>), not an empty reasoning block."""
    if reasoning is not None:
        lead = re.sub(re.escape(reasoning.open) + r"\s*" + re.escape(reasoning.close), "", lead)
    elif re.search(r"<think>\s*</think>", lead):
        lead = re.sub(r"<think>\s*</think>", "", lead)
    tokens = list(_TOKEN.finditer(lead))
    if not tokens:
        return ""
    return lead[tokens[0].start():].strip()


def _split_prefill(turn: _Turn, reasoning: _Reasoning | None) -> None:
    """Move a reasoning opener (or an empty reasoning block) at the end of the anchors out of the anchor.

    The anchor marks where the assistant turn starts; a prefilled `<think>` after it must stay in the
    prefix the parser reads, so that the parser knows reasoning is open.
    """
    if reasoning is None:
        return
    cut = []
    for anchor in turn.anchors:
        position = anchor.rfind(reasoning.open)
        if position > 0 and anchor[:position].strip():
            cut.append((anchor[:position], anchor[position:]))
        else:
            cut.append((anchor, ""))
    turn.anchors = [a for a, _ in cut]
    turn.anchor = cut[0][0]
    turn.prefill = cut[0][1]
    turn.unprefilled = [a for a, p in cut if not p.strip()]


def _optional_anchor_suffix(r: _Renderer, turn: _Turn, reasoning: _Reasoning | None, kwargs: dict | None) -> None:
    """With thinking off, some generation prompts close the reasoning right after the anchor
    (<｜Assistant｜></think>): accept that closing marker after the anchor (always, when the template has
    reasoning: a prompt that closed the reasoning says no reasoning follows)."""
    if reasoning is None:
        return
    turn.anchor_suffix = reasoning.close
    if kwargs is None:
        return
    other = _Renderer(r.source, dict(r.kwargs, **kwargs))
    other.tools_always = r.tools_always
    try:
        gp = other.generation_prompt([_user()])
    except Exception:
        return
    if gp.startswith(turn.anchor) and gp[len(turn.anchor):].strip() == reasoning.close:
        turn.anchor_suffix = gp[len(turn.anchor):]


def _dropped_prefill(r: _Renderer, kwargs: dict, reasons: list[str]) -> None:
    """With thinking off, some generation prompts write an empty reasoning block that the rendered turn drops
    (<|channel>thought\n<channel|>): verify then reads the turn after that prefill."""
    other = _Renderer(r.source, dict(r.kwargs, **kwargs))
    other.tools_always = r.tools_always
    try:
        prompt = other.render([_user()], False, True)
        full = other.render([_user(), _assistant(_CONTENT, False)], False, False)
    except Exception:
        return
    if full.startswith(prompt):
        return
    at = _common_prefix_len(prompt, full)
    for token in _TOKEN.finditer(prompt):
        if token.start() < at < token.end():
            at = token.start()  # back to the start of a marker the two renderings share only in part
    prefill = prompt[at:]
    if prefill.strip() and _TOKEN.match(prefill.strip()) and _CONTENT in full[at:]:
        r.synthesis = {"prefill": prefill, "close": ""}
        reasons.append(f"with thinking off the generation prompt writes {prefill!r}, which the rendered turn drops: "
                       "the turn is verified as written after it")


def _prefilled_everywhere(turn: _Turn, reasons: list[str]) -> bool:
    """Whether every generation prompt the chat template writes opens the reasoning (then a generation parsed
    without its prompt starts inside it). When some do not (no reasoning opener after a tool result), only the
    prompt passed as prefix says whether the reasoning is open: a bare turn start is read as content."""
    if not turn.unprefilled:
        return True
    reasons.append("reasoning: the generation prompt opens it after " + repr(turn.anchor) + " but not after "
                   + ", ".join(repr(a) for a in turn.unprefilled) + ": the prompt (prefix) says when it is open")
    return False


def _dropped_opener_before_calls(r: _Renderer, thinking: _Reasoning | None, reasons: list[str]) -> None:
    """The generation prompt ends by opening the reasoning (<think>) and the chat template renders a last turn with
    calls without that opener: the model writes its reasoning, closes it, then the calls. Verify then reads the turn
    as written after the prefilled opener (with the reasoning and its closing marker synthesised)."""
    if r.synthesis is not None or thinking is None:
        return
    message = {"role": "assistant", "content": "", "tool_calls": [_call(*_CALL_A, _CALL_IDS[0])]}
    for mode in ("dict", "json_string"):
        r.arguments = mode
        try:
            prompt = r.render([_user()], True, True)
            full = r.render([_user(), message], True, False)
        except Exception:
            continue
        at = prompt.rfind(thinking.open)
        if full.startswith(prompt) or at < 0 or prompt[at + len(thinking.open):].strip():
            continue
        if full.startswith(prompt[:at]) and _CALL_A[0] in full[at:]:
            r.synthesis = {"prefill": prompt[at:], "close": "\n" + thinking.close + "\n\n"}
            reasons.append(f"the generation prompt opens the reasoning ({prompt[at:]!r}) and the chat template renders "
                           "a turn with calls without that opener: the turn is verified as written after it, with the "
                           f"reasoning closed by {thinking.close!r} (synthesised)")
            break
    r.arguments = "dict"


def _tail_token(text: str) -> str:
    tokens = list(_TOKEN.finditer(text))
    if tokens and not text[tokens[-1].end():].strip():
        return tokens[-1].group(0)
    return ""


def _call_generation(r: _Renderer, turn: _Turn, calls: list[tuple], content: str = "") -> str:
    """The rendered calls alone: the generation without the turn's lead-in and end-of-turn markup."""
    message = {"role": "assistant", "content": content,
               "tool_calls": [_call(n, a, i) for (n, a), i in zip(calls, _CALL_IDS)]}
    _, generation = r.turn([_user()], message, tools=True)
    if r.with_reasoning and turn.reasoning_close in generation:
        generation = generation[generation.index(turn.reasoning_close) + len(turn.reasoning_close):]
    elif turn.before_content and generation.startswith(turn.before_content):
        generation = generation[len(turn.before_content):]
    if turn.end and turn.end in generation:
        generation = generation[: generation.rindex(turn.end)]
    if turn.prefill.strip() and turn.empty_reasoning and generation.lstrip().startswith(turn.empty_reasoning[1]):
        # The prompt opened the reasoning and the turn closes it before the calls.
        generation = generation.lstrip()[len(turn.empty_reasoning[1]):]
    if turn.empty_reasoning:
        # An empty reasoning block the template writes before calls (Cohere's <|START_THINKING|><|END_THINKING|>)
        # belongs to the reasoning field, not to the calls' markup.
        opener, closer = turn.empty_reasoning
        generation = re.sub(re.escape(opener) + r"\s*" + re.escape(closer) + r"\s*", "", generation, count=1)
    return turn.segment + generation  # the segment marker the prompt wrote belongs to the first call


def _renders_calls_somehow(r: _Renderer, turn: _Turn) -> str:
    """Whether a message with a call renders differently from the same message without it, or cannot be
    rendered at all (then the calls it would write are unknown: no template is safer than one without calls)."""
    failures = []
    for mode in ("dict", "json_string"):
        r.arguments = mode
        try:
            with_call = r.turn([_user()], _assistant(_CONTENT, False, tool_calls=[_call(*_CALL_A, _CALL_IDS[0])]), True)
            without = r.turn([_user()], _assistant(_CONTENT, False), True)
        except Exception as error:
            failures.append(f"{type(error).__name__}: {error}")
            continue
        if with_call[1] != without[1]:
            return "the chat template writes something for tool calls, but not their name and arguments as given"
    r.arguments = "dict"
    if len(failures) == 2:
        return f"the chat template fails when it renders a tool call ({failures[0][:160]})"
    return ""


def _choose_arguments_mode(r: _Renderer) -> None:
    """Give arguments as dicts unless the chat template only renders JSON strings well."""
    html_escaped = False
    for mode in ("dict", "json_string"):
        r.arguments = mode
        try:
            message = {"role": "assistant", "content": "", "tool_calls": [_call(*_CALL_A, _CALL_IDS[0])]}
            _, generation = r.turn([_user()], message, tools=True)
        except Exception:
            continue
        # A Python repr of the dict ({'city': ...}) or a JSON string written character by character is
        # not what the model writes; try the other mode.
        if "'city'" in generation or '"{' in generation.replace(" ", "") or '"c", "i"' in generation:
            continue
        if "&#34;" in generation:
            html_escaped = True
            continue
        if "Paris" in generation and _CALL_A[0] in generation:
            return
    if html_escaped:
        raise InferenceError("the chat template HTML-escapes the quotes of tool calls (&#34;), which is not what the "
                             "model writes: tool calls cannot be read from its renderings")
    raise InferenceError("the chat template does not render a tool call (with dict or JSON-string arguments)")


# --- tool-call syntax -------------------------------------------------------------------------


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


def _infer_calls(r: _Renderer, turn: _Turn, reasons: list[str]) -> _Calls | None:
    one = _call_generation(r, turn, [_CALL_A])
    try:
        two = _call_generation(r, turn, [_CALL_A, _CALL_B])
        if _CALL_B[0] not in two:
            raise InferenceError("the second call is not rendered")
    except Exception as error:
        reasons.append(f"parallel calls: not rendered by the chat template ({error})")
        two = None
    name, arguments = _CALL_A
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
        return _python_calls(one, match.start())
    # 3b. Python calls one per line in a block, without list brackets.
    match = re.search(r"(?m)^[ \t]*" + re.escape(name) + r"\(\s*[A-Za-z_]\w*\s*=", one)
    if match and two is not None and re.search(r"(?m)^[ \t]*" + re.escape(_CALL_B[0]) + r"\(", two):
        calls = _python_lines(one, two, match.start(), reasons)
        if calls is not None:
            return calls
    # 4. XML-style parameters: the keys and values appear as text.
    if name in one and all(k in one for k in arguments) and "Paris" in one:
        return _xml_calls(r, turn, one, two, reasons)
    reasons.append(f"tool calls: argument syntax not recognised in {one!r}")
    return None


def _boundaries(text: str) -> set[int]:
    """Positions where markup may be split: outside special tokens."""
    inside = set()
    for token in _TOKEN.finditer(text):
        inside.update(range(token.start() + 1, token.end()))
    return set(range(len(text) + 1)) - inside


def _split_repeat(head: str, tail: str, mid: str) -> tuple[str, str, str, str]:
    """Split the markup around calls into (block open, call open, call close, block close).

    `head` is the text before the first call, `tail` the text after the last one, `mid` the text between
    two calls: `mid` is `call close + separator + call open`, so the call open is what `head` and `mid`
    end with, the call close what `tail` and `mid` start with; the rest wraps the whole block. Splits are
    moved off the inside of special tokens (<｜tool▁calls▁begin｜> shares its end with <｜tool▁call▁begin｜>).
    """
    open_len = _common_suffix_len(head, mid)
    allowed = _boundaries(head)
    while open_len and len(head) - open_len not in allowed:
        open_len -= 1
    close_len = min(_common_prefix_len(tail, mid), len(mid) - open_len)
    allowed = _boundaries(tail)
    while close_len and close_len not in allowed:
        close_len -= 1
    return head[: len(head) - open_len], head[len(head) - open_len:], tail[:close_len], tail[close_len:]


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
    return _split_repeat(before, after, two[second[0]:second[1]])


def _optional(text: str) -> str:
    return f"(?:{_esc(text.strip())}\\s*)?" if text.strip() else ""


def _tail(text: str) -> str:
    """Optional closing markup after a call; whitespace after it is left to the content that follows."""
    return f"(?:\\s*{_esc(text.strip())})?" if text.strip() else ""


def _json_object_calls(one, two, start, end, keys, reasons) -> _Calls:
    name_key, args_key = keys
    second = None
    if two is not None:
        spans = [(s, e) for s, e, v in _json_values(two) if _call_object_keys(v, _CALL_A[0], _CALL_A[1])
                 or _call_object_keys(v, _CALL_B[0], _CALL_B[1])]
        if len(spans) >= 2:
            second = (spans[0][1], spans[1][0])
    block_open, call_open, call_close, block_close = _envelope(one, start, end, two, second)
    calls = _Calls(kind="json_object")
    head = _optional(block_open) + _esc(call_open.strip())
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
        inside = _esc(block_open.strip()) + r"[\s\S]*"
        calls.open = (r"\s*" + _esc(block_open.strip()) + r"\s*(?=" + lead + r")|(?<=\}\s*)\s*(?=" + lead + ")(?<="
                      + inside + ")")
    else:  # no per-call markup: the object itself, starting with its name key, opens a call
        calls.open = r"\s*" + head + r"(?=" + lead + ")"
    guard = r"(?<=\})"
    calls.end_guard = guard
    closing = _esc(call_close.strip())
    if closing:
        calls.close = guard + r"\s*(?:```\s*)?" + closing + _tail(block_close)
        # A call the model did not close before opening the next one still ends there.
        calls.close += "|" + guard + r"\s*(?=" + _esc(call_open.strip()) + ")"
    else:
        # No closing markup: only the end of the generation (or of the turn) ends the call, since a '}' can
        # end a nested value.
        calls.close = guard + r"\s*" + _optional(block_close) + r"\Z"
        # ... or a blank line after it: the model went on writing text.
        calls.close += "|" + guard + r"(?=[ \t]*\n[ \t]*\n)"
        if block_close.strip():
            # Calls listed inside a block: one ends at the block's end or where the next object starts.
            calls.close = guard + r"\s*" + _esc(block_close.strip()) + "|" + guard + r"(?=\s*\{)"
        elif second is not None and not call_open.strip():
            # Bare objects one after the other: a call also ends at the separator the chat template writes
            # between two (",", a line break, or none at all) when the next call's object follows.
            separator = two[second[0]:second[1]]
            shape = (r"\{\s*" + re.escape(json.dumps(name_key)) + r'\s*:\s*"(?:[^"\\]|\\.)*"\s*,\s*'
                     + re.escape(json.dumps(args_key)) + r"\s*:")  # a whole call's start, not a nested object
            calls.close += "|" + guard + r"\s*" + _esc(separator.strip()) + r"\s*(?=" + shape + ")"
            calls.literal["separator"] = separator
    if call_open.strip():
        calls.partial_open = _optional(block_open) + _esc(call_open.strip()) + r"\s*(?:```(?:json)?\s*)?"
    calls.transform = {"type": "function", "function": "{content}"} if keys == ("name", "arguments") else {
        "type": "function", "function": {"name": "{content.%s}" % name_key, "arguments": "{content.%s}" % args_key}}
    calls.literal.update({"block_open": block_open, "call_open": call_open, "call_close": call_close,
                          "block_close": block_close, "arguments": f"JSON object with keys {name_key!r}/{args_key!r}"})
    return calls


def _call_object_head(r: _Renderer, turn: _Turn, calls: _Calls, reasons: list[str]) -> None:
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
    one = _call_generation(r, turn, [_CALL_A])
    keys = None
    for _, _, value in _json_values(one):
        keys = _call_object_keys(value, *_CALL_A)
        if keys and list(value) == list(keys):
            break
        keys = None
    if keys is None:
        return
    name_key, args_key = keys
    block_open = calls.literal.get("block_open") or ""
    aliases = _alternation([args_key, "arguments", "parameters"])
    head = (r'\{\s*(?:"type"\s*:\s*"function"\s*,\s*)?' + re.escape(json.dumps(name_key)) + r'\s*:\s*"(?P<name>[^"\\\n]{1,200})"'
            r'\s*,\s*"' + aliases + r'"\s*:\s*(?=\{)')
    wrapper = calls.literal.get("content_wrapper")
    calls.open = r"\s*" + (_optional(wrapper[0]) + _optional(wrapper[1]) if wrapper else _optional(block_open)) + head
    separators = [";", ","] + ([calls.literal["separator"].strip()] if (calls.literal.get("separator") or "").strip() else [])
    after = [r"\s*(?:" + "|".join(dict.fromkeys(re.escape(x) for x in separators)) + r")?\s*(?=\{\s*\"(?:type|"
             + re.escape(name_key) + r')\")', r"\s*\Z", r"(?=[ \t]*\n[ \t]*\n)", r"(?=[ \t]+[A-Z])"]
    calls.end_guard = r"(?<=\})\s*\}" + (r"(?:\s*" + _esc(wrapper[1]) + ")?" if wrapper else "")
    calls.close = calls.end_guard + "(?:" + "|".join(after) + ")"
    # A call that starts the message (after markup only): the whitespace after it is markup, as _build makes it for
    # calls whose opener is a special token.
    calls.close = ("(?:" + calls.close + r")(?:(?<=(?<![\s\S])\s*(?:(?:" + _TOKEN.pattern + r")\s*)*\{[\s\S]{0,200})"
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


def _content_wrapper_in_call_turn(r: _Renderer, turn: _Turn, calls: _Calls, reasons: list[str]) -> None:
    """Markup the chat template writes around the content of a turn with calls, before the calls.

    Llama 4 writes <|python_start|>{content}<|python_end|> and then the calls: with no content the probe shows
    <|python_start|><|python_end|> as the calls' opener, and with content the same markup holds the text. Read from
    the call probe rendered with content: its two halves are dropped from the content, either half may precede a
    call (a model may put the call inside them), and the closing half may follow one.
    """
    block_open = (calls.literal.get("block_open") or "").strip()
    tokens = list(_TOKEN.finditer(block_open))
    if calls.kind != "json_object" or len(tokens) < 2:
        return
    try:
        text = _call_generation(r, turn, [_CALL_A], content=_CONTENT)
    except Exception:
        return
    if _CONTENT not in text:
        return
    at = text.index(_CONTENT)
    for token in tokens[1:]:
        first, second = block_open[: token.start()].strip(), block_open[token.start():].strip()
        if text[:at].strip().endswith(first) and text[at + len(_CONTENT):].lstrip().startswith(second):
            calls.literal["content_wrapper"] = (first, second)
            turn.dropped += [_esc(first), _esc(second)]
            reasons.append(f"content: in a turn with calls the chat template writes it between {first!r} and "
                           f"{second!r} (dropped from the content; either may come right before a call)")
            return


def _json_array_calls(one, start, end, keys) -> _Calls:
    name_key, args_key = keys
    before, after = one[:start], one[end:]
    if before.strip() and after.strip():
        first = list(json.loads(one[start:end])[0])
        return _json_list_in_block(before, after, keys, first[:2])
    calls = _Calls(kind="json_array", content="json", repeats=False, transform_each=True)
    calls.open = r"\s*" + _esc(before.strip()) + r"\s*(?=\[)" if before.strip() else r"\s*(?=\[\s*\{)"
    # Without closing markup only the end ends the list: a ']' may end a nested value.
    calls.close = r"(?<=\])\s*" + _esc(after.strip()) if after.strip() else r"(?<=\])\s*\Z"
    if not after.strip():
        # Text the model writes after the list starts on a new line.
        # (not inside a pretty-printed list: the next line must not continue the JSON)
        calls.close += r"|(?<=\}\])[ \t]*(?=\n\s*[^\s,}\]\"])"
    calls.end_guard = r"(?<=\])"
    if before.strip():
        calls.partial_open = _esc(before.strip()) + r"\s*"
    calls.transform = {"type": "function", "function": {"name": "{%s}" % name_key, "arguments": "{%s}" % args_key}}
    calls.literal = {"block_open": before, "block_close": after,
                     "arguments": f"JSON array of objects with keys {name_key!r}/{args_key!r}"}
    return calls


def _json_list_in_block(before: str, after: str, keys: tuple[str, str], leading: list) -> _Calls:
    """A JSON list of call objects between block markers (<TOOLCALL>[{...}, {...}]</TOOLCALL>): each object is a
    call of its own, so the model may write several blocks, a bare object without the list's brackets, or stop
    in the middle of the list and keep the calls it completed."""
    name_key, args_key = keys
    block_open, block_close = _esc(before.strip()), _esc(after.strip())
    # Where the next call's object starts (not a nested object): its first key as the chat template writes it,
    # and the arguments key after the name when the name comes first.
    shape = r"\{\s*" + re.escape(json.dumps(leading[0])) + r"\s*:"
    if leading == [name_key, args_key]:
        shape += r'\s*"(?:[^"\\]|\\.)*"\s*,\s*' + re.escape(json.dumps(args_key)) + r"\s*:"
    calls = _Calls(kind="json_array", content="json", repeats=True)
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


def _generalise(text: str) -> str:
    """A regex for a call header: indices and call ids vary from call to call, and models often leave the
    id out (with the marker that introduces it: [CALL_ID]abc123def)."""
    for call_id in _CALL_IDS:
        if call_id in text:
            before, after = text.split(call_id, 1)
            tokens = list(_TOKEN.finditer(before))
            if tokens and tokens[-1].end() == len(before):
                head, marker = before[: tokens[-1].start()], before[tokens[-1].start():]
                return _generalise(head) + "(?:" + re.escape(marker) + r"[^\s<>\[\]{}]*)?" + _generalise(after)
            return _generalise(before) + r"[^\s<>\[\]{}]*" + _generalise(after)
    return re.sub(r"(?<!\\)\d+", r"\\d+", _esc_loose(text))


def _opener_regex(opener: str) -> str:
    """A regex for a reasoning opener. An opener made of a special token and a label (<|channel>thought) is also
    accepted without the label, and with the token repeated (models stutter on it)."""
    match = _TOKEN.match(opener)
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


def _esc_loose(text: str) -> str:
    """Like _esc, and models may also put spaces around a special token (<|tool_call_begin|> functions.x :0 <|...|>)."""
    out, last = [], 0
    for token in _TOKEN.finditer(text):
        out.append(_esc(text[last:token.start()]))
        if token.start() > 0 and not text[token.start() - 1].isspace():
            out.append(r"\s*")
        out.append(re.escape(token.group(0)))
        if not text[token.end():token.end() + 1].isspace():
            out.append(r"\s*")
        last = token.end()
    out.append(_esc(text[last:]))
    pattern = "".join(out)
    return pattern[: -len(r"\s*")] if pattern.endswith(r"\s*") and not text[-1:].isspace() else pattern


def _name_json_calls(one, two, start, end, reasons) -> _Calls:
    name = _CALL_A[0]
    before, after = one[:start], one[end:]
    at = before.rindex(name)
    head, tail = before[:at], before[at + len(name):]
    second = None
    if two is not None and _CALL_B[0] in two and one[start:end] in two:
        # The first call's arguments are written the same way in the parallel rendering.
        second = (two.index(one[start:end]) + end - start, two.index(_CALL_B[0]))
    if second is not None:
        block_open, call_head, call_close, block_close = _split_repeat(head, after, two[second[0]:second[1]])
    else:
        block_open, call_head, call_close, block_close = "", head, after, ""
    if not call_head.strip() and not block_open.strip():
        raise InferenceError("tool calls: a name followed by JSON arguments with no marker before it")
    calls = _Calls(kind="name_json")
    name_chars, header_tail = r"[^\s<>\"'{}]+?", _generalise(tail).replace("```json", "```(?:json)?")
    marker = _TOKEN.match(tail)
    if marker:
        # The name is followed by special-token markup ([ARGS]): the name stops before it, other markers of the
        # same kind with their values may come first (a call id the chat template does not write), and the markup
        # may be missing altogether (output decoded without it), since the arguments' '{' ends the name anyway.
        name_chars = r"[^\s<>\"'{}" + re.escape(marker.group(0)[0]) + "]+?"
        style = _token_style(marker.group(0))
        header_tail = "(?:(?:\\s*" + style + r"[^\s<>\[\]{}|]*)*?" + header_tail + ")?"
    head_pattern = _generalise(call_head.strip())
    lead = _TOKEN.match(call_head.strip())
    bare = call_head.strip()[lead.end():] if lead else ""
    if bare.strip() and not _TOKEN.search(bare):
        # After the opening special token, which alone commits the model to a call, a stray punctuation mark
        # before the header word (<|tool_call>:call:) is tolerated.
        head_pattern = (_generalise(call_head.strip()[: lead.end()]) + r"\s*(?:[:;,.]\s*)?"
                        + _generalise(bare.strip()))
    if bare.strip() and not _TOKEN.search(bare) and not block_open.strip() and not tail.strip():
        # The call header is a special token and a word (<|tool_call>call:name{...}): models sometimes write the
        # word alone. Accepted at the start, on a line of its own or right after markup, and only when a name and
        # the arguments' '{' follow at once.
        head_pattern = ("(?:" + head_pattern + r"|(?:(?<![\s\S])|(?<=\n)|(?<=>))[ \t]*" + _esc(bare.strip())
                        + r"(?=[A-Za-z_][\w.-]*\{))")
        calls.literal["bare_call_open"] = bare.strip()
    calls.open = (r"\s*" + _optional(block_open) + head_pattern + r"\s*(?P<name>" + name_chars + ")"
                  + header_tail + r"(?=\s*[\[{])")
    guard = r"(?<=\})"  # arguments are a JSON object: a call ends only right after a '}'
    calls.end_guard = guard
    if call_close.strip():
        calls.close = guard + r"\s*" + _generalise(call_close.strip()) + _tail(block_close)
        # The header names the function and markup closes the call: arguments that are not valid JSON (damaged
        # output) are kept as the text the model wrote rather than failing the whole message.
        calls.content_args = {"allow_non_json": True}
        calls.close += _special_token_close(call_close, block_close)
    else:
        # No closing markup: the call ends at the end of the generation (a '}' may end a nested value).
        calls.close = guard + r"\s*" + _optional(block_close) + r"\Z"
        # ... or a blank line after it: the model went on writing text.
        calls.close += "|" + guard + r"(?=[ \t]*\n[ \t]*\n)"
    calls.close += "|" + guard + r"\s*(?=" + _generalise(call_head.strip()) + ")"
    if block_close.strip():
        calls.close += "|" + guard + r"\s*(?:```\s*)?" + _esc(block_close.strip())
    calls.partial_open = _optional(block_open) + _generalise(call_head.strip()) + r"[^\[{]*"
    calls.transform = {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}
    calls.literal.update({"block_open": block_open, "call_open": call_head, "after_name": tail,
                          "call_close": call_close, "block_close": block_close,
                          "arguments": "JSON object after the name"})
    return calls


# A special token: a marker the tokenizer writes as one piece (<|tool_call_end|>, <｜tool▁call▁end｜>), which a model
# cannot spell out character by character inside a JSON string.
_SPECIAL_TOKEN = re.compile(r"<\|[^<>|\s]+\|>|<｜[^<>]+｜>")


def _special_token_close(call_close: str, block_close: str) -> str:
    """Damaged output: a call closed by a special token ends there even when its arguments do not end in '}'.

    The '}' guard of JSON arguments keeps closing markup written inside a string value in the arguments; a special
    token cannot be written there, so when the close is one, arguments cut short before it (broken JSON) end at it
    and are kept as the text the model wrote (allow_non_json), and the calls after it are still read.
    """
    close = call_close.strip()
    if not _SPECIAL_TOKEN.fullmatch(close):
        return ""
    return r"|(?<!\})\s*" + _esc(close) + _tail(block_close)


def _stray_call_tokens(calls: _Calls | None, turn: _Turn, reasoning: _Reasoning | None) -> list[str]:
    """Damaged output: the special tokens that separate or close the parts of a call, met in the content outside any
    call, are markup the model emitted by mistake: dropped from the content, the text around them kept.

    Only special tokens (no text spelling) the chat template writes in calls alone: not the ones that open a call,
    nor the ones of the turn's other markup (its header and end, the content and reasoning sections), which keep
    their meaning. A policy of every inferred template whose calls use such tokens (Kimi K2's library entry does
    the same).
    """
    tokens = _stray_tokens(calls, turn, reasoning)
    return [r"\s*" + _alternation(tokens)] if tokens else []


def _stray_tokens(calls: _Calls | None, turn: _Turn, reasoning: _Reasoning | None) -> list[str]:
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


def _damaged_output_reasons(calls: _Calls | None, turn: _Turn, reasoning: _Reasoning | None, reasons: list[str]) -> None:
    """Say which robustness policies apply to this template (not verified: the chat template does not write them)."""
    if calls is None:
        return
    if calls.literal.get("empty_call"):
        reasons.append(f"tool calls: by policy (XML) a call without parameters may be written as an empty element "
                       f"({calls.literal['empty_call']!r}; not verified)")
    if calls.kind == "name_json" and _special_token_close(calls.literal.get("call_close") or "", ""):
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


def _python_lines(one, two, start, reasons) -> _Calls | None:
    """Python calls written one per line inside a block (<function_calls>\nname(key=value)\n</function_calls>):
    each line is a call, its keyword arguments read one by one."""
    end = one.rindex(")") + 1
    before, after = one[:start], one[end:]
    between = two[two.index(")") + 1: re.search(r"(?m)^[ \t]*" + re.escape(_CALL_B[0]) + r"\(", two).start()]
    if not before.strip() or not after.strip() or between.strip():
        return None  # only calls in a block, one per line
    block_open, block_close = _esc(before.strip()), _esc(after.strip())
    ident = r"[A-Za-z_][\w.-]*"
    calls = _Calls(kind="python", content="xml-inline")
    calls.open = (r"\s*" + block_open + r"\s*(?P<name>" + ident + r")\(|(?<=\)[ \t]*\n)[ \t]*(?P<name>" + ident
                  + r")\((?<=" + block_open + "(?:(?!" + block_close + r")[\s\S])*)")
    calls.close = r"\)[ \t]*(?:\n(?=[ \t]*" + ident + r"\()|\s*" + block_close + ")"
    calls.end_guard = r"\)"
    calls.partial_open = block_open + r"\s*(?:" + ident + r"\([^\n)]*)?"
    calls.content_args = {"tag_pattern": _KWARG, "value_parser_by": {"group": "t", "parsers": _KWARG_VALUES}}
    calls.transform = {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}
    calls.literal = {"block_open": before, "block_close": after, "arguments": "Python calls, one per line"}
    return calls


def _python_calls(one, start) -> _Calls:
    end = one.rindex("]") + 1
    before, after = one[:start], one[end:]
    calls = _Calls(kind="python", content="python-call-list", repeats=False, transform_each=True)
    lead = r"(?=\[\s*[A-Za-z_][A-Za-z0-9_.-]*\s*\()"
    if re.search(r"\[\s*[A-Za-z_][\w.-]*\s*\(\s*[A-Za-z_]\w*\s*=", one[start:end]):
        # The chat template writes keyword arguments: a call list starts with name( and a keyword or ')', so a
        # bracketed expression in prose ([f(x)]) is not a call.
        lead = r"(?=\[\s*[A-Za-z_][A-Za-z0-9_.-]*\s*\(\s*(?:\)|[A-Za-z_][A-Za-z0-9_]*\s*=))"
    calls.open = r"\s*" + (_esc(before.strip()) + r"\s*" if before.strip() else "") + lead
    calls.close = r"(?<=\)\s*\])" + (r"\s*" + _esc(after.strip()) if after.strip() else "")
    if before.strip():
        calls.partial_open = _esc(before.strip()) + r"\s*"
    calls.transform = {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}}
    calls.end_guard = r"(?<=\])"
    calls.literal = {"block_open": before, "block_close": after, "arguments": "Python call list"}
    _python_close_outside_strings(calls, one[start:end])
    return calls


def _python_close_outside_strings(calls: _Calls, rendered: str) -> None:
    """A Python call list with no closing markup ends at its ')]', but string values may hold ')]' too.

    The chat template writes string values quoted ("Paris" or 'Paris'), and a quoted value may contain any text. A
    ')]' ends the list when the text after it, up to the next quote, reaches a line break or the end of the text, or
    a quote that does not end a value (one followed by ',', ')', ']' or '}' ends a value: that ')]' was inside a
    string). Text after a real end rarely starts that way (a model writing text after its calls writes words). Past
    200 characters without a quote or a line break, the ')]' ends the list. Written as a lookahead that holds (not
    one that must fail), so a stream cut right after ')]' waits for the text that decides. Only when no markup closes
    the list: closing markup after ')]' is evidence enough.
    """
    quoted = re.escape(_CALL_A[1]["city"])
    if calls.close != r"(?<=\)\s*\])" or not re.search(r"=\s*([\"'])" + quoted + r"\1", rendered):
        return  # closing markup follows the list, or string values are not written quoted
    text = r"(?:[^\"'\\\n]|\\.)"  # up to the next quote or line break
    calls.close += r"(?=" + text + r"{0,200}(?:\n|\Z|[\"']\s*(?:[^\s,)\]}]|\Z))|" + text + "{200})"


def _xml_calls(r, turn, one, two, reasons) -> _Calls:
    """Parameters as markup around each key and value, e.g. <parameter=city>Paris</parameter>."""
    name, arguments = _CALL_A
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
    key_prefix = _cut_after_token(t1[len(t1) - _common_suffix_len(t0, t1):])
    value_suffix = _cut_to_token(t1[:_common_prefix_len(t1, t2)])
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
    followers = [_esc(key_prefix.strip())] + [re.escape(t.group(0)) for t in _TOKEN.finditer(call_close_all)]
    followers += [re.escape(t.group(0)) for t in _TOKEN.finditer(head)][-1:]
    follow = "(?=\\s*(?:" + "|".join(dict.fromkeys(followers)) + r"|\Z))"
    # Models sometimes drop a parameter's closing markup: the next parameter or the call's end ends it too.
    value = r"(?P<value>.*?)"
    if "<![CDATA[" in r.source:
        # The chat template wraps values holding markup in a CDATA section: its content is the value.
        value = r"(?:<!\[CDATA\[(?P<value>.*?)\]\]>(?=\n?" + _esc(value_suffix.strip()) + r")|(?P<value>.*?))"
    # A newline the chat template writes after a value is markup; otherwise whitespace at the end of a value is
    # the value's own.
    # When the key sits in the value's opening tag (<parameter=city>, <parameter name="city">), models of that
    # lineage put the value on lines of its own whatever the chat template writes: one newline on each side is
    # markup. When key and value are separate elements (<arg_key>city</arg_key><arg_value>...), it is data.
    own_tag = not re.search(r"</|\|>", infix1)
    newline = r"\n?" if value_suffix.startswith("\n") or own_tag else ""
    tag = (_esc(key_prefix.strip()) + r"(?P<key>[^\s<>\"'=|]+)" + infix + value + r"(?:" + newline
           + _esc(value_suffix.strip()) + follow + r"|\s*(?=" + _esc(key_prefix.strip()) + r"|\Z))")
    # Split the head and the close into what each call repeats and what wraps them all.
    block_open, call_head, call_close, block_close = "", head, call_close_all, ""
    between = ""
    if two is not None and _CALL_B[0] in two:
        b = two.index(_CALL_B[0])
        last_value = two.rfind(value_suffix.strip(), 0, b)
        if last_value >= 0:
            mid = two[last_value + len(value_suffix.strip()):b]
            block_open, call_head, call_close, block_close = _split_repeat(head, call_close_all, mid)
            between = mid[len(call_close): len(mid) - len(call_head)]
    if not call_head.strip() and not block_open.strip():
        raise InferenceError("tool calls: no marker before the call's name")
    calls = _Calls(kind="xml", content="xml-inline")
    stop = header_tail.strip()[:1]
    name_chars = "[^\\s<>\"'" + (re.escape(stop) if stop and stop not in "<>\"'" else "") + "]+"
    calls.open = (r"\s*" + _optional(block_open) + _generalise(call_head.strip()) + r"\s*(?P<name>" + name_chars + ")"
                  + _header_tail_pattern(header_tail))
    parts = call_head.split()
    if len(parts) > 1 and not block_open.strip():
        # Models sometimes drop the outer opener (<tool_call>) and write the inner one (<function=...>) alone:
        # accept it when parameters or the call's closing markup follow.
        first_close = _TOKEN.search(call_close)
        ahead = [_esc(key_prefix.strip())] + ([re.escape(first_close.group(0))] if first_close else [])
        calls.open = (r"\s*(?:" + _esc(parts[0]) + r"\s*" + _generalise(" ".join(parts[1:])) + "|"
                      + _generalise(" ".join(parts[1:])) + r"(?=[^\n<>]*" + _header_tail_pattern(header_tail, name_chars)
                      + r"\s*(?:" + "|".join(ahead) + r")))\s*(?P<name>" + name_chars + ")"
                      + _header_tail_pattern(header_tail))
    self_closing = _self_closing_call(calls, call_head, header_tail, call_close, block_close, name_chars)
    calls.open = _after_separator(calls.open, between)
    ending = _esc(call_close.strip())
    # A call ends at its closing markup right after a complete parameter (or right after the header when it has
    # none), so the same markup written inside a value does not end it.
    calls.close = (r"\s*" + ending + _tail(block_close)) if ending else r"\s*" + _tail(block_close)
    guards = [f"(?<={re.escape(g)})" for g in dict.fromkeys([value_suffix.strip()[-1],
                                                              (header_tail.strip() or call_head.strip())[-1:]]) if g]
    if not header_tail.strip():
        # No markup after the name: a call without parameters closes right after its name.
        guards.append("(?<=" + _generalise(call_head.strip()) + r"\s*" + name_chars + r"\s*)")
    if len(_TOKEN.findall(call_close)) < 2:
        # A one-marker close could be written inside a value; a sequence of markers (</function></tool_call>)
        # is specific enough on its own.
        calls.close = "(?:" + "|".join(guards) + ")" + calls.close
    # A call the model did not close before opening the next one still ends there.
    calls.close += "|" + "(?:" + "|".join(guards) + r")\s*(?=" + _generalise(call_head.strip()) + ")"
    calls.close += self_closing
    calls.close = _outside_cdata(calls.close, r.source)
    # A generation cut inside the call's header leaves no markup behind: the block opener alone, or the header cut
    # after any of its words (<｜GCML｜invoke na).
    words = call_head.split()
    heads = [_generalise(" ".join(words[:i])) for i in range(len(words), 0, -1)]
    calls.partial_open = ("(?:" + _optional(block_open) + "(?:" + "|".join(heads) + r")[^<>\n]*"
                          + ("|" + _esc(block_open.strip()) if block_open.strip() else "") + ")")
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


def _self_closing_call(calls: _Calls, call_head: str, header_tail: str, call_close: str, block_close: str,
                       name_chars: str) -> str:
    """XML: a call header that is an element's start tag (<invoke name="NAME">) closed by that element's end tag
    (</invoke>) may be written as an empty element (<invoke name="NAME"/>): a call without parameters.

    Widens calls.open to accept the empty-element form and returns the close alternative for it (right after such a
    header), or "" when the markup is not an element with its end tag.
    """
    head, tail, close = call_head.strip(), header_tail.rstrip(), call_close.strip()
    element = re.match(r"<([^\s<>/=\"']+)\s", head)
    if not element or not tail.endswith(">") or tail.endswith("/>") or _CALL_A[0] in tail:
        return ""
    if not re.fullmatch(r"</" + re.escape(element.group(1)) + r"\s*>", close):
        return ""
    full, empty = _header_tail_pattern(header_tail), _generalise(tail[:-1]) + r"\s*/>"
    if not calls.open.endswith(full):
        return ""
    calls.open = calls.open[: len(calls.open) - len(full)] + _generalise(tail[:-1]) + r"\s*/?>"
    return "|(?<=" + _generalise(head) + r"\s*" + name_chars + empty + ")" + _tail(block_close)


def _header_tail_pattern(header_tail: str, name_chars: str | None = None) -> str:
    """A regex for the markup after a call's name. The header may write the name again (to=NAME<|message|>
    <invoke name="NAME">): the second time it is the same name (a backreference, or `name_chars` where the name
    has not been read yet)."""
    text, name = header_tail.rstrip(), _CALL_A[0]
    if name not in text:
        return _generalise(text)
    return ("(?P=name)" if name_chars is None else name_chars).join(_generalise(part) for part in text.split(name))


def _after_separator(open_pattern: str, between: str) -> str:
    """Markup the chat template writes between two calls besides each call's own (a message end and a new message
    header, <|eom|><|start|>assistant): accepted before a call's opener, whole or from any of its markers on (an
    earlier section may have ended with the first of them)."""
    if not between.strip() or not open_pattern.startswith(r"\s*"):
        return open_pattern
    text = between.strip()
    starts = [m.start() for m in _TOKEN.finditer(text)] or [0]
    tails = [_esc_loose(text[at:]) for at in dict.fromkeys([0] + starts)]
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
        return _esc_loose(a.rstrip("\n")) + (r"\n?" if a.endswith("\n") else "")
    typed = _typed_infix(a, b)
    if typed is not None:
        head, first, second, tail = typed
        # Any type word is accepted: the probes show the string one and one other; the other types a schema names
        # (boolean, array, object) are JSON values like the number.
        return _esc_loose(head) + r"(?P<vtype>\w+)" + _esc(tail)
    p = _common_prefix_len(a, b)
    s = min(_common_suffix_len(a, b), min(len(a), len(b)) - p)
    return _esc(a[:p]) + "[^<>]*?" + _esc(a[len(a) - s:])


def _typed_infix(a: str, b: str) -> tuple[str, str, str, str] | None:
    """(head, word for a string value, word for another value, tail) when the markup between a key and its value
    differs by one word with the value's type (string="true" / string="false"), else None."""
    p = _common_prefix_len(a, b)
    s = min(_common_suffix_len(a, b), min(len(a), len(b)) - p)
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
    ends = [m.end() for m in _TOKEN.finditer(stripped)]
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


def _citation_markup(r: _Renderer, reasons: list[str]) -> tuple:
    """(span open tag, close tag head) when the prompt, rendered with documents and grounding on, shows an example
    of cited span markup: a tag pair whose closing tag lists the sources (<co>span</co: 0:[1,2]>)."""
    kwargs = {"documents": _DOCUMENTS}
    kwargs.update({k: v for k, v in _GROUNDING_SWITCHES if re.search(r"\b%s\b" % k, r.source)})
    other = _Renderer(r.source, dict(r.kwargs, **kwargs))
    other.tools_always = r.tools_always
    try:
        text = other.render([_user()], True, True)
    except Exception:
        return ()
    match = re.search(r"<(\w+)>\w+</\1(:[^<>\"\n]*)>", text)
    if not match:
        return ()
    reasons.append(f"content: grounded answers mark cited spans as {match.group(0)!r} (described by the prompt "
                   "with documents): the markers are dropped, the cited text kept in place")
    return f"<{match.group(1)}>", f"</{match.group(1)}:"


def _citation_spans(turn: _Turn, content: dict, closes: list[str]) -> None:
    """Cited-span markers end a piece of content (no whitespace taken: it is the text's own) and the text after
    them continues it, so 'foo <co>bar</co: 0:[1]>.' reads 'foo bar.'."""
    if not turn.citation:
        return
    opening, closing = re.escape(turn.citation[0]), re.escape(turn.citation[1]) + r"[^<>\n]{0,200}>"
    closes += [opening, closing]
    if "open_pattern" in content:  # an explicit field: the text after a marker opens it again
        content["open_pattern"] += "|(?<=" + opening + ")|(?<=" + closing + ")"


# ---------------------------------------------------------------------------------------------
# Assembling the template.


def _build(turn: _Turn, reasoning: _Reasoning | None, calls: _Calls | None) -> dict:
    template: dict = {"version": 1, "defaults": {"role": "assistant"}}
    anchors = [a for a in dict.fromkeys(turn.anchors) if a.strip()]
    # A complete reasoning block the prompt itself writes after the assistant header (a thinking budget's note,
    # an empty block that turns thinking off) is the prompt's, not the model's: the turn starts after it.
    prompt_block = ""
    if reasoning is not None and not reasoning.always and not reasoning.conventional:
        prompt_block = (r"(?:\s*" + re.escape(reasoning.open) + "(?:(?!" + re.escape(reasoning.close) + r")[\s\S])*"
                        + re.escape(reasoning.close) + r"\s*)?")
    if len(anchors) == 1 and not turn.anchor_suffix and not prompt_block:
        template["start_anchor"] = anchors[0]
    else:
        pattern = _alternation(anchors)[3:-1]
        if turn.anchor_suffix:
            pattern = "(?:" + pattern + ")(?:" + re.escape(turn.anchor_suffix) + ")?"
        if prompt_block:
            pattern = "(?:" + pattern + ")" + prompt_block
        template["start_anchor_pattern"] = pattern
    fields: dict = {}
    ends = list(dict.fromkeys(e for e in [turn.end, *turn.extra_ends] if e))
    end_pattern = "|".join(re.escape(e) for e in ends)
    opener = ((calls.literal.get("block_open") or "").strip() or (calls.literal.get("call_open") or "").strip()
              if calls is not None else "")
    for end in ends:
        if opener.startswith(end) and opener != end:
            # The call opener starts with the end-of-turn marker (GigaChat opens a call with a new message):
            # that marker ends the turn only when no call follows.
            end_pattern = end_pattern.replace(re.escape(end), re.escape(end) + "(?!" + _esc(opener[len(end):]) + ")")
    first = _TOKEN.search(opener) if opener else None
    if reasoning is not None:
        # Whitespace around the reasoning belongs to its markers, and the text is kept as written (strip off), so
        # streamed chunks add up to the final value.
        opens = "(?:" + "|".join(_opener_regex(o) for o in [reasoning.open] + [a for a, _ in reasoning.also]) + ")"
        closes_ = _alternation([reasoning.close] + [b for _, b in reasoning.also])
        close = r"\s*" + closes_ + r"\s*|\s*\Z"
        if ends:
            # The end of the turn ends a reasoning block the model never closed.
            close += r"|\s*(?=" + end_pattern + ")"
        if first and calls.kind in ("name_json", "xml"):
            # A model that starts its calls without closing the reasoning has ended it: the call opener closes
            # the reasoning. Only for calls that name the function in their header markup; a JSON object in tags
            # written inside the reasoning is the model thinking about a call, and stays reasoning.
            # The calls may also start without their block's opener: the per-call opener closes it too.
            call_first = _TOKEN.search((calls.literal.get("call_open") or "").strip())
            openers = [first.group(0)] + ([call_first.group(0)] if call_first else [])
            close += r"|\s*(?=" + _alternation(openers) + ")"
        fields["reasoning_content"] = {
            "open_pattern": r"\s*" + opens + r"\s*",
            "close_pattern": close,
            "content_args": {"strip": False},
            # A model that reasons again later in the message (a second block, another analysis segment) adds to
            # its reasoning: the blocks are joined as written, none replaces another.
            "repeats": True,
            "join": "",
        }
        if reasoning.always:
            # The prompt always opens the reasoning: a generation parsed without its prompt starts inside it.
            fields["reasoning_content"]["open_pattern"] = r"\A(?:\s*" + opens + r")?\s*"
    if calls is not None:
        close = calls.close
        if first:
            # Calls written first in the message (or right after the reasoning) are followed by markup whitespace;
            # after text, the whitespace belongs to the text that follows (it separates the two pieces).
            starts = r"(?<![\s\S])" + ("|" + _alternation([reasoning.close] + [b for _, b in reasoning.also]) if reasoning is not None else "")
            close = ("(?:" + close + r")(?:(?<=(?:" + starts + r")\s*" + re.escape(first.group(0))
                     + r"[\s\S]{0,200})\s*)?")
        open_ = calls.open
        if first and open_.startswith(r"\s*") and calls.kind == "xml":
            # Whitespace before the calls is markup when it holds a line break or follows other markup; spaces
            # right after text are the text's own (kept in the content, as the model wrote them). The library
            # does so for XML-style calls (GLM, DeepSeek V3.2, MiniMax M2); for JSON calls it drops the space.
            open_ = r"(?:(?<=[>\]])\s*|[ \t]*\n\s*)?" + open_[len(r"\s*"):]
        field_ = {"open_pattern": open_, "close_pattern": close}
        if ends:
            # A call the model did not close before ending its turn still ends there.
            field_["close_pattern"] = (close + "|" + calls.end_guard + r"\s*(?:```\s*)?(?:" + end_pattern
                                       + ").*")
        if "```" in calls.literal.get("call_close", ""):
            # The model stopped right after the arguments' closing fence, before the call's closing marker.
            field_["close_pattern"] += "|" + calls.end_guard + r"\s*```\s*\Z"
        if calls.repeats:
            field_["repeats"] = True
        field_["content"] = calls.content
        if calls.content_args:
            field_["content_args"] = calls.content_args
        if calls.transform_each:
            field_["transform_each"] = True
        field_["transform"] = calls.transform
        fields["tool_calls"] = field_
    content: dict = {}
    closes = []
    paired = bool(turn.content_open) and _closing_of(turn.content_open, turn.content_open + turn.content_close) == (
        turn.content_close)
    if paired:
        # Content in a pair of its own tags (<response> ... </response>): markup dropped from the text, which stays
        # the implicit field, so an answer the model writes without them is content too.
        closes.append(r"\s*" + _esc(turn.content_open) + r"\s*")
        closes.append(r"\s*" + _esc(turn.content_close))
    elif turn.content_open:
        # Content opened by a section marker that other sections share the end of (<|channel|>final<|message|>
        # ... <|return|>): an explicit field.
        content["open_pattern"] = r"\s*" + _esc(turn.content_open) + r"\s*"
        if turn.content_close:
            closes.append(r"\s*" + _esc(turn.content_close) + r"\s*")
    if ends:
        closes.append(r"\s*(?:" + end_pattern + ").*")
    if calls is not None and calls.partial_open:
        # An opener cut off by the end of the generation is markup, not content.
        closes.append(r"\s*" + calls.partial_open + r"\Z")
    closes += turn.dropped  # markup that is no content where it stands: dropped, the text around it kept
    closes += _stray_call_tokens(calls, turn, reasoning)
    if reasoning is not None and (paired or not turn.content_open):
        # A reasoning close written again after the reasoning ended is markup: dropped from the content (the text
        # after it, with its whitespace, continues the content).
        closes.append(r"\s*" + _alternation([reasoning.close] + [b for _, b in reasoning.also]))
    _citation_spans(turn, content, closes)
    if closes:
        content["close_pattern"] = "|".join(closes)
    # Text is kept as written (no strip): whitespace before markup belongs to the markup's pattern, trailing
    # whitespace at the end is dropped by the last alternative; pieces around calls join as they were written.
    content["close_pattern"] = "|".join([r"(?<![\s\S])\s+"] + closes + [r"\s*\Z"])  # leading whitespace: markup
    content.update({"content": "text", "content_args": {"strip": False}, "repeats": True, "join": ""})
    fields["content"] = content
    template["fields"] = fields
    return template


def _calls_end_bare_reasoning(r: _Renderer, template: dict, reasoning: _Reasoning | None, calls: _Calls | None,
                              reasons: list[str]) -> None:
    """The call block's opener ends a reasoning that the generation prompt opens with plain text.

    When the reasoning has no markup of its own (see _reasoning_after_text_prefill) and the chat template renders
    a turn without reasoning with its call block right after the header, where the prompt leaves the reasoning
    open, a call block at the start of the generation is a call, not reasoning. The block opener (followed by
    the start of its JSON) then closes the reasoning wherever it comes: also after reasoning text whose closing
    marker the model left out. That second half is a generalisation the renderings do not show (they always
    write the marker after reasoning); it is reported.
    """
    if reasoning is None or not reasoning.bare or calls is None or calls.kind not in ("json_array", "json_object"):
        return
    opener = (calls.literal.get("block_open") or "").strip()
    if not opener or not _TOKEN.fullmatch(opener):
        return
    message = {"role": "assistant", "content": "", "tool_calls": [_call(*_CALL_A, _CALL_IDS[0])]}
    try:
        _, generation = r.turn([_user()], message, tools=True)
    except Exception:
        return
    if not generation.lstrip().startswith(opener):
        return
    field_ = template["fields"]["reasoning_content"]
    field_["close_pattern"] += r"|\s*(?=" + _esc(opener) + r"\s*[\[{])"
    reasons.append(f"reasoning: a turn without reasoning starts with {opener!r} where the prompt leaves the reasoning "
                   f"open, so {opener!r} ends the reasoning, also after reasoning text without "
                   f"{reasoning.close!r} (a generalisation, not verified)")


# ---------------------------------------------------------------------------------------------
# The entry point.


def load_chat_template(path: str | os.PathLike) -> tuple[str, dict]:
    """Read a chat template from a .jinja file, a tokenizer_config.json, or a model directory holding either.

    Returns (source, tokenizer settings: bos_token / eos_token when the config gives them).
    """
    path = os.fspath(path)
    settings: dict = {}
    if os.path.isdir(path):
        config = os.path.join(path, "tokenizer_config.json")
        if os.path.isfile(config):
            settings = _token_settings(_read_json(config))
        jinja = os.path.join(path, "chat_template.jinja")
        if os.path.isfile(jinja):
            return _read_text(jinja), settings
        if os.path.isfile(config):
            return _template_from_config(_read_json(config), config), settings
        raise InferenceError(f"{path}: no chat_template.jinja or tokenizer_config.json in this directory")
    if not os.path.isfile(path):
        raise InferenceError(f"{path}: no such file or directory")
    if path.endswith(".json"):
        config = _read_json(path)
        return _template_from_config(config, path), _token_settings(config)
    return _read_text(path), settings


def _read_text(path: str) -> str:
    with open(path, "rb") as f:
        return f.read().decode("utf-8").replace("\r\n", "\n")


def _read_json(path: str) -> dict:
    try:
        data = json.loads(_read_text(path))
    except ValueError as error:
        raise InferenceError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise InferenceError(f"{path}: expected a JSON object")
    return data


def _template_from_config(config: dict, where: str) -> str:
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: prefer the tool-use one
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("tool_use") or named.get("default")
    if not isinstance(template, str) or not template:
        raise InferenceError(f"{where}: no 'chat_template' string in this tokenizer config")
    return template


def _token_settings(config: dict) -> dict:
    out = {}
    for key in ("bos_token", "eos_token"):
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    return out


def infer_template(chat_template: str, *, tokenizer: Any = None, render_kwargs: dict | None = None) -> InferredTemplate:
    """Infer a verified response template from a chat template's Jinja source.

    `tokenizer` (optional) supplies bos_token / eos_token to the chat template; `render_kwargs` are extra
    variables for every render (they may also set bos_token / eos_token). Never raises for a template it
    cannot read: the result then has `template=None` and the reason in `reasons`.
    """
    if not isinstance(chat_template, str) or not chat_template.strip():
        raise ValueError("infer_template: chat_template must be a non-empty Jinja source string")
    kwargs = {"bos_token": "", "eos_token": ""}
    if tokenizer is not None:
        for key in ("bos_token", "eos_token"):
            value = getattr(tokenizer, key, None)
            if isinstance(value, str):
                kwargs[key] = value
    kwargs.update(render_kwargs or {})
    reasons: list[str] = []
    try:
        with frozen_clock():  # every probe and verify render sees the same time (templates that write the clock)
            return _infer(chat_template, kwargs, reasons)
    except InferenceError as error:
        reasons.append(str(error))
    except Exception as error:  # the chat template itself failed: a finding, reported
        reasons.append(f"the chat template failed to render a probe: {type(error).__name__}: {error}")
    return InferredTemplate(template=None, confidence=0.0, verified="", reasons=reasons)


def _thinking_scenarios(source: str) -> list[dict] | None:
    """Verify scenarios for chat templates with a thinking switch (enable_thinking, or DeepSeek's thinking)."""
    for name in ("enable_thinking", "thinking"):
        if re.search(r"\b%s\b" % name, source) and (name == "enable_thinking" or re.search(
                r"(?:if|and|or|not)\s+%s\b|\b%s\s+is\s+(?:not\s+)?defined" % (name, name), source)):
            return [{"name": "thinking", "render_kwargs": {name: True}},
                    {"name": "no_thinking", "render_kwargs": {name: False}, "reasoning": False}]
    return None


def _effort_scenarios(source: str, kwargs: dict) -> list[dict] | None:
    """Verify scenarios for chat templates whose generation prompt opens reasoning only with a reasoning effort
    (reasoning_effort="high"); without one they think not at all."""
    if not re.search(r"\breasoning_effort\b", source):
        return None
    try:
        default = _Renderer(source, kwargs).generation_prompt([_user()])
        high = _Renderer(source, dict(kwargs, reasoning_effort="high")).generation_prompt([_user()])
    except Exception:
        return None
    if high == default or not high.strip():
        return None
    return [{"name": "thinking", "render_kwargs": {"reasoning_effort": "high"}},
            {"name": "no_thinking", "render_kwargs": {}, "reasoning": False}]


def _infer(source: str, kwargs: dict, reasons: list[str]) -> InferredTemplate:
    scenarios = _thinking_scenarios(source) or _effort_scenarios(source, kwargs)
    probe_kwargs = dict(kwargs, **(scenarios[0]["render_kwargs"] if scenarios else {}))
    r = _Renderer(source, probe_kwargs)
    try:
        r.render([_user()], False, True)
    except Exception:
        r.tools_always = True  # some chat templates fail without tools
    try:
        _choose_arguments_mode(r)  # early: the tool-result history that gives a second anchor holds a call
        arguments_error = None
    except InferenceError as error:
        arguments_error = error
    reasoning = _find_reasoning(r, reasons)
    turn = _find_turn(r, reasoning, reasons)
    if reasoning is not None and turn.content_open and reasoning.close.endswith(turn.content_open):
        # The reasoning's closing text runs into the content's opening markup: each keeps its own.
        reasoning.close = reasoning.close[: -len(turn.content_open)].strip()
    guessed = None
    if reasoning is None:
        guessed = _reasoning_from_source(r.source)
        if guessed is None and not any(m in r.source for pair in _KNOWN_REASONING for m in pair):
            # Many models reason in <think> ... </think> whatever their chat template shows (Granite 4, MiMo):
            # read such a block as reasoning. Only that exact markup is affected.
            guessed = _Reasoning(open="<think>", close="</think>", conventional=True)
            reasons.append("reasoning: the chat template shows no reasoning markup; a <think> ... </think> block is "
                           "read as reasoning by convention (not verified)")
        elif guessed is not None:
            reasons.append(f"reasoning: the chat template never renders reasoning_content, but its source writes "
                           f"{guessed.open!r} and {guessed.close!r}; they delimit reasoning in the template, not verified")
            if turn.content_open.startswith(guessed.close):
                # A prompt that opened the reasoning: the turn closes it before the content's own markup.
                turn.content_open = turn.content_open[len(guessed.close):].strip()
    _conventional_reasoning(turn, reasoning or guessed, reasons)
    _split_prefill(turn, reasoning or guessed)
    if reasoning or guessed:
        turn.empty_reasoning = ((reasoning or guessed).open, (reasoning or guessed).close)
    if arguments_error is None:
        _prefilled_segment_marker(r, turn, reasons)
    calls = None
    if arguments_error is not None:
        _dropped_opener_before_calls(r, reasoning or guessed, reasons)
    if arguments_error is not None:
        try:  # again, now that the probes carry what the chat template needs (reasoning, a synthesised close)
            _choose_arguments_mode(r)
            arguments_error = None
        except InferenceError as error:
            arguments_error = error
    if arguments_error is not None:
        why = _renders_calls_somehow(r, turn)
        if why:
            raise InferenceError(f"cannot infer: {why}") from None
        reasons.append(str(arguments_error))  # no tool calls in this format: a template for reasoning and content
    else:
        calls = _infer_calls(r, turn, reasons)
        if calls is None:
            # The chat template writes tool calls we cannot read: a template without them would silently
            # leave call markup in the content.
            raise InferenceError("cannot infer: the chat template renders tool calls in a syntax not recognised")
        closing = (calls.literal.get("block_close") or "").strip()
        if closing and not (calls.literal.get("block_open") or "").strip() and _TOKEN.fullmatch(closing):
            # Markup after the calls that no opener pairs with (Gemma's <|tool_response>) ends the turn.
            turn.extra_ends.append(closing)
        header = _tool_turn_header(r, calls)
        if header and header not in turn.extra_ends and header != turn.end:
            # What the chat template writes after a turn with calls, before the tool results (GLM's
            # <|observation|>): the model stops there.
            turn.extra_ends.append(header)
        _inline_tool_results(r, turn, calls, reasons)
        _content_wrapper_in_call_turn(r, turn, calls, reasons)
        _call_object_head(r, turn, calls, reasons)
        _builtin_tool_markup(r, turn, calls, reasons)
        if turn.segment and calls.kind == "name_json":
            # The segment marker also opens the content: a cut call header is the marker and a name, on one line.
            calls.partial_open = _esc(turn.segment) + r"[^\[{\n<]*"
    _optional_anchor_suffix(r, turn, reasoning, scenarios[1]["render_kwargs"] if scenarios else None)
    turn.citation = _citation_markup(r, reasons)
    if scenarios and r.synthesis is None:
        _dropped_prefill(r, scenarios[1]["render_kwargs"], reasons)
    thinking = reasoning or guessed
    if not scenarios and thinking is not None and (thinking.prefilled or turn.prefill.strip() == thinking.open):
        thinking.always = _prefilled_everywhere(turn, reasons)
    template = _build(turn, reasoning or guessed, calls)
    _calls_end_bare_reasoning(r, template, reasoning, calls, reasons)
    _damaged_output_reasons(calls, turn, reasoning or guessed, reasons)
    supports = {"reasoning": reasoning is not None, "tool_calls": calls is not None,
                "parallel_tool_calls": calls is not None and not any(x.startswith("parallel") for x in reasons)}
    options: dict = {"bos_token": kwargs.get("bos_token", ""), "eos_token": kwargs.get("eos_token", "")}
    extra = {k: v for k, v in kwargs.items() if k not in ("bos_token", "eos_token")}
    if extra:
        options["render_kwargs"] = extra
    if r.tools_always:
        options["tools_always"] = True
    if r.arguments != "dict":
        options["arguments"] = r.arguments
    if r.synthesis is not None:
        options["reasoning_synthesis"] = r.synthesis
    if r.reasoning_key:
        options["reasoning_key"] = r.reasoning_key
    if scenarios:
        scenarios[1]["reasoning"] = False
        if reasoning is None:
            scenarios = [dict(s, reasoning=False) for s in scenarios]
        options["scenarios"] = scenarios
    anchors = list(dict.fromkeys(turn.anchors))
    markers = {"start_anchor": anchors if len(anchors) > 1 else turn.anchor, "end_of_turn": turn.end,
               "prompt_prefill": turn.prefill}
    if turn.content_open:
        markers.update(content_open=turn.content_open, content_close=turn.content_close)
    if reasoning is not None:
        markers.update(reasoning_open=reasoning.open, reasoning_close=reasoning.close,
                       reasoning_prefilled=reasoning.prefilled)
    if guessed is not None:
        origin = "convention" if guessed.conventional else "chat template source"
        markers.update(reasoning_open=guessed.open, reasoning_close=guessed.close, reasoning_from=origin)
    if calls is not None:
        markers.update({f"tool_calls.{k}": v for k, v in calls.literal.items()})
    return _check(template, source, options, supports, markers, reasons)


def _check(template, source, options, supports, markers, reasons) -> InferredTemplate:
    """Load the template in our core and run verify; give up (template None) unless every case that ran passed."""
    from ...core.template import load_template

    try:
        load_template(template)
    except Exception as error:  # a bug in assembly: report it rather than return a broken template
        reasons.append(f"the assembled template does not load: {error}")
        return InferredTemplate(None, 0.0, "", reasons, markers, options, supports)
    report = verify(template, source, options=options, supports=supports)
    calls = template["fields"].get("tool_calls") or {}
    if not report.ok and calls.get("content") == "xml-inline":
        # Parameter values written as JSON (nested objects) need the JSON value parser.
        with_json = copy.deepcopy(template)
        with_json["fields"]["tool_calls"]["content_args"]["value_parser"] = {"name": "json", "args": {"allow_non_json": True}}
        retry = verify(with_json, source, options=options, supports=supports)
        if len(retry.failures) < len(report.failures):
            template, report = with_json, retry
            markers["tool_calls.values"] = "JSON (plain text when not JSON)"
    skip = {}
    for case in report.failures:
        # Cases the chat template itself cannot render say nothing about the inferred template.
        text = " ".join(case.diff)
        if "chat template failed to render" in text or "is not a prefix" in text:
            skip[case.name] = "the chat template cannot render this case: " + case.diff[0][:160]
        elif _dropped_content(case):
            skip[case.name] = "the chat template does not render the content of this turn"
        elif _content_moved_to_reasoning(case):
            skip[case.name] = "the chat template writes this turn's content as reasoning"
        elif _labelled_content(case):
            skip[case.name] = ("the chat template writes a label before this turn's content that its generation "
                               f"prompt does not ({_labelled_content(case)!r}): kept as content text")
        elif _dropped_calls(case):
            skip[case.name] = "the chat template does not render the tool calls of this turn"
        elif case.name in ("nested_unicode_arguments", "marker_text_arguments") and _python_literals(case.generation):
            skip[case.name] = ("the chat template writes nested argument values as Python literals (None, True, "
                               "single quotes), which is not what the model writes")
        elif _python_calls_missing_commas(case, template):
            skip[case.name] = ("the chat template writes keyword arguments without the commas between them, which is "
                               "not valid Python: not what the model writes")
        elif case.name in ("nested_unicode_arguments", "marker_text_arguments") and _invalid_python_calls(case, template):
            skip[case.name] = ("the chat template writes string values without escaping their quotes, which is not "
                               "valid Python: not what the model writes")
    if skip:
        options = dict(options, skip_cases=skip)
        report = verify(template, source, options=options, supports=supports)
    ran = [c for c in report.cases if c.skipped is None]
    passed = [c for c in ran if c.ok]
    total = len(report.cases) or 1
    confidence = round(len(passed) / total * (1.0 if report.ok else 0.0), 2)
    for name, why in sorted(skip.items()):
        reasons.append(f"not verified: {name}: {why}")
    if not ran:
        reasons.append("cannot infer: the chat template could not render any canonical case, nothing was verified")
        return InferredTemplate(None, 0.0, report.summary(), reasons, markers, options, supports)
    call_cases = {"single_call", "parallel_calls", "no_arguments", "nested_unicode_arguments", "marker_text_arguments",
                  "text_before_call", "multi_turn"}
    if supports.get("tool_calls") and not any(c.name in call_cases for c in ran):
        # The syntax was read from the probes, but no canonical tool-call case could be rendered: say so.
        reasons.append("not verified: tool calls (the chat template renders no canonical tool-call case; the "
                       "syntax comes from the probe renderings only)")
    if not report.ok:
        failed = sorted({c.name for c in report.failures})
        reasons.append(f"cannot infer: the assembled template fails verify on {', '.join(failed)}: "
                       + "; ".join(report.failures[0].diff)[:300])
        return InferredTemplate(None, 0.0, report.summary(), reasons, markers, options, supports)
    return InferredTemplate(template, confidence, report.summary(), reasons, markers, options, supports)


def _invalid_python_calls(case, template: dict) -> bool:
    """Whether the rendered Python call list itself does not parse (the chat template does not escape strings)."""
    import ast

    if (template["fields"].get("tool_calls") or {}).get("content") != "python-call-list":
        return False
    start, end = case.generation.find("["), case.generation.rfind("]")
    if start < 0 or end < start:
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # `3days=` in a broken rendering: no news to the user
            ast.parse(case.generation[start:end + 1], mode="eval")
    except SyntaxError:
        return True
    return False


def _python_calls_missing_commas(case, template: dict) -> bool:
    """Whether the rendered Python call list is invalid because the chat template writes each keyword argument right
    after the previous value, with no comma (`f(a="x"b=2)`): a chat-template bug, not the model's syntax."""
    if not _invalid_python_calls(case, template):
        return False
    glued = 0
    for call in (case.expected or {}).get("tool_calls") or []:
        keys = list(((call.get("function") or {}).get("arguments") or {}))
        for key in keys[1:]:
            if not re.search(r"[^\s,(]" + re.escape(key) + "=", case.generation):
                return False  # this argument is separated as Python separates them: some other defect
            glued += 1
    return glued > 0


def _python_literals(text: str) -> bool:
    return bool(re.search(r"[:=(,\[{]\s*(?:None|True|False)\b|[{\[,]\s*'[^']*'\s*:", text))


def _content_moved_to_reasoning(case) -> bool:
    expected = ((case.expected or {}).get("content") or "").strip()
    parsed = case.parsed or {}
    return bool(expected) and (parsed.get("reasoning_content") or "").strip().endswith(expected) and not (
        parsed.get("content") or "").strip()


def _labelled_content(case) -> str:
    """The short label the parsed content has before the expected content (助手：), or ''."""
    expected = ((case.expected or {}).get("content") or "").strip()
    parsed = ((case.parsed or {}).get("content") or "").strip()
    if not expected or not parsed.endswith(expected) or parsed == expected:
        return ""
    label = parsed[: len(parsed) - len(expected)]
    return label if len(label) <= 16 and not _TOKEN.search(label) and "\n" not in label else ""


def _dropped_calls(case) -> bool:
    calls = (case.expected or {}).get("tool_calls") or []
    return bool(calls) and bool(case.generation) and not any(c["function"]["name"] in case.generation for c in calls)


def _dropped_content(case) -> bool:
    expected = ((case.expected or {}).get("content") or "").strip()
    return bool(expected) and bool(case.generation) and expected not in case.generation


class InferredResponseTemplate(dict):
    """A response template dict that was inferred from a chat template, not taken from the library.

    It is a plain dict for every consumer (our parser, transformers', `save_pretrained`); `.inferred` is True
    and `.result` holds the `InferredTemplate` (confidence, verify summary, reasons).
    """

    inferred = True

    def __init__(self, template: dict, result: InferredTemplate):
        super().__init__(template)
        self.result = result


def infer_for_tokenizer(tokenizer: Any) -> InferredResponseTemplate | None:
    """An inferred, verified template for a loaded tokenizer's chat template, or None.

    The fallback of `template_for(tokenizer, infer=True)` when the library has no template: the result is
    marked (`result.inferred`, `result.result.report()`), and None when the tokenizer has no chat template
    (a Hub id alone is not enough: nothing is downloaded) or inference gives up.
    """
    source = getattr(tokenizer, "chat_template", None)
    if isinstance(source, dict):
        source = source.get("tool_use") or source.get("default")
    if not isinstance(source, str) or not source.strip():
        return None
    result = infer_template(source, tokenizer=tokenizer)
    if result.template is None:
        return None
    return InferredResponseTemplate(result.template, result)


# ---------------------------------------------------------------------------------------------
# Command line: `response-templates infer` (registered in cli.py).


def add_infer_parser(sub) -> None:
    p = sub.add_parser("infer", help="infer a response template from a chat template")
    p.add_argument("path", nargs="?", metavar="FILE_OR_MODEL_DIR",
                   help="a .jinja file, a tokenizer_config.json, or a directory holding chat_template.jinja or "
                        "tokenizer_config.json")
    p.add_argument("--diff", metavar="NAME",
                   help="infer from the chat templates a library entry lists and show the result beside the entry's")
    p.add_argument("--chat-templates-dir", help="with --diff: folder holding the entry's chat templates "
                                                "(default: $RESPONSE_TEMPLATES_CHAT_TEMPLATES)")
    p.add_argument("--json", action="store_true", help="print the whole result (template, confidence, report) as JSON")


def cli_infer(args) -> int:
    """Run `response-templates infer`; InferenceError for bad input (the CLI prints it on one line)."""
    import sys

    if bool(args.path) == bool(args.diff):
        raise InferenceError("give either FILE_OR_MODEL_DIR or --diff NAME")
    if args.diff:
        return _cli_diff(args)
    source, settings = load_chat_template(args.path)
    result = infer_template(source, render_kwargs=settings)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(json.dumps(result.template, indent=2, ensure_ascii=False))
        print(result.report(), file=sys.stderr)
    return 0 if result.ok else 1


def _cli_diff(args) -> int:
    import difflib

    from ...library import get_entry

    try:
        entry = get_entry(args.diff)
    except KeyError as error:
        raise InferenceError(str(error).strip("'\"")) from None
    folder = args.chat_templates_dir or os.environ.get("RESPONSE_TEMPLATES_CHAT_TEMPLATES")
    if not folder:
        raise InferenceError("give --chat-templates-dir DIR (or set RESPONSE_TEMPLATES_CHAT_TEMPLATES) to read the "
                             f"chat templates {args.diff!r} lists")
    library_text = json.dumps(entry["template"], indent=2, ensure_ascii=False).splitlines()
    options = entry.get("verify") or {}
    tokens = {k: options[k] for k in ("bos_token", "eos_token") if k in options}
    inferred_any = False
    for item in entry["chat_templates"]:
        path = os.path.join(folder, item["file"])
        if not os.path.isfile(path):
            raise InferenceError(f"{path}: no such file (listed by {args.diff!r})")
        result = infer_template(_read_text(path), render_kwargs=tokens)
        print(f"== {item['file']}")
        if args.json:
            print(json.dumps({"library": entry["template"], **result.to_dict()}, indent=2, ensure_ascii=False))
            continue
        print(result.report())
        if result.ok:
            inferred_any = True
            inferred_text = json.dumps(result.template, indent=2, ensure_ascii=False).splitlines()
            diff = difflib.unified_diff(library_text, inferred_text, f"library: {args.diff}", "inferred", lineterm="")
            print("\n".join(diff) or "(identical)")
    return 0 if inferred_any else 1

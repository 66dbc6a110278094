"""Rendering probes: turns whose values are easy to find again in a rendering (a content marker, a reasoning
marker, calls with known names and arguments), the renderer that caches renderings of one chat template, and small
string helpers for building patterns from what was found.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from ...core.errors import InferenceError
from ..rendering import SAMPLE_TOOLS, common_prefix, generated_part, render_chat_template

# Probe values: distinctive, so each is found exactly once in a rendering.
USER = "USER_PROBE_TEXT"
CONTENT = "CONTENT_PROBE_TEXT"
REASONING = "REASONING_PROBE_TEXT"
CALL_A: tuple[str, dict[str, Any]] = ("get_weather", {"city": "Paris", "days": 3})
CALL_B: tuple[str, dict[str, Any]] = ("search_web", {"query": "bakeries", "max_results": 5})
CALL_IDS = ("call00001", "call00002")  # 9 characters, alphanumeric (Mistral templates insist)


def call_message(name: str, arguments: dict, call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def common_prefix_len(a: str, b: str) -> int:
    return len(common_prefix(a, b))


def common_suffix_len(a: str, b: str) -> int:
    n = 0
    for x, y in zip(reversed(a), reversed(b)):
        if x != y:
            break
        n += 1
    return n


class Renderer:
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
            tools=SAMPLE_TOOLS if tools or self.tools_always else None,
            add_generation_prompt=generation_prompt,
            **self.kwargs,
        )

    def turn(self, history: list[dict], message: dict, tools: bool = False) -> tuple[str, str]:
        prompt = self.render(history, tools, True)
        if self.with_reasoning:
            message = dict(message, reasoning_content=REASONING)
        full = self.render(history + [message], tools, False)
        if not full.startswith(prompt) and self.synthesis is not None:
            generation = generated_part(prompt, full, message, self.synthesis)
            if generation is not None:
                return prompt, generation
        if not full.startswith(prompt):
            raise InferenceError(
                "the prompt (history + generation prompt) is not a prefix of the rendered assistant turn: the chat "
                f"template rewrites the last turn (prompt ends {prompt[-60:]!r}, rendering continues "
                f"{full[common_prefix_len(prompt, full):][:60]!r})"
            )
        return prompt, full[len(prompt):]

    def generation_prompt(self, history: list[dict], tools: bool = False) -> str:
        """What add_generation_prompt adds after the history (empty for templates without one)."""
        with_prompt = self.render(history, tools, True)
        without = self.render(history, tools, False)
        return with_prompt[common_prefix_len(with_prompt, without):]


def user_message(text: str = USER) -> dict:
    return {"role": "user", "content": text}


def tool_history() -> list[dict]:
    """A history ending with a tool result (for the anchor after a tool turn)."""
    return [
        user_message(),
        {"role": "assistant", "content": "", "tool_calls": [call_message("get_weather", {"city": "Oslo"}, "call00009")]},
        {"role": "tool", "tool_call_id": "call00009", "name": "get_weather", "content": "TOOL_RESULT_PROBE"},
    ]


# End-of-generation tokens of widely used tokenizers. A model may stop with its tokenizer's EOS token instead
# of the turn's end marker (Hermes on Llama writes <|eot_id|>); those the chat template never writes cannot be
# markup of this format, so they are accepted as an end too.
COMMON_EOS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "</s>", "<eos>",
               "<end_of_turn>", "<|eot|>", "<|eom|>", "<｜end▁of▁sentence｜>", "[EOS]")

# Special-token-like markup: <|x|>, <x>, </x>, [X], <｜x｜>.
# Gemma 4 uses half-barred ones: <|turn>, <turn|>.
# A lowercase word between two special tokens (<|open|>think<|sep|>, <|channel|>final<|message|>) names a section
# and is one marker with them; a role name there (<|start|>assistant<|channel|>) belongs to the turn header instead.
TOKEN = re.compile(r"<\|[^<>|\s]+\|>(?!(?:assistant|user|system|tool)<)[a-z][a-z_]*<\|[^<>|\s]+\|>|<\|[^<>]*?\|>|<｜[^<>]*?｜>|</?｜[^<>]*?>|<\|[^<>|\s]+>|<[A-Za-z_][^<>|\s]*\|>|</?[A-Za-z_][^<>\s]*(?:\s[^<>]*)?>"
                    r"|\[/?[A-Z_]+\]")


def esc(text: str) -> str:
    """A regex for literal markup where any run of whitespace may vary (models are loose with it)."""
    parts = re.split(r"(\s+)", text)
    return "".join(r"\s*" if part.isspace() else re.escape(part) for part in parts if part)


def first_token(text: str) -> str:
    """The first special-token-like marker of `text` (the end-of-turn marker), else its first line."""
    stripped = text.strip()
    match = TOKEN.match(stripped)
    if match:
        return match.group(0)
    return stripped.split("\n")[0].strip()


def alternation(items: list[str]) -> str:
    items = sorted({i for i in items if i}, key=len, reverse=True)
    return "(?:" + "|".join(re.escape(i) for i in items) + ")"


def _boundaries(text: str) -> set[int]:
    """Positions where markup may be split: outside special tokens."""
    inside: set[int] = set()
    for token in TOKEN.finditer(text):
        inside.update(range(token.start() + 1, token.end()))
    return set(range(len(text) + 1)) - inside


def split_repeat(head: str, tail: str, mid: str) -> tuple[str, str, str, str]:
    """Split the markup around calls into (block open, call open, call close, block close).

    `head` is the text before the first call, `tail` the text after the last one, `mid` the text between
    two calls: `mid` is `call close + separator + call open`, so the call open is what `head` and `mid`
    end with, the call close what `tail` and `mid` start with; the rest wraps the whole block. Splits are
    moved off the inside of special tokens (<｜tool▁calls▁begin｜> shares its end with <｜tool▁call▁begin｜>).
    """
    open_len = common_suffix_len(head, mid)
    allowed = _boundaries(head)
    while open_len and len(head) - open_len not in allowed:
        open_len -= 1
    close_len = min(common_prefix_len(tail, mid), len(mid) - open_len)
    allowed = _boundaries(tail)
    while close_len and close_len not in allowed:
        close_len -= 1
    return head[: len(head) - open_len], head[len(head) - open_len:], tail[:close_len], tail[close_len:]


def optional(text: str) -> str:
    return f"(?:{esc(text.strip())}\\s*)?" if text.strip() else ""


def text_tail(text: str) -> str:
    """Optional closing markup after a call; whitespace after it is left to the content that follows."""
    return f"(?:\\s*{esc(text.strip())})?" if text.strip() else ""


def generalise(text: str) -> str:
    """A regex for a call header: indices and call ids vary from call to call, and models often leave the
    id out (with the marker that introduces it: [CALL_ID]abc123def)."""
    for call_id in CALL_IDS:
        if call_id in text:
            before, after = text.split(call_id, 1)
            tokens = list(TOKEN.finditer(before))
            if tokens and tokens[-1].end() == len(before):
                head, marker = before[: tokens[-1].start()], before[tokens[-1].start():]
                return generalise(head) + "(?:" + re.escape(marker) + r"[^\s<>\[\]{}]*)?" + generalise(after)
            return generalise(before) + r"[^\s<>\[\]{}]*" + generalise(after)
    return re.sub(r"(?<!\\)\d+", r"\\d+", esc_loose(text))


def esc_loose(text: str) -> str:
    """Like esc, and models may also put spaces around a special token (<|tool_call_begin|> functions.x :0 <|...|>)."""
    out, last = [], 0
    for token in TOKEN.finditer(text):
        out.append(esc(text[last:token.start()]))
        if token.start() > 0 and not text[token.start() - 1].isspace():
            out.append(r"\s*")
        out.append(re.escape(token.group(0)))
        if not text[token.end():token.end() + 1].isspace():
            out.append(r"\s*")
        last = token.end()
    out.append(esc(text[last:]))
    pattern = "".join(out)
    return pattern[: -len(r"\s*")] if pattern.endswith(r"\s*") and not text[-1:].isspace() else pattern

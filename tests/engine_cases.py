"""What the engine-check tests (tests/test_vllm_engine.py, tests/test_sglang_engine.py) share: the guard that skips
them where the engine is missing (and fails them on CI, where it must be installed), a template within what the
engines' own parsers serve, and a few cases to run through them."""

from __future__ import annotations

import os

import pytest

from response_templates.authoring import engines


def engine_mark(engine: str, label: str):
    """The module's pytestmark: skip when `engine` cannot run here, saying why; on CI (CI=true) raise instead."""
    missing = engines.engine_unavailable(engine)
    if missing and os.environ.get("CI", "").lower() == "true":
        raise RuntimeError(f"{label} must be installed for these tests on CI: {missing}")
    return pytest.mark.skipif(bool(missing), reason=f"{label} is not installed here: {missing}")


PROMPT = "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
# A template within what the engines' parsers serve: a `thinking` field, plain text fields, no join, JSON calls.
SERVABLE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>"},
        "tool_calls": {"open": "<tool_call>", "close": "</tool_call>", "repeats": True, "content": "json",
                       "transform": {"type": "function", "function": "{content}"}},
        "content": {"close": "<|im_end|>"},
    },
}


def servable_cases(days: str) -> list[dict]:
    """A plain answer, reasoning, a prefilled <think>, a call whose `days` argument is written as `days` (JSON)."""
    return [
        {"name": "plain", "prefix": PROMPT, "output": "It is sunny.<|im_end|>"},
        {"name": "reasoning", "prefix": PROMPT, "output": "<think>Easy.</think>It is sunny.<|im_end|>"},
        {"name": "prefilled_think", "prefix": PROMPT + "<think>", "output": "Easy.</think>Sunny.<|im_end|>"},
        {"name": "call", "prefix": PROMPT, "tools": TOOLS,
         "output": '<think>Use the tool.</think><tool_call>{"name": "get_weather", "arguments": {"city": "Paris", '
                   f'"days": {days}}}}}</tool_call><|im_end|>'},
    ]

"""Chat templates rendered the way transformers renders them: sandboxed jinja2 with transformers' globals and
filters (`tojson` keeping non-ASCII text, `raise_exception`, `strftime_now` under a `frozen_clock`), and the
`{% generation %}` tag. Also what verification and inference share about renderings: the sample tools they
offer a chat template, and how a rendered turn is split into prompt and generated text.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
from datetime import datetime
from typing import Any


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Chat templates expect non-ASCII text to stay as is, unlike jinja2's HTML-safe built-in filter.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message):
    from jinja2.exceptions import TemplateError

    raise TemplateError(message)


_NOW: contextvars.ContextVar = contextvars.ContextVar("response_templates_now", default=None)


def _strftime_now(fmt):
    return (_NOW.get() or datetime.now()).strftime(fmt)


@contextlib.contextmanager
def frozen_clock():
    """Inside this block, strftime_now gives one fixed time (the time the block started, or the outer block's).

    A chat template that writes the time (Hunyuan writes it to the second) renders the prompt and the full turn at
    two moments; comparing them must not depend on the clock ticking in between.
    """
    token = _NOW.set(_NOW.get() or datetime.now())
    try:
        yield
    finally:
        _NOW.reset(token)


_ENV = None


def _environment():
    global _ENV
    if _ENV is None:
        from jinja2 import nodes
        from jinja2.ext import Extension, loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        class _Generation(Extension):
            # `{% generation %}...{% endgeneration %}` marks assistant text for training masks; rendering ignores it.
            tags = {"generation"}

            def parse(self, parser):
                lineno = next(parser.stream).lineno
                body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
                return nodes.Scope(body).set_lineno(lineno)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        _ENV = env
    return _ENV


@functools.lru_cache(maxsize=64)
def compiled_chat_template(chat_template: str):
    # Compiling is the slow part of rendering, and verify renders each chat template many times.
    return _environment().from_string(chat_template)


def render_chat_template(
    chat_template: str,
    messages: list[dict],
    *,
    tools: list[dict] | None = None,
    add_generation_prompt: bool = False,
    bos_token: str = "",
    eos_token: str = "",
    **kwargs: Any,
) -> str:
    """Render a chat template source the way transformers does (sandboxed jinja2)."""
    return compiled_chat_template(chat_template).render(
        messages=messages,
        tools=tools,
        add_generation_prompt=add_generation_prompt,
        bos_token=bos_token,
        eos_token=eos_token,
        **kwargs,
    )


SAMPLE_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather forecast for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "days": {"type": "integer", "description": "Number of days"},
                    "include_hourly": {"type": "boolean"},
                    "min_temp": {"type": "number"},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_web",
            "description": "Search the web.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "max_results": {"type": "integer"}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Get the current time.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "create_event",
            "description": "Create a calendar event.",
            "parameters": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "attendees": {"type": "array", "items": {"type": "object"}},
                    "details": {"type": "object"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["title"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "save_note",
            "description": "Save a text note.",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        },
    },
]


def common_prefix(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return a[:n]


def generated_part(prompt: str, full: str, message: dict, synthesis: dict | None) -> str | None:
    if full.startswith(prompt):
        return full[len(prompt) :]
    if synthesis is None or not prompt.endswith(synthesis["prefill"]):
        return None
    # The chat template drops reasoning from rendered turns while its generation prompt opens a
    # reasoning block (the prefill): the model writes the reasoning, the close marker, then the turn.
    head = prompt[: len(prompt) - len(synthesis["prefill"])]
    if not full.startswith(head):
        return None
    reasoning = message.get("reasoning_content") or ""
    if reasoning and full[len(head) :].startswith(reasoning):
        # The rendered turn keeps the reasoning, written bare right after the turn's header (Apriel 1.6): only the
        # prefill is the prompt's own, and the rest of the turn is what the model writes after it.
        return full[len(head) :]
    return reasoning + synthesis["close"] + full[len(head) :]

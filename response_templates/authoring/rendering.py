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
import threading
import time
from datetime import datetime
from typing import Any

from ..core.errors import RenderTimeoutError


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


# Seconds of CPU time that rendering chat templates may take in one `verify` or `infer_template` call (or one
# render_chat_template call outside them). Chat templates come from Hub repositories: two nested
# `range(100000)` loops would otherwise render for hours. Real chat templates take milliseconds per render.
RENDER_TIME_LIMIT = 30.0


class _RenderBudget(threading.local):
    deadline: float | None = None  # in this thread's CPU time (time.thread_time)
    spent = False  # the budget of the call in progress ran out (later renders of the call fail at once)


_render_budget = _RenderBudget()


@contextlib.contextmanager
def render_budget():
    """One rendering time budget (RENDER_TIME_LIMIT) for every render inside; nested uses join the outer one. Yields
    the budget: its `spent` says whether it ran out."""
    if _render_budget.deadline is not None:
        yield _render_budget
        return
    try:
        _render_budget.spent = False
        _render_budget.deadline = time.thread_time() + RENDER_TIME_LIMIT
        yield _render_budget
    finally:
        _render_budget.deadline = None


def _render_check() -> None:
    deadline = _render_budget.deadline
    if deadline is not None and (_render_budget.spent or time.thread_time() > deadline):
        _render_budget.spent = True
        raise RenderTimeoutError(render_timeout_message())


def render_timeout_message() -> str:
    return (
        f"rendering the chat template took more than RENDER_TIME_LIMIT ({RENDER_TIME_LIMIT:g} s of CPU time; a loop "
        "that runs that long, such as nested range(100000), is taken for a hostile template)"
    )


def _budgeted(iterable):
    """What a `for` loop of a chat template iterates over, with the rendering time checked at each step."""
    for item in iterable:
        _render_check()
        yield item


def _budget_loops(tree) -> None:
    """Every `for` loop of a parsed chat template iterates through `_budgeted` (loops and macro calls are the only
    ways a template's rendering time can outgrow its size: calls are checked by the environment's `call`)."""
    from jinja2 import nodes

    for loop in tree.find_all(nodes.For):
        loop.iter = nodes.Call(nodes.Name("__render_budgeted", "load"), [loop.iter], [], None, None)


_ENV = None


def _environment():
    global _ENV
    if _ENV is None:
        from jinja2 import nodes
        from jinja2.ext import Extension, loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        class _BudgetedEnvironment(ImmutableSandboxedEnvironment):
            def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 - jinja2's own signature
                _render_check()
                return super().call(__context, __obj, *args, **kwargs)

        class _Generation(Extension):
            # `{% generation %}...{% endgeneration %}` marks assistant text for training masks; rendering ignores it.
            tags = {"generation"}

            def parse(self, parser):
                lineno = next(parser.stream).lineno
                body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
                return nodes.Scope(body).set_lineno(lineno)

        env = _BudgetedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        env.globals["__render_budgeted"] = _budgeted
        _ENV = env
    return _ENV


@functools.lru_cache(maxsize=64)
def compiled_chat_template(chat_template: str):
    # Compiling is the slow part of rendering, and verify renders each chat template many times.
    environment = _environment()
    tree = environment.parse(chat_template)
    _budget_loops(tree)
    return environment.from_string(tree)


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
    """Render a chat template source the way transformers does (sandboxed jinja2), within the rendering time
    budget (RENDER_TIME_LIMIT; raises RenderTimeoutError past it)."""
    with render_budget():
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
    rest = full[len(head) :]
    if reasoning and rest.startswith(reasoning) and (message.get("content") or "") in rest[len(reasoning) :]:
        # The rendered turn keeps the reasoning, written bare right after the turn's header (Apriel 1.6): only the
        # prefill is the prompt's own, and the rest of the turn is what the model writes after it. (A turn that
        # drops the reasoning may start with the same text when the answer does: the answer must follow it.)
        return rest
    return reasoning + synthesis["close"] + full[len(head) :]

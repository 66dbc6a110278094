"""Constrained decoding from a response template: xgrammar structural tags that force tool calls.

`structural_tag(template, tools, tool_choice=...)` returns the JSON form of an xgrammar structural tag (what
vLLM's `structured_outputs`, SGLang's `response_format` and `xgrammar.Grammar.from_structural_tag` accept). The
template already says how a call opens, how its body is written and how it closes; the compiler reads one
canonical writing of each out of the template's patterns:

- delimiter patterns are walked (Python's own regex parser) taking the first alternative that spells literal
  text, skipping optional parts and lookarounds, and keeping `\\s*` as optional whitespace;
- a call's body is the tool's JSON schema written in the region's syntax: JSON (the whole `{"name", "arguments"}`
  object, or the arguments after a name the opener spells), or xml-inline parameters (one tag per property,
  string values as raw text up to the tag's end, other values as JSON);
- reasoning and content stay free text, kept free of the template's markers so that they cannot open, close or
  swallow a call; where the parser drops text outside messages (gpt-oss's harmony), the answer is written as the
  format's content message instead.

Every grammar is checked before it is returned: calls written in the canonical form (one and two calls, text
before and after, after the reasoning) are parsed with our own parser and must give exactly the calls meant. A
template the compiler cannot express raises `GrammarError` naming the reason; it never returns a grammar whose
strings parse to other calls. The property test (tests/test_grammar.py) walks each grammar at random with
xgrammar's matcher and parses what it admits.

xgrammar itself is not imported here: the result is plain JSON.
"""
from __future__ import annotations

from typing import Any

from ...core.errors import GrammarError
from .building import _build
from .formats import _tool_list
from .planning import _plan

__all__ = ["GrammarError", "explain", "structural_tag"]


def _check_choice(tool_choice: Any, names: list) -> None:
    if tool_choice in ("auto", "required", "none"):
        if tool_choice == "required" and not names:
            raise GrammarError('tool_choice="required" needs at least one tool')
        return
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        name = (tool_choice.get("function") or {}).get("name")
        if name in names:
            return
        raise GrammarError(f"tool_choice names {name!r}, which is not among the tools {names}")
    raise GrammarError(f'tool_choice must be "auto", "required", "none" or {{"type": "function", "function": '
                       f'{{"name": ...}}}}, got {tool_choice!r}')


_STAND_IN_TOOL = {"type": "function", "function": {"name": "stand_in", "parameters": {"type": "object",
                                                                                     "properties": {}}}}


def structural_tag(template: Any, tools: Any = None, *, prefix: str = "", tool_choice: Any = "auto",
                   parallel_tool_calls: bool = True, _after_reasoning: bool = False) -> dict:
    """An xgrammar structural tag (JSON form) that constrains a model writing with `template` to call `tools`.

    `template`: a template dict, a compiled template or a library name. `prefix`: the prompt, as for the parser
    (tells whether the prompt left a reasoning block open). `tool_choice`: "auto" (the model chooses; a call, once
    opened, must be complete and valid), "required" (at least one call), "none" (no call), or
    {"type": "function", "function": {"name": ...}} (that call). `parallel_tool_calls=False`: at most one call.
    Raises `GrammarError` when the template cannot be expressed (the message says why)."""
    # `_after_reasoning`, for engines that apply a constraint only once the reasoning is over (vLLM with a reasoning
    # parser): a reasoning block the prompt left open counts as closed, so the grammar starts after it.
    tool_names = [name for name, _ in _tool_list(tools)]
    _check_choice(tool_choice, tool_names)
    prefix = prefix if prefix is not None else ""
    tools = tools if tool_choice != "none" else None
    plan = _plan(template, tools, prefix)
    if _after_reasoning and plan.reasoning_open is not None:
        prefix += plan.reasoning_open
        plan = _plan(template, tools, prefix)
    if tool_choice == "none" and plan.plain_opener is not None:
        # whether calls open only at the answer's start (so text can be kept from starting like one) is found by
        # writing a call: of a stand-in tool, since "none" writes none
        with_calls = _plan(template, [_STAND_IN_TOOL], prefix)
        if with_calls.answer_starts:
            plan = with_calls
    # (a tag of new containers only: the caller may change it without touching what the compiler caches)
    return _build(plan, tool_choice, bool(parallel_tool_calls))


def explain(template: Any, tools: Any = None, *, prefix: str = "") -> list:
    """Notes on how the template was compiled (for the coverage table): empty when nothing is restricted."""
    return list(_plan(template, tools, prefix).notes)

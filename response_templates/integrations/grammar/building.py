"""The structural tag for each tool_choice mode, built from a plan."""

from __future__ import annotations

import functools
import json
from typing import Any

from ...core.errors import GrammarError
from .formats import _const, _free_text, _plain, _ws
from .planning import _Plan


def _tags(plan: _Plan, names: list, parallel: bool = True, json_bodies: bool = False) -> list:
    """One tag per distinct begin (tools whose calls open alike share a tag whose content picks the tool; where a
    region holds a list of calls, one list whose items are any of those tools, one item at most if not `parallel`).
    `json_bodies`: a call's body may also be one JSON object (inside a section of calls, where the plan found it)."""
    by_begin: dict = {}
    for name in names:
        for forms in (plan.calls, plan.spelled):  # (in each spelling of the markers the grammar writes)
            if name in forms:
                by_begin.setdefault((forms[name].begin, forms[name].end), []).append(forms[name])
    tags = []
    for (begin, end), forms in by_begin.items():
        first = forms[0]
        if first.list_body is not None:
            elements = list(first.elements)
            elements[first.list_at] = first.list_body([form.list_item for form in forms], parallel)
            content: dict = {"type": "sequence", "elements": elements}
        else:
            contents = [{"type": "sequence", "elements": form.elements or [_const("")]} for form in forms]
            if json_bodies:
                contents += [{"type": "sequence", "elements": form.json_body} for form in forms if form.json_body]
            if parallel and all(form.list_region is not None for form in forms):  # or a list of call objects
                contents.append({"type": "sequence", "elements": first.list_region(
                    [form.list_item for form in forms], parallel)})
            content = contents[0] if len(contents) == 1 else {"type": "or", "elements": contents}
        tags.append({"type": "tag", "begin": begin, "content": content, "end": end})
    return tags


def _one_region(plan: _Plan) -> bool:
    """The calls are one region holding a list of them (a second list would not be read as more calls)."""
    return any(form.list_body is not None for form in plan.calls.values())


def _excludes(plan: _Plan, extra: tuple | list = ()) -> list:
    """Markers kept out of free text. Free text also spells the start of a call's opener before the grammar knows a
    call began, so markers that overlap an opener are left out (the opener itself is the call)."""
    begins = ([form.begin for form in [*plan.calls.values(), *plan.spelled.values()]]
              + [opener for opener, _ in plan.wrappers]
              + [trigger for _, _, trigger in plan.messages])
    # (nor the pieces of a marker free text may hold: `<|sep|>` of Kimi K3's `<|open|>response<|sep|>`)
    found = [marker for marker in [*plan.markers, *plan.spaced_markers]
             if not any(_runs_into(marker, begin) for begin in begins if begin)
             and not any(marker in free for free in plan.free_markers)]
    # (where the opener is plain, its guard keeps calls out instead of the opener's start: Llama's `{`)
    extra = [text for text in extra if plan.guard is None or not _plain(text)]
    guards = [plan.guard] if plan.guard is not None else []
    return found + [text for text in [*extra, *plan.plain_starts, *guards] if text and text not in found]


def _runs_into(marker: str, begin: str) -> bool:
    """Free text that may not hold `marker` could not write `begin`: the one holds the other, or the marker's end is
    the begin's start (where the begin's end is the marker's start, the tag has begun: MiniMax M3's namespace
    `]<]minimax[>[` and its end-of-turn `[e~[`)."""
    return marker in begin or begin in marker or any(marker.endswith(begin[:size]) for size in range(1, len(marker)))


def _build(plan: _Plan, tool_choice: Any, parallel: bool) -> dict:
    parallel = parallel and not plan.one_call
    names = [tool_choice["function"]["name"]] if isinstance(tool_choice, dict) else list(plan.calls)
    free = tool_choice in ("none", "auto") or not names
    if plan.plain_opener is not None and free and not plan.answer_starts and plan.guard is None:
        forced = ', so only "required" and a named function compile for this template' if plan.calls else ""
        raise GrammarError(f"{plan.plain_opener}: tool_choice={tool_choice!r} leaves text free{forced}")
    answer: list
    if plan.answer_starts and tool_choice == "none":
        answer = [{"type": "optional", "content": _start_text(plan)}]
    elif plan.answer_starts and tool_choice == "auto":
        answer = _calls_at_start_answer(plan, names, parallel)
    elif tool_choice == "none" or not names:
        answer = _text_answer(plan)
    elif tool_choice == "auto":
        answer = _chosen_answer(plan, names, parallel)
    else:  # "required" or a named function: calls only
        answer = [_ws(0), *_call_lead(plan),
                  {"type": "tags_with_separator", "tags": _tags(plan, names, parallel), "separator": plan.separator,
                   "at_least_one": True, "stop_after_first": not parallel or _one_region(plan)}]
    elements = _reasoning_part(plan) + answer
    fmt = elements[0] if len(elements) == 1 else {"type": "sequence", "elements": elements}
    inside = _calls_inside_reasoning(plan, names, parallel) if tool_choice == "auto" else None
    if inside is not None:
        fmt = {"type": "or", "elements": [fmt, inside]}
    # (a plain opener, Llama's `{`, cannot open a call inside a JSON string: its quotes would be escaped there)
    _exclude_triggers(fmt, [trigger for trigger in plan.triggers if not _plain(trigger)])
    _fewest_excludes(fmt)
    return {"type": "structural_tag", "format": _merged(fmt)}


def _reasoning_part(plan: _Plan) -> list:
    """The reasoning block: closing the one the prompt left open, or one the answer may start with."""
    after = [{"type": "regex", "pattern": plan.lead.text}] if plan.lead is not None else []
    if plan.content_open is not None:  # the prompt opened the answer's message: its text runs up to its close
        inner = [m for m in plan.markers if m != plan.content_open] + plan.triggers
        return [{"type": "tag", "begin": "", "content": _free_text(inner), "end": plan.content_open}]
    if plan.reasoning_open is not None:
        inner = [m for m in plan.markers if m != plan.reasoning_open] + plan.triggers
        return [{"type": "tag", "begin": "", "content": _free_text(inner), "end": plan.reasoning_open}, *after]
    if plan.reasoning_tag is not None:
        inner = [m for m in plan.markers if m not in plan.reasoning_tag] + plan.triggers
        block = {"type": "tag", "begin": plan.reasoning_tag[0], "content": _free_text(inner), "end": plan.reasoning_tag[1]}
        if plan.lone_reasoning_close:  # (or its closer alone, which skips it)
            block = {"type": "or", "elements": [block, _const(plan.reasoning_tag[1])]}
        # (layout before the block: GLM-4.5 writes "\n<think>")
        return [_ws(0), {"type": "optional", "content": {"type": "sequence", "elements": [block, *after]}
                         if after else block}]
    return []


def _messages_of(plan: _Plan, preambles: bool = False) -> list:
    """The answer as a message, where text outside messages is dropped (gpt-oss's final channel); `preambles`: and
    the messages written before calls (gpt-oss's commentary channel)."""
    openers = [(opener, ends) for opener, ends, _ in plan.messages] + (plan.preambles if preambles else [])
    return [{"type": "tag", "begin": opener, "end": ends if len(ends) > 1 else ends[0],
             "content": _free_text([m for m in plan.markers if m not in ends])} for opener, ends in openers]


def _call_lead(plan: _Plan) -> list:
    """The optional marker the calls may start with (plan.call_lead), as an element before them (or none)."""
    return [{"type": "regex", "pattern": plan.call_lead.text}] if plan.call_lead is not None else []


def _text_answer(plan: _Plan) -> list:
    """No call: free text, or the format's content messages."""
    if plan.messages:
        return [{"type": "triggered_tags", "triggers": [trigger for _, _, trigger in plan.messages],
                 "tags": _messages_of(plan), "at_least_one": False, "stop_after_first": False,
                 "excludes": _excludes(plan, plan.triggers)}]
    return [_free_text(_excludes(plan, plan.triggers))]


def _chosen_answer(plan: _Plan, names: list, parallel: bool) -> list:
    """"auto": text, and calls where the model opens one."""
    if plan.calls_end_answer:
        # text after a call would be read as part of it: free text first, then (perhaps) calls to the end
        if plan.messages:
            raise GrammarError("this template reads text written after a call as part of the call, and its calls "
                               'sit in messages: tool_choice="auto" is not compiled for it')
        # (a section of calls is not written here: its markers stay out of free text, Llama 4's `<|python_start|>`)
        sections = [marker for pair in plan.wrappers for marker in pair]
        breaks = "(" + "|".join(_regex_literal(text) for text in plan.text_after_calls) + ")"
        after = [{"type": "optional", "content": {"type": "sequence", "elements": [
            {"type": "regex", "pattern": breaks + "[A-Za-z]"},
            _free_text(_excludes(plan, [*plan.triggers, *sections]))]}}]
        calls = {"type": "tags_with_separator", "tags": _tags(plan, names, parallel), "separator": plan.separator,
                 "at_least_one": True, "stop_after_first": not parallel or _one_region(plan)}
        return [_free_text(_excludes(plan, sections)), {"type": "optional", "content": {"type": "sequence", "elements": [
            *_call_lead(plan), calls, *(after if plan.text_after_calls else [])]}}]
    if _one_region(plan) and not (plan.messages or plan.wrappers):
        # one region holds the list of calls, text may surround it: text, then perhaps the region and text that
        # cannot open another one (a second region would not be read as more calls)
        tags = _tags(plan, names, parallel)
        region = tags[0] if len(tags) == 1 else {"type": "or", "elements": tags}
        return [_free_text(_excludes(plan)), {"type": "optional", "content": {"type": "sequence", "elements": [
            region, _free_text(_excludes(plan, plan.triggers))]}}]
    tags = _call_and_section_tags(plan, names, parallel)
    chosen = {"type": "triggered_tags", "triggers": _section_triggers(plan) + [trigger for _, _, trigger in plan.messages],
              "tags": tags + _messages_of(plan, preambles=True), "at_least_one": False,
              "stop_after_first": not parallel or _one_region(plan), "excludes": _excludes(plan)}
    # the last call may stop before its closer, the turn ending there, as models write it (under "auto" only, which
    # admits what the model chooses to write: the forced modes write the canonical calls, and an xgrammar tag has
    # no optional end, so the call is written a second time, at some cost in compile time)
    unclosed = _unclosed(plan, names, run=parallel)
    if unclosed is None:
        return [chosen]
    if parallel:
        return [chosen, {"type": "optional", "content": unclosed}]
    # (one call at most: text and a closed call, or text and an unclosed one)
    alone = {"type": "sequence", "elements": [_free_text(_excludes(plan, _section_triggers(plan))), unclosed]}
    return [{"type": "or", "elements": [chosen, alone]}]


def _unclosed(plan: _Plan, names: list, run: bool = False) -> dict | None:
    """A call of one of `names` written without its closer (or with its start only: plan.unclosed_ends), for the end
    of the answer, in its canonical writing with the optional parts found to read the same so (others were checked
    with their closer only: Hermes' code fence); None where the template reads none. With `run`, where a call left
    so is read before another call too (plan.unclosed_between): the calls that end the answer, each with or without
    its closer (a tag with several ends)."""
    if not plan.unclosed_ends:
        return None
    writings = []  # (begin, the elements after it) of each tool's call
    for name in names:
        form = plan.calls[name]
        dropped = [element for element, _ in form.optional
                   if not any(element is kept for kept in plan.unclosed_optional)]
        writings.append((form.begin, [element for element in form.elements
                                      if not any(element is other for other in dropped)]))
    if run and plan.unclosed_between:
        # (one tag per begin, its tools' contents one choice, as _tags does: their JSON schemas merge into one)
        by_begin: dict = {}
        for begin, elements in writings:
            by_begin.setdefault(begin, []).append({"type": "sequence", "elements": elements or [_const("")]})
        ends = list(dict.fromkeys([plan.calls[names[0]].end, *plan.unclosed_ends]))
        tags = [{"type": "tag", "begin": begin, "end": ends,
                 "content": contents[0] if len(contents) == 1 else {"type": "or", "elements": contents}}
                for begin, contents in by_begin.items()]
        return {"type": "tags_with_separator", "tags": tags, "separator": plan.separator, "at_least_one": True,
                "stop_after_first": False}
    calls = [{"type": "sequence", "elements": [_const(begin), *elements]} for begin, elements in writings]
    stops = {"type": "regex", "pattern": "(" + "|".join(_regex_literal(end) for end in plan.unclosed_ends) + ")"}
    choice = calls[0] if len(calls) == 1 else {"type": "or", "elements": calls}
    return {"type": "sequence", "elements": [choice, stops]}


def _start_text(plan: _Plan) -> dict:
    """Where calls open only at the answer's start (plan.answer_starts): text that cannot start like a call (its
    first character none a call starts with, or a call's start left before it is complete: "``x", not
    "```tool_code")."""
    excludes = plan.start_text_excludes
    # (nor a character a marker free text may not hold starts with: the marker would begin across the two formats)
    starts = "".join(sorted({_class_char(text[0]) for text in [*plan.answer_starts, *excludes] if text}))
    firsts = [f"[^ \\t\\r\\n{starts}]"] + [
        _regex_literal(start[:size]) + f"[^{_class_char(start[size])}]"
        for start in plan.answer_starts for size in range(1, len(start))]
    return {"type": "sequence", "elements": [{"type": "regex", "pattern": "(" + "|".join(firsts) + ")"},
                                             _free_text(excludes)]}


def _calls_at_start_answer(plan: _Plan, names: list, parallel: bool) -> list:
    """"auto" where calls open only at the answer's start: the calls, then perhaps text after them (on the
    separators found to work), or text that cannot start like a call, or nothing."""
    between = "(" + "|".join(_regex_literal(text) for text in plan.text_after_start_calls) + ")"
    after = [{"type": "optional", "content": {"type": "sequence", "elements": [
        {"type": "regex", "pattern": between + "[A-Za-z]"}, _free_text(plan.start_text_excludes)]}}]
    called = {"type": "sequence", "elements": [
        _ws(0), {"type": "tags_with_separator", "tags": _tags(plan, names, parallel), "separator": plan.separator,
                 "at_least_one": True, "stop_after_first": not parallel or _one_region(plan)},
        *(after if plan.text_after_start_calls else [])]}
    return [{"type": "or", "elements": [called, {"type": "optional", "content": _start_text(plan)}]}]


def _class_char(char: str) -> str:
    """`char` as it stands inside a regex character class."""
    return "\\" + char if char in "\\]^-[" else {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(char, char)


def _regex_literal(text: str) -> str:
    return "".join("\\" + char if char in ".^$*+?()[]{}|\\/" else _class_char(char) if char in "\n\t\r" else char
                   for char in text)


def _section_triggers(plan: _Plan) -> list:
    """The calls' triggers, and the openers of sections of calls; a section opener that starts with a call's trigger
    is reached through that trigger (xgrammar wants each tag under one trigger)."""
    return plan.triggers + [opener for opener, _ in plan.wrappers
                            if not any(opener.startswith(trigger) for trigger in plan.triggers)]


def _call_and_section_tags(plan: _Plan, names: list, parallel: bool) -> list:
    """The tags of calls, and of sections holding a group of them (DeepSeek's `<｜DSML｜tool_calls>`)."""
    tags = _tags(plan, names, parallel)
    for opener, closer in plan.wrappers:
        inner = _tags(plan, names, parallel, json_bodies=plan.json_bodies)
        group: dict = {"type": "sequence", "elements": [_ws(0), {"type": "or", "elements": inner}]}
        if parallel:
            group = {"type": "plus", "content": group}
        tags.append({"type": "tag", "begin": opener, "end": closer,
                     "content": {"type": "sequence", "elements": [group, _ws(0)]}})
    return tags


def _calls_inside_reasoning(plan: _Plan, names: list, parallel: bool) -> dict | None:
    """"auto": the other way models write: reasoning the model does not close, a call (or a section of calls) whose
    opener ends it (plan.reasoning_enders), then the answer as after any call: text, and more calls where parallel.
    None where the template has no such opener, or where the answer is not text with calls opened by triggers."""
    if not plan.reasoning_enders or plan.calls_end_answer or plan.messages or plan.content_open is not None or (
            _one_region(plan) and not plan.wrappers):
        return None
    tags = _call_and_section_tags(plan, names, parallel)
    enders = [tag for tag in tags if tag["begin"] in plan.reasoning_enders]
    if not enders:
        return None
    if plan.reasoning_open is not None:
        inner, start = [m for m in plan.markers if m != plan.reasoning_open] + [plan.reasoning_open], []
    else:
        assert plan.reasoning_tag is not None
        inner = [m for m in plan.markers if m not in plan.reasoning_tag] + [plan.reasoning_tag[1]]
        start = [_ws(0), _const(plan.reasoning_tag[0])]
    first = enders[0] if len(enders) == 1 else {"type": "or", "elements": enders}
    if parallel:
        rest = {"type": "triggered_tags", "triggers": _section_triggers(plan), "tags": tags, "at_least_one": False,
                "stop_after_first": False, "excludes": _excludes(plan)}
    else:
        rest = _free_text(_excludes(plan, plan.triggers))
    return {"type": "sequence", "elements": [*start, _free_text(inner + plan.triggers), first, rest]}


def _exclude_triggers(node: Any, triggers: list) -> None:
    """Argument strings and tag contents must not hold a call opener either: the text would count one more call
    to a reader (and to some parsers) than the grammar opened."""
    if isinstance(node, dict):
        if node.get("type") in ("json_schema", "any_text"):
            node["excludes"] = node.get("excludes", []) + [t for t in triggers if t not in node.get("excludes", [])]
        for value in node.values():
            _exclude_triggers(value, triggers)
    elif isinstance(node, list):
        for item in node:
            _exclude_triggers(item, triggers)


def _fewest_excludes(node: Any) -> None:
    """Each list of excluded texts without those that hold another one of the list (text that holds `}<tool_call>`
    holds `<tool_call>`): the same text is excluded, and xgrammar's compile time grows with the list."""
    if isinstance(node, dict):
        excludes = node.get("excludes")
        if excludes:
            node["excludes"] = list(_fewest(tuple(excludes)))
        for value in node.values():
            _fewest_excludes(value)
    elif isinstance(node, list):
        for item in node:
            _fewest_excludes(item)


@functools.lru_cache(maxsize=256)
def _fewest(excludes: tuple) -> tuple:
    """The texts of `excludes` that hold no other one (a tag repeats the same lists: DeepSeek V4's hold hundreds)."""
    return tuple(text for text in dict.fromkeys(excludes)
                 if not any(other != text and other in text for other in excludes if other))


def _has_reference(schema: Any) -> bool:
    """Whether a schema refers to a part of itself (`$ref`, `$defs`): nested under another, its pointers would move."""
    if isinstance(schema, dict):
        return any(key in ("$ref", "$defs", "definitions") or _has_reference(value) for key, value in schema.items())
    if isinstance(schema, list):
        return any(_has_reference(item) for item in schema)
    return False


def _merged(node: Any) -> Any:
    """The same constraint with the alternatives of each choice merged where they differ in one part only (the
    calls of several tools inside one tag: `<tool_call>` + one of the tools' JSON objects): the differing parts
    become one choice, and JSON schemas with the same options one schema of `anyOf` alternatives. xgrammar then
    builds the automaton of the strings' excluded texts once per schema instead of once per tool, which is most of
    its compile time (Qwen3 with ten tools: seconds). Every dict and list of the result is new."""
    if isinstance(node, list):
        return [_merged(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _merged(value) for key, value in node.items()}
    if node.get("type") != "or":
        return node
    # (compared as JSON text: the order of an object's keys matters, as in a schema's properties)
    choices: dict = {}
    for element in node["elements"]:
        for choice in element["elements"] if element.get("type") == "or" else [element]:
            choices.setdefault(json.dumps(choice), choice)
    sequences = [choice for choice in choices.values() if choice.get("type") == "sequence"]
    if len(sequences) == len(choices) > 1 and len({len(choice["elements"]) for choice in sequences}) == 1:
        first = sequences[0]["elements"]
        differ = [at for at in range(len(first))
                  if any(json.dumps(choice["elements"][at]) != json.dumps(first[at]) for choice in sequences)]
        if len(differ) == 1:
            at = differ[0]
            return {"type": "sequence", "elements": first[:at] + [
                _merged({"type": "or", "elements": [choice["elements"][at] for choice in sequences]})] + first[at + 1:]}
    merged: list = []
    slots: dict = {}  # a JSON schema element's options other than its schema -> its place in `merged`
    for choice in choices.values():
        if choice.get("type") != "json_schema" or _has_reference(choice["json_schema"]):
            merged.append(choice)
            continue
        options = json.dumps({key: value for key, value in choice.items() if key != "json_schema"}, sort_keys=True)
        if options not in slots:
            slots[options] = len(merged)
            merged.append({**choice, "json_schema": {"anyOf": []}})
        schema = choice["json_schema"]
        # (a schema that is only a union, as merged below a choice, adds its alternatives)
        merged[slots[options]]["json_schema"]["anyOf"].extend(
            schema["anyOf"] if isinstance(schema, dict) and list(schema) == ["anyOf"] else [schema])
    for at in slots.values():
        if len(merged[at]["json_schema"]["anyOf"]) == 1:
            merged[at]["json_schema"] = merged[at]["json_schema"]["anyOf"][0]
    return merged[0] if len(merged) == 1 else {**node, "elements": merged}

"""What the compiler reads from a template and a prompt (the calls, the reasoning block, section wrappers, content
messages), each found by parsing, and the check that calls written the canonical way parse back exactly."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import GrammarError
from ...core.parse_whole import parse_response
from ...core.template import CompiledTemplate, load_template
from .formats import (
    _call_form,
    _leading_literal,
    _list_separator,
    _opener,
    _plain,
    _sample,
    _stress_samples,
    _tool_list,
)
from .patterns import (
    PROMPT,
    SPELL_ALL,
    _MARKER_CHARS,
    _answer_starts,
    _Dead,
    _delimiter_spec,
    _held_runs,
    _literal_runs,
    _markers,
    _Piece,
    _skeletons,
    _spaced_runs,
    _spaced_spellings,
)


@dataclass
class _Plan:
    """What the compiler read from the template: enough to build any tool_choice mode."""

    template: CompiledTemplate
    prefix: str
    tools: list
    calls: dict  # tool name -> _CallForm
    triggers: list
    markers: list
    reasoning_open: str | None  # the prompt left the reasoning open: the text that closes it
    reasoning_tag: tuple | None  # (open, close) when the answer may start with a reasoning block
    separator: str
    notes: list = field(default_factory=list)
    # text written after a call is read as part of it (a closer that writes nothing: Mistral's calls end the turn):
    # under "auto" the answer is text, then calls to the end
    calls_end_answer: bool = False
    # a second call is not read (GigaChat 3's call message ends the turn): one call per answer in every mode
    one_call: bool = False
    # where calls end the answer, the line breaks ("\n", "\n\n") after which text that starts with a letter is still
    # read as content (Mistral's and Granite 3's calls end before a line break and a word)
    text_after_calls: list = field(default_factory=list)
    wrappers: list = field(default_factory=list)  # (open, close) markers a group of calls may be written between
    # plain text that starts a call in another writing of the opener (gpt-oss's `to=`): kept out of free text
    # (inside a message or an argument string it opens nothing: the message's markers are kept out of them)
    plain_starts: list = field(default_factory=list)
    # an optional part a call's opener starts with, in a format whose messages each open with a header (gpt-oss's
    # `<|start|>assistant`): allowed after the reasoning block and written between calls, where the model writes it
    lead: _Piece | None = None
    # elsewhere, an optional marker the calls may start with (Llama's `<|python_tag|>`): written at most once, before
    # the first call, where calls written after it parse the same (alone, after text, two of them)
    call_lead: _Piece | None = None
    # the prompt left a content message open (Kimi K3's non-thinking `<|open|>response<|sep|>`): the text that
    # closes it, which the answer's text runs up to before any call
    content_open: str | None = None
    # why free text could open a call the grammar did not mean (Llama's `{"name": ...}` opener is also JSON text),
    # or None: then only modes without free text ("required", a named function) compile
    plain_opener: str | None = None
    # where the opener is plain, a literal that every text the opener matches holds (Llama's `"name"`, Llama 4
    # pythonic's `[`): free text that holds none cannot open a call, so "auto" and "none" compile with it kept out;
    # None where there is no such literal, or where calls written after text are not read as calls (Gemma 3)
    guard: str | None = None
    # content messages opened by their own marker, in a format that drops text outside messages:
    # (open, [closes], what free text writes to open one)
    messages: list = field(default_factory=list)
    # content messages that open like a call, before calls (gpt-oss's commentary preamble): [(open, [closes])],
    # each a tag under the call's trigger, admitted under "auto"
    preambles: list = field(default_factory=list)
    # the calls written in the template's other spelling (every optional spelling inside a marker written: DeepSeek
    # V4.1's `<｜DSML｜ invoke`), each tool name -> _CallForm, where the prompt does not choose one and calls written
    # so parse back: the grammar admits either spelling
    spelled: dict = field(default_factory=dict)
    # markers free text may hold: markup the parser drops wherever the answer's text writes it (Apriel's
    # `[BEGIN FINAL RESPONSE]`, Ernie's `<response>`, Kimi K3's response block), which models write
    free_markers: list = field(default_factory=list)
    # the begins of the tags (a call's opener, a section's opener) that end a reasoning block still open where they
    # are written, found by parsing (DeepSeek's `<｜DSML｜tool_calls>`, Qwen's `<tool_call>`): under "auto" a call
    # may open inside the reasoning, as models write it, and the reasoning ends there
    reasoning_enders: list = field(default_factory=list)
    # inside a section of calls, a call's body may be one JSON object instead of tags (DeepSeek's direct JSON DSML
    # calls), where calls written so parse back there
    json_bodies: bool = False
    # where calls open only at the answer's start and their opener spells no text (Gemma 3): the texts one of which a
    # call starts with ("```tool_code", "["), so that under "auto" text cannot start like one
    answer_starts: list = field(default_factory=list)
    start_text_excludes: list = field(default_factory=list)  # the markers such text cannot hold (found by parsing)
    text_after_start_calls: list = field(default_factory=list)  # what may stand between them: "", "\n", "\n\n"
    # the answer may start with the reasoning block's closer alone, which the parser drops (MiniMax M3 skips its
    # reasoning so after the adaptive prompt)
    lone_reasoning_close: bool = False
    # JSON arguments are written with no line break between tokens: one would end a call early (Llama's `}` `}`)
    one_line: bool = False
    # what the answer's last call may end with instead of its closer, the turn ending there: the start of the closer
    # ("", or Qwen3-Coder's `</function>` of `</function>\n</tool_call>`), perhaps a line break. Models stop before
    # their closer (Qwen's `</tool_call>`), and the parser reads such a call: found by parsing
    unclosed_ends: list = field(default_factory=list)
    unclosed_optional: list = field(default_factory=list)  # the optional parts' elements such a call may hold
    # a call left so is read before another call too (Qwen's `<tool_call>{...}\n<tool_call>{...}</tool_call>`): the
    # calls that end the answer may each lack their closer
    unclosed_between: bool = False
    # the markers the calls' opener and closer spell across optional whitespace, in every spacing (_spaced_markers)
    spaced_markers: list = field(default_factory=list)


def _probe(template: CompiledTemplate, text: str, prefix: str, tools: list | None = None) -> dict | None:
    try:
        return parse_response(text, template, prefix=prefix, tools=tools)
    except ValueError:  # a text the template cannot parse (TemplateError, TransformError...): the probe failed
        return None


def _read(plan: _Plan, text: str) -> dict | None:
    """What our parser reads from `text` after the plan's prompt, with the plan's tools (None: it raises)."""
    return _probe(plan.template, text, plan.prefix, _as_tools(plan.tools))


def _literal_text(pieces: list) -> str | None:
    return None if any(p.kind == "group" for p in pieces) else "".join(p.text for p in pieces if p.kind == "lit")


def _calls_read(message: Any) -> list:
    """The (name, arguments) of each call a parsed message holds (none for no message)."""
    return [((call.get("function") or {}).get("name"), (call.get("function") or {}).get("arguments"))
            for call in (message or {}).get("tool_calls") or []]


def _drops_bare_text(template: CompiledTemplate, prefix: str, before: str = "") -> bool:
    """Text written outside any region (after `before`) is dropped, not content (gpt-oss's harmony: every message
    opens with its channel)."""
    message = _probe(template, before + "Answer.", prefix)
    return message is not None and message == _probe(template, before, prefix)


def _reasoning(template: CompiledTemplate, prefix: str, markers: list) -> tuple:
    """(the text closing a reasoning block the prompt left open, or None; (open, close) of a reasoning block the
    answer may start with, or None), each the first writing of the template's delimiters our parser reads so."""
    spec = template.source.get("fields", {}).get("reasoning_content")
    if not spec:
        return None, None
    try:
        written = [_literal_text(p) for p in _skeletons(_delimiter_spec(spec, "close", "close_pattern"), "close")]
    except _Dead:
        return None, None
    closes: list[str] = [text for text in written if text]
    dropped = _drops_bare_text(template, "")  # the format's own way, whatever the prompt left open

    def reads(text: str) -> bool:
        message = _probe(template, text, prefix)
        # where text outside the format's messages is dropped (harmony), the block must leave it dropped
        return message is not None and message.get("reasoning_content") == "Thinking." and (
            message.get("content") == "Answer." or dropped and not message.get("content"))

    for close in closes:
        if reads("Thinking." + close + "Answer."):
            return close, None
    try:
        opens = [_literal_text(p) for p in _skeletons(_delimiter_spec(spec, "open", "open_pattern"), "open")]
    except _Dead:
        return None, None
    for opener in opens:
        for close in closes:
            if opener and reads(opener + "Thinking." + close + "Answer."):
                return None, (opener, close)
    return None, None


# Where a marker is tried inside an argument string: the text before it and after it in the string.
_STRING_BEFORE = ("", "a ", "}", "} ", "}  ", "]", '"', ")")
_STRING_AFTER = ("", " b", "}", '"')
# A string argument, for trying markers inside one.
_PROBE_TOOL = {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}


def _string_excludes(source_json: str, closing: int) -> list | None:
    """What argument strings (JSON strings, xml-inline values) may not hold: the template's markers, but for those
    the parser reads as text inside a string wherever they stand there (found by parsing calls whose string holds
    the marker after and before several texts and beside each other such marker, alone and before another call).
    A marker that ends a call only right after a `}` (Hermes' `(?<=\\}\\s*)</tool_call>`) is kept out only there:
    after `}` and spaces. None: the markers, all of them (Gemma's strings, Python lists, or calls written so do not
    parse back). Cached by the template and by the spelling of the calls it writes, which follows the prompt's
    (Hy3's `<tool_call:opensource>` or `<tool_call>`: the probes differ, and so may what they find)."""
    return _string_excludes_spelled(source_json, closing, _probe_spelling(source_json, closing), SPELL_ALL.get())


def _probe_spelling(source_json: str, closing: int) -> str:
    """The probe call as the prompt (PROMPT) spells it: part of the key of _string_excludes' cache."""
    source = json.loads(source_json)
    spec = source.get("fields", {}).get("tool_calls")
    if spec is None:
        return ""
    try:
        form = _call_form(spec, "probe", _PROBE_TOOL, _markers(source), closing)
    except (_Dead, IndexError, GrammarError):
        return ""
    listed = form.write_list([("probe", {"s": "a"}), ("probe", {"s": "b"})]) if form.write_list else ""
    return form.write({"s": "a"}) + "\n" + listed


@functools.lru_cache(maxsize=64)
def _string_excludes_spelled(source_json: str, closing: int, _spelling: str, _spell_all: bool) -> list | None:
    """_string_excludes, for the calls spelled as `_spelling` says (the key of the cache only)."""
    source = json.loads(source_json)
    template = load_template(source)
    spec = source.get("fields", {}).get("tool_calls")
    markers = _markers(source)
    if spec is None:
        return None
    try:
        form = _call_form(spec, "probe", _PROBE_TOOL, markers, closing)
    except (_Dead, IndexError, GrammarError):
        return None
    if form.write_laid_out is None and spec.get("content") != "xml-inline":  # (Gemma's strings, Python lists)
        return None

    def calls(values: list, separator: str) -> str:
        if form.write_list is not None:
            return form.write_list([("probe", {"s": value}) for value in values])
        return separator.join(form.write({"s": value}) for value in values)

    def reads(values: list, separator: str = "") -> bool:
        # (up to whitespace at the value's ends, which xml-inline values may strip whatever they hold: a marker must
        # not move where the value or the call ends, the ends' spacing is the value's own)
        read = _calls_read(_probe(template, calls(values, separator), ""))
        return [(name, {key: value.strip() if isinstance(value, str) else value for key, value in arguments.items()})
                if isinstance(arguments, dict) else (name, arguments)
                for name, arguments in read] == [("probe", {"s": v.strip()}) for v in values]

    if not reads(["ok"]):
        return None
    # how two calls follow each other, where they do (GigaChat 3 reads one); a list of calls where a region may
    # hold one (Nemotron's `<TOOLCALL>[{...}, {...}]</TOOLCALL>`)
    separator = next((text for text in ("\n", "") if reads(["ok", "ok"], text)), None)
    listed = form.write_list_region

    def in_list(value: str) -> bool:  # (a string before another item of a list region)
        items = [("probe", {"s": value}), ("probe", {"s": "ok"})]
        return listed is None or _calls_read(_probe(template, listed(items), "")) == items

    if not in_list("ok"):
        listed = None

    def fine(value: str) -> bool:
        return reads([value]) and (separator is None or reads([value, "ok"], separator)) and in_list(value)

    # (a marker holding JSON's own punctuation stays out: the parser's lookarounds read JSON syntax, which a string
    # could spell piece by piece: Apertus's `},{"`; but a value read as nested elements is raw text that ends only at
    # the namespace token, where the probes below decide: MiniMax M3's `</mm:think>`)
    raw = spec.get("content") == "xml-inline" and bool((spec.get("content_args") or {}).get("nested_elements"))
    excludes = [marker for marker in markers if not raw and any(char in marker for char in '{}[]":,')]
    # after a marker, the text a parameter tag spells too (MiniCPM5's raw value ends before `<param name=`, whose
    # `name="` is no marker)
    tag_pattern = (spec.get("content_args") or {}).get("tag_pattern")
    runs = _literal_runs(tag_pattern) if spec.get("content") == "xml-inline" and tag_pattern else []
    failings = {marker: [before for before in _STRING_BEFORE for after in _STRING_AFTER
                         if not fine(before + marker + after)] for marker in markers if marker not in excludes}
    # (a run holding a marker strings cannot hold anyway is never written after one: GLM's `\n<arg_key>`)
    kept_out = excludes + [marker for marker, failing in failings.items() if failing]
    spelled = [text for run in runs if run not in markers and not any(marker in run for marker in kept_out)
               for text in (run, " " + run)]
    after_brace: list = []
    free = []
    for marker, failing in failings.items():
        failing += ["" for after in spelled if not fine(marker + after)]
        if not failing:
            free.append(marker)
        elif all(before.startswith("}") for before in failing):
            after_brace.append(marker)
        else:
            excludes.append(marker)
    # and two markers side by side (a closer may start with another marker: Hermes' `(?<=\}\s*)(?:```\s*)?</tool_call>`)
    # (each pair tried side by side, a space and a line break apart in one string: a few hundred pairs at most). Of a
    # pair that ends a call, one is kept out, which is enough for the pair (GLM's `</tool_call><|user|>`): first
    # those a value has least use for, its own closer (the grammar ends the value there; in each spelling: DeepSeek
    # V4.1's `</｜DSML｜ parameter>`) and the start of a call's opener (Hy3's `</tool_call><tool_call>`: `<tool_call>`
    # goes), then the fewest markers that cover the pairs left, taken greedily
    written = calls(["qzq"], "")
    value_closer = written[written.index("qzq") + 3:].lstrip().replace(" ", "")
    least_use = {marker for marker in markers
                 if form.begin.startswith(marker) or value_closer.startswith(marker.replace(" ", ""))}
    candidates = free + after_brace
    failing_pairs = [(first, second) for first in candidates for second in candidates
                     if not (reads([f"{first}{second}|{first} {second}|{first}\n{second}"])
                             and in_list(f"{first}{second}|{first} {second}|{first}\n{second}"))]
    for marker in dict.fromkeys(marker for pair in failing_pairs for marker in pair if marker in least_use):
        excludes.append(marker)
    # (a pair holding a marker kept out, inside another one too, cannot be written: MiniMax M3's markers that spell
    # its namespace token)
    failing_pairs = [pair for pair in failing_pairs
                     if not any(kept in marker for kept in excludes for marker in pair)]
    while failing_pairs:
        worst = max(dict.fromkeys(marker for pair in failing_pairs for marker in pair),
                    key=lambda marker: sum(marker in pair for pair in failing_pairs))
        excludes.append(worst)
        failing_pairs = [pair for pair in failing_pairs if worst not in pair]
    for first in candidates:
        for second in candidates:
            if first in excludes or second in excludes:
                continue
            if first not in after_brace and second in after_brace and not reads(
                    [f"}}{first}{second}|}} {first} {second}"]):
                after_brace.append(first)  # (then kept out right after a `}`, as the closer is)
    for marker in after_brace:
        if marker not in excludes:
            excludes += ["}" + marker, "} " + marker, "  " + marker]
    # a marker kept out that the calls' closer spells across optional whitespace is kept out in every spacing
    # (Llama's `(?<=\\})\\s*\\}` ends a call at `} }` too), unless a piece of it is kept out anyway
    for before, after in _spaced_runs(spec.get("close_pattern") or ""):
        if before + after in excludes and not any(
                kept != before + after and (kept in before or kept in after) for kept in excludes):
            excludes += _spaced_spellings(before, after)
    return list(dict.fromkeys(excludes))


class _NoParseBack(GrammarError):
    """Calls written the canonical way do not parse back: another writing of the closer may."""


class _LineBreaksEndCalls(_NoParseBack):
    """Calls whose JSON arguments hold line breaks between tokens (or closers meeting) do not parse back: JSON on one
    line may."""


# How many writings of a call's closer the planner tries (the template's order) before it gives up.
_CLOSINGS_TRIED = 4


def _plan(template: Any, tools: Any, prefix: str) -> _Plan:
    """What the compiler reads from the template for these tools and this prompt, with the first writing of the
    calls' closer whose calls parse back."""
    last_failure = None
    spelling = PROMPT.set(prefix)  # (markers are written as the prompt spells them)
    try:
        for one_line in (False, True):
            line_breaks_failed = False
            for closing in range(_CLOSINGS_TRIED):
                try:
                    return _plan_closing(template, tools, prefix, closing, one_line)
                except IndexError:
                    break
                except _NoParseBack as failure:
                    # (the last writing tried got furthest: Llama's `};` fails before its `}`)
                    last_failure = failure
                    line_breaks_failed |= isinstance(failure, _LineBreaksEndCalls)
            if not line_breaks_failed:
                break
    finally:
        PROMPT.reset(spelling)
    assert last_failure is not None
    raise GrammarError(str(last_failure))


def _plan_closing(template: Any, tools: Any, prefix: str, closing: int, one_line: bool = False) -> _Plan:
    if isinstance(template, str):
        from ...library import get_template

        template = get_template(template)
    compiled = load_template(template)
    source = compiled.source
    markers = _markers(source)
    fields = source.get("fields", {})
    reasoning_open, reasoning_tag = _reasoning(compiled, prefix, markers)
    tool_list = _tool_list(tools)
    calls: dict = {}
    spec = fields.get("tool_calls")
    in_strings = _string_excludes(json.dumps(source, sort_keys=True), closing) if tool_list and spec else None
    if tool_list:
        if spec is None:
            raise GrammarError("the template has no tool_calls field: it cannot write a tool call")
        for name, parameters in tool_list:
            try:
                calls[name] = _call_form(spec, name, parameters, markers, closing, in_strings, one_line)
            except _Dead as dead:
                raise GrammarError(f"tool_calls of this template cannot be compiled: {dead}") from None
    triggers = _triggers_of(calls)
    plan = _Plan(compiled, prefix, tool_list, calls, triggers, markers, reasoning_open, reasoning_tag, "\n")
    plan.one_line = one_line and any(form.write_laid_out is not None for form in calls.values())
    if plan.one_line:
        plan.notes.append("JSON arguments are written on one line: a line break between their tokens would end a "
                          "call early")
    if any(form.block_lines for form in calls.values()):
        plan.notes.append("the calls are the lines of one block (its later calls open with no marker): each call is "
                          "written on one line")
    plan.plain_opener = _plain_opener(spec, triggers)
    if plan.plain_opener is not None:
        plan.guard = _guard(spec)
    if calls and any(form.begin for form in calls.values()):
        _, plan.plain_starts, lead = _opener(spec)
        # only where every message opens with its own header (text outside one is dropped): elsewhere an optional
        # start of the opener is markup of calls (DeepSeek's section marker), not of messages
        after_reasoning = "Let me think." + reasoning_open if reasoning_open is not None else ""
        if lead is not None and _drops_bare_text(compiled, prefix, after_reasoning):
            plan.lead = lead
        elif lead is not None and not _plain(lead.sample.strip()):
            plan.call_lead = lead  # (checked once the calls' separator is known)
    if calls:
        plan.spaced_markers = _spaced_markers(spec, [*markers, *plan.plain_starts])
        plan.content_open = _content_open(plan)
        _self_check(plan)
        if plan.call_lead is not None and not _call_lead_reads(plan, plan.call_lead):
            plan.call_lead = None
        if plan.plain_opener is not None and plan.guard is None:
            plan.answer_starts = _calls_only_at_start(plan, spec)
    if plan.answer_starts:
        plan.notes.append("calls open only at the answer's start: under \"auto\" and \"none\" text cannot start "
                          f"like one ({', '.join(map(repr, plan.answer_starts))})")
    elif plan.plain_opener is not None and plan.guard is not None:
        plan.notes.append(f"the call opener is plain text: free text holds no {plan.guard!r}, which every call's "
                          "opener holds")
    elif plan.plain_opener is not None:
        plan.notes.append(f"{plan.plain_opener}: only tool_choice \"required\" and a named function compile")
    if calls:
        _other_spelling(plan, spec, closing, in_strings)
        plan.free_markers = _free_markers(plan)
        plan.wrappers = [(opener, closer) for opener, closer in _wrappers(plan) if opener not in plan.free_markers]
    if plan.plain_starts:
        plan.notes.append(f"calls open with {triggers[0]!r}; the template's other spellings of a call, which start "
                          f"with plain text ({', '.join(map(repr, plan.plain_starts))}), are not written and that "
                          "text is kept out of free text")
    plan.messages, like_calls = _messages(plan)
    if plan.messages and calls:  # (markers between the messages, found once the messages are known)
        plan.free_markers = _free_markers(plan)
    if calls and not plan.messages:
        plan.reasoning_enders = _reasoning_enders(plan)
    plan.lone_reasoning_close = _lone_reasoning_close(plan)
    if calls:
        _find_unclosed(plan)
        if plan.unclosed_ends:
            plan.notes.append("under \"auto\" the last call may stop before its closer, the turn ending there")
    if calls and plan.wrappers:
        plan.json_bodies = _json_bodies_in_sections(plan)
        if plan.json_bodies:
            plan.notes.append("inside a section of calls, a call's body may be one JSON object instead of tags")
    if plan.messages:
        opener, ends, _ = plan.messages[0]
        plan.notes.append(f"text outside messages is dropped: under \"auto\" and \"none\" the answer is a "
                          f"{opener!r}...{' or '.join(map(repr, ends))} message")
    if plan.preambles:
        plan.notes.append("a message before calls may open like a call: "
                          + ", ".join(f"{opener!r}...{' or '.join(map(repr, ends))}" for opener, ends in plan.preambles))
    if like_calls:
        plan.notes.append(f"a message that opens like a call ({', '.join(map(repr, like_calls))}) cannot be written")
    header = plan.separator if plan.separator != "\n" else plan.lead.sample if plan.lead is not None else None
    places = (["after the reasoning block"] if plan.lead is not None and (
        plan.reasoning_tag is not None or plan.reasoning_open is not None) else []) + (
        ['between calls (not under "auto")'] if plan.separator != "\n" else [])
    if header and places:
        plan.notes.append(f"{header!r} is written only {' and '.join(places)}")
    return plan


def _first_call(plan: _Plan) -> tuple:
    """(a sample of arguments for each tool, the first tool's call written with its sample, [(tool, sample)] as the
    parser reads that call back), for the checks that write calls and parse them."""
    samples = {name: _sample(parameters) for name, parameters in plan.tools}
    first = next(iter(plan.calls.values()))
    return samples, first.write(samples[first.tool]), [(first.tool, samples[first.tool])]


def _find_unclosed(plan: _Plan) -> None:
    """Sets plan.unclosed_ends: each start of the calls' closer (at a tag's `>` or a line break), perhaps followed
    by a line break, that a call may end with where the output ends, read as the same call alone, after text and
    after another call; none where calls end the answer, a region holds a list of them, or they open with no text
    (their end is then the list's). And plan.unclosed_between and plan.unclosed_optional, found the same way."""
    forms = list(plan.calls.values())
    first, second = forms[0], forms[-1]
    if plan.calls_end_answer or plan.content_open is not None or any(
            form.list_body is not None or not form.begin or form.end != first.end for form in forms):
        return
    samples, one, wanted = _first_call(plan)
    if not first.end or not one.endswith(first.end):
        return
    lead = _answer_start(plan)
    body = one[:-len(first.end)]
    second_closed = second.write(samples[second.tool])
    closed_then = one + plan.separator + second_closed[:-len(first.end)]
    both = [*wanted, (second.tool, samples[second.tool])]
    contexts = [("", body, wanted), ("Sure. ", body, wanted)]
    if not plan.one_call:
        contexts.append(("", closed_then, both))
    # (and the other writings the grammar kept, the keys of a call object in the other order)
    for form in forms:
        for choices, write_variant in form.variants:
            if all(any(kept is element for kept in choice["elements"]) for choice, element in choices):
                written = write_variant(samples[form.tool])
                if not written.endswith(form.end):
                    return
                contexts.append(("", written[:-len(form.end)], [(form.tool, samples[form.tool])]))
    ends = []
    for size in range(len(first.end)):
        cut = first.end[:size]
        if cut and cut[-1] not in ">\n":
            continue
        for end in dict.fromkeys((cut, cut + "\n")):
            if all(_calls_read(_read(plan, lead + before + written + end)) == calls
                   for before, written, calls in contexts):
                ends.append(end)
    ends = list(dict.fromkeys(ends))
    plan.unclosed_ends = ends
    plan.unclosed_between = bool(ends) and not plan.one_call and all(
        _calls_read(_read(plan, lead + before + body + end + plan.separator + after)) == both
        for before in ("", "Sure. ") for end in ends
        for after in (second_closed, second_closed[:-len(first.end)] + end))
    # the optional parts a call may hold stay in such a call where it reads the same with them (gpt-oss's
    # `<|constrain|>json`; not Hermes' code fence, whose closing half is read only before `</tool_call>`)
    for form in forms:
        for element, write in form.optional:
            written = write(samples[form.tool])
            if ends and written.endswith(form.end) and all(
                    _calls_read(_read(plan, lead + before + written[:-len(form.end)] + end)) == [
                        (form.tool, samples[form.tool])] for before in ("", "Sure. ") for end in ends):
                plan.unclosed_optional.append(element)


def _call_lead_reads(plan: _Plan, lead: _Piece) -> bool:
    """Calls written after `lead` (Llama's `<|python_tag|>`) read as the same calls: one, one after text (where free
    text stands beside calls), and two."""
    samples, one, wanted = _first_call(plan)
    forms = list(plan.calls.values())
    second = forms[-1]
    two = one + plan.separator + second.write(samples[second.tool])
    writings = [(lead.sample + one, wanted), (lead.sample + two, [*wanted, (second.tool, samples[second.tool])])]
    if plan.plain_opener is None or plan.guard is not None:
        writings.append(("Sure. " + lead.sample + one, wanted))
    return all(_calls_read(_read(plan, text)) == calls for text, calls in writings)


def _reasoning_enders(plan: _Plan) -> list:
    """The begins of the tags that end a reasoning block the model has not closed, where they are written (the
    prompt's, or one the answer opened): after some reasoning, a call (or a section of calls) written with such a
    begin must parse as that reasoning and the call, text after it as content, and another call after it as one
    more call."""
    if plan.reasoning_open is not None:
        start = ""
    elif plan.reasoning_tag is not None:
        start = plan.reasoning_tag[0]
    else:
        return []
    forms = [*plan.calls.values(), *plan.spelled.values()]
    samples, one, wanted_one = _first_call(plan)
    writings = [(form.begin, form.write(samples[form.tool]), [(form.tool, samples[form.tool])]) for form in forms]
    writings += [(opener, opener + one + closer, wanted_one) for opener, closer in plan.wrappers]

    def reads(text: str, calls: list, content: str) -> bool:
        message = _read(plan, text)
        return (message is not None and message.get("reasoning_content") == "Let me think."
                and _calls_read(message) == calls and (message.get("content") or "").strip() == content)

    enders: list = []
    for begin, written, calls in writings:
        if begin in enders:
            continue
        tries = [(written, calls, ""), (written + " Done.", calls, "Done.")]
        if not plan.one_call:
            tries.append((written + plan.separator + one, calls + wanted_one, ""))
        if all(reads(start + "Let me think." + space + text, read, content)
               for space in ("", "\n\n") for text, read, content in tries):
            enders.append(begin)
    return enders


_WORD = re.compile(r"[A-Za-z_][\w.]*")


def _spaced_markers(spec: dict, markers: list) -> list:
    """A marker the calls' opener spells from a plain word across optional whitespace (Phi-4-mini's
    `functools\\s*\\[`), in every spacing: free text keeps out `functools [` as it keeps out `functools[`."""
    spaced: list = []
    pattern = spec.get("open_pattern")
    for before, after in _spaced_runs(pattern) if isinstance(pattern, str) else []:
        if (before + after).strip() in markers and _WORD.fullmatch(before):
            spaced += [text for text in _spaced_spellings(before, after) if text not in spaced]
    return spaced


def _calls_only_at_start(plan: _Plan, spec: dict) -> list:
    """The texts a call starts with (patterns._answer_starts), where calls open only at the answer's start: a call
    written after text on the same line, on the next one or after a blank line is read as that text; else []. Sets
    plan.text_after_start_calls: how text after the calls may follow them (right after, on a new line, after a blank
    line) where it is read as content."""
    starts = _answer_starts(spec.get("open_pattern") or "") if isinstance(spec.get("open_pattern"), str) else None
    if not starts or plan.reasoning_open is not None or plan.reasoning_tag is not None:
        return []
    _, one, wanted = _first_call(plan)
    if _calls_read(_read(plan, one)) != wanted:
        return []
    for before in ("Sure. ", "Sure.\n", "Sure.\n\n"):
        message = _read(plan, before + one)
        if message is None or _calls_read(message) or message.get("content") != before + one:
            return []
    # (text there opens no call: it may hold the markers the parser reads as its text, "```" and ")]" of Gemma 3's
    # calls, but not those that end it)
    for marker in plan.markers:
        for text in (f"Sure. a {marker} b", f"Sure. a{marker}b", f"Sure. a{marker}"):
            message = _read(plan, text)
            if message is None or _calls_read(message) or message.get("content") != text:
                plan.start_text_excludes.append(marker)
                break
    for between in ("", "\n", "\n\n"):
        message = _read(plan, one + between + "Ok, done.")
        if _calls_read(message) == wanted and (message or {}).get("content") == "Ok, done.":
            plan.text_after_start_calls.append(between)
    return starts


def _lone_reasoning_close(plan: _Plan) -> bool:
    """Whether the reasoning block's closer written alone at the answer's start is dropped: before text, and before
    a call."""
    if plan.reasoning_tag is None:
        return False
    close = plan.reasoning_tag[1]
    tries: list[tuple[str, list, str | None]] = [("Answer.", [], "Answer.")]
    if plan.calls:
        _, one, wanted_one = _first_call(plan)
        tries.append((one, wanted_one, None))
    for text, calls, content in tries:
        message = _read(plan, close + text)
        if message is None or message.get("reasoning_content") or _calls_read(message) != calls or (
                message.get("content") or None) != content:
            return False
    return True


def _json_bodies_in_sections(plan: _Plan) -> bool:
    """Whether a call whose body is one JSON object (content_args.json_body) parses back inside each section of
    calls: alone, before text after the section, and before and after another call (with and without a line break
    between them)."""
    forms = [*plan.calls.values(), *plan.spelled.values()]
    if any(form.write_json_body is None for form in forms):
        return False
    samples, one, wanted_one = _first_call(plan)
    lead = _answer_start(plan)
    for opener, closer in plan.wrappers:
        for form in forms:
            assert form.write_json_body is not None
            call, wanted = form.write_json_body(samples[form.tool]), [(form.tool, samples[form.tool])]
            tries = [(opener + call + closer + "After.", wanted, "After.")]
            for between in ("", "\n"):
                tries += [(opener + call + between + one + closer, wanted + wanted_one, ""),
                          (opener + one + between + call + closer, wanted_one + wanted, "")]
            for text, read, content in tries:
                message = _read(plan, lead + text)
                if _calls_read(message) != read or ((message or {}).get("content") or "").strip() != content:
                    return False
    return True


def _triggers_of(calls: dict) -> list:
    """The call triggers of a set of call forms (one per distinct literal start their begins share)."""
    triggers: list = []
    for form in calls.values():
        trigger = _trigger(form.begin, [other.begin for other in calls.values()])
        if trigger not in triggers:
            triggers.append(trigger)
    return triggers


def _other_spelling(plan: _Plan, spec: dict, closing: int, in_strings: list | None) -> None:
    """Where the calls written with every optional spelling of the template's markers (SPELL_ALL) differ from the
    canonical ones and parse back too, the plan admits them beside the canonical calls, with their own triggers."""
    spelling = SPELL_ALL.set(True)
    try:
        spelled = {name: _call_form(spec, name, parameters, plan.markers, closing, in_strings, plan.one_line)
                   for name, parameters in plan.tools}
    except (_Dead, IndexError):
        return
    finally:
        SPELL_ALL.reset(spelling)
    if all(spelled[name].begin == plan.calls[name].begin for name in spelled):
        return
    try:
        _self_check(dataclasses.replace(plan, calls=spelled, notes=[]))
    except _NoParseBack:
        return
    plan.spelled = spelled
    plan.triggers += [trigger for trigger in _triggers_of(spelled) if trigger not in plan.triggers]
    first, other = next(iter(plan.calls.values())), next(iter(spelled.values()))
    plan.notes.append(f"calls are written in either spelling of the template's markers ({first.begin!r} or "
                      f"{other.begin!r})")


def _messages(plan: _Plan) -> tuple:
    """([(open, [closes], trigger)] of the content message a format writes where it drops text outside its messages
    (gpt-oss's `<|channel|>final<|message|>`...`<|end|>` or `<|return|>`): free text there is lost, so the answer
    must be written as such a message. Found by parsing: the message alone, before and after a call, reads as
    content beside exactly the call. Second: the openers left out because they open like a call, but those written
    as preambles before calls (plan.preambles, set here)."""
    spec = plan.template.source.get("fields", {}).get("content")
    lead = _reasoning_text(plan) if plan.reasoning_open is not None else ""
    if not spec or not _drops_bare_text(plan.template, plan.prefix, lead):
        return [], []
    try:
        opens = [_literal_text(p) for p in _skeletons(_delimiter_spec(spec, "open", "open_pattern"), "open", spread=True)]
        closes = [_literal_text(p) for p in _skeletons(_delimiter_spec(spec, "close", "close_pattern"), "close",
                                                        spread=True)]
    except _Dead:
        return [], []
    forms = list(plan.calls.values())
    one = forms[0].write(_sample(dict(plan.tools)[forms[0].tool])) if forms else ""
    wanted = [(forms[0].tool, _sample(dict(plan.tools)[forms[0].tool]))] if forms else []

    def reads(text: str, calls: list) -> bool:
        message = _read(plan, lead + text)
        got = _calls_read(message)
        return message is not None and message.get("content") == "Answer." and got == calls and not (
            message.get("reasoning_content") and not lead)

    for opener in opens:
        # a message that opens like a call (`<|channel|>commentary<|message|>`, a preamble) would be read as one
        if not opener or _plain(opener) or any(_overlaps(opener, trigger) for trigger in plan.triggers):
            continue
        # text after the close is outside the message again (a citation marker inside the answer is no close)
        ends = [close for close in closes if close and not _plain(close)
                and reads(opener + "Answer." + close, []) and reads(opener + "Answer." + close + "More.", [])
                and (not forms or reads(opener + "Answer." + close + one, wanted)
                     and reads(one + opener + "Answer." + close, wanted))]
        if ends:
            like_calls = [other for other in opens if other and any(_overlaps(other, t) for t in plan.triggers)]
            plan.preambles = [(other, other_ends) for other in like_calls
                              if (other_ends := _preamble_ends(plan, other, closes))]
            like_calls = [other for other in like_calls if other not in dict(plan.preambles)]
            trigger = _message_trigger(opener, plan.markers)
            others = plan.triggers + [wrapper for wrapper, _ in plan.wrappers]
            if any(other.startswith(trigger) or trigger.startswith(other) for other in others):
                # cut at a piece of a longer marker (Cohere's `<|START_` of `<|START_RESPONSE|>`), the trigger would
                # also start a call (`<|START_ACTION|>`): the whole opener is the trigger
                trigger = opener
            return [(opener, ends, trigger)], like_calls
    return [], []


def _preamble_ends(plan: _Plan, opener: str, closes: list) -> list:
    """The closes of a content message that opens like a call (gpt-oss's `<|channel|>commentary<|message|>`
    preamble, which shares the call's trigger), where the message before a call (right after it, and after the
    header calls may start with) reads as its text beside exactly the call: written as its own tag under that
    trigger. None ([]) where the opener does not start with a call's trigger (the tag could not be told from a
    call's until past the trigger)."""
    if not plan.calls or not any(opener.startswith(trigger) and opener != trigger for trigger in plan.triggers):
        return []
    lead = _reasoning_text(plan) if plan.reasoning_open is not None else ""
    _, one, wanted = _first_call(plan)
    betweens = ["", plan.lead.sample] if plan.lead is not None else [""]

    def reads(text: str) -> bool:
        message = _read(plan, lead + text)
        return (message is not None and message.get("content") == "Preamble." and _calls_read(message) == wanted
                and not (message.get("reasoning_content") and not lead))

    return [close for close in closes if close and not _plain(close)
            and all(reads(opener + "Preamble." + close + between + one) for between in betweens)]


def _wrappers(plan: _Plan) -> list:
    """Section markers around a group of calls that the template reads as markup (Kimi K2's
    `<|tool_calls_section_begin|>`...`<|tool_calls_section_end|>`, DeepSeek's `<｜tool▁calls▁begin｜>`...), found by
    parsing: calls written between them must parse to exactly those calls, with no content, and text after the
    closing marker must stay content. Models write them, so the grammar under "auto" admits them too."""
    forms = list(plan.calls.values())
    samples = {form.tool: _sample(dict(plan.tools)[form.tool]) for form in forms}
    first, second = forms[0], forms[-1]
    one, two = first.write(samples[first.tool]), second.write(samples[second.tool])
    lead = _reasoning_text(plan) if plan.reasoning_open is not None else ""
    reserved = [form.begin for form in [*forms, *plan.spelled.values()]] + [form.end for form in forms] + list(
        plan.triggers)
    if plan.reasoning_open:
        reserved.append(plan.reasoning_open)
    if plan.reasoning_tag:
        reserved.extend(plan.reasoning_tag)
    # a call's own text (`<|tool_call_argument_begin|>`) is no section marker either
    # (a marker that spells out a call's begin further, DSML's `<｜DSML｜tool_calls>` after the begin `<｜DSML｜`,
    # is one: the grammar tells them apart by what follows the begin)
    begins = [form.begin for form in forms]
    candidates = [m for m in plan.markers
                  if not any(_overlaps(m, text) for text in reserved if not _extends(m, text, begins))
                  and m not in one and m not in two]

    def calls_of(text: str) -> Any:
        message = _read(plan, lead + text)
        if message is None or message.get("reasoning_content") and not lead:
            return None
        got = _calls_read(message)
        return got, message.get("content") or ""

    wanted = [(first.tool, samples[first.tool]), (second.tool, samples[second.tool])]
    opens = [m for m in candidates if calls_of(m + one) == (wanted[:1], "")]
    closes = [m for m in candidates if calls_of(one + m + "After.") == (wanted[:1], "After.")]
    def wraps(opener: str, closer: str) -> bool:
        if opener == closer or calls_of(opener + one + two + closer + "After.") != (wanted, "After."):
            return False
        # and the section leaves the parser where it was: a call after it is still a call
        after = calls_of(opener + one + two + closer + "After. " + one)
        return after is not None and after[0] == wanted + wanted[:1] and after[1].strip() == "After."

    def neutral(marker: str) -> bool:  # a reasoning delimiter is no section marker, whatever the parser drops
        message = _read(plan, lead + "Before." + marker + "After.")
        return message is not None and not (message.get("reasoning_content") and not lead)


    found: list = []
    for opener in opens:
        if any(_overlaps(opener, other) for other, _ in found) or not neutral(opener):
            continue
        # the closer that spells the opener most closely (`<|tool_calls_section_begin|>`: its own `_end|>`, not the
        # singular spelling's)
        for closer in sorted(closes, key=lambda closer: -_kinship(opener, closer)):
            if not neutral(closer) or not wraps(opener, closer):
                continue
            # markup that reads the same either way round (Kimi drops its section markers wherever they are) is
            # a section only as a pair spelled alike whose closer says it closes
            if wraps(closer, opener) and not _closes(opener, closer):
                continue
            found.append((opener, closer))
            break
    return found


def _free_markers(plan: _Plan) -> list:
    """The markers the answer's free text may hold, found by parsing: written once, each is markup the parser drops
    (it is not in the message); the text around it is kept in order, and calls written before and after it are read
    exactly. Where text outside messages is dropped (Solar Open), the text is written as messages and the marker
    between them (Solar Open's `<|begin|>assistant<|tool_calls|>` before its calls, after a message). Not where
    free text could open a call (Llama's `{`)."""
    if not plan.calls or plan.plain_opener is not None:
        return []
    after_reasoning = _reasoning_text(plan) if plan.reasoning_open is not None else ""
    if not plan.messages and _drops_bare_text(plan.template, plan.prefix, after_reasoning):
        return []  # (text outside messages is dropped: found once the messages are known)
    if plan.messages:
        opener, ends, _ = plan.messages[0]

        def said(word: str) -> str:
            return opener + word + ends[0]
    else:
        def said(word: str) -> str:
            return word

    aa, bb, cc = said("Aa."), said("Bb."), said("Cc.")
    forms = list(plan.calls.values())
    sample = _sample(dict(plan.tools)[forms[0].tool])
    one, wanted = forms[0].write(sample), [(forms[0].tool, sample)]
    lead = _answer_start(plan)
    reserved = [form.begin for form in forms] + [form.end for form in forms] + list(plan.triggers)
    reserved += [plan.reasoning_open] if plan.reasoning_open else []
    reserved += list(plan.reasoning_tag or ()) + ([plan.content_open] if plan.content_open else [])

    def keeps(text: str, words: list, calls: list, markup: bool = False) -> bool:
        """The calls are read exactly and the words kept in order (and with `markup`, the marker is not text)."""
        message = _read(plan, lead + text)
        if message is None or _calls_read(message) != calls:
            return False
        read = (message.get("reasoning_content") or "") + (message.get("content") or "")
        at = 0
        for word in words:
            at = read.find(word, at)
            if at < 0:
                return False
        return not markup or all(marker not in read for marker in plan.markers if marker in text)

    found = []
    for marker in plan.markers:
        # (a marker that does not end as markup ends, `>` or `]`, is the start of a longer one: Cohere's `</co:`
        # of `</co: 0>`, after which text is content; but for the header every message starts with, Solar Open's
        # `<|begin|>assistant`)
        header = plan.lead is not None and marker == plan.lead.sample
        if not marker or _plain(marker) or marker[-1] not in ">]" and not header or any(
                _overlaps(marker, text) for text in reserved if text):
            continue
        # (written once, the marker is markup; written again, it may be read as text: Apriel's content opener)
        if not keeps(f"{aa}{marker}{bb}", ["Aa.", "Bb."], [], markup=True):
            continue
        # where text outside messages is dropped, text after the marker must stay dropped (Cohere's `<co>` would
        # make it content, and a call after it too)
        if plan.messages and not all(keeps(text, [], calls) and not keeps(text, ["Bb."], calls)
                                     for text, calls in ((f"{marker}Bb.", []), (f"{aa}{marker}Bb.{one}", wanted))):
            continue
        cases = [(f"{marker}{bb}", ["Bb."], []),
                 (f"{aa}{marker}{one}", ["Aa."], wanted), (f"{marker}{one}", [], wanted),
                 (f"{aa}{marker}{bb}{marker}{cc}", ["Aa.", "Bb.", "Cc."], []),
                 (f"{aa}{marker}{bb}{one}", ["Aa.", "Bb."], wanted),
                 # (free text after it, outside messages too: Cohere's `<co>` would make it content, call and all)
                 (f"{aa}{marker}Bb.{one}", ["Aa."], wanted)]
        if not plan.calls_end_answer:
            cases += [(f"{aa}{marker}{bb}{one}{cc}", ["Aa.", "Bb.", "Cc."], wanted),
                      (f"{one}{marker}{bb}", ["Bb."], wanted), (f"{one}{bb}{marker}{cc}", ["Bb.", "Cc."], wanted)]
        if all(keeps(text, words, calls) for text, words, calls in cases):
            found.append(marker)
    # the markers free text may then hold as pieces of these (xgrammar keeps a text out where any piece of it is
    # excluded): each must leave a call after it read (Cohere's `<|END_` of `<|END_RESPONSE|>`)
    for piece in [marker for marker in plan.markers if marker not in found and any(marker in free for free in found)]:
        if not all(keeps(text, [], wanted) for text in (f"{aa}{piece}{one}", f"{piece}Bb.{one}", f"{aa}{piece}{bb}{one}")):
            found = [free for free in found if piece not in free]
    # and side by side (Cohere's `<co>` then `</co:` swallows the call after them): a marker that breaks the text
    # or the call after another one is left out
    for first in list(found):
        for second in list(found):
            if first in found and second in found and not (
                    keeps(f"{aa}{first}{second}{one}", ["Aa."], wanted) and keeps(f"{first}{second}{bb}", ["Bb."], [])):
                found.remove(second)
    return found


def _closes(opener: str, closer: str) -> bool:
    """`closer` is `opener`'s closing marker as markup spells one: alike (half of the shorter shared at the start
    and end) and saying it closes (`/`, `end`, `close`) where the opener does not."""
    said = [word for word in ("/", "end", "close") if word in closer.lower() and word not in opener.lower()]
    return bool(said) and 2 * _kinship(opener, closer) >= min(len(opener), len(closer))


def _extends(marker: str, text: str, begins: list) -> bool:
    """`marker` is a call's begin `text` spelled out further (and the overlap is only that)."""
    return text in begins and marker.startswith(text) and len(marker) > len(text) and not any(
        marker.endswith(text[:size]) for size in range(1, len(text)))


def _kinship(one: str, other: str) -> int:
    """How many characters two markers share at their start and at their end."""
    start = 0
    while start < min(len(one), len(other)) and one[start] == other[start]:
        start += 1
    end = 0
    while end < min(len(one), len(other)) - start and one[-1 - end] == other[-1 - end]:
        end += 1
    return start + end


def _content_open(plan: _Plan) -> str | None:
    """When the prompt ends with a marker that opens the answer's text (Kimi K3 with thinking off ends with
    `<|open|>response<|sep|>`), the template's closing marker spelled most like it (`<|close|>response<|sep|>`) for
    which text closed by it, then a call, parses as that text and the call; None otherwise."""
    spec = plan.template.source.get("fields", {}).get("content")
    if not spec or plan.reasoning_open is not None:
        return None
    tail = plan.prefix.rstrip()
    opened = max((marker for marker in plan.markers if tail.endswith(marker)), key=len, default=None)
    if opened is None:
        return None
    closes = [marker for marker in plan.markers if _closes(opened, marker)]  # found by parsing below
    form = next(iter(plan.calls.values()))
    sample = _sample(dict(plan.tools)[form.tool])
    for close in sorted(closes, key=lambda close: -_kinship(opened, close)):
        message = _read(plan, "Answer." + close + form.write(sample))
        if message is not None and message.get("content") == "Answer." and _calls_read(message) == [(form.tool, sample)]:
            return close
    return None


def _plain_opener(spec: dict | None, triggers: list) -> str | None:
    """Why free text could not be kept from opening a call: the call's trigger (or, with no tools, the start of the
    opener's first writing) is plain text, or the opener spells no text to keep out; None when it can be."""
    if spec is None:
        return None
    if not triggers:
        try:
            triggers = [_leading_literal(_opener(spec)[0])]
        except _Dead:
            return "the call opener spells no literal text: free text could not be kept from opening calls"
    for trigger in triggers:
        if not trigger:
            return "the call opener spells no literal text: free text could not be kept from opening calls"
        if _plain(trigger):
            return (f"the call opener {trigger!r} is too plain to tell a call from text (it is also JSON syntax or a "
                    "word): free text could not be kept from opening calls")
    separator = _list_separator(spec)
    if separator is not None and _plain(separator):
        return (f"a call after another opens with {separator!r} wherever it follows a call's end, in text too (a "
                "lookbehind): free text could not be kept from opening calls")
    return None


def _guard(spec: dict) -> str | None:
    """A literal every call opener holds, to keep out of free text where the opener is plain (plan.guard): the
    longest, a marker character breaking ties; None where a call may also open after a list separator that is plain
    text (Apertus's `, {"NAME": ` after a call's `}`), since calls then open beside text the guard does not cover."""
    separator = _list_separator(spec)
    if separator is not None and _plain(separator):
        return None
    pattern, literal = spec.get("open_pattern"), spec.get("open")
    # (a list of literal openers: none, to be safe)
    held = (_held_runs(pattern) if isinstance(pattern, str) else [literal] if isinstance(literal, str) and literal
            else [])
    return max(held, key=lambda run: (len(run), any(char in _MARKER_CHARS for char in run)), default=None)


def _trigger(begin: str, begins: list) -> str:
    """The longest literal start the begins of the calls share (so one trigger serves tools named in the opener)."""
    common = begin
    for other in begins:
        size = 0
        while size < min(len(common), len(other)) and common[size] == other[size]:
            size += 1
        common = common[:size]
    return common or begin


def _reasoning_text(plan: _Plan) -> str:
    if plan.reasoning_open is not None:
        return "Let me think." + plan.reasoning_open
    if plan.reasoning_tag is not None:
        return plan.reasoning_tag[0] + "Let me think." + plan.reasoning_tag[1]
    return ""


def _answer_start(plan: _Plan) -> str:
    """What the answer writes before anything else: the close of a reasoning block (or a content message) the
    prompt left open, after some text."""
    if plan.reasoning_open is not None:
        return _reasoning_text(plan)
    return "Answer." + plan.content_open if plan.content_open is not None else ""


def _as_tools(tool_list: list) -> list:
    return [{"type": "function", "function": {"name": name, "parameters": parameters}} for name, parameters in tool_list]


def _self_check(plan: _Plan) -> None:
    """Calls written the canonical way must parse back to exactly those calls, or the grammar would lie."""
    forms = list(plan.calls.values())
    samples = {form.tool: _sample(dict(plan.tools)[form.tool]) for form in forms}
    first, second = forms[0], forms[-1]
    one = first.write(samples[first.tool])
    # the grammar closes a reasoning block (or a content message) the prompt left open before anything else
    lead = _answer_start(plan)
    if plan.lead is not None:  # the header every message starts with separates calls too (`<|start|>assistant`)
        joined = _read(plan, lead + one + plan.lead.sample + second.write(samples[second.tool]))
        if _calls_read(joined) == [
                (first.tool, samples[first.tool]), (second.tool, samples[second.tool])]:
            plan.separator = plan.lead.sample
    elif all(not form.end for form in forms):
        # calls whose closer writes nothing follow each other directly (Mistral's `{...}[TOOL_CALLS]next[ARGS]`)
        joined = _read(plan, lead + one + second.write(samples[second.tool]))
        if _calls_read(joined) == [(first.tool, samples[first.tool]), (second.tool, samples[second.tool])]:
            plan.separator = ""
    two = one + plan.separator + second.write(samples[second.tool])
    if first.write_list is not None:  # a region holds a list of calls: two calls are one list of two
        two = first.write_list([(first.tool, samples[first.tool]), (second.tool, samples[second.tool])])
    cases = [
        ("one call", lead + one, [first.tool]),
        ("two calls", lead + two, [first.tool, second.tool]),
        ("text before a call", lead + "Sure, let me check. " + one, [first.tool]),
        # (text of several kinds: Granite 3 reads a call's end only before a capital letter or a line break)
        *[("text after a call", lead + one + after, [first.tool]) for after in (" Done.", "done.", " 2 more.", "\nok")],
        ("reasoning then a call", _reasoning_text(plan) + one, [first.tool]),
    ]
    if plan.lead is not None:
        reasoning = _reasoning_text(plan) + plan.lead.sample
        cases += [("reasoning, the opener's optional start, then a call", reasoning + one, [first.tool]),
                  ("reasoning, the opener's optional start, text, then a call", reasoning + "Sure. " + one, [first.tool])]
    for what, text, names in cases:
        if what.startswith("text ") and plan.plain_opener is not None and plan.guard is None:
            continue  # free text is never written beside calls (no guard, or it was dropped below)
        message = _read(plan, text)
        calls = (message or {}).get("tool_calls") or []
        got = [(call.get("function") or {}).get("name") for call in calls]
        wanted_args = [samples[name] for name in names]
        got_args = [(call.get("function") or {}).get("arguments") for call in calls]
        if got != names or got_args != wanted_args:
            if what.startswith("reasoning, the opener's optional start"):
                plan.lead = None
                continue
            if what == "text before a call" and plan.guard is not None:  # a call after text is not read as one:
                plan.guard = None  # free text holding no guard would not be enough
                continue
            if what == "two calls" and _calls_read(message)[:1] == [(first.tool, samples[first.tool])]:
                plan.one_call = True
                plan.notes.append("the template reads one call per answer: parallel calls are not written")
                continue
            if what == "text after a call":
                if not plan.calls_end_answer:
                    plan.calls_end_answer = True
                    plan.notes.append("calls end the answer: no text after them")
                continue
            raise _NoParseBack(
                f"the canonical writing of a call does not parse back ({what}): {text!r} gives "
                f"{calls if message is not None else 'a parse error'}")
    if plan.calls_end_answer:
        # text after the calls on a new line, starting with a letter (the only text the grammar writes there)
        # (or after a blank line, where that is read so too: models write one before a closing sentence)
        def kept_after(calls: str, names: list, breaks: str) -> bool:
            message = _read(plan, lead + calls + breaks + "Ok, done.")
            return _calls_read(message) == [(name, samples[name]) for name in names] and (
                (message or {}).get("content") or "").endswith("Ok, done.")

        plan.text_after_calls = [breaks for breaks in ("\n", "\n\n") if kept_after(one, [first.tool], breaks) and (
            plan.one_call or kept_after(two, [first.tool, second.tool], breaks))]
        if plan.text_after_calls:
            where = "a new line" + (" or after a blank line" if "\n\n" in plan.text_after_calls else "")
            plan.notes = [note.replace("no text after them", f"text after them starts with a letter, on {where}")
                          for note in plan.notes]
    # a region may hold a list of call objects where the parser reads every call of a list written so, alone,
    # between texts and beside another call
    if first.write_list_region is not None:
        pair = [(first.tool, samples[first.tool]), (second.tool, samples[second.tool])]
        listed = first.write_list_region(pair)
        contexts = [("", "", pair), ("Sure. ", "", pair), (one + plan.separator, "", [pair[0], *pair])]
        if not plan.calls_end_answer:
            contexts += [("", " Done.", pair), ("", plan.separator + one, [*pair, pair[0]])]
        if plan.one_call or any(_calls_read(_read(plan, lead + before + listed + after)) != wanted
                                for before, after, wanted in contexts):
            for form in forms:
                form.list_region = form.write_list_region = None
    # a call id in the items of a list of calls stays allowed only where the parser reads the call with it (xLAM's
    # opener wants "name" first)
    for form in forms:
        for key in list(form.list_ids):
            assert form.write_list is not None
            text = form.write_list([(form.tool, samples[form.tool])], key)
            if _calls_read(_read(plan, lead + text)) != [
                    (form.tool, samples[form.tool])]:
                form.list_ids.remove(key)
                del form.list_item["properties"][key]
    # JSON arguments may hold whitespace (line breaks) between any tokens, and JSON's closers meeting (`}}, {"k": {`
    # in an object of any members): a closer that also matches where nested objects end before a line break (Llama's
    # `}` `}`), or before another object (Apertus's `}}, {"NAME": {`), would end such a call inside its arguments
    for form in forms:
        if form.write_laid_out is None:
            continue
        for arguments in _stress_samples(dict(plan.tools)[form.tool]):
            text = form.write_laid_out(arguments)
            texts = [(text, [(form.tool, arguments)])]
            if form.write_list is None and not plan.one_call:  # and before another call
                texts.append((text + plan.separator + one, [(form.tool, arguments), (first.tool, samples[first.tool])]))
            for written, wanted in texts:
                message = _read(plan, lead + written)
                if _calls_read(message) != wanted:
                    raise _LineBreaksEndCalls(
                        "calls whose JSON arguments hold what the grammar allows there (line breaks between tokens, "
                        "nested objects and lists whose closers meet) do not parse back: "
                        f"{written[:160]!r} gives {_calls_read(message) if message else 'a parse error'}")
    # an optional part (or another writing: the call object's keys in the other order) stays allowed only where a
    # call written with it parses as the same call, alone, after another call and before text (DSML's self-closing `/` after the
    # tool's name does not: parameters follow)
    for form in forms:
        for choices, write_variant in form.variants:
            for before, after, names in _variant_contexts(plan, form, one):
                read = _calls_read(_read(plan, lead + before + write_variant(samples[form.tool]) + after))
                if read != [(name, samples[name]) for name in names] and not (after == " Done." and plan.calls_end_answer):
                    for choice, element in choices:
                        choice["elements"].remove(element)
                    break
        for element, write in form.optional:
            text = write(samples[form.tool])
            for before, after, names in _variant_contexts(plan, form, one):
                message = _read(plan, lead + before + text + after)
                read = _calls_read(message)
                if read != [(name, samples[name]) for name in names] and not (
                        after == " Done." and plan.calls_end_answer):
                    form.elements[:] = [kept for kept in form.elements if kept is not element]
                    if form.json_body is not None:  # (the same opener and closer around a JSON body)
                        form.json_body[:] = [kept for kept in form.json_body if kept is not element]
                    break


def _variant_contexts(plan: _Plan, form: Any, one: str) -> list:
    """(text before, text after, the tools of the calls read) around a call written in another way the grammar
    allows: alone, after another call, before another call, before text."""
    first = next(iter(plan.calls.values()))
    contexts = [("", "", [form.tool]), ("", " Done.", [form.tool])]
    if not plan.one_call:
        contexts += [(one + plan.separator, "", [first.tool, form.tool]), ("", plan.separator + one, [form.tool, first.tool])]
    return contexts


def _overlaps(marker: str, text: str) -> bool:
    """`marker` shares text with `text` where one could run into the other (inside it, or end-to-start)."""
    if marker in text or text in marker:
        return True
    return any(text.endswith(marker[:size]) or marker.endswith(text[:size]) for size in range(1, len(marker)))


def _message_trigger(begin: str, excluded: list) -> str:
    """What free text writes to open a message: its begin up to the first marker after its start
    (`<|channel|>final` of `<|channel|>final<|message|>`): free text may not hold that marker, and xgrammar never
    fires a trigger that holds text free text may not hold."""
    cut = min([begin.find(marker, 1) for marker in excluded if begin.find(marker, 1) > 0], default=len(begin))
    return begin[:cut]

"""Check a response template against a real chat template.

The chat template writes assistant messages; the response template must read them back. We render a
set of canonical conversations, split each rendering into the prompt (history with the generation
prompt) and the generation (what the model would have written), parse the generation and compare
the parsed message with the message that was rendered. See templates/FORMAT.md for the options.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import RenderTimeoutError
from ..library.entries import check_options
from .rendering import (
    SAMPLE_TOOLS,
    common_prefix,
    compiled_chat_template,
    frozen_clock,
    generated_part,
    render_budget,
    render_chat_template,
    render_timeout_message,
)

__all__ = [
    "CaseResult",
    "VerifyReport",
    "verify",
    "verify_entry",
]


def _parse(generation: str, template: Any, prefix: str, tools: list | None) -> dict:
    from ..core import parse_response

    return parse_response(generation, template, prefix=prefix, tools=tools)


_WEATHER_ARGS = {"city": "Paris", "days": 3, "include_hourly": True, "min_temp": -2.5}
_SEARCH_ARGS = {"query": "best bakeries in Lyon", "max_results": 5}
_NESTED_ARGS = {
    "title": "Réunion d'équipe — 東京 🚀",
    "attendees": [{"name": "Zoë", "email": "zoe@example.com"}, {"name": "Łukasz", "optional": True}],
    "details": {"location": {"city": "Zürich", "room": "B-12"}, "duration_h": 1.5, "notes": None},
    "tags": ["planning", "q3"],
}
_MARKER_TEXT = (
    'He said "hi" and wrote a backslash \\ then:\n'
    "close tags such as </tool_call>, </function>, </parameter> or </think> are plain text here."
)

_ANSWER = "Here is a short answer.\n\n**Key points:**\n- Paris is the capital of France.\n- It has about 2.1 million inhabitants."
_REASONING = "The user wants a short fact.\nI recall Paris has roughly 2.1 million people, so I will answer briefly."


def _call(name: str, arguments: dict, call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _history(reasoning: bool) -> list[dict]:
    first_answer = {"role": "assistant", "content": "", "tool_calls": [_call("get_weather", {"city": "Oslo"}, "abc123def")]}
    second_answer = {"role": "assistant", "content": "It is 4°C and cloudy in Oslo today."}
    if reasoning:
        first_answer["reasoning_content"] = "I need the weather for Oslo."
        second_answer["reasoning_content"] = "The tool says 4°C and cloudy."
    return [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What's the weather in Oslo?"},
        first_answer,
        {"role": "tool", "tool_call_id": "abc123def", "name": "get_weather", "content": '{"temp_c": 4, "sky": "cloudy"}'},
        second_answer,
    ]


def _cases(reasoning: bool, tool_calls: bool, parallel: bool) -> list[tuple[str, list[dict], dict, bool]]:
    """(name, history, assistant message, uses tools) for every applicable case."""
    user = {"role": "user", "content": "Tell me about Paris."}
    out: list[tuple[str, list[dict], dict, bool]] = [("plain", [user], {"role": "assistant", "content": _ANSWER}, False)]
    if reasoning:
        out.append(("reasoning_only", [user], {"role": "assistant", "content": ""}, False))
    if tool_calls:

        def calls(*items):
            return {"role": "assistant", "content": "", "tool_calls": list(items)}

        ask = {"role": "user", "content": "Plan my trip to Paris."}
        out += [
            ("single_call", [ask], calls(_call("get_weather", _WEATHER_ARGS, "mno789pqr")), True),
            ("no_arguments", [{"role": "user", "content": "What time is it?"}], calls(_call("get_time", {}, "mno789pqr")), True),
            ("nested_unicode_arguments", [ask], calls(_call("create_event", _NESTED_ARGS, "mno789pqr")), True),
            ("marker_text_arguments", [ask], calls(_call("save_note", {"text": _MARKER_TEXT}, "mno789pqr")), True),
            (
                "text_before_call",
                [ask],
                {
                    "role": "assistant",
                    "content": "Let me check the forecast first.",
                    "tool_calls": [_call("get_weather", _WEATHER_ARGS, "mno789pqr")],
                },
                True,
            ),
            (
                "multi_turn",
                _history(reasoning) + [{"role": "user", "content": "Any good bakeries in Lyon?"}],
                calls(_call("search_web", _SEARCH_ARGS, "ghi456jkl")),
                True,
            ),
            (
                "multi_turn_answer",
                _history(reasoning) + [{"role": "user", "content": "Thanks! And Paris?"}],
                {"role": "assistant", "content": _ANSWER},
                True,
            ),
        ]
        if parallel:
            out.insert(
                2,
                (
                    "parallel_calls",
                    [ask],
                    calls(_call("get_weather", _WEATHER_ARGS, "mno789pqr"), _call("search_web", _SEARCH_ARGS, "stu012vwx")),
                    True,
                ),
            )
    if reasoning:
        for _, _, message, _ in out:
            message["reasoning_content"] = _REASONING
    return out


@dataclass
class CaseResult:
    """One canonical case of a verification: its name and scenario, whether it passed (`ok`), what differed
    (`diff`), why it was skipped (`skipped`), and what was rendered and parsed (`prompt`, `generation`,
    `expected`, `parsed`, `tools`)."""

    name: str
    scenario: str
    ok: bool
    diff: list[str] = field(default_factory=list)
    skipped: str | None = None
    prompt: str = ""
    generation: str = ""
    expected: dict | None = None
    parsed: dict | None = None
    tools: list | None = None

    def __str__(self) -> str:
        head = f"[{self.scenario}] {self.name}: "
        if self.skipped is not None:
            return head + f"skipped ({self.skipped})"
        if self.ok:
            return head + "ok"
        return head + "FAILED\n" + "\n".join("    " + line for line in self.diff) + f"\n    generation: {self.generation!r}"


@dataclass
class VerifyReport:
    """What `verify` found: one `CaseResult` per canonical case, in order. `str(report)` is `report.summary()`."""

    cases: list[CaseResult]

    @property
    def ok(self) -> bool:
        """Every case that ran passed, and at least one ran."""
        return all(case.ok for case in self.cases) and any(case.skipped is None for case in self.cases)

    @property
    def failures(self) -> list[CaseResult]:
        """The cases that failed."""
        return [case for case in self.cases if not case.ok]

    def summary(self) -> str:
        """`N/M cases ok, K skipped`, then a line (and the differences) per failed or skipped case."""
        ran = [case for case in self.cases if case.skipped is None]
        failed = self.failures
        lines = [f"{len(ran) - len(failed)}/{len(ran)} cases ok, {len(self.cases) - len(ran)} skipped"]
        lines += [str(case) for case in self.cases if not case.ok or case.skipped is not None]
        return "\n".join(lines)

    __str__ = summary


def _text_value(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        return value  # compared as is, so a wrong type shows in the diff
    return value.strip() or None


def _expected_calls(message: dict) -> list[tuple[str, Any]]:
    return [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]


def _parsed_calls(message: dict, diff: list[str]) -> list[tuple[Any, Any]] | None:
    calls = message.get("tool_calls")
    if calls is None:
        return []
    if not isinstance(calls, list):
        diff.append(f"tool_calls: expected a list, got {type(calls).__name__}: {calls!r}")
        return None
    out: list[tuple[Any, Any]] = []  # (name, arguments) as parsed: not checked to be a string and a dict
    for i, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or call.get("type") != "function":
            diff.append(f"tool_calls[{i}]: not of the shape {{'type': 'function', 'function': {{...}}}}: {call!r}")
            return None
        out.append((function.get("name"), function.get("arguments")))
    return out


def _compare(expected: dict, parsed: dict) -> list[str]:
    want: str | tuple[str, Any] | None  # texts, then (name, arguments) of calls
    got: str | tuple[Any, Any] | None
    diff = []
    for key in ("content", "reasoning_content"):
        want, got = _text_value(expected.get(key)), _text_value(parsed.get(key))
        if want != got:
            diff.append(f"{key}: expected {want!r}, got {got!r}")
    want_calls = _expected_calls(expected)
    got_calls = _parsed_calls(parsed, diff)
    if got_calls is not None:
        if len(want_calls) != len(got_calls):
            diff.append(f"tool_calls: expected {len(want_calls)} call(s), got {len(got_calls)}: {parsed.get('tool_calls')!r}")
        for i, (want, got) in enumerate(zip(want_calls, got_calls)):
            if want[0] != got[0]:
                diff.append(f"tool_calls[{i}].name: expected {want[0]!r}, got {got[0]!r}")
            if want[1] != got[1] or _json_types(want[1]) != _json_types(got[1]):
                diff.append(f"tool_calls[{i}].arguments: expected {want[1]!r}, got {got[1]!r}")
    if parsed.get("role") != "assistant":
        diff.append(f"role: expected 'assistant', got {parsed.get('role')!r}")
    extra = sorted(set(parsed) - {"role", "content", "reasoning_content", "tool_calls"})
    if extra:
        diff.append(f"unexpected keys in the parsed message: {extra}")
    return diff


def _json_types(value: Any) -> Any:
    # 1 == 1.0 == True in Python; compare the JSON types too so `"3"` vs `3` or `1` vs `True` show up.
    if isinstance(value, dict):
        return {k: _json_types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_types(v) for v in value]
    return type(value).__name__


def apply_source_edits(source: str, edits: list) -> str:
    """The chat template with each `remove` text cut out. Each must occur exactly once: an edit that no longer
    applies (the file changed) is an error, not a silent no-op. Line endings are compared as LF."""
    if not edits:
        return source
    source = source.replace("\r\n", "\n")
    for i, edit in enumerate(edits):
        count = source.count(edit["remove"])
        if count != 1:
            raise ValueError(
                f"verify options: source_edits[{i}] ({edit['why'][:80]}): the text to remove occurs {count} times "
                "in the chat template, expected exactly once"
            )
        source = source.replace(edit["remove"], "", 1)
    return source


def _for_template(message: dict, options: dict) -> dict:
    """The message as given to the chat template, as the verify `options` say: reasoning under another key
    (reasoning_key) or inside the content (reasoning_in_content), text content as a list of parts (content_parts),
    arguments as JSON text (arguments: "json_string")."""
    message = copy.deepcopy(message)
    reasoning_key = options.get("reasoning_key")
    in_content = options.get("reasoning_in_content")
    if reasoning_key and message.get("reasoning_content") is not None:
        # Templates that read the reasoning under another key (message.thinking, message.reasoning).
        message[reasoning_key] = message.pop("reasoning_content")
    if in_content is not None and message.get("reasoning_content") is not None:
        # Templates that only read reasoning from the content string, written as the model writes it.
        reasoning = message.pop("reasoning_content")
        message["content"] = in_content["open"] + reasoning + in_content["close"] + (message.get("content") or "")
    if options.get("content_parts") and isinstance(message.get("content"), str):
        # Chat templates of vision models read a message's content only as a list of typed parts.
        message["content"] = [{"type": "text", "text": message["content"]}]
    if options.get("arguments", "dict") == "json_string":
        for call in message.get("tool_calls") or []:
            call["function"]["arguments"] = json.dumps(call["function"]["arguments"], ensure_ascii=False)
    return message


def scenarios(options: dict) -> list[dict]:
    """The scenarios of verify options (one unnamed default scenario when none are listed)."""
    return options.get("scenarios") or [{"name": "default"}]


def scenario_render_kwargs(options: dict, scenario: dict) -> dict:
    """The variables a scenario renders with besides the messages and tools: bos/eos tokens, then the options'
    render_kwargs, then the scenario's (which win)."""
    kwargs = {"bos_token": options.get("bos_token", ""), "eos_token": options.get("eos_token", "")}
    kwargs.update(options.get("render_kwargs") or {})
    kwargs.update(scenario.get("render_kwargs") or {})
    return kwargs


def render_turn(
    chat_template: str,
    history: list[dict],
    message: dict,
    *,
    tools: list | None,
    options: dict,
    render_kwargs: dict,
) -> tuple[str, str, str | None]:
    """Render one conversation the way verify does and cut out the assistant's generation.

    `history` and `message` are in the OpenAI shape (arguments as dicts, reasoning under `reasoning_content`);
    they are given to the chat template as the verify `options` say (arguments, tools_shape, reasoning_key,
    reasoning_in_content, content_parts). Returns (prompt, full, generation): the history rendered with the
    generation prompt, the history and message rendered without it, and what the model wrote after the prompt (None
    when the prompt is not a prefix of the full rendering and `reasoning_synthesis` does not apply). Rendering errors
    propagate.
    Call it inside `frozen_clock()` when the chat template may write the time.
    """
    rendered_history = [_for_template(m, options) for m in history]
    # Some chat templates read bare function schemas ({"name", "description", "parameters"}), not the
    # OpenAI {"type": "function", "function": ...} wrappers; the parse still gets the wrapped tools.
    given = [t["function"] for t in tools] if tools and options.get("tools_shape") == "function" else tools
    prompt = render_chat_template(chat_template, rendered_history, tools=given, add_generation_prompt=True, **render_kwargs)
    full = render_chat_template(
        chat_template,
        rendered_history + [_for_template(message, options)],
        tools=given,
        **render_kwargs,
    )
    return prompt, full, generated_part(prompt, full, message, options.get("reasoning_synthesis"))


@frozen_clock()  # the prompt and the full turn are rendered apart: a template that writes the time must agree
def verify(
    template: Any,
    chat_template: str | os.PathLike,
    *,
    options: dict | None = None,
    supports: dict | None = None,
) -> VerifyReport:
    """Render the canonical conversations through `chat_template` and parse them back with `template`.

    `template` is a response template (dict or compiled) or a whole library entry (a dict with
    "template", "supports" and optional "verify"), in which case `supports` and `options` default to
    the entry's. `chat_template` is the Jinja source, or the path of a file holding it: a pathlib.Path, or a str
    with no `{` and no line break (Jinja source always has a `{`), which must name an existing file.

    Raises `TemplateError` for an invalid response template and ValueError for a chat template that does not
    compile, once, before any case runs; what goes wrong in a case (rendering, parsing, a different message) is
    reported in that case. Rendering has a time budget (rendering.RENDER_TIME_LIMIT): a chat template that renders
    longer raises RenderTimeoutError.
    """
    with render_budget() as budget:
        report = _verify(template, chat_template, options=options, supports=supports)
        if budget.spent:  # (the cases that hit it were reported as failed renders: the whole check is void)
            raise RenderTimeoutError(f"verify: {render_timeout_message()}")
    return report


def _verify(
    template: Any,
    chat_template: str | os.PathLike,
    *,
    options: dict | None = None,
    supports: dict | None = None,
) -> VerifyReport:
    """`verify` without the rendering budget."""
    from ..core.template import load_template

    if isinstance(template, dict) and "template" in template and "fields" not in template:
        entry = template
        template = entry["template"]
        options = entry.get("verify", {}) if options is None else options
        supports = entry.get("supports") if supports is None else supports
    options = dict(options or {})
    check_options(options)
    supports = supports or {"reasoning": False, "tool_calls": True, "parallel_tool_calls": True}
    if isinstance(chat_template, str) and "{" not in chat_template and "\n" not in chat_template:
        if not os.path.isfile(chat_template):
            raise FileNotFoundError(
                f"chat template {chat_template!r}: no such file (a str without '{{' is taken as a file path; "
                "pass the Jinja source itself, or the path of an existing file)"
            )
        chat_template = Path(chat_template)
    if isinstance(chat_template, os.PathLike):
        with open(chat_template, "rb") as f:  # bytes: keep \r\n as the tokenizer would
            chat_template = f.read().decode("utf-8")
    chat_template = apply_source_edits(chat_template, options.get("source_edits") or [])
    template = load_template(template)
    try:
        compiled_chat_template(chat_template)
    except Exception as error:  # jinja2's TemplateSyntaxError: every case would fail the same way
        line = getattr(error, "lineno", None)
        raise ValueError(
            f"the chat template does not compile{f' (line {line})' if line else ''}: {type(error).__name__}: {error}"
        ) from None

    only = options.get("cases")
    skip = options.get("skip_cases") or {}

    results = []
    for scenario in scenarios(options):
        kwargs = scenario_render_kwargs(options, scenario)
        reasoning = scenario.get("reasoning", bool(supports.get("reasoning")))
        cases = _cases(reasoning, bool(supports.get("tool_calls")), bool(supports.get("parallel_tool_calls")))
        for name, history, message, uses_tools in cases:
            if only is not None and name not in only:
                continue
            result = CaseResult(name=name, scenario=scenario["name"], ok=True, expected=message)
            results.append(result)
            if name in skip:
                result.skipped = skip[name]
                continue
            tools = SAMPLE_TOOLS if uses_tools or options.get("tools_always") else None
            try:
                prompt, full, generation = render_turn(chat_template, history, message, tools=tools, options=options, render_kwargs=kwargs)
            except Exception as e:  # any template error is a finding, reported per case
                result.ok = False
                result.diff.append(f"chat template failed to render: {type(e).__name__}: {e}")
                continue
            result.prompt = prompt
            result.tools = tools
            if generation is None:
                result.ok = False
                result.diff.append(
                    "the prompt (history + generation prompt) is not a prefix of the rendering with the assistant "
                    f"message; prompt ends with {prompt[-80:]!r}, rendering continues with "
                    f"{full[len(common_prefix(prompt, full)) :][:80]!r}"
                )
                continue
            result.generation = generation
            try:
                parsed = _parse(generation, template, prompt, tools)
            except Exception as e:  # a parse error is a finding too
                result.ok = False
                result.diff.append(f"parse failed: {type(e).__name__}: {e}")
                continue
            result.parsed = parsed
            result.diff = _compare(message, parsed)
            result.ok = not result.diff
    return VerifyReport(results)


def entry_options(entry: dict, chat_template: str) -> dict | None:
    """A library entry's verify options, with the overrides of the listed chat template this one is (matched by
    sha256, tolerant of a final newline and of CRLF line endings)."""
    from ..library import fingerprints

    digests = fingerprints(chat_template)
    options = entry.get("verify")
    for item in entry.get("chat_templates") or ():
        if isinstance(item, dict) and item.get("sha256") in digests and isinstance(item.get("verify"), dict):
            return {**(options or {}), **item["verify"]}
    return options


def verify_entry(entry: dict | str, folder: str | os.PathLike) -> dict[str, VerifyReport]:
    """Verify a library entry (or its name) against every chat template it lists, read from `folder`.

    Returns {file name: report}. Raises FileNotFoundError for a listed file that is missing, and
    ValueError when a file's sha256 differs from the one the entry records (the entry was verified
    against other bytes).
    """
    import hashlib

    if isinstance(entry, str):
        from ..library import get_entry

        entry = get_entry(entry)
    reports = {}
    for item in entry["chat_templates"]:
        path = os.path.join(folder, item["file"])
        with open(path, "rb") as f:
            data = f.read()
        digest = hashlib.sha256(data).hexdigest()
        if digest != item["sha256"]:
            raise ValueError(
                f"{entry['name']}: chat template {item['file']} has sha256 {digest}, the entry records {item['sha256']}"
            )
        options = {**entry.get("verify", {}), **item.get("verify", {})}
        reports[item["file"]] = verify(entry["template"], data.decode("utf-8"), options=options, supports=entry["supports"])
    return reports

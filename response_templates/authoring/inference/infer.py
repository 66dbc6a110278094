"""The entry points: `infer_template(chat_template)` runs the probes, assembles a template and verifies it;
`infer_for_tokenizer(tokenizer)` is the opt-in fallback of `template_for(..., infer=True)`; `load_chat_template`
reads a chat template from a file, a tokenizer_config.json or a model folder.
"""

from __future__ import annotations

import copy
import os
import re
import warnings
from typing import Any

from ...core.errors import InferenceError
from ...integrations.transformers_patch import TOKENIZER_CONFIG
from .. import files
from ..rendering import frozen_clock, render_budget, render_timeout_message
from ..verification import verify
from .assemble import build, calls_end_bare_reasoning
from .calls import call_object_head, content_wrapper_in_call_turn, infer_calls
from .markup import citation_markup, damaged_output_reasons
from .probes import TOKEN, Renderer, esc, user_message
from .result import InferredResponseTemplate, InferredTemplate
from .turns import (
    KNOWN_REASONING,
    Reasoning,
    builtin_tool_markup,
    choose_arguments_mode,
    conventional_reasoning,
    dropped_opener_before_calls,
    dropped_prefill,
    find_reasoning,
    find_turn,
    inline_tool_results,
    optional_anchor_suffix,
    prefilled_everywhere,
    prefilled_segment_marker,
    reasoning_from_source,
    renders_calls_somehow,
    split_prefill,
    tool_turn_header,
)


def load_chat_template(path: str | os.PathLike) -> tuple[str, dict]:
    """Read a chat template from a .jinja file, a tokenizer_config.json, or a model directory holding either.

    Returns (source, tokenizer settings: bos_token / eos_token when the config gives them).
    """
    path = os.fspath(path)
    settings: dict = {}
    config: str | dict  # a file's path, or its contents
    if os.path.isdir(path):
        config = os.path.join(path, TOKENIZER_CONFIG)
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
    try:
        return files.read_text(path, "chat template").replace("\r\n", "\n")
    except ValueError as error:
        raise InferenceError(str(error)) from None


def _read_json(path: str) -> dict:
    try:
        data = files.read_json(path, "tokenizer config")
    except ValueError as error:
        raise InferenceError(str(error)) from None
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
    # every probe and verify render sees the same time (templates that write the clock), and all of them share one
    # rendering time budget (a hostile chat template must not keep the probes running for hours)
    with render_budget() as budget:
        try:
            with frozen_clock():
                inferred = _infer(chat_template, kwargs, reasons)
            if not budget.spent:
                return inferred
        except InferenceError as error:
            reasons.append(str(error))
        except Exception as error:  # the chat template itself failed: a finding, reported
            reasons.append(f"the chat template failed to render a probe: {type(error).__name__}: {error}")
        if budget.spent:  # (the probes that hit it failed one by one: say why once, first)
            reasons.insert(0, render_timeout_message())
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
        default = Renderer(source, kwargs).generation_prompt([user_message()])
        high = Renderer(source, dict(kwargs, reasoning_effort="high")).generation_prompt([user_message()])
    except Exception:
        return None
    if high == default or not high.strip():
        return None
    return [{"name": "thinking", "render_kwargs": {"reasoning_effort": "high"}},
            {"name": "no_thinking", "render_kwargs": {}, "reasoning": False}]


def _infer(source: str, kwargs: dict, reasons: list[str]) -> InferredTemplate:
    scenarios = _thinking_scenarios(source) or _effort_scenarios(source, kwargs)
    probe_kwargs = dict(kwargs, **(scenarios[0]["render_kwargs"] if scenarios else {}))
    r = Renderer(source, probe_kwargs)
    try:
        r.render([user_message()], False, True)
    except Exception:
        r.tools_always = True  # some chat templates fail without tools
    try:
        choose_arguments_mode(r)  # early: the tool-result history that gives a second anchor holds a call
        arguments_error = None
    except InferenceError as error:
        arguments_error = error
    reasoning = find_reasoning(r, reasons)
    turn = find_turn(r, reasoning, reasons)
    if reasoning is not None and turn.content_open and reasoning.close.endswith(turn.content_open):
        # The reasoning's closing text runs into the content's opening markup: each keeps its own.
        reasoning.close = reasoning.close[: -len(turn.content_open)].strip()
    guessed = None
    if reasoning is None:
        guessed = reasoning_from_source(r.source)
        if guessed is None and not any(m in r.source for pair in KNOWN_REASONING for m in pair):
            # Many models reason in <think> ... </think> whatever their chat template shows (Granite 4, MiMo):
            # read such a block as reasoning. Only that exact markup is affected.
            guessed = Reasoning(open="<think>", close="</think>", conventional=True)
            reasons.append("reasoning: the chat template shows no reasoning markup; a <think> ... </think> block is "
                           "read as reasoning by convention (not verified)")
        elif guessed is not None:
            reasons.append(f"reasoning: the chat template never renders reasoning_content, but its source writes "
                           f"{guessed.open!r} and {guessed.close!r}; they delimit reasoning in the template, not verified")
            if turn.content_open.startswith(guessed.close):
                # A prompt that opened the reasoning: the turn closes it before the content's own markup.
                turn.content_open = turn.content_open[len(guessed.close):].strip()
    conventional_reasoning(turn, reasoning or guessed, reasons)
    split_prefill(turn, reasoning or guessed)
    if reasoning or guessed:
        turn.empty_reasoning = ((reasoning or guessed).open, (reasoning or guessed).close)  # type: ignore[union-attr]  # one is set
    if arguments_error is None:
        prefilled_segment_marker(r, turn, reasons)
    calls = None
    if arguments_error is not None:
        dropped_opener_before_calls(r, reasoning or guessed, reasons)
    if arguments_error is not None:
        try:  # again, now that the probes carry what the chat template needs (reasoning, a synthesised close)
            choose_arguments_mode(r)
            arguments_error = None
        except InferenceError as error:
            arguments_error = error
    if arguments_error is not None:
        why = renders_calls_somehow(r, turn)
        if why:
            raise InferenceError(f"cannot infer: {why}") from None
        reasons.append(str(arguments_error))  # no tool calls in this format: a template for reasoning and content
    else:
        calls = infer_calls(r, turn, reasons)
        if calls is None:
            # The chat template writes tool calls we cannot read: a template without them would silently
            # leave call markup in the content.
            raise InferenceError("cannot infer: the chat template renders tool calls in a syntax not recognised")
        closing = (calls.literal.get("block_close") or "").strip()
        if closing and not (calls.literal.get("block_open") or "").strip() and TOKEN.fullmatch(closing):
            # Markup after the calls that no opener pairs with (Gemma's <|tool_response>) ends the turn.
            turn.extra_ends.append(closing)
        header = tool_turn_header(r, calls)
        if header and header not in turn.extra_ends and header != turn.end:
            # What the chat template writes after a turn with calls, before the tool results (GLM's
            # <|observation|>): the model stops there.
            turn.extra_ends.append(header)
        inline_tool_results(r, turn, calls, reasons)
        content_wrapper_in_call_turn(r, turn, calls, reasons)
        call_object_head(r, turn, calls, reasons)
        builtin_tool_markup(r, turn, calls, reasons)
        if turn.segment and calls.kind == "name_json":
            # The segment marker also opens the content: a cut call header is the marker and a name, on one line.
            calls.partial_open = esc(turn.segment) + r"[^\[{\n<]*"
    optional_anchor_suffix(r, turn, reasoning, scenarios[1]["render_kwargs"] if scenarios else None)
    turn.citation = citation_markup(r, reasons)
    if scenarios and r.synthesis is None:
        dropped_prefill(r, scenarios[1]["render_kwargs"], reasons)
    thinking = reasoning or guessed
    if not scenarios and thinking is not None and (thinking.prefilled or turn.prefill.strip() == thinking.open):
        thinking.always = prefilled_everywhere(turn, reasons)
    template = build(turn, reasoning or guessed, calls)
    calls_end_bare_reasoning(r, template, reasoning, calls, reasons)
    damaged_output_reasons(calls, turn, reasoning or guessed, reasons)
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
    markers: dict[str, Any] = {"start_anchor": anchors if len(anchors) > 1 else turn.anchor, "end_of_turn": turn.end,
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
            # ... but the models trained on it do: their strings are read as pasted raw where the strict reading fails
            template = copy.deepcopy(template)
            template["fields"]["tool_calls"].setdefault("content_args", {})["raw_strings"] = True
            markers["tool_calls.strings"] = "pasted raw between quotes (raw_strings)"
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
    return label if len(label) <= 16 and not TOKEN.search(label) and "\n" not in label else ""


def _dropped_calls(case) -> bool:
    calls = (case.expected or {}).get("tool_calls") or []
    return bool(calls) and bool(case.generation) and not any(c["function"]["name"] in case.generation for c in calls)


def _dropped_content(case) -> bool:
    expected = ((case.expected or {}).get("content") or "").strip()
    return bool(expected) and bool(case.generation) and expected not in case.generation


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

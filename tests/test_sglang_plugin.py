"""The SGLang plugin (response_templates.integrations.sglang_plugin), driven through SGLang's own parser classes.

SGLang's chat server parses in two stages: `ReasoningParser` splits off the reasoning, and the rest goes to
`FunctionCallParser`. These tests make both with the name `response_templates`, as the server does for
`--reasoning-parser response_templates --tool-call-parser response_templates`, give them the prompt as the server
does (`prefix`), and run them the way its chat server does, whole and a few characters at a time. For every case of
every library template the message a client assembles is ours (`to_openai_message(parse_response(...))`), with
tool-call arguments in as many pieces as `OpenAIStreamAdapter` sends them. Skipped, with the reason, when SGLang
is not installed; failing on CI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from response_templates import parse_response
from response_templates.authoring import engines
from response_templates.integrations import sglang_plugin
from response_templates.integrations.openai_adapter import (
    OpenAIStreamAdapter,
    to_openai_message,
)
from response_templates.library import get_template, list_templates

CORPORA = Path(__file__).resolve().parent / "data" / "corpora"
DAMAGED = Path(__file__).resolve().parent / "data" / "damaged"
STEP = 3  # characters per streamed piece
NAME = "response_templates"

_missing = sglang_plugin.host_unavailable()
if _missing and os.environ.get("CI", "").lower() == "true":
    raise RuntimeError(f"an SGLang that can host the plugin must be installed for these tests on CI: {_missing}")
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"no SGLang here that can host the plugin: {_missing}")


def _tools(tools):
    from sglang.srt.entrypoints.openai.protocol import Tool

    return [Tool.model_validate(tool) for tool in tools or ()]


def _parsers(tokenizer, prefix, tools, *, reasoning=True, stream_reasoning=True):
    """The two stages as SGLang's chat server makes them for one request."""
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    sglang_plugin.register()
    sglang_plugin.register()  # safe twice
    tool_objects = _tools(tools)
    reasoning_parser = None
    if reasoning:
        reasoning_parser = ReasoningParser(NAME, stream_reasoning, tokenizer=tokenizer,
                                           tool_call_parser_active=bool(tool_objects), prefix=prefix)
    tool_parser = FunctionCallParser(tool_objects, NAME, tokenizer=tokenizer, prefix=prefix) if tool_objects else None
    return reasoning_parser, tool_parser, tool_objects


def _one_shot(tokenizer, prefix, tools, output, *, reasoning=True):
    """What the chat server answers without streaming (serving_chat: reasoning, then _process_tool_calls)."""
    reasoning_parser, tool_parser, _ = _parsers(tokenizer, prefix, tools, reasoning=reasoning)
    reasoning_text, text = (reasoning_parser.parse_non_stream(output) if reasoning_parser else (None, output))
    calls = []
    if tool_parser is not None and tool_parser.has_tool_call(text):
        text, items = tool_parser.parse_non_stream(text)
        calls = [{"name": item.name, "arguments": item.parameters} for item in items]
    return {"reasoning": reasoning_text or None, "content": text or None, "calls": calls}


def _stream(tokenizer, prefix, tools, output, step=STEP, *, reasoning=True, stream_reasoning=True):
    """The deltas a streaming client gets, as (reasoning, content, [ToolCallItem]) per piece."""
    reasoning_parser, tool_parser, _ = _parsers(tokenizer, prefix, tools, reasoning=reasoning,
                                                stream_reasoning=stream_reasoning)
    pieces = [output[i:i + step] for i in range(0, len(output), step)] or [""]
    deltas = []
    for position, piece in enumerate(pieces):
        last = position == len(pieces) - 1
        reasoning_text, text = None, piece
        if reasoning_parser is not None:
            reasoning_text, text = reasoning_parser.parse_stream_chunk(piece)
            if last:
                end_reasoning, end_text = reasoning_parser.parse_stream_end()
                reasoning_text = (reasoning_text or "") + (end_reasoning or "")
                text = (text or "") + (end_text or "")
        calls = []
        if tool_parser is not None:
            text, calls = tool_parser.parse_stream_chunk(text or "")
            if last:
                end_text, end_calls = tool_parser.parse_stream_end()
                text, calls = (text or "") + end_text, list(calls) + end_calls
        deltas.append((reasoning_text or "", text or "", list(calls)))
    return deltas


def _assemble(deltas):
    """The message a client builds from the deltas (SGLang sends a call's name with its first piece only)."""
    reasoning, content, calls = "", "", {}
    for reasoning_text, text, items in deltas:
        reasoning += reasoning_text
        content += text
        for item in items:
            slot = calls.setdefault(item.tool_index, {"name": None, "arguments": ""})
            if item.name:
                assert slot["name"] is None, "a call's name was sent twice"
                slot["name"] = item.name
            slot["arguments"] += item.parameters or ""
    return {"reasoning": reasoning or None, "content": content or None,
            "calls": [calls[index] for index in sorted(calls)]}


def _expected(openai, tools):
    calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
             for c in openai.get("tool_calls") or ()] if tools else []
    return {"reasoning": openai.get("reasoning_content"), "content": openai.get("content"), "calls": calls}


def _argument_pieces(deltas):
    counts = {}
    for _, _, items in deltas:
        for index in {item.tool_index for item in items if item.parameters}:
            counts[index] = counts.get(index, 0) + 1
    return counts


def _adapter_argument_pieces(template, case, output, step=STEP):
    adapter = OpenAIStreamAdapter(template, case["prefix"], tools=case.get("tools"), may_truncate=False)
    counts = {}
    pieces = [output[i:i + step] for i in range(0, len(output), step)] or [""]
    for position, piece in enumerate(pieces):
        chunks = adapter.feed(piece) if piece else []
        if position == len(pieces) - 1:
            chunks += adapter.finish()
        for index in {call["index"] for chunk in chunks for choice in chunk["choices"]
                      for call in choice["delta"].get("tool_calls") or ()
                      if call.get("function", {}).get("arguments")}:
            counts[index] = counts.get(index, 0) + 1
    return counts


@pytest.mark.parametrize("name", list_templates())
def test_every_corpus_case_one_shot_and_streamed(name, monkeypatch):
    monkeypatch.delenv("RESPONSE_TEMPLATES_MALFORMED", raising=False)
    template = get_template(name)
    tokenizer = engines._tokenizer(template)
    cases = json.loads((CORPORA / f"{name}.json").read_text(encoding="utf-8"))["cases"]
    for case in cases:
        tools, prefix, output = case.get("tools"), case["prefix"], case["output"]
        try:
            ours = to_openai_message(parse_response(output, template, prefix=prefix, tools=tools))
        except ValueError:  # damaged output: the server answers with the text as it is, it does not fail
            assert _one_shot(tokenizer, prefix, tools, output) == {
                "reasoning": None, "content": output or None, "calls": []}, (name, case["name"])
            continue
        expected = _expected(ours, tools)
        assert _one_shot(tokenizer, prefix, tools, output) == expected, (name, case["name"])
        deltas = _stream(tokenizer, prefix, tools, output)
        assert _assemble(deltas) == expected, (name, case["name"])
        if expected["calls"]:  # arguments go out in as many pieces as the adapter sends them while they arrive
            assert _argument_pieces(deltas) == _adapter_argument_pieces(template, case, output), (name, case["name"])


QWEN_TOOLS = [{"type": "function", "function": {"name": "write_note", "parameters": {"type": "object", "properties": {
    "title": {"type": "string"}, "body": {"type": "string"}, "days": {"type": "integer"}}}}}]
QWEN_PREFIX = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_long_arguments_stream_while_the_model_writes_them(monkeypatch):
    monkeypatch.delenv("RESPONSE_TEMPLATES_MALFORMED", raising=False)
    tokenizer = engines._tokenizer(get_template("qwen3"))
    arguments = {"title": "Trip", "body": "Paris, " * 40 + "then Lyon.", "days": 3}
    call = json.dumps({"name": "write_note", "arguments": arguments})
    output = f"<think>\nA note.\n</think>\n\n<tool_call>\n{call}\n</tool_call><|im_end|>"
    deltas = _stream(tokenizer, QWEN_PREFIX, QWEN_TOOLS, output, step=1)
    close_at = output.index("\n</tool_call>")
    sent_before_close = "".join(item.parameters for _, _, items in deltas[:close_at] for item in items)
    assert _assemble(deltas) == {"reasoning": "A note.", "content": None,
                                 "calls": [{"name": "write_note", "arguments": json.dumps(arguments)}]}
    assert _argument_pieces(deltas)[0] >= 3  # title, body, days: each once complete
    assert sent_before_close.startswith('{"title": "Trip", "body": "Paris, Paris, ')


def test_the_prompt_decides_where_the_output_starts(monkeypatch):
    """A prompt that opens the reasoning (the chat template wrote `<think>`): the output starts inside it."""
    monkeypatch.delenv("RESPONSE_TEMPLATES_MALFORMED", raising=False)
    tokenizer = engines._tokenizer(get_template("qwen3"))
    output = "Short.\n</think>\n\nHello!<|im_end|>"
    expected = {"reasoning": "Short.", "content": "Hello!", "calls": []}
    assert _one_shot(tokenizer, QWEN_PREFIX + "<think>\n", None, output) == expected
    assert _assemble(_stream(tokenizer, QWEN_PREFIX + "<think>\n", None, output)) == expected
    # without the opener in the prompt, the same text is the answer
    assert _one_shot(tokenizer, QWEN_PREFIX, None, output)["reasoning"] is None


def test_tools_type_the_arguments(monkeypatch):
    """Arguments are cast to the request's tool schema, as this package's parser does (here an XML-style format
    whose values are text until the schema says otherwise)."""
    monkeypatch.delenv("RESPONSE_TEMPLATES_MALFORMED", raising=False)
    template = get_template("qwen3-coder")
    tokenizer = engines._tokenizer(template)
    output = ("<tool_call>\n<function=write_note>\n<parameter=title>\nTrip\n</parameter>\n<parameter=days>\n3\n"
              "</parameter>\n</function>\n</tool_call><|im_end|>")
    for tools, days in ((QWEN_TOOLS, 3), ([{"type": "function", "function": {"name": "write_note"}}], "3")):
        one_shot = _one_shot(tokenizer, QWEN_PREFIX, tools, output)
        assert [json.loads(c["arguments"])["days"] for c in one_shot["calls"]] == [days]
        assert _assemble(_stream(tokenizer, QWEN_PREFIX, tools, output)) == one_shot


def test_reasoning_held_until_its_end_when_not_streamed(monkeypatch):
    monkeypatch.delenv("RESPONSE_TEMPLATES_MALFORMED", raising=False)
    tokenizer = engines._tokenizer(get_template("qwen3"))
    output = "<think>\nFirst this, then that.\n</think>\n\nDone.<|im_end|>"
    deltas = _stream(tokenizer, QWEN_PREFIX, None, output, stream_reasoning=False)
    assert [reasoning for reasoning, _, _ in deltas if reasoning] == ["First this, then that."]
    assert _assemble(deltas) == {"reasoning": "First this, then that.", "content": "Done.", "calls": []}


def test_only_the_tool_call_parser(monkeypatch):
    """`--tool-call-parser response_templates` alone: content and calls are ours, the reasoning is not sent."""
    monkeypatch.delenv("RESPONSE_TEMPLATES_MALFORMED", raising=False)
    tokenizer = engines._tokenizer(get_template("qwen3"))
    output = ('<think>\nHmm.\n</think>\n\nWriting.\n<tool_call>\n{"name": "write_note", "arguments": {"title": "A"}}'
              "\n</tool_call><|im_end|>")
    expected = {"reasoning": None, "content": "Writing.",
                "calls": [{"name": "write_note", "arguments": '{"title": "A"}'}]}
    assert _one_shot(tokenizer, QWEN_PREFIX, QWEN_TOOLS, output, reasoning=False) == expected
    assert _assemble(_stream(tokenizer, QWEN_PREFIX, QWEN_TOOLS, output, reasoning=False)) == expected


def test_a_broken_call_under_each_policy(monkeypatch):
    tokenizer = engines._tokenizer(get_template("qwen3"))
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
             {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]
    broken = '<tool_call>\n{"name": "get_weather", "arguments": {"city": Paris}}\n</tool_call>'
    output = f'Checking.\n{broken}\n<tool_call>\n{{"name": "get_time", "arguments": {{}}}}\n</tool_call><|im_end|>'
    results = {}
    for policy in ("raise", "content", "drop"):
        monkeypatch.setenv("RESPONSE_TEMPLATES_MALFORMED", policy)
        one_shot = _one_shot(tokenizer, QWEN_PREFIX, tools, output)
        results[policy] = (one_shot["content"], [c["name"] for c in one_shot["calls"]])
        if policy != "raise":
            streamed = _assemble(_stream(tokenizer, QWEN_PREFIX, tools, output))
            assert (streamed["content"], [c["name"] for c in streamed["calls"]]) == results[policy]
    assert results["raise"] == (output, [])  # the whole output as it is, as SGLang's own parsers answer
    assert results["content"] == (f"Checking.\n{broken}", ["get_time"])
    assert results["drop"] == ("Checking.", ["get_time"])
    # streamed with the default policy: the text before the broken call went out as it came; the broken call's
    # text and the rest follow as content, and nothing of the call went out (its name waits for arguments)
    monkeypatch.setenv("RESPONSE_TEMPLATES_MALFORMED", "raise")
    for step in (1, STEP):
        streamed = _assemble(_stream(tokenizer, QWEN_PREFIX, tools, output, step=step))
        assert streamed == {"reasoning": None, "content": "Checking.\n" + output[output.index(broken):],
                            "calls": []}


def test_an_unknown_policy_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("RESPONSE_TEMPLATES_MALFORMED", "ignore")
    tokenizer = engines._tokenizer(get_template("qwen3"))
    with pytest.raises(ValueError, match="RESPONSE_TEMPLATES_MALFORMED='ignore'"):
        _parsers(tokenizer, QWEN_PREFIX, QWEN_TOOLS)


@pytest.mark.parametrize("name", list_templates())
@pytest.mark.parametrize("policy", ["content", "drop"])
def test_damaged_outputs_follow_the_malformed_policy(name, policy, monkeypatch):
    monkeypatch.setenv("RESPONSE_TEMPLATES_MALFORMED", policy)
    path = DAMAGED / f"{name}.json"
    if not path.exists():
        pytest.skip(f"no damaged corpus for {name}")
    template = get_template(name)
    tokenizer = engines._tokenizer(template)
    for case in json.loads(path.read_text(encoding="utf-8"))["cases"]:
        tools, prefix, output = case.get("tools"), case["prefix"], case["output"]
        try:
            ours = to_openai_message(parse_response(output, template, prefix=prefix, tools=tools, malformed=policy))
        except ValueError:  # not a region the policy applies to: the text as it is
            assert _one_shot(tokenizer, prefix, tools, output)["content"] == (output or None), (name, case["name"])
            continue
        expected = _expected(ours, tools)
        assert _one_shot(tokenizer, prefix, tools, output) == expected, (name, case["name"])
        adapter = OpenAIStreamAdapter(template, prefix, tools=tools, malformed=policy)
        list(adapter.stream([output[i:i + STEP] for i in range(0, len(output), STEP)]))
        assert _assemble(_stream(tokenizer, prefix, tools, output)) == _expected(
            to_openai_message(adapter.message), tools), (name, case["name"])


@pytest.mark.parametrize("policy", ["raise", "content", "drop"])
def test_a_generation_cut_by_the_token_limit_drops_the_unfinished_call(policy, monkeypatch):
    """SGLang's chat server reports finish_reason "length" to the wrappers `register` puts on it (here: the block
    they open); the detectors then drop a call the limit cut off (as `truncated=True` does) rather than read it as
    damaged output."""
    monkeypatch.setenv("RESPONSE_TEMPLATES_MALFORMED", policy)
    tokenizer = engines._tokenizer(get_template("qwen3"))
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    output = ('<think>\nWeather.\n</think>\n\nChecking.\n<tool_call>\n'
              '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call><|im_end|>')
    cut = output[:output.index('"days"')]
    with sglang_plugin.truncated_generation():
        assert _one_shot(tokenizer, QWEN_PREFIX, tools, cut) == {"reasoning": "Weather.", "content": "Checking.",
                                                                  "calls": []}
        streamed = _assemble(_stream(tokenizer, QWEN_PREFIX, tools, cut))
    assert (streamed["reasoning"], streamed["content"]) == ("Weather.", "Checking.")
    # what streamed before the cut stays sent: with "raise", the call's name and its first complete argument
    assert streamed["calls"] == ([{"name": "get_weather", "arguments": '{"city": "Paris"'}] if policy == "raise"
                                 else [])
    # not cut by the limit, the same text is an output that ended there: damaged (a call that does not parse), so
    # with "raise" the whole text and with "content" the call's text are the content ("drop" leaves the call out)
    one_shot = _one_shot(tokenizer, QWEN_PREFIX, tools, cut)
    assert one_shot["calls"] == []
    assert one_shot["content"] == {"raise": cut, "content": "Checking.\n" + cut[cut.index("<tool_call>"):],
                                   "drop": "Checking."}[policy]


def test_the_wrappers_pass_the_finish_reason_on():
    """The wrappers `register` puts on SGLang's chat server set the cut from the finish reason it passes (a dict in
    the one-shot path, its type in the streaming one), for the duration of the call."""
    import asyncio

    seen = []

    def process(self, text, tools, finish_reason, tool_choice=None):
        seen.append(sglang_plugin._truncated.get())
        return text

    async def generate(self, content, index, request, created, stream_offsets, reasoning_parser_dict, parser_dict,
                       has_tool_calls, choice_logprobs, finish_reason_type, *rest):
        seen.append(sglang_plugin._truncated.get())
        yield content

    wrapped = sglang_plugin._reporting(process, "finish_reason")
    assert wrapped(None, "t", [], {"type": "length"}) == "t"
    wrapped(None, "t", [], finish_reason={"type": "stop"})
    streamed = sglang_plugin._reporting(generate, "finish_reason_type")

    async def drain(reason):
        return [item async for item in streamed(None, "c", 0, None, 0, {}, {}, {}, {}, None,
                                                finish_reason_type=reason)]

    assert asyncio.run(drain("length")) == ["c"]
    assert asyncio.run(drain(None)) == ["c"]
    assert seen == [True, False, True, False]
    assert sglang_plugin._truncated.get() is False  # reset after each call


def test_register_wraps_the_chat_server_where_it_can():
    sglang_plugin.register()
    why = sglang_plugin.truncation_unavailable()
    if "cannot be imported" in why:  # a parser-only environment (CI installs only what the parsers import)
        pytest.skip(why)
    from sglang.srt.entrypoints.openai.serving_chat import OpenAIServingChat

    assert why == ""
    assert getattr(OpenAIServingChat._process_tool_calls, "_response_templates", False)
    assert getattr(OpenAIServingChat._generate_stream_content, "_response_templates", False)


def test_strict_tools_are_refused(monkeypatch):
    monkeypatch.delenv("RESPONSE_TEMPLATES_MALFORMED", raising=False)
    tokenizer = engines._tokenizer(get_template("qwen3"))
    tools = [{"type": "function", "function": {**QWEN_TOOLS[0]["function"], "strict": True}}]
    _, tool_parser, _ = _parsers(tokenizer, QWEN_PREFIX, tools)
    with pytest.raises(ValueError, match="strict tools are not supported with --tool-call-parser response_templates"):
        tool_parser.get_structure_constraint("auto", parallel_tool_calls=True)


def test_a_tokenizer_without_a_template_fails_at_startup_with_the_reason():
    tokenizer = engines._tokenizer(None)
    with pytest.raises(ValueError, match="no response_template in its configuration"):
        _parsers(tokenizer, "", QWEN_TOOLS)


def test_the_names_are_offered_by_sglangs_argument_parser():
    """`sglang serve --help` lists the parsers SGLang's tables hold once the plugin registered them."""
    from sglang.srt import server_args

    sglang_plugin.register()
    assert NAME in server_args._tool_call_parser_choices()
    assert NAME in server_args._reasoning_parser_choices()


def test_sglang_loads_the_plugin_through_its_entry_point(monkeypatch):
    """SGLang's own plugin loader (run in its processes before the arguments are read) finds this package's
    `sglang.srt.plugins` entry point and registers both names."""
    from importlib.metadata import entry_points

    from sglang.srt import plugins
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    ours = [e for e in entry_points(group="sglang.srt.plugins") if e.value.startswith("response_templates.")]
    if not ours:
        pytest.skip("response-templates is not installed with its entry points here (run from a source tree)")
    monkeypatch.delitem(FunctionCallParser.ToolCallParserEnum, NAME, raising=False)
    monkeypatch.delitem(ReasoningParser.DetectorMap, NAME, raising=False)
    monkeypatch.setattr(plugins, "_plugins_loaded", False)
    monkeypatch.delenv("SGLANG_PLUGINS", raising=False)
    plugins.load_plugins()
    assert NAME in FunctionCallParser.ToolCallParserEnum and NAME in ReasoningParser.DetectorMap

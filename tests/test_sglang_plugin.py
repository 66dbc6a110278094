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
    assert getattr(OpenAIServingChat._process_messages, "_response_templates", False)
    assert sglang_plugin.constraint_unavailable() in ("", sglang_plugin._xgrammar_unfit())


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


# ---------------------------------------------------------------------------------------------------------------
# The tool-call constraint: SGLang's chat server asks the tool-call detector for it while it renders a request
# (OpenAIServingChat._process_messages, which `register` wraps to compile it for the rendered prompt). Its module
# does not import where CI installs SGLang (it needs torchvision), so `_render` below does, with SGLang's own
# classes, what that method does with a tool-call parser; the wrapper is the plugin's.

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city"]}}}
SEARCH = {"type": "function", "function": {"name": "search_web", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}, "safe": {"type": "boolean"},
                                     "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["query", "safe"]}}}
FORCING_TOOLS = [WEATHER, SEARCH]
SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in FORCING_TOOLS}
NAMED = {"type": "function", "function": {"name": "search_web"}}


class _Serving:
    """What the wrapper reads of SGLang's chat server: its parsers' names and its tokenizer manager."""

    def __init__(self, tokenizer, reasoning_parser=NAME, grammar_backend="xgrammar"):
        from types import SimpleNamespace

        self.reasoning_parser = reasoning_parser
        self.tokenizer_manager = SimpleNamespace(tokenizer=tokenizer, config_value=lambda name: grammar_backend)

    def _process_messages(self, request, is_multimodal, *, output_constrained=False):
        """SGLang 0.5.23's steps for a tool-call parser: ask FunctionCallParser for the constraint (the JSON form
        for a forced call when it gives none), render the prompt, record whether the constraint is the template's
        grammar."""
        from sglang.srt.entrypoints.openai.protocol import MessageProcessingResult
        from sglang.srt.function_call.function_call_parser import FunctionCallParser
        from sglang.srt.function_call.utils import get_json_schema_constraint

        parser = FunctionCallParser(request.tools, NAME, tokenizer=self.tokenizer_manager.tokenizer)
        constraint = parser.get_structure_constraint(request.tool_choice,
                                                     parallel_tool_calls=request.parallel_tool_calls)
        if constraint is None and not parser.detector.parses_required_natively() and request.tool_choice != "auto":
            constraint = ("json_schema", get_json_schema_constraint(
                request.tools, request.tool_choice, parallel_tool_calls=request.parallel_tool_calls))
        ids = self.tokenizer_manager.tokenizer.encode(self.prompt, add_special_tokens=False)
        result = MessageProcessingResult(prompt="", prompt_ids=ids, image_data=None, audio_data=None,
                                         video_data=None, modalities=[], stop=[], tool_call_constraint=constraint)
        result.template_tool_call_grammar = constraint is not None and constraint[0] == "structural_tag"
        return result


def _render(template_name, prompt, tool_choice, *, parallel=True, tools=FORCING_TOOLS, **serving):
    """The sampling parameters SGLang's chat server sends its engine for this request, and the request."""
    from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest

    tokenizer = engines._tokenizer(get_template(template_name))
    sglang_plugin.register()
    server = _Serving(tokenizer, **serving)
    server.prompt = prompt
    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=tools,
                                    tool_choice=tool_choice, parallel_tool_calls=parallel)
    result = sglang_plugin._rendering_wrapper(_Serving._process_messages)(server, request, False)
    params = request.to_sampling_params(stop=[], model_generation_config={},
                                        tool_call_constraint=result.tool_call_constraint)
    return params, request, result, tokenizer


class _Walker:
    """Random walks through what a compiled grammar admits, over single characters plus the grammar's marker texts
    as whole tokens (picked often, so that markers are tried everywhere)."""

    def __init__(self, tag):
        import xgrammar

        markers, ends = set(), set()

        def collect(node):
            if isinstance(node, dict):
                markers.update(v for k, v in node.items() if k in ("begin", "end", "value") and isinstance(v, str))
                ends.update(node["end"] if isinstance(node.get("end"), list) else [node.get("end")])
                markers.update(t for k in ("triggers", "excludes") for t in node.get(k) or () if isinstance(t, str))
                for value in node.values():
                    collect(value)
            elif isinstance(node, list):
                for item in node:
                    collect(item)

        collect(tag)
        chars = [chr(code) for code in range(32, 127)] + ["\n", "é"]
        self.vocab = chars + sorted(m for m in markers if m and m not in chars) + ["<eos>"]
        self.markers = set(range(len(chars), len(self.vocab) - 1))
        self.eos = len(self.vocab) - 1
        # late in a walk these are favoured, so that it ends (openers are not: a walk could open calls forever)
        self.closing = {self.vocab.index(c) for c in '"}]>'} | {self.eos} | {
            self.vocab.index(end) for end in ends if isinstance(end, str) and end in self.vocab}
        info = xgrammar.TokenizerInfo(self.vocab, stop_token_ids=[self.eos])
        self.grammar = xgrammar.GrammarCompiler(info).compile_structural_tag(json.dumps(tag))

    def walk(self, rng, steps=3000):
        import numpy
        import xgrammar

        matcher = xgrammar.GrammarMatcher(self.grammar)
        mask = numpy.zeros(xgrammar.get_bitmask_shape(1, len(self.vocab)), dtype=numpy.int32)
        out = []
        for step in range(steps):
            if matcher.is_terminated():
                return "".join(out)
            matcher.fill_next_token_bitmask(mask)
            bits = numpy.unpackbits(mask[0].view(numpy.uint8), bitorder="little")[:len(self.vocab)]
            allowed = [int(token) for token in numpy.nonzero(bits)[0]]
            assert allowed, f"the grammar admits nothing after {''.join(out)!r}"
            weights = [(15 if token in self.markers else 1) * (40 if step > 120 and token in self.closing else 1)
                       for token in allowed]
            token = rng.choices(allowed, weights)[0]
            if token == self.eos:
                return "".join(out)
            assert matcher.accept_token(token)
            out.append(self.vocab[token])
        return None  # too long to judge


STRICT_TOOLS = [{**tool, "function": {**tool["function"], "strict": True}} for tool in FORCING_TOOLS]
FORCING = [("required", True, FORCING_TOOLS), ("required", False, FORCING_TOOLS), (NAMED, True, FORCING_TOOLS),
           ("auto", False, FORCING_TOOLS), ("auto", True, STRICT_TOOLS)]
CONSTRAINED_TEMPLATES = ["qwen3", "qwen3-coder", "glm", "kimi-k2"]


def _xgrammar_or_skip():
    pytest.importorskip("xgrammar")
    pytest.importorskip("jsonschema")
    why = sglang_plugin._xgrammar_unfit()
    if why:
        if os.environ.get("CI", "").lower() == "true":
            raise RuntimeError(f"CI's SGLang environment must have an xgrammar that takes the constraint: {why}")
        pytest.skip(why)


@pytest.mark.parametrize("name", CONSTRAINED_TEMPLATES)
@pytest.mark.parametrize("tool_choice, parallel, tools", FORCING,
                         ids=["required", "required-one", "named", "auto-one", "auto-strict"])
def test_the_constraint_admits_only_valid_calls_of_the_right_tools(name, tool_choice, parallel, tools, monkeypatch):
    """The structural tag SGLang's engine gets for a forced, single-call or strict request, walked at random:
    every string it admits is read by our parser (and by SGLang's tool-call parser, as the chat server makes it for
    a request whose constraint was the template's grammar) as calls of the tools asked for, with schema-valid
    arguments."""
    import random

    import jsonschema
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    _xgrammar_or_skip()
    monkeypatch.delenv("RESPONSE_TEMPLATES_MALFORMED", raising=False)
    template = get_template(name)
    corpus_prefixes = [c["prefix"] for c in json.loads((CORPORA / f"{name}.json").read_text())["cases"]]
    prompt = next((p for p in corpus_prefixes if p), "")
    params, request, result, tokenizer = _render(name, prompt, tool_choice, parallel=parallel, tools=tools)
    assert "json_schema" not in params and result.template_tool_call_grammar
    tag = json.loads(params["structural_tag"])  # what SGLang's engine compiles
    walker = _Walker(tag)
    rng = random.Random(f"{name}{tool_choice}{parallel}{tools is STRICT_TOOLS}")
    walked = 0
    for _ in range(12):
        text = walker.walk(rng)
        if text is None:
            continue
        walked += 1
        where = f"{name} tool_choice={tool_choice} parallel={parallel}: {text!r}"
        message = parse_response(text, template, prefix=prompt, tools=FORCING_TOOLS)
        calls = message.get("tool_calls") or []
        if tool_choice != "auto":
            assert calls, where
        if not parallel:
            assert len(calls) <= 1, where
        for call in calls:
            function = call["function"]
            if tool_choice == NAMED:
                assert function["name"] == "search_web", where
            assert function["name"] in SCHEMAS, where
            jsonschema.validate(function["arguments"], SCHEMAS[function["name"]])
        # SGLang's parse of the same output: the detector owns the format of a forced call under our constraint
        parser = FunctionCallParser(request.tools, NAME, tokenizer=tokenizer, tool_choice=request.tool_choice,
                                    prefix=prompt, constrained=True)
        assert parser.owns_tool_format() or tool_choice == "auto"
        _, items = parser.parse_non_stream(text)
        assert [(i.name, json.loads(i.parameters)) for i in items] == [
            (c["function"]["name"], c["function"]["arguments"]) for c in calls], where
    assert walked >= 6


def test_the_constraint_follows_the_rendered_prompt():
    """A prompt that opens the reasoning (Qwen3's chat template writes `<think>`): the constraint starts inside
    the reasoning, so the model reasons and then calls; compiled without the prompt it would not admit that."""
    _xgrammar_or_skip()
    import xgrammar

    opened = QWEN_PREFIX + "<think>\n"
    output = ('Let me look.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
              '</tool_call>')
    admitted = {}
    for prompt in (opened, QWEN_PREFIX):
        params, _, _, _ = _render("qwen3", prompt, "required")
        walker = _Walker(json.loads(params["structural_tag"]))
        matcher = xgrammar.GrammarMatcher(walker.grammar)
        admitted[prompt] = all(matcher.accept_token(walker.vocab.index(c)) for c in output) and matcher.accept_token(
            walker.eos)
    assert admitted == {opened: True, QWEN_PREFIX: False}
    message = parse_response(output, get_template("qwen3"), prefix=opened, tools=FORCING_TOOLS)
    assert message["reasoning_content"] == "Let me look." and message["tool_calls"][0]["function"]["name"] == \
        "get_weather"


def test_an_old_xgrammar_gets_no_constraint_in_the_model_format(monkeypatch, caplog):
    """With xgrammar older than 0.2.9 (SGLang 0.5.23 pins 0.2.7, whose structural tags drop `excludes`, letting
    marker text into arguments): a forced call falls back to SGLang's JSON form, which SGLang parses itself, with
    the reason logged; strict tools and parallel_tool_calls=false under "auto" are refused (HTTP 400)."""
    import logging

    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    monkeypatch.setattr(sglang_plugin, "xgrammar_release", lambda: "0.2.7")
    assert sglang_plugin.constraint_unavailable().startswith("xgrammar 0.2.7 is installed; the constraint needs "
                                                             "xgrammar>=0.2.9")
    with caplog.at_level(logging.WARNING, logger="response_templates.serving"):
        params, request, result, tokenizer = _render("qwen3", QWEN_PREFIX, "required")
    assert "structural_tag" not in params and json.loads(params["json_schema"])["type"] == "array"
    assert not result.template_tool_call_grammar
    assert "xgrammar 0.2.7 is installed; the constraint needs xgrammar>=0.2.9" in caplog.text
    parser = FunctionCallParser(request.tools, NAME, tokenizer=tokenizer, tool_choice="required",
                                prefix=QWEN_PREFIX, constrained=False)
    assert not parser.owns_tool_format()  # SGLang reads the JSON form itself
    for choice, parallel, tools, asked in (
            ("auto", False, FORCING_TOOLS, "parallel_tool_calls=false"),
            ("auto", True, [{**WEATHER, "function": {**WEATHER["function"], "strict": True}}],
             "strict tool 'get_weather'")):
        with pytest.raises(ValueError, match=f"{asked} with --tool-call-parser response_templates: xgrammar 0.2.7 "
                                             "is installed; the constraint needs xgrammar>=0.2.9"):
            _render("qwen3", QWEN_PREFIX, choice, parallel=parallel, tools=tools)


def test_requests_the_constraint_cannot_serve(monkeypatch):
    """A template the compiler cannot express, another reasoning parser, another grammar backend: a forced call
    gets SGLang's JSON form, "auto" with one call at most is refused with the reason; plain "auto" is not
    constrained at all."""
    _xgrammar_or_skip()
    mixed = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"key": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}}}]
    for template_name, tools, serving, why in (
            ("minimax_m3", mixed, {}, "the model's tool calls cannot be constrained: tool_calls of this template "
                                      "cannot be compiled: nested-element values whose schema combines types"),
            ("qwen3", FORCING_TOOLS, {"reasoning_parser": "qwen3"}, "the server's reasoning parser is 'qwen3'"),
            ("qwen3", FORCING_TOOLS, {"grammar_backend": "llguidance"}, "the server's grammar backend is 'llguidance'")):
        params, _, result, _ = _render(template_name, "", "required", tools=tools, **serving)
        assert "structural_tag" not in params and "json_schema" in params, template_name
        assert not result.template_tool_call_grammar
        with pytest.raises(ValueError, match=f"parallel_tool_calls=false with --tool-call-parser "
                                             f"response_templates: {why}"):
            _render(template_name, "", "auto", parallel=False, tools=tools, **serving)
    params, _, result, _ = _render("qwen3", QWEN_PREFIX, "auto")
    assert "structural_tag" not in params and "json_schema" not in params


def test_without_the_wrapper_the_constraint_is_not_applied(monkeypatch):
    """SGLang asking outside its chat server's _process_messages (a release without it): the prompt is unknown, so
    a forced call is left to SGLang's JSON form and a strict tool is refused, saying so."""
    _xgrammar_or_skip()
    monkeypatch.delenv("RESPONSE_TEMPLATES_MALFORMED", raising=False)
    tokenizer = engines._tokenizer(get_template("qwen3"))
    _, tool_parser, _ = _parsers(tokenizer, QWEN_PREFIX, FORCING_TOOLS)
    assert tool_parser.get_structure_constraint("required")[0] == "json_schema"
    strict = [{"type": "function", "function": {**QWEN_TOOLS[0]["function"], "strict": True}}]
    _, tool_parser, _ = _parsers(tokenizer, QWEN_PREFIX, strict)
    with pytest.raises(ValueError, match="strict tool 'write_note' with --tool-call-parser response_templates: "
                                         "the prompt is not known"):
        tool_parser.get_structure_constraint("auto", parallel_tool_calls=True)


def test_a_tag_the_installed_xgrammar_would_change_is_refused():
    """SGLang hands its engine xgrammar's StructuralTag serialized again: a field that model does not keep (as
    0.2.7's drops `excludes` of JSON schemas) must not be lost silently."""
    pytest.importorskip("xgrammar")
    from response_templates.integrations.grammar import GrammarError

    tag = {"type": "structural_tag", "format": {"type": "json_schema", "json_schema": {"type": "object"},
                                                "not_a_field": ["</tool_call>"]}}
    with pytest.raises(GrammarError, match="drops fields of the constraint"):
        sglang_plugin._structural_tag(json.dumps(tag))
    del tag["format"]["not_a_field"]
    assert sglang_plugin._structural_tag(json.dumps(tag)).model_dump(by_alias=True)["format"]["type"] == "json_schema"

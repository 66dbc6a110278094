"""The vLLM plugin (response_templates.integrations.vllm_plugin), driven through vLLM's own parser manager and protocol classes.

For every case of every library template: the message vLLM's serving layer gets from `parse` is ours
(`to_openai_message(parse_response(...))`), and the deltas of `parse_delta`, fed a few tokens at a time and
assembled the way clients do, give the same message, with tool-call arguments sent in as many pieces as
`OpenAIStreamAdapter` sends them. Damaged outputs follow RESPONSE_TEMPLATES_MALFORMED; a forced tool choice, a
strict tool or parallel_tool_calls=false put the tool-call constraint on the request. Skipped, with the reason, when
vLLM is absent; failing on CI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from response_templates import parse_response
from response_templates.authoring import engines
from response_templates.integrations import vllm_plugin
from response_templates.library import get_template, list_templates
from response_templates.integrations.openai_adapter import OpenAIStreamAdapter, to_openai_message

CORPORA = Path(__file__).resolve().parent / "data" / "corpora"
DAMAGED = Path(__file__).resolve().parent / "data" / "damaged"
STEP = 3  # tokens per streamed delta

_missing = vllm_plugin.host_unavailable()
if _missing and os.environ.get("CI", "").lower() == "true":
    raise RuntimeError(f"a vLLM that can host the plugin must be installed for these tests on CI: {_missing}")
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"no vLLM here that can host the plugin: {_missing}")


def _give_prompt(parser, prompt_ids):
    """Give the parser the prompt as this release's serving layer does: set_prompt_token_ids where vLLM has it,
    else is_reasoning_end, which the chat-completions server calls with the prompt on the request's parser."""
    if vllm_plugin._api().gives_prompt:
        parser.set_prompt_token_ids(prompt_ids)
    else:
        parser.is_reasoning_end(prompt_ids)


def _parser_cls(tokenizer, *, reasoning=True, tools=True):
    ParserManager = vllm_plugin._api().ParserManager
    vllm_plugin.register()
    vllm_plugin.register()  # safe twice
    return ParserManager.get_parser(
        tool_parser_name="response_templates" if tools else None,
        reasoning_parser_name="response_templates" if reasoning else None,
        enable_auto_tools=True, model_name="test", tokenizer=tokenizer,
    )


def _request(tools):
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    return ChatCompletionRequest(model="test", messages=[{"role": "user", "content": "hi"}], tools=tools or None)


def _assemble(deltas):
    message = {"reasoning": "", "content": "", "calls": {}}
    for delta in deltas:
        if delta is None:
            continue
        message["reasoning"] += delta.reasoning or ""
        message["content"] += delta.content or ""
        for call in delta.tool_calls or ():
            slot = message["calls"].setdefault(call.index, {"id": None, "name": None, "arguments": ""})
            slot["id"] = slot["id"] or call.id
            if call.function is not None:
                slot["name"] = slot["name"] or call.function.name
                slot["arguments"] += call.function.arguments or ""
    calls = [{"name": c["name"], "arguments": c["arguments"]} for _, c in sorted(message["calls"].items())]
    return {"reasoning": message["reasoning"] or None, "content": message["content"] or None, "calls": calls}


def _one_shot(parser, output, request, output_ids):
    """The plugin's one-shot parse, in the shape `_expected` gives."""
    reasoning, content, calls = parser.parse(output, request, enable_auto_tools=True, model_output_token_ids=output_ids)
    return {"reasoning": reasoning or None, "content": content or None,
            "calls": [{"name": c.name, "arguments": c.arguments} for c in calls or ()]}


def _expected(openai):
    calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
             for c in openai.get("tool_calls") or ()]
    return {"reasoning": openai.get("reasoning_content"), "content": openai.get("content"), "calls": calls}


def _stream(parser, tokenizer, request, prompt_ids, output_ids, step=STEP):
    """parse_delta over the output, `step` tokens at a time, as vLLM's serving layer calls it."""
    deltas = []
    for start in range(0, len(output_ids), step):
        ids = output_ids[start:start + step]
        deltas.append(parser.parse_delta(tokenizer.decode(ids), ids, request, prompt_ids,
                                         finished=start + step >= len(output_ids)))
    if not output_ids:
        deltas.append(parser.parse_delta("", [], request, prompt_ids, finished=True))
    return deltas


def _argument_pieces(deltas):
    """Per call index, how many deltas carried a piece of its arguments."""
    counts = {}
    for delta in deltas:
        for index in {c.index for c in (delta.tool_calls if delta else None) or () if c.function and
                      c.function.arguments}:
            counts[index] = counts.get(index, 0) + 1
    return counts


def _adapter_argument_pieces(template, case, tokenizer, prompt_ids, output_ids):
    """The same count for OpenAIStreamAdapter streaming arguments early (may_truncate=False), fed the same pieces."""
    adapter = OpenAIStreamAdapter(template, prompt_ids, tools=case.get("tools"), tokenizer=tokenizer,
                                  may_truncate=False)
    counts = {}
    for start in range(0, len(output_ids), STEP):
        chunks = adapter.feed(output_ids[start:start + STEP])
        if start + STEP >= len(output_ids):
            chunks += adapter.finish()
        indexes = {call["index"] for chunk in chunks for choice in chunk["choices"]
                   for call in choice["delta"].get("tool_calls") or () if call.get("function", {}).get("arguments")}
        for index in indexes:
            counts[index] = counts.get(index, 0) + 1
    return counts


@pytest.mark.parametrize("name", list_templates())
def test_every_corpus_case_one_shot_and_streamed(name, monkeypatch):
    monkeypatch.delenv("RESPONSE_TEMPLATES_MALFORMED", raising=False)
    template = get_template(name)
    cases = json.loads((CORPORA / f"{name}.json").read_text(encoding="utf-8"))["cases"]
    tokenizer = engines._tokenizer(template)
    parser_cls = _parser_cls(tokenizer)
    for case in cases:
        prompt_ids = tokenizer.encode(case["prefix"], add_special_tokens=False)
        output_ids = tokenizer.encode(case["output"], add_special_tokens=False)
        try:
            ours = to_openai_message(parse_response(case["output"], template, prefix=case["prefix"],
                                                    tools=case.get("tools")))
        except ValueError:  # damaged output: the server answers with the text as it is, it does not fail
            request = _request(case.get("tools"))
            parser = parser_cls(tokenizer, request.tools)
            _give_prompt(parser, prompt_ids)
            assert parser.parse(case["output"], request, True, output_ids) == (None, case["output"], None)
            continue
        expected = _expected(ours)
        if not case.get("tools"):
            expected["calls"] = []  # no tools in the request: tool_choice is "none", vLLM parses no calls

        request = _request(case.get("tools"))
        parser = parser_cls(tokenizer, request.tools)
        request = parser.adjust_request(request)
        _give_prompt(parser, prompt_ids)
        assert _one_shot(parser, case["output"], request, output_ids) == expected, (name, case["name"])

        deltas = _stream(parser_cls(tokenizer, request.tools), tokenizer, request, prompt_ids, output_ids)
        assert _assemble(deltas) == expected, (name, case["name"])
        if expected["calls"]:  # arguments go out in as many pieces as the adapter sends them while they arrive
            assert _argument_pieces(deltas) == _adapter_argument_pieces(
                template, case, tokenizer, prompt_ids, output_ids), (name, case["name"])


def test_long_arguments_stream_while_the_model_writes_them(monkeypatch):
    monkeypatch.delenv("RESPONSE_TEMPLATES_MALFORMED", raising=False)
    template = get_template("qwen3")
    tokenizer = engines._tokenizer(template)
    tools = [{"type": "function", "function": {"name": "write_note", "parameters": {"type": "object", "properties": {
        "title": {"type": "string"}, "body": {"type": "string"}, "tags": {"type": "array"}}}}}]
    arguments = {"title": "Trip", "body": "Paris, " * 40 + "then Lyon.", "tags": ["travel", "france"]}
    call = json.dumps({"name": "write_note", "arguments": arguments})
    output = f"<think>\nA note.\n</think>\n\n<tool_call>\n{call}\n</tool_call><|im_end|>"
    prompt_ids = tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False)
    output_ids = tokenizer.encode(output, add_special_tokens=False)
    close_at = len(tokenizer.encode(output[:output.index("\n</tool_call>")], add_special_tokens=False))

    request = _request(tools)
    parser = _parser_cls(tokenizer)(tokenizer, request.tools)
    sent_before_close, deltas = "", []
    for position, token in enumerate(output_ids):  # one token at a time, as a server streams
        delta = parser.parse_delta(tokenizer.decode([token]), [token], request, prompt_ids,
                                   finished=position == len(output_ids) - 1)
        deltas.append(delta)
        if position < close_at:
            sent_before_close += "".join(c.function.arguments or "" for c in (delta.tool_calls if delta else ())
                                         if c.function)
    assert _assemble(deltas) == {"reasoning": "A note.", "content": None,
                                 "calls": [{"name": "write_note", "arguments": json.dumps(arguments)}]}
    assert _argument_pieces(deltas)[0] >= 3  # title, body, tags: each once complete
    assert sent_before_close.startswith('{"title": "Trip", "body": "Paris, Paris, ')


@pytest.mark.parametrize("policy", ["content", "drop"])
@pytest.mark.parametrize("name", list_templates())
def test_damaged_outputs_follow_the_malformed_policy(name, policy, monkeypatch):
    """RESPONSE_TEMPLATES_MALFORMED=content|drop: `parse` gives the core parser's message under that policy, and
    the assembled stream gives the same message (calls are then sent whole at their close)."""
    monkeypatch.setenv("RESPONSE_TEMPLATES_MALFORMED", policy)
    path = DAMAGED / f"{name}.json"
    if not path.exists():
        pytest.skip(f"no damaged corpus for {name}")
    template = get_template(name)
    tokenizer = engines._tokenizer(template)
    parser_cls = _parser_cls(tokenizer)
    for case in json.loads(path.read_text(encoding="utf-8"))["cases"]:
        prompt_ids = tokenizer.encode(case["prefix"], add_special_tokens=False)
        output_ids = tokenizer.encode(case["output"], add_special_tokens=False)
        request = _request(case.get("tools"))
        parser = parser_cls(tokenizer, request.tools)
        assert parser.malformed == policy
        _give_prompt(parser, prompt_ids)
        try:
            ours = to_openai_message(parse_response(case["output"], template, prefix=case["prefix"],
                                                    tools=case.get("tools"), malformed=policy))
        except ValueError:  # not a region the policy applies to (e.g. a cut the format cannot end)
            assert parser.parse(case["output"], request, True, output_ids) == (None, case["output"], None)
            continue
        expected = _expected(ours)
        if not case.get("tools"):
            expected["calls"] = []  # no tools in the request: vLLM parses no calls
        assert _one_shot(parser, case["output"], request, output_ids) == expected, (name, case["name"])
        deltas = _stream(parser_cls(tokenizer, request.tools), tokenizer, request, prompt_ids, output_ids)
        # The core's own streamed parse, fed the same pieces: for Llama 3.1, Llama 4 and Granite 3 the kept text of
        # a malformed call may lack the end-of-turn marker that one-shot parsing keeps (README, "Damaged output").
        adapter = OpenAIStreamAdapter(template, prompt_ids, tools=case.get("tools"), tokenizer=tokenizer,
                                      malformed=policy)
        list(adapter.stream([output_ids[i:i + STEP] for i in range(0, len(output_ids), STEP)]))
        streamed = _expected(to_openai_message(adapter.message))
        if not case.get("tools"):
            streamed["calls"] = []
        if streamed != expected:
            assert {**streamed, "content": None} == {**expected, "content": None}, (name, case["name"])
            assert name in ("llama3.1", "llama4", "granite-3"), (name, case["name"])
        assert _assemble(deltas) == streamed, (name, case["name"])


def test_a_broken_call_under_each_policy(monkeypatch):
    template = get_template("qwen3")
    tokenizer = engines._tokenizer(template)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
             {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]
    broken = '<tool_call>\n{"name": "get_weather", "arguments": {"city": Paris}}\n</tool_call>'
    output = f'Checking.\n{broken}\n<tool_call>\n{{"name": "get_time", "arguments": {{}}}}\n</tool_call><|im_end|>'
    prompt_ids = tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False)
    output_ids = tokenizer.encode(output, add_special_tokens=False)
    results = {}
    for policy in ("raise", "content", "drop"):
        monkeypatch.setenv("RESPONSE_TEMPLATES_MALFORMED", policy)
        request = _request(tools)
        parser = _parser_cls(tokenizer)(tokenizer, request.tools)
        _give_prompt(parser, prompt_ids)
        reasoning, content, calls = parser.parse(output, request, True, output_ids)
        results[policy] = (content, [c.name for c in calls or ()])
        streamed = _assemble(_stream(_parser_cls(tokenizer)(tokenizer, request.tools), tokenizer, request,
                                     prompt_ids, output_ids))
        if policy != "raise":
            assert (streamed["content"], [c["name"] for c in streamed["calls"]]) == results[policy]
    assert results["raise"] == (output, [])  # the whole output as it is, as vLLM's own parsers answer
    # streamed, the text before the broken call is parsed as it came; the broken call's text and the rest follow
    # as content. The call broke before any argument was complete, so nothing of it went out as a call: its
    # name waits for its first arguments.
    monkeypatch.setenv("RESPONSE_TEMPLATES_MALFORMED", "raise")
    request = _request(tools)
    for step in (1, STEP):
        streamed = _assemble(_stream(_parser_cls(tokenizer)(tokenizer, request.tools), tokenizer, request,
                                     prompt_ids, output_ids, step=step))
        assert streamed["calls"] == []
        assert streamed["content"] == "Checking.\n" + output[output.index(broken):]
    assert results["content"] == (f"Checking.\n{broken}", ["get_time"])
    assert results["drop"] == ("Checking.", ["get_time"])


def test_a_call_goes_out_with_its_first_arguments_never_as_a_bare_name(monkeypatch):
    """Default policy, arguments streamed early: a call's id and name go out in the same delta as its first final
    arguments. A call that breaks after some arguments went out keeps them (a delta cannot be taken back): the
    client then has a call whose arguments are not complete JSON, and the call's text follows as content."""
    monkeypatch.delenv("RESPONSE_TEMPLATES_MALFORMED", raising=False)
    template = get_template("qwen3")
    tokenizer = engines._tokenizer(template)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    prompt_ids = tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False)
    request = _request(tools)
    good = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>'
            '<|im_end|>')
    broken = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": three}}\n</tool_call>'
    for output in (good, broken + "<|im_end|>"):
        output_ids = tokenizer.encode(output, add_special_tokens=False)
        deltas = _stream(_parser_cls(tokenizer)(tokenizer, request.tools), tokenizer, request, prompt_ids,
                         output_ids, step=1)
        firsts = [call for delta in deltas for call in (delta.tool_calls if delta else ()) if call.id]
        assert len(firsts) == 1 and firsts[0].function.name == "get_weather"
        assert firsts[0].function.arguments == '{"city": "Paris"'  # the name waited for the first argument
        assembled = _assemble(deltas)
        if output == good:
            assert assembled == {"reasoning": None, "content": None,
                                 "calls": [{"name": "get_weather", "arguments": '{"city": "Paris", "days": 3}'}]}
        else:
            assert assembled == {"reasoning": None, "content": broken + "<|im_end|>",
                                 "calls": [{"name": "get_weather", "arguments": '{"city": "Paris"'}]}


@pytest.mark.parametrize("policy", ["raise", "content", "drop"])
def test_a_generation_cut_by_the_token_limit_drops_the_unfinished_call(policy, monkeypatch):
    """vLLM does not tell parsers that a generation hit max_tokens: the plugin sees it from the request, so a call
    cut off there is dropped (as `truncated=True` does) rather than read as damaged output."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    monkeypatch.setenv("RESPONSE_TEMPLATES_MALFORMED", policy)
    template = get_template("qwen3")
    tokenizer = engines._tokenizer(template)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    output = ('<think>\nWeather.\n</think>\n\nChecking.\n<tool_call>\n'
              '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call><|im_end|>')
    prompt_ids = tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False)
    cut_ids = tokenizer.encode(output, add_special_tokens=False)[:output.index('"days"')]  # one byte per token
    cut = tokenizer.decode(cut_ids)

    def request(limit):
        return ChatCompletionRequest(model="test", messages=[{"role": "user", "content": "hi"}], tools=tools,
                                     max_completion_tokens=limit)

    parser_cls = _parser_cls(tokenizer)
    parser = parser_cls(tokenizer, request(len(cut_ids)).tools)
    _give_prompt(parser, prompt_ids)
    assert parser.parse(cut, request(len(cut_ids)), True, cut_ids) == ("Weather.", "Checking.", None)
    streamed = _assemble(_stream(parser_cls(tokenizer, tools), tokenizer, request(len(cut_ids)), prompt_ids, cut_ids))
    assert (streamed["reasoning"], streamed["content"]) == ("Weather.", "Checking.")
    # what streamed before the cut stays sent: with "raise", the call's name and its first complete argument
    assert streamed["calls"] == ([{"name": "get_weather", "arguments": '{"city": "Paris"'}] if policy == "raise"
                                 else [])
    # under the limit, the same text is an output that ended there: damaged (a call that does not parse), so with
    # "raise" the whole text and with "content" the call's text are the content ("drop" leaves the call out anyway)
    parser = parser_cls(tokenizer, tools)
    _give_prompt(parser, prompt_ids)
    reasoning, content, calls = parser.parse(cut, request(len(cut_ids) + 10), True, cut_ids)
    assert calls is None
    assert content == {"raise": cut, "content": "Checking.\n" + cut[cut.index("<tool_call>"):],
                       "drop": "Checking."}[policy]


def test_a_bad_policy_fails_naming_the_variable(monkeypatch):
    monkeypatch.setenv("RESPONSE_TEMPLATES_MALFORMED", "repair")
    tokenizer = engines._tokenizer(get_template("qwen3"))
    # vLLM's parser manager makes one parser at startup: the server does not start
    with pytest.raises(TypeError, match="RESPONSE_TEMPLATES_MALFORMED='repair'.*raise, content, drop"):
        _parser_cls(tokenizer)


# A Qwen-style chat template: enable_thinking=false prefills an empty reasoning block, as Qwen3's does.
QWEN_CHAT = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
             "{% if add_generation_prompt %}<|im_start|>assistant\n"
             "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}")
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}, "days": {"type": "integer"}},
    "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}
WEATHER_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TIME_CALL = '<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>'


def _admits(structured_outputs, text) -> bool:
    """Whether the request's constraint (a structural tag, compiled by the xgrammar vLLM uses) admits `text`."""
    import xgrammar
    from xgrammar.testing import _is_grammar_accept_string

    assert structured_outputs is not None and structured_outputs.structural_tag, "the request is not constrained"
    return _is_grammar_accept_string(xgrammar.Grammar.from_structural_tag(structured_outputs.structural_tag), text)


def _adjusted(template_name, *, reasoning=True, chat_template_kwargs=None, **fields):
    """A chat-completions request (fields as a client sends them) after the parser's adjust_request, which vLLM's
    renderer calls on a parser made with the request's tools and chat_template_kwargs."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    tokenizer = engines._tokenizer(get_template(template_name))
    tokenizer.chat_template = QWEN_CHAT
    fields.setdefault("tools", [WEATHER, TIME])
    request = ChatCompletionRequest(model="test", messages=[{"role": "user", "content": "Weather in Paris?"}],
                                    **fields)
    kwargs = {"add_generation_prompt": True, **(chat_template_kwargs or {})}
    parser = _parser_cls(tokenizer, reasoning=reasoning)(tokenizer, request.tools, chat_template_kwargs=kwargs)
    return parser.adjust_request(request)


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_a_forced_tool_choice_constrains_the_output_to_calls(choice):
    """vLLM's renderer calls adjust_request for every request: a forced choice gets a structural tag that admits
    only calls (of the named tool, when one is named) in the model's own format, with valid arguments."""
    assert _parser_cls(engines._tokenizer(get_template("qwen3"))).always_adjust_request
    request = _adjusted("qwen3", tool_choice=choice, chat_template_kwargs={"enable_thinking": False})
    assert request.skip_special_tokens is False
    constraint = request.structured_outputs
    assert _admits(constraint, WEATHER_CALL)
    assert _admits(constraint, WEATHER_CALL + "\n" + WEATHER_CALL)  # parallel calls are allowed by default
    assert not _admits(constraint, "Let me check.")  # a call is required
    assert not _admits(constraint, WEATHER_CALL.replace("Paris", "Lyon"))  # the schema's enum
    assert not _admits(constraint, WEATHER_CALL.replace('{"city": "Paris"}', "{}"))  # a required property
    assert _admits(constraint, TIME_CALL) == (choice == "required")  # a named choice admits that tool only


def test_parallel_tool_calls_false_allows_at_most_one_call():
    for choice in ("required", "auto"):
        constraint = _adjusted("qwen3", tool_choice=choice, parallel_tool_calls=False,
                               chat_template_kwargs={"enable_thinking": False}).structured_outputs
        assert _admits(constraint, WEATHER_CALL)
        assert not _admits(constraint, WEATHER_CALL + "\n" + TIME_CALL)
        assert _admits(constraint, "No call needed.") == (choice == "auto")


@pytest.mark.parametrize("where", ["function", "responses"])
def test_strict_tools_constrain_the_calls_and_leave_the_choice_to_the_model(where):
    """A strict tool (strict=true in the function or, in the Responses API, beside it) under tool_choice "auto":
    the model may answer in text, but a call it opens must be valid."""
    tokenizer = engines._tokenizer(get_template("qwen3"))
    parser_cls = _parser_cls(tokenizer)
    weather = {**WEATHER["function"]}
    if where == "function":
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

        tools = [TIME, {"type": "function", "function": {**weather, "strict": True}}]
        make = lambda **extra: ChatCompletionRequest(  # noqa: E731
            model="test", messages=[{"role": "user", "content": "hi"}], tools=tools, **extra)
    else:
        from vllm.entrypoints.openai.responses.protocol import ResponsesRequest

        tools = [{"type": "function", **TIME["function"]}, {"type": "function", **weather, "strict": True}]
        make = lambda **extra: ResponsesRequest(model="test", input="hi", tools=tools, **extra)  # noqa: E731
    request = parser_cls(tokenizer, tools).adjust_request(make())
    assert _admits(request.structured_outputs, "Sure. " + WEATHER_CALL)
    assert _admits(request.structured_outputs, "It is sunny.")
    assert not _admits(request.structured_outputs, "Sure. " + WEATHER_CALL.replace("Paris", "Lyon"))
    assert parser_cls(tokenizer, tools).adjust_request(make(tool_choice="none")).structured_outputs is None


def test_auto_and_none_stay_unconstrained():
    for choice in ("auto", "none"):
        request = _adjusted("qwen3", tool_choice=choice)
        assert request.skip_special_tokens is False and request.structured_outputs is None


def test_the_constraint_follows_the_prompt_and_the_reasoning_parser():
    """The prompt decides where the constraint starts: after an empty reasoning block that enable_thinking=false
    prefilled, the answer is calls only; else the model may first think. With a reasoning parser vLLM applies the
    constraint only once the reasoning is over, so for a template whose prompt leaves the reasoning open (QwQ's
    `<think>\n`) the constraint starts after it; without one it covers the reasoning too."""
    thinking = "<think>\nThe user wants Paris.\n</think>\n\n"
    closed = _adjusted("qwen3", tool_choice="required", chat_template_kwargs={"enable_thinking": False})
    free = _adjusted("qwen3", tool_choice="required")
    assert not _admits(closed.structured_outputs, thinking + WEATHER_CALL)
    assert _admits(free.structured_outputs, thinking + WEATHER_CALL)
    assert _admits(free.structured_outputs, WEATHER_CALL)
    gated = _adjusted("qwq", tool_choice="required")
    whole = _adjusted("qwq", tool_choice="required", reasoning=False)
    assert _admits(gated.structured_outputs, WEATHER_CALL)
    assert not _admits(whole.structured_outputs, WEATHER_CALL)
    assert _admits(whole.structured_outputs, "The user wants Paris.\n</think>\n\n" + WEATHER_CALL)


def test_the_reasoning_parser_tells_vllm_where_the_reasoning_ends():
    """vLLM starts a constraint once `is_reasoning_end` says the reasoning is over (on the prompt, then on the
    prompt and the output so far): right after the closer, even while the parser still holds it because whitespace
    follows (an empty block that enable_thinking=false prefilled), and not inside a closer half written."""
    from vllm.reasoning import ReasoningParserManager

    tokenizer = engines._tokenizer(get_template("qwen3"))
    vllm_plugin.register()
    reasoning = ReasoningParserManager.get_reasoning_parser("response_templates")(tokenizer)
    prompt = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    for tail, over in (("", True), ("<think>\n", False), ("<think>\n\n</think>\n\n", True),
                       ("<think>\nHm.</thi", False), ("<think>\nHm.</think>", True)):
        ids = tokenizer.encode(prompt + tail, add_special_tokens=False)
        assert reasoning.is_reasoning_end(ids) is over, tail
        assert reasoning.is_reasoning_end_streaming(ids, ids[-1:]) is over, tail


def test_a_template_the_compiler_cannot_express_is_refused_with_the_reason():
    """MiniMax M3 writes arguments as nested elements, which the compiler cannot type where a schema combines types
    (anyOf), so a forced choice with such a tool is answered with a validation error (HTTP 400) that says so; "auto"
    still works, unconstrained.
    Apertus opens a later call after any `}` followed by `, {"NAME": `, in text too: a forced choice is constrained
    (the calls are the whole answer), but a strict tool under "auto", where free text could open calls, is refused.
    Llama 3.1 opens a call with a bare `{`, but every call holds `"name"`, which free text is kept from: both work."""
    from vllm.exceptions import VLLMValidationError

    mixed = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"key": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}}}]
    with pytest.raises(VLLMValidationError, match=r"tool_choice=\"required\" with --tool-call-parser "
                                                  r"response_templates: .*schema combines types") as raised:
        _adjusted("minimax_m3", reasoning=False, tool_choice="required", tools=mixed)
    assert raised.value.parameter == "tool_choice"
    assert _adjusted("minimax_m3", reasoning=False, tool_choice="auto", tools=mixed).structured_outputs is None
    assert _adjusted("apertus", reasoning=False, tool_choice="required").structured_outputs is not None
    strict = [{**WEATHER, "function": {**WEATHER["function"], "strict": True}}]
    with pytest.raises(VLLMValidationError, match=r"a call after another opens with ','"):
        _adjusted("apertus", reasoning=False, tool_choice="auto", tools=strict)
    assert _adjusted("llama3.1", reasoning=False, tool_choice="auto", tools=strict).structured_outputs is not None


def test_a_request_that_constrains_its_output_itself_is_refused():
    from vllm.exceptions import VLLMValidationError

    with pytest.raises(VLLMValidationError, match="already constrains the output"):
        _adjusted("qwen3", tool_choice="required", structured_outputs={"choice": ["yes", "no"]})


def test_responses_api_tools_type_the_arguments_as_chat_tools_do():
    """The Responses API writes function tools flat; the parser reads their schemas as for chat completions (here a
    string written for an integer parameter is read as the integer, as `parse_response(tools=...)` does)."""
    from vllm.entrypoints.openai.responses.protocol import ResponsesRequest

    template = get_template("qwen3")
    tokenizer = engines._tokenizer(template)
    function = {"name": "get_weather", "parameters": {"type": "object", "properties": {"days": {"type": "integer"}}}}
    output = '<tool_call>\n{"name": "get_weather", "arguments": {"days": "3"}}\n</tool_call><|im_end|>'
    prompt_ids = tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False)
    ours = to_openai_message(parse_response(output, template, prefix="<|im_start|>assistant\n",
                                            tools=[{"type": "function", "function": function}]))
    assert ours["tool_calls"][0]["function"]["arguments"] == '{"days": 3}'
    for request in (ResponsesRequest(model="test", input="hi", tools=[{"type": "function", **function}]),
                    _request([{"type": "function", "function": function}])):
        parser = _parser_cls(tokenizer)(tokenizer, request.tools)
        _give_prompt(parser, prompt_ids)
        calls = parser.parse(output, request, True, tokenizer.encode(output, add_special_tokens=False))[2]
        assert [(c.name, c.arguments) for c in calls] == [("get_weather", '{"days": 3}')]


def test_template_from_the_library_when_the_tokenizer_has_none():
    tokenizer = engines._tokenizer(None)
    tokenizer.name_or_path = "Qwen/Qwen3-8B"
    assert vllm_plugin.resolve_template(tokenizer) == get_template("qwen3")
    parser_cls = _parser_cls(tokenizer)
    request = _request(None)
    parser = parser_cls(tokenizer, None)
    _give_prompt(parser, tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False))
    assert parser.parse("<think>Hm.</think>Hi!<|im_end|>", request, enable_auto_tools=True)[:2] == ("Hm.", "Hi!")


def test_no_template_fails_at_startup_with_a_clear_error():
    tokenizer = engines._tokenizer(None)
    with pytest.raises(TypeError, match="no response_template"):
        _parser_cls(tokenizer)


def test_a_release_too_old_to_host_the_plugin_is_named_and_refused_when_used(monkeypatch, caplog):
    """A vLLM whose Parser lacks parse_delta (releases before the unified parser) cannot host the plugin: vLLM
    still starts (register() runs in every vLLM process), and a server started with the parsers fails naming why."""
    api = vllm_plugin._api()
    tokenizer = engines._tokenizer(get_template("qwen3"))
    monkeypatch.delattr(api.Parser, "parse_delta")
    vllm_plugin._api.cache_clear()
    try:
        reason = vllm_plugin.host_unavailable()
        assert reason.startswith("vLLM ") and "cannot host the response_templates parsers: it lacks Parser" in reason
        with caplog.at_level("WARNING"):
            vllm_plugin.register()
        assert reason in caplog.text
        for cls in (api.ToolParserManager.get_tool_parser("response_templates"),
                    api.ReasoningParserManager.get_reasoning_parser("response_templates")):
            with pytest.raises(RuntimeError, match="response_templates: vLLM .* cannot host"):
                cls(tokenizer)
    finally:
        monkeypatch.undo()
        vllm_plugin._api.cache_clear()
        vllm_plugin.register()
    assert vllm_plugin.host_unavailable() == ""
    assert api.ToolParserManager.get_tool_parser("response_templates").__name__ == "ResponseTemplatesToolParser"


def test_vllm_loads_the_plugin_from_the_installed_entry_point():
    from importlib.metadata import entry_points

    ours = [ep for ep in entry_points(group="vllm.general_plugins") if ep.value.startswith("response_templates.")]
    if not ours:
        if os.environ.get("RESPONSE_TEMPLATES_TEST_INSTALLED"):
            pytest.fail("the installed package has no vllm.general_plugins entry point")
        pytest.skip("response-templates is not installed here (source tree): no entry point to load")
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    ReasoningParserManager, ToolParserManager = vllm_plugin._api().ReasoningParserManager, vllm_plugin._api().ToolParserManager
    assert ToolParserManager.get_tool_parser("response_templates").__name__ == "ResponseTemplatesToolParser"
    assert ReasoningParserManager.get_reasoning_parser("response_templates").__name__ == (
        "ResponseTemplatesReasoningParser")

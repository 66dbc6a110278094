"""The OpenAI adapter: non-streaming messages, and streamed chunks that add up to them for every split.

The corpus tests run over every tests/data/corpora/*.json file present (each names its library template)."""

from __future__ import annotations

import glob
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from response_templates import ResponseParser, parse_response
from response_templates.integrations.openai_adapter import (
    OpenAIStreamAdapter,
    accumulate_chunks,
    finish_reason_for,
    to_openai_message,
)

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES_DIR = os.path.join(os.path.dirname(HERE), "response_templates", "library", "templates")


def ids(index: int) -> str:
    return f"call_{index}"


# The ChatML / Qwen-style template the offline test tokenizer is built for.
from tokenizer_factory import RESPONSE_TEMPLATE as CHATML  # noqa: E402

# Names in the opening delimiter, XML-style parameters: calls go out whole at their close.
XML_CALLS = {
    "start_anchor": "<|im_start|>assistant\n",
    "defaults": {"role": "assistant"},
    "fields": {
        "tool_calls": {
            "open_pattern": r"\s*<tool_call>\s*<function=(?P<name>[\w.-]+)>",
            "close_pattern": r"\s*</function>\s*</tool_call>",
            "repeats": True,
            "content": "xml-inline",
            "content_args": {
                "tag_pattern": r"<parameter=(?P<key>[\w.-]+)>\n?(?P<value>.*?)\n?</parameter>",
                "value_parser": {"name": "json", "args": {"allow_non_json": True}},
            },
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "content": {"close": "<|im_end|>"},
    },
}

# A repeated field with `join`, and a renamed-arguments transform.
JOINED = {
    "start_anchor": "<s>",
    "fields": {
        "reasoning_content": {"open": "[THINK]", "close": "[/THINK]", "repeats": True, "join": "\n"},
        "tool_calls": {
            "open": "[CALL]",
            "close": "[/CALL]",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": {"name": "{content.tool}", "arguments": "{content.args}"}},
        },
        "content": {},
    },
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "units": {"type": "string"}},
        },
    },
}

INLINE_CASES = [
    ("chatml", CHATML, "", '<think>\nLet me check.\n</think>\n\nSure, one moment. <tool_call>\n{"name": "get_weather", '
     '"arguments": {"city": "Paris", "days": 3, "nested": {"a": [1, {"b": "}"}]}, "q": "é\\"\\n"}}\n</tool_call>'
     '<|im_end|>', None, False),
    ("chatml-prefilled-think", CHATML, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n",
     "Reasoning here.\n</think>\n\nHello   there!\n\n<|im_end|>", None, False),
    ("chatml-two-calls", CHATML, "", '<tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{"arguments": '
     '{"x": [1, 2]}, "name": "g"}</tool_call>', None, False),
    ("chatml-schema-cast", CHATML, "", '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "days": '
     '"4", "units": "metric"}}</tool_call>', [WEATHER_TOOL], False),
    ("chatml-string-arguments", CHATML, "", '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>',
     None, False),
    ("chatml-truncated-call", CHATML, "", 'Let me look. <tool_call>{"name": "get_weather", "arguments": {"city": "Par',
     None, True),
    ("chatml-truncated-after-call", CHATML, "", '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'
     '<tool_call>{"name": "g", "argu', None, True),
    ("chatml-truncated-text", CHATML, "", "<think>partial reasoni", None, True),
    ("xml", XML_CALLS, "", "I'll check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
     "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call><|im_end|>", [WEATHER_TOOL], False),
    ("joined-overwritten-content", JOINED, "", "a[THINK]b[/THINK]c", None, False),
    ("joined", JOINED, "", '[THINK] first [/THINK][THINK]second[/THINK] more [CALL]{"tool": "f", "args": '
     '{"k": "v", "n": 1.5}}[/CALL]', None, False),
]


def _library_template(name: str) -> dict:
    try:
        from response_templates.library import get_template

        template = get_template(name)
    except ImportError:
        with open(os.path.join(TEMPLATES_DIR, f"{name}.json"), encoding="utf-8") as f:
            template = json.load(f)
    if isinstance(template, dict) and "template" in template and "fields" not in template:
        template = template["template"]
    if not isinstance(template, dict):  # a compiled template
        template = template.source
    return template


def _corpus_cases() -> list:
    cases = []
    for path in sorted(glob.glob(os.path.join(HERE, "data", "corpora", "*.json"))):
        with open(path, encoding="utf-8") as f:
            corpus = json.load(f)
        for case in corpus["cases"]:
            cases.append(
                pytest.param(
                    corpus["template"],
                    case,
                    id=f"{corpus['template']}:{case['name']}",
                )
            )
    return cases


CORPUS_CASES = _corpus_cases()


def _stream(template, prefix, output, splits, *, tools=None, truncated=False, may_truncate=True):
    adapter = OpenAIStreamAdapter(
        template, prefix, tools=tools, model="m", id_factory=ids, may_truncate=may_truncate, created=0
    )
    chunks = []
    start = 0
    for cut in sorted(set(splits)) + [len(output)]:
        chunks += adapter.feed(output[start:cut])
        start = cut
    chunks += adapter.finish(truncated=truncated)
    return chunks, adapter


def _overwrites(template, prefix, output, tools, truncated) -> bool:
    """Whether a field that does not repeat gets a second non-empty value (the message keeps only the last: a
    stream cannot take back the first)."""
    parser = ResponseParser(template, prefix, tools=tools)
    events = list(parser.initial_events) + parser.feed(output) + parser.finalize(truncated=truncated)[1]
    fields = template["fields"]
    seen: dict[str, object] = {}
    for event in events:
        if event["type"] != "region_close":
            continue
        name = event["field"]
        if fields.get(name, {}).get("repeats"):
            continue
        if seen.get(name) not in (None, "", [], {}):
            return True
        seen[name] = event["value"]
    return False


def _check_splits(template, prefix, output, tools, truncated, splits):
    expected_message = parse_response(output, template, prefix=prefix, tools=tools, truncated=truncated)
    expected = to_openai_message(expected_message, id_factory=ids)
    overwrite = _overwrites(template, prefix, output, tools, truncated)
    modes = [True] if truncated else [True, False]
    for may_truncate in modes:
        chunks, adapter = _stream(
            template, prefix, output, splits, tools=tools, truncated=truncated, may_truncate=may_truncate
        )
        assert adapter.message == expected_message
        if overwrite:
            assert adapter.mismatch  # documented limit: it is noticed
            continue
        assert accumulate_chunks(chunks) == expected, (splits, may_truncate)
        assert not adapter.mismatch
        finish = chunks[-1]["choices"][0]["finish_reason"]
        assert finish == finish_reason_for(bool(expected.get("tool_calls")), truncated)
        assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
        for chunk in chunks:
            assert chunk["object"] == "chat.completion.chunk" and chunk["model"] == "m"


def _splits_strategy(length: int):
    return st.lists(st.integers(min_value=0, max_value=length), max_size=min(12, length + 1))


# --- corpora -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,case", CORPUS_CASES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_corpus_stream_adds_up_to_message(name, case, data):
    template = _library_template(name)
    output = case["output"]
    splits = data.draw(_splits_strategy(len(output)), label="splits")
    _check_splits(template, case.get("prefix", ""), output, case.get("tools"), case.get("truncated", False), splits)


@pytest.mark.parametrize("name,case", CORPUS_CASES)
def test_corpus_one_character_at_a_time(name, case):
    template = _library_template(name)
    output = case["output"]
    splits = list(range(1, len(output)))
    _check_splits(template, case.get("prefix", ""), output, case.get("tools"), case.get("truncated", False), splits)


def test_corpora_present_or_skipped():
    if not CORPUS_CASES:
        pytest.skip("no tests/data/corpora/*.json yet: the corpus tests above have nothing to run")


# --- inline templates --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,template,prefix,output,tools,truncated", INLINE_CASES, ids=[c[0] for c in INLINE_CASES])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_inline_stream_adds_up_to_message(name, template, prefix, output, tools, truncated, data):
    splits = data.draw(_splits_strategy(len(output)), label="splits")
    _check_splits(template, prefix, output, tools, truncated, splits)


@pytest.mark.parametrize("name,template,prefix,output,tools,truncated", INLINE_CASES, ids=[c[0] for c in INLINE_CASES])
def test_inline_one_character_at_a_time(name, template, prefix, output, tools, truncated):
    _check_splits(template, prefix, output, tools, truncated, list(range(1, len(output))))


def _deltas(chunks):
    return [c["choices"][0]["delta"] for c in chunks]


def test_no_delimiter_in_any_delta():
    output = INLINE_CASES[0][3]
    chunks, _ = _stream(CHATML, "", output, list(range(1, len(output))), may_truncate=False)
    for delta in _deltas(chunks):
        text = json.dumps(delta, ensure_ascii=False)
        for marker in ("<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_end|>", "<", "|>"):
            assert marker not in text


def test_first_chunk_has_role_and_last_has_finish_reason():
    chunks, _ = _stream(CHATML, "", "Hi!<|im_end|>", [])
    assert _deltas(chunks)[0] == {"role": "assistant"}
    assert chunks[-1]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("chatcmpl-")


def test_text_streams_live_and_holds_edge_whitespace():
    adapter = OpenAIStreamAdapter(CHATML, "", id_factory=ids)
    assert _deltas(adapter.feed("<think>\n  Let me")) == [{"role": "assistant"}, {"reasoning_content": "Let me"}]
    assert _deltas(adapter.feed(" think \n")) == [{"reasoning_content": " think"}]  # trailing space held
    assert _deltas(adapter.feed("</thi")) == []
    assert _deltas(adapter.feed("nk>\n\nAnswer")) == [{"content": "Answer"}]


def test_open_field_and_holding_follow_the_regions():
    for may_truncate in (True, False):
        adapter = OpenAIStreamAdapter(CHATML, "", id_factory=ids, may_truncate=may_truncate)
        assert (adapter.open_field, adapter.holding) == (None, False)
        adapter.feed("<think>Hm")
        assert (adapter.open_field, adapter.holding) == ("reasoning_content", False)  # streams as it arrives
        adapter.feed("</think>Sure")
        assert (adapter.open_field, adapter.holding) == ("content", False)
        adapter.feed('<tool_call>{"name": "f", "arguments": {"a": 1')
        assert (adapter.open_field, adapter.holding) == ("tool_calls", True)  # held (early mode: final pairs only)
        adapter.feed("}}</tool_call>")
        assert adapter.open_field != "tool_calls"
        adapter.finish()
        assert (adapter.open_field, adapter.holding) == (None, False)


def test_default_mode_holds_a_call_until_it_closes():
    adapter = OpenAIStreamAdapter(CHATML, "", id_factory=ids)
    adapter.feed('<tool_call>{"name": "f", "arguments": {"a": 1, "b": 2')
    assert adapter.feed(', "c": 3}}') == []
    deltas = _deltas(adapter.feed("</tool_call>"))
    assert deltas == [
        {"tool_calls": [{"index": 0, "id": "call_0", "type": "function", "function": {"name": "f", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1, "b": 2, "c": 3}'}}]},
    ]
    assert _deltas(adapter.finish())[-1] == {}


def test_early_mode_streams_name_then_final_argument_pairs():
    adapter = OpenAIStreamAdapter(CHATML, "", id_factory=ids, may_truncate=False)
    assert _deltas(adapter.feed('<tool_call>{"name": "get_w')) == [{"role": "assistant"}]
    header = _deltas(adapter.feed('eather", "arguments": {"city": "Pa'))
    assert header == [
        {"tool_calls": [{"index": 0, "id": "call_0", "type": "function",
                         "function": {"name": "get_weather", "arguments": ""}}]}
    ]
    assert _deltas(adapter.feed('ris", "days": 1')) == [
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Paris"'}}]}
    ]
    # "days": 1 may still become 10: it waits for the next `,` or `}`.
    assert _deltas(adapter.feed("0}")) == [{"tool_calls": [{"index": 0, "function": {"arguments": ', "days": 10'}}]}]
    assert _deltas(adapter.feed("}</tool_call>")) == [{"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}]
    chunks = adapter.finish()
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_early_mode_stops_where_the_schema_recasts():
    adapter = OpenAIStreamAdapter(CHATML, "", tools=[WEATHER_TOOL], id_factory=ids, may_truncate=False)
    chunks = adapter.feed(
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "days": "4", "units": "x", '
    )
    sent = "".join(
        e["function"].get("arguments", "") for d in _deltas(chunks) for e in d.get("tool_calls", [])
    )
    assert sent == '{"city": "Oslo"'  # "4" will be cast to 4: nothing after it goes out early
    chunks += adapter.feed('"z": 1}}</tool_call>') + adapter.finish()
    assert accumulate_chunks(chunks)["tool_calls"][0]["function"]["arguments"] == (
        '{"city": "Oslo", "days": 4, "units": "x", "z": 1}'
    )


def test_truncated_generation_never_delivers_the_unfinished_call():
    output = 'Let me look. <tool_call>{"name": "get_weather", "arguments": {"city": "Par'
    chunks, adapter = _stream(CHATML, "", output, list(range(1, len(output))), truncated=True)
    assert not any("tool_calls" in d for d in _deltas(chunks))
    assert accumulate_chunks(chunks) == {"role": "assistant", "content": "Let me look."}
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert "tool_calls" not in adapter.message


def test_noticed_limit_second_region_of_a_field_that_does_not_repeat():
    chunks, adapter = _stream(CHATML, "", "<think>a</think><think>b</think>x", [8])
    assert adapter.mismatch
    assert adapter.message["reasoning_content"] == "b"


def test_adapter_accepts_a_parser():
    parser = ResponseParser(CHATML, "")
    adapter = OpenAIStreamAdapter(parser, id_factory=ids)
    chunks = adapter.feed("Hi<|im_end|>") + adapter.finish()
    assert accumulate_chunks(chunks) == {"role": "assistant", "content": "Hi"}


def test_feed_after_finish_is_an_error():
    adapter = OpenAIStreamAdapter(CHATML, "")
    adapter.finish()
    with pytest.raises(RuntimeError, match="after finish"):
        adapter.feed("x")


# --- to_openai_message -------------------------------------------------------------------------------------


def test_to_openai_message_shapes():
    message = {
        "role": "assistant",
        "reasoning_content": "why",
        "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": {"city": "Zürich", "n": [1, 2]}}},
            {"id": "kept", "type": "function", "function": {"name": "g", "arguments": '{"raw": true}'}},
        ],
    }
    result = to_openai_message(message, id_factory=ids)
    assert result == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "why",
        "tool_calls": [
            {"id": "call_0", "type": "function",
             "function": {"name": "f", "arguments": '{"city": "Zürich", "n": [1, 2]}'}},
            {"id": "kept", "type": "function", "function": {"name": "g", "arguments": '{"raw": true}'}},
        ],
    }


def test_to_openai_message_default_ids_and_plain_content():
    result = to_openai_message({"role": "assistant", "content": "hi", "tool_calls": [{"name": "f", "arguments": {}}]})
    assert result["content"] == "hi" and "reasoning_content" not in result
    call = result["tool_calls"][0]
    assert call["id"].startswith("call_") and len(call["id"]) > 10
    assert call["function"] == {"name": "f", "arguments": "{}"}
    assert to_openai_message({"role": "assistant"}) == {"role": "assistant", "content": None}


def test_to_openai_message_rejects_non_dict():
    with pytest.raises(TypeError, match="must be a dict"):
        to_openai_message("hello")


# --- the real openai client --------------------------------------------------------------------------------


def test_openai_client_accumulation_matches():
    pytest.importorskip("openai", reason="the openai package is not installed (test extra)")
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    output = INLINE_CASES[0][3]
    expected = to_openai_message(parse_response(output, CHATML, prefix=""), id_factory=ids)
    for may_truncate in (True, False):
        chunks, _ = _stream(CHATML, "", output, list(range(1, len(output), 3)), may_truncate=may_truncate)
        state = ChatCompletionStreamState()
        for chunk in chunks:
            state.handle_chunk(ChatCompletionChunk.model_validate(chunk))
        choice = state.get_final_completion().choices[0]
        message = choice.message.model_dump()
        got = {
            "role": message["role"],
            "content": message["content"],
            "reasoning_content": message.get("reasoning_content"),
            "tool_calls": [
                {"id": c["id"], "type": c["type"], "function": {"name": c["function"]["name"],
                                                                "arguments": c["function"]["arguments"]}}
                for c in message["tool_calls"]
            ],
        }
        assert got == expected
        assert choice.finish_reason == "tool_calls"


def _early_templates() -> list[str]:
    from response_templates.integrations.openai_adapter import _early_call_keys, _template_fields

    names = sorted({p.values[0] for p in CORPUS_CASES})
    early = []
    for name in names:
        fields, _ = _template_fields(_library_template(name))
        if "tool_calls" in fields and _early_call_keys(fields["tool_calls"]) is not None:
            early.append(name)
    return early


@pytest.mark.parametrize("name", _early_templates())
def test_corpus_calls_stream_arguments_before_the_close(name):
    """For JSON-bodied formats, with may_truncate=False, some call's arguments go out in several pieces."""
    pieces_per_call = []
    for param in CORPUS_CASES:
        corpus_name, case = param.values
        if corpus_name != name or case.get("truncated"):
            continue
        output = case["output"]
        chunks, _ = _stream(_library_template(name), case.get("prefix", ""), output, list(range(1, len(output))),
                            tools=case.get("tools"), may_truncate=False)
        counts: dict[int, int] = {}
        for delta in _deltas(chunks):
            for entry in delta.get("tool_calls", []):
                if entry.get("function", {}).get("arguments"):
                    counts[entry["index"]] = counts.get(entry["index"], 0) + 1
        pieces_per_call += counts.values()
    if not pieces_per_call:
        pytest.skip(f"the {name} corpus has no tool call")
    assert max(pieces_per_call) >= 2


def test_token_ids_fed_one_at_a_time(tmp_path):
    pytest.importorskip("transformers", reason="transformers is needed to load the test tokenizer")
    from tokenizer_factory import make_tokenizer

    tokenizer = make_tokenizer(tmp_path)
    prompt = tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
    output = tokenizer.encode(
        '<think>\nWeather time 🙂\n</think>\n\nOk. <tool_call>\n'
        '{"name": "get_weather", "arguments": {"city": "Köln"}}'
        "\n</tool_call><|im_end|>",
        add_special_tokens=False,
    )
    expected = to_openai_message(parse_response(output, CHATML, prefix=prompt, tokenizer=tokenizer), id_factory=ids)
    assert expected["tool_calls"][0]["function"]["arguments"] == '{"city": "Köln"}'
    for may_truncate in (True, False):
        adapter = OpenAIStreamAdapter(CHATML, prompt, tokenizer=tokenizer, id_factory=ids, may_truncate=may_truncate)
        chunks = [chunk for token in output for chunk in adapter.feed([token])] + adapter.finish()
        assert accumulate_chunks(chunks) == expected


def test_early_mode_cut_anyway_keeps_what_was_sent_and_says_so():
    adapter = OpenAIStreamAdapter(CHATML, "", id_factory=ids, may_truncate=False)
    chunks = adapter.feed('<tool_call>{"name": "f", "arguments": {"a": 1, "b"') + adapter.finish(truncated=True)
    assert accumulate_chunks(chunks)["tool_calls"] == [
        {"id": "call_0", "type": "function", "function": {"name": "f", "arguments": '{"a": 1'}}
    ]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert adapter.mismatch and "tool_calls" not in adapter.message


def test_library_name_as_source():
    adapter = OpenAIStreamAdapter("qwen3", "", id_factory=ids)
    chunks = adapter.feed("<think>\nx\n</think>\n\ny<|im_end|>") + adapter.finish()
    assert accumulate_chunks(chunks) == {"role": "assistant", "reasoning_content": "x", "content": "y"}


@pytest.mark.parametrize("name,case", [p for p in CORPUS_CASES if not p.values[1].get("truncated")])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_corpus_cut_anywhere_never_delivers_a_half_call(name, case, data):
    """Any corpus output cut at any point, as max_tokens would: the default mode still adds up exactly."""
    template = _library_template(name)
    output = case["output"][: data.draw(st.integers(0, len(case["output"])), label="cut")]
    try:
        parse_response(output, template, prefix=case.get("prefix", ""), tools=case.get("tools"), truncated=True)
    except ValueError:
        return  # this cut leaves something the template cannot parse (e.g. a required field missing)
    splits = data.draw(_splits_strategy(len(output)), label="splits")
    _check_splits(template, case.get("prefix", ""), output, case.get("tools"), True, splits)

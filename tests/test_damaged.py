"""Damaged generations (issue 10, issue 15.5): cut-off and malformed outputs never crash a caller under a policy
that asks not to, and never look like a call.

* A dropped region ends with a `region_discard` event, never a `region_close`.
* `malformed="raise" | "content" | "drop"` in the core, the tokenizer methods, the OpenAI adapter and the CLI.
* `truncated=True` never raises on a cut of a valid output and never returns a call the full output lacks.
"""

from __future__ import annotations

import json
import logging
import random

import pytest

import response_templates as rt
from event_helpers import collect, merged
from response_templates import ResponseParser, parse_response
from response_templates.library import get_template
from response_templates.integrations.openai_adapter import OpenAIStreamAdapter, accumulate_chunks, to_openai_message

POLICIES = ("content", "drop")


def _calls(*names_and_args):
    return [{"type": "function", "function": {"name": name, "arguments": args}} for name, args in names_and_args]


# --- the shapes seen in real outputs ------------------------------------------------------------------------------

HERMES_PREFIX = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"
KIMI_PREFIX = "<|im_user|>user<|im_middle|>Weather?<|im_end|><|im_assistant|>assistant<|im_middle|>"
LLAMA_PREFIX = "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
GRANITE_PREFIX = "<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>"
LFM2_PREFIX = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
R1_PREFIX = "<｜User｜>Weather?<｜Assistant｜><think>\n"

KIMI_BROKEN = (
    "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
    '{"city": "Beijing"<|tool_call_end|>'
)
R1_BROKEN = (
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
    '{"city": "Paris", "days": 2\n```<｜tool▁call▁end｜>'
)

# (id, template, prefix, output, raw text of the malformed region, message with "content", message with "drop")
SHAPES = [
    (
        "hermes-missing-last-brace-no-close-tag",
        "hermes",
        HERMES_PREFIX,
        'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n<|im_end|>',
        '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n<|im_end|>',
        {"role": "assistant", "content": 'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n<|im_end|>'},
        {"role": "assistant", "content": "Checking."},
    ),
    (
        "hermes-missing-last-brace-at-end-of-text",
        "hermes",
        HERMES_PREFIX,
        'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}',
        '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}',
        {"role": "assistant", "content": 'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}'},
        {"role": "assistant", "content": "Checking."},
    ),
    (
        "hermes-json-fence-with-unclosed-json",
        "hermes",
        HERMES_PREFIX,
        '<tool_call>\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"\n```\n</tool_call><|im_end|>',
        '<tool_call>\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"\n```\n</tool_call><|im_end|>',
        {"role": "assistant", "content": '<tool_call>\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"\n```\n</tool_call><|im_end|>'},
        {"role": "assistant"},
    ),
    (
        "llama3-invalid-json-parameters",
        "llama3.1",
        LLAMA_PREFIX,
        '{"name": "f", "parameters": {invalid json}}<|eot_id|>',
        '{"name": "f", "parameters": {invalid json}}<|eot_id|>',
        {"role": "assistant", "content": '{"name": "f", "parameters": {invalid json}}<|eot_id|>'},
        {"role": "assistant"},
    ),
    (
        "granite-object-where-a-list-belongs",
        "granite-3",
        GRANITE_PREFIX,
        'Sure.<|tool_call|>{"name": "get_weather", "arguments": {"city": "Paris"}}<|end_of_text|>',
        '<|tool_call|>{"name": "get_weather", "arguments": {"city": "Paris"}}<|end_of_text|>',
        {"role": "assistant", "content": 'Sure.<|tool_call|>{"name": "get_weather", "arguments": {"city": "Paris"}}<|end_of_text|>'},
        {"role": "assistant", "content": "Sure."},
    ),
    (
        "lfm2-unterminated-string",
        "lfm2",
        LFM2_PREFIX,
        "<|tool_call_start|>[save(text='line one\nline two)]<|tool_call_end|>Saved.<|im_end|>",
        "<|tool_call_start|>[save(text='line one\nline two)]<|tool_call_end|>",
        {"role": "assistant", "content": "<|tool_call_start|>[save(text='line one\nline two)]<|tool_call_end|>Saved."},
        {"role": "assistant", "content": "Saved."},
    ),
    (
        "lfm2-set-literal",
        "lfm2",
        LFM2_PREFIX,
        "<|tool_call_start|>[tag(labels={'a', 'b'})]<|tool_call_end|><|im_end|>",
        "<|tool_call_start|>[tag(labels={'a', 'b'})]<|tool_call_end|>",
        {"role": "assistant", "content": "<|tool_call_start|>[tag(labels={'a', 'b'})]<|tool_call_end|>"},
        {"role": "assistant"},
    ),
    (
        # (a quote of the string's own kind inside it is read where the call goes on after a later quote: raw_strings)
        "lfm2-inner-quote-and-no-closing-quote",
        "lfm2",
        LFM2_PREFIX,
        "<|tool_call_start|>[say(text='it's fine)]<|tool_call_end|><|im_end|>",
        "<|tool_call_start|>[say(text='it's fine)]<|tool_call_end|>",
        {"role": "assistant", "content": "<|tool_call_start|>[say(text='it's fine)]<|tool_call_end|>"},
        {"role": "assistant"},
    ),
    (
        "lfm2-leading-zero-then-a-valid-call",
        "lfm2",
        LFM2_PREFIX,
        "<|tool_call_start|>[date(year=2024, month=07)]<|tool_call_end|>Then "
        "<|tool_call_start|>[get_time()]<|tool_call_end|><|im_end|>",
        "<|tool_call_start|>[date(year=2024, month=07)]<|tool_call_end|>",
        {
            "role": "assistant",
            "content": "<|tool_call_start|>[date(year=2024, month=07)]<|tool_call_end|>Then",
            "tool_calls": _calls(("get_time", {})),
        },
        {"role": "assistant", "content": "Then", "tool_calls": _calls(("get_time", {}))},
    ),
    (
        "lfm2-json-call-with-an-unquoted-value",
        "lfm2",
        LFM2_PREFIX,
        'Checking.<|tool_call_start|>[{"name": "get_weather", "arguments": {"city": Paris}}]<|tool_call_end|><|im_end|>',
        '<|tool_call_start|>[{"name": "get_weather", "arguments": {"city": Paris}}]<|tool_call_end|>',
        {"role": "assistant", "content": 'Checking.<|tool_call_start|>[{"name": "get_weather", "arguments": {"city": Paris}}]<|tool_call_end|>'},
        {"role": "assistant", "content": "Checking."},
    ),
    (
        "lfm2-json-call-then-a-python-call-in-one-list",
        "lfm2",
        LFM2_PREFIX,
        '<|tool_call_start|>[{"name": "get_time", "arguments": {}}, get_weather(city="Paris")]<|tool_call_end|>Done.<|im_end|>',
        '<|tool_call_start|>[{"name": "get_time", "arguments": {}}, get_weather(city="Paris")]<|tool_call_end|>',
        {"role": "assistant", "content": '<|tool_call_start|>[{"name": "get_time", "arguments": {}}, get_weather(city="Paris")]<|tool_call_end|>Done.'},
        {"role": "assistant", "content": "Done."},
    ),
]
SHAPE_IDS = [shape[0] for shape in SHAPES]

# Shapes the library's templates now read leniently, as vLLM does: arguments that are not valid JSON are kept as a
# string. Nothing is malformed there, so every policy gives the same message, with both calls (id, template,
# prefix, output, the broken call's arguments string).
LENIENT_SHAPES = [
    (
        "kimi-unclosed-arguments-then-a-valid-call",
        "kimi-k2",
        KIMI_PREFIX,
        "<think>ok</think><|tool_calls_section_begin|>" + KIMI_BROKEN
        + "<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
        "<|tool_calls_section_end|><|im_end|>",
        '{"city": "Beijing"',
    ),
    (
        "json-fence-with-unclosed-json-then-a-valid-call",
        "deepseek_r1",
        R1_PREFIX,
        "Need it.\n</think>\n\n" + R1_BROKEN
        + "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```<｜tool▁call▁end｜>"
        "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
        '{"city": "Paris", "days": 2',
    ),
]


@pytest.mark.parametrize("shape", LENIENT_SHAPES, ids=[shape[0] for shape in LENIENT_SHAPES])
def test_shapes_a_template_reads_leniently_are_the_same_under_every_policy(shape):
    _, name, prefix, output, arguments = shape
    template = get_template(name)
    message = parse_response(output, template, prefix=prefix)
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == [arguments, {}]
    hf = pytest.importorskip("transformers.utils.chat_parsing", reason="this transformers release has no parser")
    assert hf.parse_response(output, template, prefix=prefix) == message
    for policy in POLICIES:
        assert parse_response(output, template, prefix=prefix, malformed=policy) == message
        streamed, events = collect(ResponseParser(template, prefix, malformed=policy), list(output))
        assert streamed == message and not any(e["type"] == "region_discard" for e in events)
# Known scanner limitation, not the policy's (see tests/test_damaged_corpora.py, CLOSE_SPAN_BY_CHUNKING): llama3.1's
# close ends before `<|eot_id|>` when fed in pieces and takes it when fed whole, so the raw text differs.
CLOSE_SPAN_BY_CHUNKING = {"llama3.1"}


def chunkings(text: str, seed: int = 0):
    """Whole, one character at a time, every split in two, and a few seeded random splits."""
    yield [text]
    yield list(text)
    for cut in range(1, len(text)):
        yield [text[:cut], text[cut:]]
    rng = random.Random(seed)
    for _ in range(5):
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(2, 12))))
        yield [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]


def assemble(template: dict, events: list[dict]) -> dict:
    """A consumer written to transformers' event contract: it builds the message from region_close values and
    ignores event types it does not know (region_discard)."""
    fields = template["fields"]
    message = dict(template.get("defaults") or {})
    for event in events:
        if event["type"] != "region_close":
            continue
        name, value = event["field"], event["value"]
        spec = fields.get(name, {})
        if spec.get("join") is not None:
            message[name] = value if message.get(name) is None else message[name] + spec["join"] + value
        elif spec.get("repeats"):
            message.setdefault(name, []).append(value)
        else:
            message[name] = value
    return {k: v for k, v in message.items() if k in (template.get("defaults") or {}) or v not in (None, "", [], {})}


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_default_policy_raises_like_transformers(shape):
    _, name, prefix, output, *_ = shape
    template = get_template(name)
    with pytest.raises(ValueError):
        parse_response(output, template, prefix=prefix)
    with pytest.raises(ValueError):
        collect(ResponseParser(template, prefix), list(output))
    hf = pytest.importorskip("transformers.utils.chat_parsing", reason="this transformers release has no parser")
    with pytest.raises(ValueError):
        hf.parse_response(output, template, prefix=prefix)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_malformed_policy_one_shot_and_every_chunking(shape, policy):
    _, name, prefix, output, raw, with_content, with_drop = shape
    template = get_template(name)
    expected = with_content if policy == "content" else with_drop
    assert parse_response(output, template, prefix=prefix, malformed=policy) == expected
    reference = None
    for chunks in chunkings(output):
        message, events = collect(ResponseParser(template, prefix, malformed=policy), chunks)
        discards = [e for e in events if e["type"] == "region_discard"]
        assert len(discards) == 1
        discard = discards[0]
        if discard["raw"] != raw and name in CLOSE_SPAN_BY_CHUNKING:
            pytest.xfail("the close delimiter's extent depends on chunking for this template (probe cap in the scanner)")
        assert message == expected, chunks
        assert discard["field"] == "tool_calls" and discard["reason"] == "malformed"
        assert discard["raw"] == raw and discard["policy"] == policy and discard["error"]
        # no region_close ever carries a non-value, and a consumer that ignores region_discard is right
        assert all(e["value"] is not None for e in events if e["type"] == "region_close")
        assert assemble(template, events) == expected
        shown = merged(events)
        if reference is None:
            reference = shown
        assert shown == reference, chunks
    if policy == "content":
        # the raw text arrives as a content region right after the discard, in order with the other regions
        at = reference.index(next(e for e in reference if e["type"] == "region_discard"))
        assert [e["type"] for e in reference[at + 1 : at + 4]] == ["region_open", "region_chunk", "region_close"]
        assert reference[at + 2] == {"type": "region_chunk", "field": "content", "text": raw, "dirty": False}


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_malformed_region_is_logged_at_debug_level(shape, caplog):
    _, name, prefix, output, *_ = shape
    with caplog.at_level(logging.DEBUG, logger="response_templates"):
        parse_response(output, get_template(name), prefix=prefix, malformed="drop")
    records = [r for r in caplog.records if r.name == "response_templates" and "malformed" in r.getMessage()]
    assert records and all(r.levelno == logging.DEBUG for r in records)


@pytest.mark.parametrize("policy", ("raise",) + POLICIES)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_openai_adapter_stream_equals_its_one_shot_message(shape, policy):
    _, name, prefix, output, _, with_content, with_drop = shape
    template = get_template(name)
    if policy == "raise":
        adapter = OpenAIStreamAdapter(template, prefix, malformed=policy)
        with pytest.raises(ValueError):
            list(adapter.stream(list(output)))
        return
    expected = to_openai_message(with_content if policy == "content" else with_drop, id_factory=str)
    for chunks in (list(output), [output], [output[: len(output) // 2], output[len(output) // 2 :]]):
        adapter = OpenAIStreamAdapter(template, prefix, malformed=policy, id_factory=str)
        sent = list(adapter.stream(chunks))
        if adapter.message != (with_content if policy == "content" else with_drop) and name in CLOSE_SPAN_BY_CHUNKING:
            pytest.xfail("the close delimiter's extent depends on chunking for this template (probe cap in the scanner)")
        accumulated = accumulate_chunks(sent)
        assert {k: v for k, v in accumulated.items() if v is not None or k == "content"} == expected
        assert not adapter.mismatch
        assert sent[-1]["choices"][0]["finish_reason"] == ("tool_calls" if expected.get("tool_calls") else "stop")


def test_a_later_valid_call_is_kept_after_a_broken_one_in_a_custom_template():
    template = {
        "start_anchor": "<s>",
        "defaults": {"role": "assistant"},
        "fields": {
            "tool_calls": {"open": "<call>", "close": "</call>", "repeats": True, "content": "json"},
            "content": {"repeats": True, "join": " "},
        },
    }
    output = 'a <call>{"x": </call> b <call>{"y": 2}</call> c'
    assert parse_response(output, template, prefix="", malformed="drop") == {
        "role": "assistant", "content": "a b c", "tool_calls": [{"y": 2}],
    }
    assert parse_response(output, template, prefix="", malformed="content") == {
        "role": "assistant", "content": 'a <call>{"x": </call> b c', "tool_calls": [{"y": 2}],
    }


def test_content_policy_without_a_repeating_content_field_follows_the_fields_rules():
    # a content field that does not repeat keeps its last region, as for any content (transformers' rule)
    template = {
        "start_anchor": "<s>",
        "fields": {
            "tool_calls": {"open": "<call>", "close": "</call>", "content": "json"},
            "content": {},
        },
    }
    assert parse_response("a <call>{</call>", template, prefix="", malformed="content") == {"content": "<call>{</call>"}
    assert parse_response("a <call>{</call> b", template, prefix="", malformed="content") == {"content": "b"}


def test_content_policy_without_a_content_field_writes_the_content_key():
    template = {"start_anchor": "<s>", "fields": {"answer": {"open": "<a>", "close": "</a>"}, "n": {"open": "<n>", "close": "</n>", "content": "int"}}}
    for chunks in (["<a>x</a><n>4o</n><a>y</a>"], list("<a>x</a><n>4o</n><a>y</a>")):
        message, events = collect(ResponseParser(template, "", malformed="content"), chunks)
        assert message == {"answer": "y", "content": "<n>4o</n>"}
        assert parse_response("".join(chunks), template, prefix="", malformed="content") == message
        assert {"type": "region_close", "field": "content", "value": "<n>4o</n>"} in events


def test_the_policy_applies_only_at_the_close_and_text_already_sent_stays_sent():
    template = get_template("hermes")
    parser = ResponseParser(template, HERMES_PREFIX, malformed="drop")
    early = parser.feed('Hi <tool_call>\n{"name": "f", "arguments": {"a": ')
    assert [e["type"] for e in early][:2] == ["region_open", "region_chunk"]
    chunked = "".join(e["text"] for e in early if e["type"] == "region_chunk" and e["field"] == "tool_calls")
    assert chunked.startswith('{"name": "f"')  # streamed as dirty text before anything was known
    later = parser.feed("oops}}\n</tool_call> bye")
    message, final = parser.finalize()
    assert message == {"role": "assistant", "content": "Hi bye"}
    assert [e["reason"] for e in later + final if e["type"] == "region_discard"] == ["malformed"]


def test_bad_policy_values_are_clear_errors():
    template = get_template("hermes")
    for bad in ("ignore", None, 1, "Content"):
        with pytest.raises(ValueError, match="malformed="):
            parse_response("x", template, prefix="", malformed=bad)
        with pytest.raises(ValueError, match="malformed="):
            ResponseParser(template, "", malformed=bad)
        if bad is not None:  # None is the adapter's "the parser's policy"
            with pytest.raises(ValueError, match="malformed="):
                OpenAIStreamAdapter(template, "", malformed=bad)


def test_adapter_refuses_early_arguments_with_a_lenient_policy():
    with pytest.raises(ValueError, match="may_truncate=False"):
        OpenAIStreamAdapter(get_template("hermes"), "", malformed="drop", may_truncate=False)
    OpenAIStreamAdapter(get_template("hermes"), "", may_truncate=False)  # the default policy is fine
    parser = ResponseParser(get_template("hermes"), "", malformed="content")
    assert OpenAIStreamAdapter(parser).malformed == "content"
    with pytest.raises(ValueError, match="differs"):
        OpenAIStreamAdapter(parser, malformed="drop")


def test_a_regex_timeout_still_raises_under_a_lenient_policy(monkeypatch):
    # a hostile template is not a damaged output: its time limit error is never swallowed
    from response_templates.core import content

    def too_slow(pattern, text):
        raise rt.RegexTimeoutError(f"xml-inline: tag_pattern {pattern!r} took longer than the regex time limit")

    monkeypatch.setattr(content, "_finditer", too_slow)
    template = get_template("qwen3-coder")
    output = "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>"
    for policy in POLICIES:
        with pytest.raises(rt.RegexTimeoutError):
            parse_response(output, template, prefix="", malformed=policy)
        with pytest.raises(rt.RegexTimeoutError):
            collect(ResponseParser(template, "", malformed=policy), list(output))


# --- truncated: region_discard, never a region_close --------------------------------------------------------------


def test_truncated_call_ends_with_region_discard_for_every_chunking():
    template = get_template("qwen3")
    prefix = "<|im_start|>assistant\n"
    output = 'Sure.<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "get_wea'
    expected = {"role": "assistant", "content": "Sure.", "tool_calls": _calls(("get_time", {}))}
    assert parse_response(output, template, prefix=prefix, truncated=True) == expected
    for chunks in chunkings(output):
        message, events = collect(ResponseParser(template, prefix), chunks, truncated=True)
        assert message == expected
        assert events[-1] == {
            "type": "region_discard", "field": "tool_calls", "reason": "truncated", "raw": '\n<tool_call>\n{"name": "get_wea',
        }
        assert all(e["value"] is not None for e in events if e["type"] == "region_close")
        assert assemble(template, events) == expected


@pytest.mark.parametrize(
    "name, output, cut, calls",
    [
        # issue 15.5: closes that can match at the end of the text (\Z, lookaheads) must not close a cut call
        (
            "nemotron3",
            "<tool_call>\n<function=save>\n<parameter=text>\na </parameter> b </function> c\n</parameter>\n"
            "</function>\n</tool_call><|im_end|>",
            "</function>",
            [],
        ),
        (
            "llama3.1",
            '{"name": "book", "parameters": {"extra": {"seat": {"row": 12}}, "meal": "veg"}}<|eot_id|>',
            '{"row": 12}}',
            [],
        ),
    ],
)
def test_a_cut_is_not_a_close(name, output, cut, calls):
    template = get_template(name)
    text = output[: output.index(cut) + len(cut)]
    for tail in ("", " "):
        assert parse_response(text + tail, template, prefix="", truncated=True).get("tool_calls", []) == calls
        message, _ = collect(ResponseParser(template, ""), list(text + tail), truncated=True)
        assert message.get("tool_calls", []) == calls
    assert parse_response(output, template, prefix="")["tool_calls"]  # the whole output does hold a call


def test_truncated_with_malformed_policy_drops_a_cut_call_and_reports_a_complete_broken_one():
    template = get_template("hermes")
    output = '<tool_call>\n{"name": "f", "arguments": {"a": }}\n</tool_call>\n<tool_call>\n{"name": "g", "argu'
    for chunks in ([output], list(output)):
        message, events = collect(ResponseParser(template, "", malformed="drop"), chunks, truncated=True)
        assert message == {"role": "assistant"}
        assert [e["reason"] for e in events if e["type"] == "region_discard"] == ["malformed", "truncated"]
    assert parse_response(output, template, prefix="", malformed="drop", truncated=True) == {"role": "assistant"}


# --- the cut property (issue 15.5) -------------------------------------------------------------------------------


def _corpus_outputs():
    from pathlib import Path

    for path in sorted((Path(__file__).parent / "data" / "corpora").glob("*.json")):
        corpus = json.loads(path.read_text(encoding="utf-8"))
        for case in corpus["cases"]:
            if not case.get("truncated"):
                yield corpus["template"], case


CORPUS_OUTPUTS = list(_corpus_outputs())


def _prefix_of(calls, full):
    return calls == full[: len(calls)]


@pytest.mark.parametrize("name, case", CORPUS_OUTPUTS, ids=[f"{n}/{c['name']}" for n, c in CORPUS_OUTPUTS])
def test_every_cut_of_a_corpus_output(name, case):
    """Every cut of every complete corpus output, one-shot: never raises, returns only calls the full output holds
    (its first calls, in order). Streaming is checked on the cut fed whole at every other cut (the same message)
    and char by char at every thirteenth cut and the last four (the same calls), and the OpenAI adapter at every fifth cut (and the whole output): it
    never sends a call the full output lacks, and finish_reason is "tool_calls" only when it sent one."""
    template = get_template(name)
    prefix, tools, output = case["prefix"], case.get("tools"), case["output"]
    try:
        full = parse_response(output, template, prefix=prefix, tools=tools)
    except ValueError:
        pytest.skip("the full output does not parse (a corpus case of an error)")
    full_calls = full.get("tool_calls") or []
    full_openai = [c["function"] for c in to_openai_message(full, id_factory=str).get("tool_calls", [])]
    for cut in range(len(output) + 1):
        text = output[:cut]
        message = parse_response(text, template, prefix=prefix, tools=tools, truncated=True)
        assert _prefix_of(message.get("tool_calls") or [], full_calls), (cut, text[-80:])
        # Streamed, the calls are the one-shot calls. (The whole message is compared in the corpus tests; at some
        # cuts text fields may still differ by chunking, a scanner limit outside this property, see the README.)
        if cut % 2 == 0:
            streamed, events = collect(ResponseParser(template, prefix, tools=tools), [text], truncated=True)
            assert streamed == message, cut
            assert all(e["value"] is not None for e in events if e["type"] == "region_close")
        if cut % 13 == 0 or cut > len(output) - 4:
            streamed = collect(ResponseParser(template, prefix, tools=tools), list(text), truncated=True)[0]
            assert streamed.get("tool_calls") == message.get("tool_calls"), cut
        if cut % 5 == 0 or cut == len(output):
            adapter = OpenAIStreamAdapter(template, prefix, tools=tools, id_factory=str)
            chunks = list(adapter.stream([text[: cut // 2], text[cut // 2 :]], truncated=True))
            sent_calls = [c["function"] for c in accumulate_chunks(chunks).get("tool_calls") or []]
            assert sent_calls == full_openai[: len(sent_calls)], cut
            assert chunks[-1]["choices"][0]["finish_reason"] == "length"  # cut off, whatever calls were sent
            assert sent_calls == [c["function"] for c in to_openai_message(message, id_factory=str).get("tool_calls", [])]


def test_the_adapter_finish_reason_on_a_cut_call():
    template = get_template("nemotron3")
    text = "<tool_call>\n<function=save>\n<parameter=text>\na </parameter> b </function>"
    chunks = list(OpenAIStreamAdapter(template, "", id_factory=str).stream([text], truncated=True))
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert "tool_calls" not in accumulate_chunks(chunks)


# --- integration and CLI -----------------------------------------------------------------------------------------


def test_tokenizer_methods_take_the_policy(tmp_path):
    pytest.importorskip("transformers")
    from tokenizer_factory import RESPONSE_TEMPLATE, make_tokenizer

    tok = make_tokenizer(tmp_path, response_template=RESPONSE_TEMPLATE)
    prompt = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    output = 'Let me see.<tool_call>{"name": "f", "arguments": {</tool_call><tool_call>{"name": "g", "arguments": {}}</tool_call><|im_end|>'
    ids = tok.encode(output, add_special_tokens=False)
    with pytest.raises(ValueError):
        tok.parse_response(output, prefix=prompt)
    good = {"type": "function", "function": {"name": "g", "arguments": {}}}
    # content does not repeat in this template: its last region wins, as for any content
    assert tok.parse_response(output, prefix=prompt, malformed="drop") == {"role": "assistant", "content": "Let me see.", "tool_calls": [good]}
    assert tok.parse_response([ids, ids], prefix=prompt, malformed="drop") == [
        {"role": "assistant", "content": "Let me see.", "tool_calls": [good]}
    ] * 2
    for token_ids in (False, True):
        parser = tok.get_response_parser(prefix=prompt, malformed="content", token_ids=token_ids)
        events = parser.feed(ids if token_ids else output)
        message, final = parser.finalize()
        assert message == {"role": "assistant", "content": '<tool_call>{"name": "f", "arguments": {</tool_call>', "tool_calls": [good]}
        discard = next(e for e in events + final if e["type"] == "region_discard")
        assert discard["raw"] == '<tool_call>{"name": "f", "arguments": {</tool_call>'
    with pytest.raises(ValueError, match="malformed="):
        tok.parse_response(output, prefix=prompt, malformed="skip")


def _cli(argv, capsys, monkeypatch, stdin):
    import io
    import sys

    from response_templates.cli import main

    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


BROKEN_QWEN = 'Hi.<tool_call>\n{"name": "f", "arguments": {"a": }}\n</tool_call>\n<tool_call>\n{"name": "g", "arguments": {}}\n</tool_call>'


def test_cli_malformed_option(capsys, monkeypatch):
    code, out, err = _cli(["parse", "--template", "qwen3", "--compact"], capsys, monkeypatch, BROKEN_QWEN)
    assert code == 1 and "json" in err
    code, out, _ = _cli(["parse", "--template", "qwen3", "--compact", "--malformed", "drop"], capsys, monkeypatch, BROKEN_QWEN)
    assert code == 0
    assert json.loads(out) == {"role": "assistant", "content": "Hi.", "tool_calls": _calls(("g", {}))}
    code, out, _ = _cli(["parse", "--template", "qwen3", "--stream", "--malformed", "content", "--chunk-size", "3"], capsys, monkeypatch, BROKEN_QWEN)
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [e["reason"] for e in lines if e["type"] == "region_discard"] == ["malformed"]
    assert lines[-1]["message"]["content"] == 'Hi.<tool_call>\n{"name": "f", "arguments": {"a": }}\n</tool_call>'
    code, out, _ = _cli(["parse", "--template", "qwen3", "--openai", "--malformed", "content"], capsys, monkeypatch, BROKEN_QWEN)
    message = accumulate_chunks(json.loads(line) for line in out.splitlines())
    assert code == 0 and message["content"].startswith("Hi.<tool_call>") and len(message["tool_calls"]) == 1
    code, _, err = _cli(["parse", "--template", "qwen3", "--malformed", "ignore"], capsys, monkeypatch, BROKEN_QWEN)
    assert code == 2 and "--malformed" in err
    code, _, err = _cli(["parse", "--template", "qwen3", "--openai", "--early-arguments", "--malformed", "drop"], capsys, monkeypatch, BROKEN_QWEN)
    assert code == 2 and "--early-arguments" in err


def test_cli_stream_prints_region_discard_for_a_cut_call(capsys, monkeypatch):
    cut = 'Hi.<tool_call>\n{"name": "f", "argu'
    code, out, _ = _cli(["parse", "--template", "qwen3", "--stream", "--truncated"], capsys, monkeypatch, cut)
    events = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert {"type": "region_discard", "field": "tool_calls", "reason": "truncated", "raw": '<tool_call>\n{"name": "f", "argu'} in events
    assert not any(e["type"] == "region_close" and e["field"] == "tool_calls" for e in events)


# --- examples ----------------------------------------------------------------------------------------------------


EXAMPLES = str(__import__("pathlib").Path(__file__).resolve().parents[1] / "examples")


def test_batch_example_keeps_rows_with_a_broken_call_under_a_lenient_policy(monkeypatch):
    monkeypatch.syspath_prepend(EXAMPLES)
    import batch_dataset
    batch = {"prompt": ["", ""], "generation": ['Hi.<tool_call>\n{not json}\n</tool_call>', "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"]}
    strict = batch_dataset.parse_batch(batch)
    assert strict["parse_error"][0] and strict["parse_error"][1] is None
    lenient = batch_dataset.parse_batch(batch, malformed="content")
    assert lenient["parse_error"] == [None, None]
    assert lenient["content"][0] == "Hi.<tool_call>\n{not json}\n</tool_call>" and lenient["tool_calls"][0] is None
    assert json.loads(lenient["tool_calls"][1])[0]["function"]["name"] == "f"
    dropped = batch_dataset.parse_batch(batch, malformed="drop")
    assert dropped["content"][0] == "Hi." and dropped["parse_error"] == [None, None]


def test_streaming_example_renders_discarded_regions(monkeypatch):
    import io

    monkeypatch.syspath_prepend(EXAMPLES)
    import streaming

    out = io.StringIO()
    render = streaming.Renderer(out=out, color=False)
    output = 'Hi.<tool_call>\n{"name": "f", "arguments": {"a": }}\n</tool_call>\n<tool_call>\n{"name": "g", "argu'
    message, events = collect(ResponseParser(get_template("qwen3"), "", malformed="content"), list(output), truncated=True)
    for event in events:
        render(event)
    shown = out.getvalue()
    assert "not a valid call (json: " in shown and "kept as text" in shown
    assert "dropped: the generation was cut inside this call" in shown
    assert message == {"role": "assistant", "content": 'Hi.<tool_call>\n{"name": "f", "arguments": {"a": }}\n</tool_call>'}


# A cut-off call header followed by a long run of whitespace (a model stuck writing spaces or blank lines after the
# call opener). The name patterns of these templates used to backtrack over the run for every way to end the name
# (`[^<]+?` then `\s*`), so the parse ran out of the regex time limit instead of returning a message. Each search now
# runs in time linear in the run: the default 1 s limit is restored for this test, far above what the parse needs.
HEADER_CUTS = [
    ("deepseek_v3.1", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"),
    ("deepseek_r1", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"),
]


@pytest.fixture
def default_regex_timeout(regex_limit):
    regex_limit(1.0)


@pytest.mark.parametrize("filler", [" ", "\n", " \t"])
@pytest.mark.parametrize(("name", "header"), HEADER_CUTS, ids=[name for name, _ in HEADER_CUTS])
def test_a_cut_call_header_over_a_long_whitespace_run_still_parses(default_regex_timeout, name, header, filler):
    template = get_template(name)
    text = "Let me check." + header + filler * 3000 + "x"
    one_shot = parse_response(text, template, prefix="", truncated=True)
    assert "tool_calls" not in one_shot  # the unfinished call is dropped
    assert one_shot["content"].startswith("Let me check.")
    parser = ResponseParser(template, prefix="")
    for at in range(0, len(text), 64):
        parser.feed(text[at : at + 64])
    assert parser.finalize(truncated=True)[0] == one_shot


@pytest.mark.parametrize(
    "output",
    [
        "The tool says 21.\n[BEGIN]<!</tool_calls>\r<tool_calls>\nool says 21.\n[BEGIN FINAL RESPONSE]\nIt is 21°C.\n<|end|>",
        "Time.\n[BEGIN FINAL RESPONSE][END FINAL RESPONSE]>:[</tool_calls><tool_calls>,\n ls>[]</tool_calls>\n<|end|>",
        "Need]=<tool_calls>name<=</tool_calls>\t<tool_calls>rguments\": {}}]\n<|end|>",
    ],
)
def test_apriel_a_tool_block_opened_right_after_one_closed_ends_quickly(output):
    """`</tool_calls><tool_calls>` without a call after it: the content region that may open after a tool block used
    to open empty there and be closed empty at once by `<tool_calls>`, again and again (a regex timeout here, no end
    at all in transformers). The message is the same one-shot, streamed and in transformers."""
    from oracle import reference_parse_or_ours

    template = get_template("apriel_thinker")
    prefix = "<|begin_assistant|>\nHere are my reasoning steps:\n"
    message = parse_response(output, template, prefix=prefix)
    assert message["reasoning_content"].startswith(output[:5])
    parser = ResponseParser(template, prefix=prefix)
    for char in output:
        parser.feed(char)
    assert parser.finalize()[0] == message
    assert reference_parse_or_ours()(output, template, prefix=prefix) == message

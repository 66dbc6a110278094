"""parse_response and the streaming ResponseParser: prefixes, events, chunk splits, truncation, unicode, message
rules (defaults, empty values, optional, join, repeats) and tool-schema typing. Streaming must give the one-shot
message for every way of splitting the output, and both must agree with transformers' parser when it is installed."""

from __future__ import annotations

import random
from typing import Optional

import pytest
from oracle import reference_module

from response_templates import ResponseParser, TemplateError, parse_response

# The ChatML / Qwen-style template the offline test tokenizer is built for.
from event_helpers import collect, merged  # noqa: E402
from tokenizer_factory import RESPONSE_TEMPLATE as QWEN_LIKE  # noqa: E402

# Tool calls whose close requires the JSON object to have ended, so the marker may appear inside a JSON string.
JSON_END_CLOSE = {
    "version": 1,
    "start_anchor": "<|im_start|>assistant\n",
    "defaults": {"role": "assistant"},
    "fields": {
        "reasoning_content": {"open": "<think>", "close": "</think>"},
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"(?<=\})\s*</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close": "<|im_end|>"},
    },
}

# Qwen3-Coder style: the function name is captured by the open pattern, the arguments are xml-inline.
XML_CALLS = {
    "version": 1,
    "start_anchor": "<|im_start|>assistant\n",
    "defaults": {"role": "assistant"},
    "fields": {
        "tool_calls": {
            "open_pattern": r"<tool_call>\s*<function=(?P<name>[\w.-]+)>",
            "close_pattern": r"</function>\s*</tool_call>",
            "repeats": True,
            "content": "xml-inline",
            "content_args": {"tag_pattern": r"<parameter=(?P<key>\w+)>\n?(?P<value>.*?)\n?</parameter>"},
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "content": {"close": "<|im_end|>"},
    },
}

KV_CALLS = {
    "start_anchor": "A:",
    "fields": {
        "tool_calls": {
            "open_pattern": r"<call (?P<name>\w+)>",
            "close": "</call>",
            "repeats": True,
            "content": "kv-lines",
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "content": {},
    },
}

PY_CALLS = {
    "start_anchor": "A:",
    "fields": {
        "tool_calls": {
            "open": "[TOOL_CALLS]",
            "content": "python-call-list",
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}},
            "transform_each": True,
        },
        "content": {},
    },
}

REGEX_DELIMITERS = {
    "start_anchor_pattern": r"<\|assistant\|>\n?",
    "fields": {
        "reasoning_content": {"open_pattern": r"<think>\n?", "close_pattern": r"\n?</think>\n*"},
        "answer": {"open_pattern": r"(?m)^Answer:", "close_pattern": r"$"},
        "content": {},
    },
}

PROMPT = (
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
)

# name -> (template, prefix, output, expected message)
CASES = {
    "content only": (QWEN_LIKE, PROMPT, "Hello there!<|im_end|>", {"role": "assistant", "content": "Hello there!"}),
    "reasoning, content and calls": (
        QWEN_LIKE,
        PROMPT,
        '<think>\nThe user wants weather.\n</think>\n\nLet me check.\n<tool_call>\n{"name": "get_weather", "arguments": '
        '{"city": "Paris"}}\n</tool_call><tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call><|im_end|>',
        {
            "role": "assistant",
            "reasoning_content": "The user wants weather.",
            "content": "Let me check.",
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                {"type": "function", "function": {"name": "get_time", "arguments": {}}},
            ],
        },
    ),
    "prefilled think": (
        QWEN_LIKE,
        PROMPT + "<think>\n",
        "Short thought.\n</think>\n\nSunny.<|im_end|>",
        {"role": "assistant", "reasoning_content": "Short thought.", "content": "Sunny."},
    ),
    "multi-turn prefix": (
        QWEN_LIKE,
        PROMPT
        + "<think>old</think>Old answer.<|im_end|>\n<|im_start|>user\nAnd Rome?<|im_end|>\n<|im_start|>assistant\n",
        "Rainy.<|im_end|>",
        {"role": "assistant", "content": "Rainy."},
    ),
    "empty thinking written by the prompt": (
        QWEN_LIKE,
        PROMPT + "<think>\n\n</think>\n\n",
        "Direct answer.",
        {"role": "assistant", "content": "Direct answer."},
    ),
    "markers inside JSON strings": (
        JSON_END_CLOSE,
        PROMPT,
        '<tool_call>\n{"name": "write", "arguments": {"text": "use </tool_call> and <tool_call> and </think>"}}\n</tool_call>'
        "<|im_end|>",
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "type": "function",
                    "function": {
                        "name": "write",
                        "arguments": {"text": "use </tool_call> and <tool_call> and </think>"},
                    },
                }
            ],
        },
    ),
    "unicode": (
        QWEN_LIKE,
        PROMPT,
        "<think>思考中 🤔 e\u0301</think>東京は晴れ 🌞👩\u200d💻 naïve<tool_call>"
        '{"name": "say", "arguments": {"t": "日本語 😀"}}</tool_call>',
        {
            "role": "assistant",
            "reasoning_content": "思考中 🤔 e\u0301",
            "content": "東京は晴れ 🌞👩\u200d💻 naïve",
            "tool_calls": [{"type": "function", "function": {"name": "say", "arguments": {"t": "日本語 😀"}}}],
        },
    ),
    "xml calls with captured names": (
        XML_CALLS,
        PROMPT,
        "I'll check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
        "</parameter>\n</function>\n</tool_call><|im_end|>",
        {
            "role": "assistant",
            "content": "I'll check.",
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}}
            ],
        },
    ),
    "kv-lines calls": (
        KV_CALLS,
        "",
        "Checking.<call lookup>\nq: weather\nn: 2\n</call>",
        {
            "content": "Checking.",
            "tool_calls": [
                {"type": "function", "function": {"name": "lookup", "arguments": {"q": "weather", "n": "2"}}}
            ],
        },
    ),
    "python call list": (
        PY_CALLS,
        "",
        "Sure.[TOOL_CALLS][get_weather(city='Paris', days=3), get_time(tz=\"UTC\")]",
        {
            "content": "Sure.",
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}},
                {"type": "function", "function": {"name": "get_time", "arguments": {"tz": "UTC"}}},
            ],
        },
    ),
    "regex delimiters": (
        REGEX_DELIMITERS,
        "<|user|>hi\n<|assistant|>\n",
        "<think>\nhmm\n</think>\n\nplain text\nAnswer: 42",
        {"reasoning_content": "hmm", "content": "plain text", "answer": "42"},
    ),
    "longer literal that shares a prefix": (
        {"start_anchor": "A:", "fields": {"content": {"close": ["<|end|>", "<|e"]}}},
        "",
        "hi<|end|>bye",
        {"content": "bye"},
    ),
    "open that looks like a prefix but is not": (
        QWEN_LIKE,
        "",
        "a <b> < <th <think</think>",
        {"role": "assistant", "content": "a <b> < <th <think</think>"},
    ),
}


def run_stream(template, prefix, chunks, truncated=False, tools=None):
    return collect(ResponseParser(template, prefix, tools=tools), chunks, truncated)


def splits(text, rng):
    """Ways of cutting `text` into chunks: whole, one character at a time, two pieces at every point, random."""
    yield [text]
    yield list(text)
    for cut in range(1, len(text)):
        yield [text[:cut], text[cut:]]
    for _ in range(20):
        points = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 8))))
        yield [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]


@pytest.mark.parametrize("case", list(CASES))
def test_one_shot(case):
    template, prefix, output, expected = CASES[case]
    assert parse_response(output, template, prefix=prefix) == expected


@pytest.mark.parametrize("case", list(CASES))
def test_streaming_gives_the_one_shot_message_for_every_split(case):
    template, prefix, output, expected = CASES[case]
    reference_message, reference_events = run_stream(template, prefix, [output])
    assert reference_message == expected
    reference_events = merged(reference_events)
    rng = random.Random(case)
    for chunks in splits(output, rng):
        message, events = run_stream(template, prefix, chunks)
        assert message == expected, chunks
        assert merged(events) == reference_events, chunks


@pytest.mark.parametrize("case", list(CASES))
def test_matches_transformers(case):
    reference = reference_module()
    template, prefix, output, expected = CASES[case]
    assert reference.parse_response(output, template, prefix=prefix) == expected
    theirs = reference.ResponseParser(template, prefix=prefix)
    events = list(theirs.initial_events) + theirs.feed(output)
    message, final = theirs.finalize()
    assert message == expected
    assert merged(events + final) == merged(run_stream(template, prefix, [output])[1])


# Random outputs made of delimiters, pieces of delimiters and text, for templates with overlapping literal lists,
# regex delimiters (anchors, optional parts, captures) and a prefix that may open a region.
FUZZ_TEMPLATES = {
    "chatml": (
        QWEN_LIKE,
        [
            "<think>",
            "</think>",
            "<tool_call>",
            "</tool_call>",
            "<|im_end|>",
            "<|im_start|>assistant\n",
            "<",
            "</",
            "<th",
            "<tool",
            "<|im",
            "a",
            "b",
            " ",
            "\n",
            "é",
            "🙂",
            "{}",
            '{"name": "f"}',
        ],
    ),
    "literal lists": (
        {
            "start_anchor": "S",
            "fields": {
                "x": {"open": ["<x>", "<xx>", "<x"], "close": ["</x>", "</"]},
                "y": {"open": "[y]", "close": ["[/y]", "[/"], "repeats": True, "join": "|"},
                "content": {"close": ["<|end|>", "<|e"]},
            },
        },
        ["<x>", "<xx>", "<x", "</x>", "</", "[y]", "[/y]", "[/", "<|end|>", "<|e", "<|", "<", "[", "a", "b", "\n"],
    ),
    "regex": (
        {
            "start_anchor_pattern": "S+",
            "fields": {
                "r": {"open_pattern": r"<r( \w+)?>", "close_pattern": r"\n?</r>\n*"},
                "ans": {"open_pattern": r"(?m)^Answer:", "close_pattern": "$"},
                "content": {"close_pattern": "END$"},
            },
        },
        ["<r>", "<r a>", "<r ", "</r>", "\n", "Answer:", "END", "E", "S", "a", " ", "b", "<", "</"],
    ),
    "captures": (
        {
            "start_anchor": "S",
            "fields": {
                "t": {
                    "open_pattern": r"<t name=(?P<n>\w+)>",
                    "close_pattern": r"</t(?: (?P<n>\w+))?>",
                    "repeats": True,
                    "transform": {"n": "{n}", "c": "{content}"},
                },
                "content": {},
            },
        },
        ["<t name=a>", "<t name=", "</t>", "</t ok>", "</t", "<t", "a", "b", " ", "ok>"],
    ),
}


def _outcome(call):
    try:
        return "ok", call()
    except KeyError:
        return "error", "KeyError"
    except ValueError:
        return "error", "ValueError"


def test_random_outputs_parse_the_same_however_they_are_split():
    try:
        from transformers.utils.chat_parsing import parse_response as reference
    except ImportError:
        reference = None
    rng = random.Random(20240607)
    for _ in range(300):
        name = rng.choice(sorted(FUZZ_TEMPLATES))
        template, alphabet = FUZZ_TEMPLATES[name]
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        prefix = rng.choice(["", "S", "<|im_start|>assistant\n", "<think>", "S<x>", "S<r>"])
        cut = rng.randint(0, len(text))
        one_shot = _outcome(lambda: parse_response(text, template, prefix=prefix))
        for chunks in ([text], list(text), [text[:cut], text[cut:]]):
            assert _outcome(lambda: run_stream(template, prefix, chunks)[0]) == one_shot, (name, prefix, chunks)
        if reference is not None:
            assert _outcome(lambda: reference(text, template, prefix=prefix)) == one_shot, (name, prefix, text)


@pytest.mark.parametrize(
    ("close_pattern", "output", "cut"),
    [(r"</x>(?:[0-9]{2}!)?", "<x>a</x>12!rest", 9), (r"</x>(?:[a-z]{3}\.)?", "<x>a</x>end.rest", 9)],
)
def test_regex_close_with_a_multi_character_optional_tail_is_split_independent(close_pattern, output, cut):
    template = {"start_anchor": "S", "fields": {"x": {"open": "<x>", "close_pattern": close_pattern}, "content": {}}}
    assert parse_response(output, template, prefix="") == {"x": "a", "content": "rest"}
    assert run_stream(template, "", [output[:cut], output[cut:]])[0] == {"x": "a", "content": "rest"}



# An opener whose first alternative is a long literal and whose last is an empty lookbehind match (Cohere's content
# reopened after a citation): with the literal cut by a chunk boundary, `regex` offers the empty match; the literal,
# once complete, is the match one-shot parsing takes.
LONG_LITERAL_OR_EMPTY = {
    "start_anchor": "S",
    "fields": {
        "content": {
            "repeats": True,
            "join": "",
            "open_pattern": r"<\|START_RESPONSE\|>\s*|(?<=</cite>)",
            "close_pattern": r"\s*<\|END_RESPONSE\|>|<cite>|</cite>",
        },
    },
}


@pytest.mark.parametrize(
    "output",
    [
        "<|START_RESPONSE|><cite>Blue</cite><|START_RESPONSE|>Paris<|END_RESPONSE|>",
        "<|START_RESPONSE|>A</cite><|START_RESPONSE|>  B<|END_RESPONSE|>",
    ],
)
def test_a_long_literal_cut_by_a_chunk_beats_an_empty_alternative_as_in_one_shot(output):
    one_shot = parse_response(output, LONG_LITERAL_OR_EMPTY, prefix="")
    assert "<|START" not in one_shot["content"]
    for cut in range(len(output) + 1):
        assert run_stream(LONG_LITERAL_OR_EMPTY, "", [output[:cut], output[cut:]])[0] == one_shot, cut
    assert run_stream(LONG_LITERAL_OR_EMPTY, "", list(output))[0] == one_shot


def test_cohere_content_after_a_citation_streams_as_one_shot():
    from response_templates.library import get_template

    template = get_template("cohere-command")
    output = (
        "<|START_THINKING|>Both facts are in the documents.<|END_THINKING|><|START_RESPONSE|><co>Blue</co: 0:[0]>"
        "<|START_RESPONSE|>Paris is the capital.<|END_RESPONSE|><|END_OF_TURN_TOKEN|>"
    )
    one_shot = parse_response(output, template, prefix="")
    assert one_shot["content"] == "BlueParis is the capital."
    for cut in range(len(output) + 1):
        assert run_stream(template, "", [output[:cut], output[cut:]])[0] == one_shot, cut

# ---------------------------------------------------------------------------------------------------------------
# prefix


def test_prefix_none_raises_value_error_after_template_validation():
    for call in (lambda: parse_response("hi", QWEN_LIKE), lambda: ResponseParser(QWEN_LIKE)):
        with pytest.raises(ValueError) as info:
            call()
        assert not isinstance(info.value, TemplateError)
        assert "prefix" in str(info.value) and 'prefix=""' in str(info.value)


def test_prefix_none_with_a_bad_template_raises_template_error():
    bad = {"start_anchor": "A", "fields": {"content": {"colse": "x"}}}
    for call in (lambda: parse_response("hi", bad, prefix=None), lambda: ResponseParser(bad, None)):
        with pytest.raises(TemplateError, match="colse"):
            call()


def test_empty_prefix_opts_out():
    assert parse_response("<think>a</think>b", QWEN_LIKE, prefix="") == {
        "role": "assistant",
        "reasoning_content": "a",
        "content": "b",
    }
    assert ResponseParser(QWEN_LIKE, prefix="").initial_events == []


def test_prefix_without_the_anchor_is_read_whole():
    # no start anchor in the prompt: the whole prompt counts, so its <think> is open
    assert parse_response("idea</think>answer", QWEN_LIKE, prefix="<think>") == {
        "role": "assistant",
        "reasoning_content": "idea",
        "content": "answer",
    }


def test_start_anchor_picks_the_last_turn():
    prefix = (
        "<|im_start|>assistant\n<think>first</think>one<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n"
        "<|im_start|>assistant\n<think>"
    )
    parser = ResponseParser(QWEN_LIKE, prefix)
    assert parser.initial_events == [{"type": "region_open", "field": "reasoning_content"}]
    events = parser.feed("second</think>two")
    message, _ = parser.finalize()
    assert message == {"role": "assistant", "reasoning_content": "second", "content": "two"}
    assert "first" not in str(events) and "one" not in str(events)


def test_start_anchor_pattern_picks_the_last_match():
    template = {"start_anchor_pattern": r"<\|turn (?:\d+)\|>", "fields": {"content": {}}}
    assert parse_response("new", template, prefix="<|turn 1|>old<|turn 2|>prefill ") == {"content": "prefill new"}


@pytest.mark.parametrize(
    ("start_anchor", "prefix", "expected"),
    [
        ("aa", "aaa", "a!"),  # occurrences are taken left to right without overlap, as finditer does
        ("aba", "ababa", "ba!"),
        ("<|a|>", "x<|a|>y<|a|>z", "z!"),
        (["<|a|>", "<|b|>"], "<|a|>1<|b|>2", "2!"),
        (["ab", "b"], "abab", "!"),
    ],
)
def test_start_anchor_occurrences(start_anchor, prefix, expected):
    template = {"start_anchor": start_anchor, "fields": {"content": {}}}
    assert parse_response("!", template, prefix=prefix) == {"content": expected}
    assert run_stream(template, prefix, ["!"])[0] == {"content": expected}


def test_prefilled_think_events():
    parser = ResponseParser(QWEN_LIKE, PROMPT + "<think>\n")
    assert parser.initial_events == [
        {"type": "region_open", "field": "reasoning_content"},
        {"type": "region_chunk", "field": "reasoning_content", "text": "\n", "dirty": False},
    ]
    events = parser.feed("ok</think>done")
    assert events[-1]["field"] == "content"
    message, _ = parser.finalize()
    assert message == {"role": "assistant", "reasoning_content": "ok", "content": "done"}


def test_prefix_that_writes_a_whole_region_puts_it_in_the_message():
    template = {"start_anchor": "A:", "fields": {"name": {"open": "<n>", "close": "</n>"}, "content": {}}}
    parser = ResponseParser(template, "A:<n>bot</n>")
    assert parser.initial_events[-1] == {"type": "region_close", "field": "name", "value": "bot"}
    parser.feed("hello")
    assert parser.finalize()[0] == {"name": "bot", "content": "hello"}


def test_prefix_must_be_text_without_a_tokenizer():
    with pytest.raises(TypeError):
        ResponseParser(QWEN_LIKE, [1, 2, 3])
    with pytest.raises(TypeError):
        parse_response("hi", QWEN_LIKE, prefix=[1, 2])


def test_text_must_be_text_without_a_tokenizer():
    with pytest.raises(TypeError, match="tokenizer"):
        parse_response([1, 2, 3], QWEN_LIKE, prefix="")
    parser = ResponseParser(QWEN_LIKE, "")
    with pytest.raises(TypeError, match="tokenizer"):
        parser.feed([1, 2, 3])


# ---------------------------------------------------------------------------------------------------------------
# events


def test_events_order_and_values():
    message, events = run_stream(
        QWEN_LIKE, "", list('<think>r</think>c<tool_call>{"name": "f", "arguments": {}}</tool_call>')
    )
    call = {"type": "function", "function": {"name": "f", "arguments": {}}}
    assert merged(events) == [
        {"type": "region_open", "field": "reasoning_content"},
        {"type": "region_chunk", "field": "reasoning_content", "text": "r", "dirty": False},
        {"type": "region_close", "field": "reasoning_content", "value": "r"},
        {"type": "region_open", "field": "content"},
        {"type": "region_chunk", "field": "content", "text": "c", "dirty": False},
        {"type": "region_close", "field": "content", "value": "c"},
        {"type": "region_open", "field": "tool_calls"},
        {"type": "region_chunk", "field": "tool_calls", "text": '{"name": "f", "arguments": {}}', "dirty": True},
        {"type": "region_close", "field": "tool_calls", "value": call},
    ]
    assert message == {"role": "assistant", "reasoning_content": "r", "content": "c", "tool_calls": [call]}


def test_events_are_emitted_as_soon_as_they_are_settled():
    parser = ResponseParser(QWEN_LIKE, "")
    assert parser.feed("Hel") == [
        {"type": "region_open", "field": "content"},
        {"type": "region_chunk", "field": "content", "text": "Hel", "dirty": False},
    ]
    assert parser.feed("lo <") == [{"type": "region_chunk", "field": "content", "text": "lo ", "dirty": False}]
    assert parser.feed("thi") == []  # "<thi" may still become <think>
    assert parser.feed("s") == [{"type": "region_chunk", "field": "content", "text": "<this", "dirty": False}]
    assert parser.feed("<think") == []
    assert parser.feed(">") == [
        {"type": "region_close", "field": "content", "value": "Hello <this"},
        {"type": "region_open", "field": "reasoning_content"},
    ]


def test_no_partial_delimiter_text_reaches_the_events():
    message, events = run_stream(
        QWEN_LIKE, "", ["a<", "th", "ink", ">b</", "think", "><tool", "_call>{}</tool_", "call>"]
    )
    text_by_field = {}
    for event in events:
        if event["type"] == "region_chunk":
            text_by_field[event["field"]] = text_by_field.get(event["field"], "") + event["text"]
    assert text_by_field == {"content": "a", "reasoning_content": "b", "tool_calls": "{}"}
    assert message == {
        "role": "assistant",
        "content": "a",
        "reasoning_content": "b",
        "tool_calls": [{"type": "function", "function": {}}],
    }


@pytest.mark.parametrize(
    ("content", "body", "dirty"),
    [
        ("text", "hi", False),
        ("int", "3", False),
        ("float", "2.5", False),
        ("bool", "true", False),
        ("json", '{"a": 1}', True),
        ("xml-inline", "<k>v</k>", True),
        ("kv-lines", "a: 1", True),
        ("python-call-list", "[f(a=1)]", True),
    ],
)
def test_region_chunk_dirty_flag(content, body, dirty):
    field = {"open": "<v>", "close": "</v>", "content": content}
    if content == "xml-inline":
        field["content_args"] = {"tag_pattern": r"<(?P<key>\w+)>(?P<value>.*?)</(?P=key)>"}
    parser = ResponseParser({"start_anchor": "A:", "fields": {"v": field}}, "")
    events = parser.feed("<v>" + body[:1]) + parser.feed(body[1:] + "</v>")
    chunks = [event for event in events if event["type"] == "region_chunk"]
    assert chunks and all(event["dirty"] is dirty for event in chunks)
    assert "".join(event["text"] for event in chunks) == body


def test_feed_after_finalize_raises():
    parser = ResponseParser(QWEN_LIKE, "")
    parser.feed("hi")
    parser.finalize()
    with pytest.raises(RuntimeError):
        parser.feed("more")


def test_finalize_twice_raises():
    parser = ResponseParser(QWEN_LIKE, "")
    parser.finalize()
    with pytest.raises(RuntimeError):
        parser.finalize()


def test_empty_feeds_change_nothing():
    parser = ResponseParser(QWEN_LIKE, "")
    assert parser.feed("") == []
    parser.feed("hi")
    assert parser.feed("") == []
    assert parser.finalize()[0] == {"role": "assistant", "content": "hi"}


def test_empty_output():
    assert parse_response("", QWEN_LIKE, prefix=PROMPT) == {"role": "assistant"}
    assert run_stream(QWEN_LIKE, PROMPT, []) == ({"role": "assistant"}, [])


# ---------------------------------------------------------------------------------------------------------------
# truncated outputs

TRUNCATED_OUTPUT = (
    '<think>plan</think>Calling.<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>'
    '<tool_call>{"name": "b", "arguments": {"y": '
)


def test_without_truncated_an_unfinished_json_call_raises():
    with pytest.raises(ValueError, match="json"):
        parse_response(TRUNCATED_OUTPUT, QWEN_LIKE, prefix="")
    parser = ResponseParser(QWEN_LIKE, "")
    parser.feed(TRUNCATED_OUTPUT)
    with pytest.raises(ValueError, match="json"):
        parser.finalize()


def test_truncated_drops_the_unfinished_call_and_keeps_earlier_ones():
    expected = {
        "role": "assistant",
        "reasoning_content": "plan",
        "content": "Calling.",
        "tool_calls": [{"type": "function", "function": {"name": "a", "arguments": {"x": 1}}}],
    }
    assert parse_response(TRUNCATED_OUTPUT, QWEN_LIKE, prefix="", truncated=True) == expected
    for chunks in ([TRUNCATED_OUTPUT], list(TRUNCATED_OUTPUT)):
        message, events = run_stream(QWEN_LIKE, "", chunks, truncated=True)
        assert message == expected
        # the dropped call ends with region_discard (never a region_close, whose value consumers turn into a call)
        assert events[-1] == {
            "type": "region_discard", "field": "tool_calls", "reason": "truncated",
            "raw": '<tool_call>{"name": "b", "arguments": {"y": ',
        }
        assert all(e["value"] is not None for e in events if e["type"] == "region_close")


def test_truncated_with_only_an_unfinished_call():
    assert parse_response('<tool_call>{"name": "b"', QWEN_LIKE, prefix="", truncated=True) == {"role": "assistant"}


def test_truncated_keeps_unfinished_text_regions():
    # text (reasoning, content) cut off is still what the model wrote
    assert parse_response("<think>half a thou", QWEN_LIKE, prefix="", truncated=True) == {
        "role": "assistant",
        "reasoning_content": "half a thou",
    }
    message, events = run_stream(QWEN_LIKE, "", ["Partial answ"], truncated=True)
    assert message == {"role": "assistant", "content": "Partial answ"}
    assert events[-1] == {"type": "region_close", "field": "content", "value": "Partial answ"}


def test_truncated_output_that_is_complete_is_unchanged():
    output = '<think>r</think>c<tool_call>{"name": "a", "arguments": {}}</tool_call>'
    assert parse_response(output, QWEN_LIKE, prefix="", truncated=True) == parse_response(output, QWEN_LIKE, prefix="")


def test_truncated_python_call_list_is_dropped():
    output = "Sure.[TOOL_CALLS][f(a=1), g(b="
    with pytest.raises(ValueError, match="python-call-list"):
        parse_response(output, PY_CALLS, prefix="")
    assert parse_response(output, PY_CALLS, prefix="", truncated=True) == {"content": "Sure."}


# ---------------------------------------------------------------------------------------------------------------
# message rules


def test_defaults_are_always_kept_even_when_empty():
    template = {
        "start_anchor": "A:",
        "defaults": {"role": "assistant", "content": "", "tool_calls": [], "meta": {"k": [1]}},
        "fields": {"tool_calls": {"open": "<c>", "close": "</c>", "repeats": True, "content": "json"}, "content": {}},
    }
    assert parse_response("", template, prefix="") == {
        "role": "assistant",
        "content": "",
        "tool_calls": [],
        "meta": {"k": [1]},
    }
    message = parse_response("   ", template, prefix="")
    assert message == {"role": "assistant", "content": "", "tool_calls": [], "meta": {"k": [1]}}
    message = parse_response('hi<c>{"n": 1}</c>', template, prefix="")
    assert message == {"role": "assistant", "content": "hi", "tool_calls": [{"n": 1}], "meta": {"k": [1]}}
    # a message never shares (and so never mutates) the template's defaults
    again = parse_response("", template, prefix="")
    assert again["tool_calls"] == [] and template["defaults"]["tool_calls"] == []
    streamed, _ = run_stream(template, "", ['<c>{"n": 2}</c>'])
    assert streamed["tool_calls"] == [{"n": 2}]
    assert run_stream(template, "", [])[0]["tool_calls"] == [] and template["defaults"]["tool_calls"] == []


def test_parsed_values_replace_defaults():
    template = {"start_anchor": "A:", "defaults": {"content": "nothing"}, "fields": {"content": {}}}
    assert parse_response("something", template, prefix="") == {"content": "something"}


def test_empty_values_are_dropped():
    template = {
        "start_anchor": "A:",
        "fields": {
            "reasoning_content": {"open": "<think>", "close": "</think>"},
            "obj": {"open": "<o>", "close": "</o>", "content": "json"},
            "lst": {"open": "<l>", "close": "</l>", "content": "json"},
            "null": {"open": "<n>", "close": "</n>", "content": "json"},
            "zero": {"open": "<z>", "close": "</z>", "content": "int"},
            "no": {"open": "<b>", "close": "</b>", "content": "bool"},
            "content": {},
        },
    }
    output = "<think>\n\n</think><o>{}</o><l>[]</l><n>null</n><z>0</z><b>false</b>  \n"
    # empty strings, lists, dicts and None are dropped; 0 and False are values
    assert parse_response(output, template, prefix="") == {"zero": 0, "no": False}
    assert run_stream(template, "", list(output))[0] == {"zero": 0, "no": False}


def test_optional_false_is_enforced():
    template = {
        "start_anchor": "A:",
        "fields": {"answer": {"open": "<a>", "close": "</a>", "optional": False}, "content": {}},
    }
    assert parse_response("<a>yes</a>", template, prefix="") == {"answer": "yes"}
    with pytest.raises(ValueError, match="answer"):
        parse_response("no answer here", template, prefix="")
    parser = ResponseParser(template, "")
    parser.feed("no answer")
    with pytest.raises(ValueError, match="answer"):
        parser.finalize()


def test_optional_false_is_satisfied_by_an_empty_value():
    # the field appeared, even if its value is empty and dropped from the message
    template = {"start_anchor": "A:", "fields": {"answer": {"open": "<a>", "close": "</a>", "optional": False}}}
    assert parse_response("<a> </a>", template, prefix="") == {}


def test_join_concatenates_repeated_matches():
    template = {
        "start_anchor": "A:",
        "fields": {
            "reasoning_content": {"open": "<think>", "close": "</think>", "repeats": True, "join": "\n\n"},
            "content": {},
        },
    }
    output = "<think>one</think>text<think>two</think><think>three</think>"
    expected = {"reasoning_content": "one\n\ntwo\n\nthree", "content": "text"}
    assert parse_response(output, template, prefix="") == expected
    assert run_stream(template, "", list(output))[0] == expected


def test_join_needs_strings():
    template = {
        "start_anchor": "A:",
        "fields": {"n": {"open": "<n>", "close": "</n>", "content": "int", "repeats": True, "join": ","}},
    }
    with pytest.raises(ValueError, match="join"):
        parse_response("<n>1</n><n>2</n>", template, prefix="")


def test_repeats_collects_every_match_in_a_list():
    template = {
        "start_anchor": "A:",
        "fields": {"n": {"open": "<n>", "close": "</n>", "content": "int", "repeats": True}},
    }
    assert parse_response("<n>1</n>", template, prefix="") == {"n": [1]}
    assert parse_response("<n>1</n> x <n>2</n><n>3</n>", template, prefix="") == {"n": [1, 2, 3]}


def test_without_repeats_the_last_match_wins():
    template = {"start_anchor": "A:", "fields": {"n": {"open": "<n>", "close": "</n>", "content": "int"}}}
    assert parse_response("<n>1</n><n>2</n>", template, prefix="") == {"n": 2}


def test_text_outside_fields_is_dropped_without_an_implicit_field():
    template = {"start_anchor": "A:", "fields": {"r": {"open": "<r>", "close": "</r>"}}}
    message, events = run_stream(template, "", ["junk <r>x</r> more junk"])
    assert message == {"r": "x"}
    assert all(event["field"] == "r" for event in events)


def test_an_unclosed_region_runs_to_the_end():
    assert parse_response("<think>never closed", QWEN_LIKE, prefix="") == {
        "role": "assistant",
        "reasoning_content": "never closed",
    }


def test_a_later_empty_match_replaces_an_earlier_value():
    # as in transformers: without repeats the last match wins, even when it is empty (and then dropped)
    output = "Let me check.<tool_call>{}</tool_call>\n<tool_call>{}</tool_call>"
    assert parse_response(output, QWEN_LIKE, prefix="") == {
        "role": "assistant",
        "tool_calls": [{"type": "function", "function": {}}, {"type": "function", "function": {}}],
    }


def test_content_errors_are_value_errors():
    with pytest.raises(ValueError):
        parse_response("<tool_call>not json</tool_call>", QWEN_LIKE, prefix="")


# ---------------------------------------------------------------------------------------------------------------
# unicode split across chunks


def test_unicode_split_between_chunks_is_kept_whole():
    output = "<think>🤔💭 深く考える</think>東京 e\u0301 👨\u200d👩\u200d👧 🇫🇷 done"
    expected = {
        "role": "assistant",
        "reasoning_content": "🤔💭 深く考える",
        "content": "東京 e\u0301 👨\u200d👩\u200d👧 🇫🇷 done",
    }
    for chunks in (list(output), [output[:9], output[9:23], output[23:]]):
        message, events = run_stream(QWEN_LIKE, "", chunks)
        assert message == expected
        streamed = "".join(
            event["text"] for event in events if event["type"] == "region_chunk" and event["field"] == "content"
        )
        assert streamed == "東京 e\u0301 👨\u200d👩\u200d👧 🇫🇷 done"


# ---------------------------------------------------------------------------------------------------------------
# tool-schema typing

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "f",
        "description": "every kind of parameter",
        "parameters": {
            "type": "object",
            "properties": {
                "s": {"type": "string"},
                "i": {"type": "integer"},
                "n": {"type": "number"},
                "b": {"type": "boolean"},
                "o": {"type": "object"},
                "a": {"type": "array"},
                "u": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                "z": {"type": "integer", "nullable": True},
                "si": {"type": ["string", "integer"]},
            },
        },
    },
}
RAW_ARGUMENTS = {
    "s": "42",
    "i": "3",
    "n": "2.5",
    "b": "true",
    "o": '{"k": 1}',
    "a": "[1, 2]",
    "u": "7",
    "z": "None",
    "si": "5",
}


def first_call_arguments(message: dict) -> dict:
    return message["tool_calls"][0]["function"]["arguments"]


def _xml_call(arguments: dict, name: str = "f") -> str:
    params = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in arguments.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def test_tools_convert_xml_inline_arguments():
    message = parse_response(_xml_call(RAW_ARGUMENTS), XML_CALLS, prefix="", tools=[WEATHER_TOOL])
    assert message["tool_calls"][0]["function"]["arguments"] == {
        "s": "42",  # strings stay strings
        "i": 3,
        "n": 2.5,
        "b": True,
        "o": {"k": 1},
        "a": [1, 2],
        "u": 7,  # anyOf: the first type that reads wins
        "z": None,  # nullable
        "si": 5,  # xml-inline values are all text: the first type that reads wins
    }


def test_tools_convert_kv_lines_arguments():
    output = "<call f>\n" + "\n".join(f"{key}: {value}" for key, value in RAW_ARGUMENTS.items()) + "\n</call>"
    arguments = first_call_arguments(parse_response(output, KV_CALLS, prefix="", tools=[WEATHER_TOOL]))
    assert arguments["i"] == 3 and arguments["b"] is True and arguments["s"] == "42" and arguments["z"] is None


def test_tools_leave_string_parameters_of_json_untouched():
    output = '<tool_call>{"name": "f", "arguments": {"s": "42", "i": "3", "u": "7", "si": "5", "n": 2.5, "z": "null"}}</tool_call>'
    arguments = first_call_arguments(parse_response(output, QWEN_LIKE, prefix="", tools=[WEATHER_TOOL]))
    # json tells strings from numbers: a parameter that allows strings keeps the string the model wrote
    assert arguments == {"s": "42", "i": 3, "u": "7", "si": "5", "n": 2.5, "z": None}


def test_tools_leave_string_parameters_of_python_call_lists_untouched():
    output = "[TOOL_CALLS][f(s='42', i='3', u='7', b='false', a=[1])]"
    arguments = first_call_arguments(parse_response(output, PY_CALLS, prefix="", tools=[WEATHER_TOOL]))
    assert arguments == {"s": "42", "i": 3, "u": "7", "b": False, "a": [1]}


def test_tools_keep_text_that_does_not_read_as_the_type():
    arguments = {"i": "three", "n": "nan", "b": "maybe", "o": "[1]", "a": "{}"}
    message = parse_response(_xml_call(arguments), XML_CALLS, prefix="", tools=[WEATHER_TOOL])
    assert message["tool_calls"][0]["function"]["arguments"] == arguments


def test_tools_integer_accepts_whole_floats():
    message = parse_response(_xml_call({"i": "3.0", "n": "4"}), XML_CALLS, prefix="", tools=[WEATHER_TOOL])
    arguments = message["tool_calls"][0]["function"]["arguments"]
    assert arguments == {"i": 3, "n": 4} and type(arguments["i"]) is int and type(arguments["n"]) is int


def test_tools_ignore_unknown_tools_and_parameters():
    message = parse_response(
        _xml_call({"i": "3", "extra": "4"}, name="other"), XML_CALLS, prefix="", tools=[WEATHER_TOOL]
    )
    assert message["tool_calls"][0]["function"]["arguments"] == {"i": "3", "extra": "4"}
    message = parse_response(_xml_call({"i": "3", "extra": "4"}), XML_CALLS, prefix="", tools=[WEATHER_TOOL])
    assert message["tool_calls"][0]["function"]["arguments"] == {"i": 3, "extra": "4"}


def test_tools_accept_bare_function_schemas():
    bare = WEATHER_TOOL["function"]
    message = parse_response(_xml_call({"i": "3"}), XML_CALLS, prefix="", tools=[bare])
    assert message["tool_calls"][0]["function"]["arguments"] == {"i": 3}


def get_weather(city: str, days: int, metric: bool = True, ratio: Optional[float] = None, tags: Optional[list[str]] = None):
    """Get the weather forecast.

    Args:
        city: The city name.
        days: How many days ahead.
        metric: Whether to use metric units.
        ratio: A ratio.
        tags: Labels.
    """


def test_tools_accept_python_functions():
    pytest.importorskip("transformers", reason="reading Python functions needs transformers' get_json_schema")
    arguments = {"city": "123", "days": "3", "metric": "false", "ratio": "0.5", "tags": '["a"]'}
    message = parse_response(_xml_call(arguments, name="get_weather"), XML_CALLS, prefix="", tools=[get_weather])
    assert message["tool_calls"][0]["function"]["arguments"] == {
        "city": "123",
        "days": 3,
        "metric": False,
        "ratio": 0.5,
        "tags": ["a"],
    }
    message = parse_response(
        _xml_call({"ratio": "None"}, name="get_weather"), XML_CALLS, prefix="", tools=[get_weather]
    )
    assert message["tool_calls"][0]["function"]["arguments"] == {"ratio": None}


def test_tools_type_arguments_while_streaming():
    output = _xml_call({"i": "3", "s": "x"})
    message, events = run_stream(XML_CALLS, "", list(output), tools=[WEATHER_TOOL])
    assert message["tool_calls"][0]["function"]["arguments"] == {"i": 3, "s": "x"}
    close = [event for event in events if event["type"] == "region_close" and event["field"] == "tool_calls"]
    assert close[0]["value"]["function"]["arguments"] == {"i": 3, "s": "x"}


def test_tools_convert_merged_duplicates_one_by_one():
    template = {
        "start_anchor": "A:",
        "fields": {
            "tool_calls": {
                "open_pattern": r"<call (?P<name>\w+)>",
                "close": "</call>",
                "content": "xml-inline",
                "content_args": {"tag_pattern": r"<(?P<key>\w+)>(?P<value>.*?)</(?P=key)>", "merge_duplicates": True},
                "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
            }
        },
    }
    tool = {
        "name": "g",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}, "l": {"type": "array"}}},
    }
    message = parse_response("<call g><n>1</n><n>2</n><l>[1]</l><l>[2]</l></call>", template, prefix="", tools=[tool])
    assert message["tool_calls"]["function"]["arguments"] == {"n": [1, 2], "l": ["[1]", "[2]"]}


def test_tools_do_not_override_value_parser_by():
    template = {
        "start_anchor": "A:",
        "fields": {
            "tool_calls": {
                "open_pattern": r"<call (?P<name>\w+)>",
                "close": "</call>",
                "content": "xml-inline",
                "content_args": {
                    "tag_pattern": r'<arg name="(?P<key>\w+)" type="(?P<type>\w+)">(?P<value>.*?)</arg>',
                    "value_parser_by": {"group": "type", "parsers": {"int": {"name": "int"}}},
                },
                "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
            }
        },
    }
    output = '<call f><arg name="i" type="str">3</arg><arg name="s" type="int">4</arg></call>'
    message = parse_response(output, template, prefix="", tools=[WEATHER_TOOL])
    # the model said how to read each value: the schema does not undo it
    assert message["tool_calls"]["function"]["arguments"] == {"i": "3", "s": 4}


def test_tools_match_transformers():
    reference = reference_module()
    for template, output in (
        (XML_CALLS, _xml_call(RAW_ARGUMENTS)),
        (QWEN_LIKE, '<tool_call>{"name": "f", "arguments": {"s": "42", "i": "3", "u": "7", "z": "null"}}</tool_call>'),
        (PY_CALLS, "[TOOL_CALLS][f(s='42', i='3', u='7', b='false')]"),
    ):
        assert parse_response(output, template, prefix="", tools=[WEATHER_TOOL]) == reference.parse_response(
            output, template, prefix="", tools=[WEATHER_TOOL]
        )


# --- a trigger whose complete match follows an earlier partial one --------------------------------------------
# `regex`'s partial search prefers a complete match anywhere to an earlier partial one (`[^<>]|<T>` on `<T` finds
# `T`), so the scanner must not take its answer as the leftmost candidate: the open `<T>` split as `<T` + `>` was lost.

BOUNDED_LEADS = ["[^<>]{0,3}<T>", "[^<>]{0,200}<T>", "x?<T>", "(?:ab|b)<T>", "[a-z]{1,4}:<T>"]


@pytest.mark.parametrize("pattern", BOUNDED_LEADS)
def test_a_bounded_lead_before_a_literal_streams_as_one_shot(pattern):
    template = {"start_anchor": "<A>", "fields": {"content": {"open_pattern": pattern, "close": "<E>"}}}
    for text in ["<T>hi<E>", "ab:<T>hi<E>", "zz <T>hi <E> tail", "b<T><T>x<E>"]:
        whole = parse_response(text, template, prefix="<A>")
        for cut in range(1, len(text)):
            parser = ResponseParser(template, prefix="<A>")
            parser.feed(text[:cut])
            parser.feed(text[cut:])
            assert parser.finalize()[0] == whole, (pattern, text, cut)
        parser = ResponseParser(template, prefix="<A>")
        for char in text:
            parser.feed(char)
        assert parser.finalize()[0] == whole, (pattern, text)


def test_leftmost_start_finds_a_partial_trigger_before_a_complete_one():
    import random

    import regex

    from response_templates.core.scanner import leftmost_start

    rng = random.Random(7)
    for source in ["[^<>]|<T>", "ab|c", "<tool>|o", "x{2,3}|y"]:
        trigger = regex.compile(source)
        for _ in range(400):
            text = "".join(rng.choice("<>Tabcoxy") for _ in range(rng.randint(0, 8)))
            low = rng.randint(0, len(text))
            expected = next((at for at in range(low, len(text)) if (m := trigger.match(text, at, partial=True))
                             is not None and m.end() > at), None)
            assert leftmost_start(trigger, text, low, len(text)) == expected, (source, text, low)

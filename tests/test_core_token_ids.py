"""Parsing token ids with tokenizer=: control tokens act as delimiters only when generated as their own ids, control
tokens spelled out with ordinary tokens stay text, multi-byte characters split across ids are never torn, and the
results equal transformers' own parser (5.25+) with the same tokenizer. The tokenizer is a tiny byte-level BPE built
offline by tests/tokenizer_factory.py."""

from __future__ import annotations

import json
import random

import pytest
from oracle import reference_module

from response_templates import ResponseParser, parse_response

pytest.importorskip("transformers", reason="token-id tests load their tokenizer with transformers")
pytest.importorskip("tokenizers", reason="token-id tests build their tokenizer with the tokenizers library")

import tokenizer_factory  # noqa: E402  (tests/ is on sys.path under pytest)
from event_helpers import collect, merged  # noqa: E402

from response_templates.core.token_ids import MARKER  # noqa: E402  slipped into spelled-out control tokens; never shown


def shown(value):
    """All the text of a message or events (repr would escape the marker, a lone surrogate)."""
    return json.dumps(value, ensure_ascii=False)

TEMPLATE = tokenizer_factory.RESPONSE_TEMPLATE
CONTROL = tokenizer_factory.CHAT_TOKENS


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return tokenizer_factory.make_tokenizer(tmp_path_factory.mktemp("core-token-ids"))


@pytest.fixture(scope="module")
def control_ids(tok):
    return {tok.convert_tokens_to_ids(token) for token in CONTROL}


def ids(tok, text):
    """Token ids for `text`, control tokens included as their own ids (what a model generates)."""
    return tok.encode(text, add_special_tokens=False)


def spelled(tok, text, control_ids):
    """Token ids that decode to `text` using ordinary tokens only: control tokens spelled out piece by piece."""
    out = []
    for char in text:
        out += tok.encode(char, add_special_tokens=False)
    assert not set(out) & control_ids
    assert tok.decode(out) == text
    return out


@pytest.fixture(scope="module")
def prompt_ids(tok):
    return ids(tok, "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<think>\n")


def run_stream(tok, prefix, id_chunks, truncated=False):
    return collect(ResponseParser(TEMPLATE, prefix, tokenizer=tok), id_chunks, truncated)


def one_at_a_time(sequence):
    return [[token_id] for token_id in sequence]


def chunk_text(events, field):
    return "".join(event["text"] for event in events if event["type"] == "region_chunk" and event["field"] == field)


CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
WEATHER_CALL = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}


def test_the_tokenizer_is_a_fast_tokenizer_with_the_control_tokens(tok, control_ids):
    assert hasattr(tok, "backend_tokenizer")
    assert len(control_ids) == len(CONTROL)
    assert ids(tok, "<tool_call>") == [tok.convert_tokens_to_ids("<tool_call>")]


def test_control_tokens_generated_as_ids_act_as_delimiters(tok, prompt_ids):
    output = ids(tok, f"I should check.\n</think>\n\nChecking.\n<tool_call>\n{CALL}\n</tool_call><|im_end|>")
    expected = {
        "role": "assistant",
        "reasoning_content": "I should check.",
        "content": "Checking.",
        "tool_calls": [WEATHER_CALL],
    }
    assert parse_response(output, TEMPLATE, prefix=prompt_ids, tokenizer=tok) == expected
    for chunks in ([output], one_at_a_time(output)):
        message, events = run_stream(tok, prompt_ids, chunks)
        assert message == expected
        assert chunk_text(events, "content") == "\n\nChecking.\n"


def test_prefix_may_be_text_ids_or_an_array(tok, prompt_ids):
    np = pytest.importorskip("numpy")
    output = ids(tok, "thought</think>answer")
    expected = {"role": "assistant", "reasoning_content": "thought", "content": "answer"}
    text_prefix = tok.decode(prompt_ids)
    assert parse_response(output, TEMPLATE, prefix=text_prefix, tokenizer=tok) == expected
    assert parse_response(np.array(output), TEMPLATE, prefix=np.array(prompt_ids), tokenizer=tok) == expected
    parser = ResponseParser(TEMPLATE, text_prefix, tokenizer=tok)
    assert parser.initial_events[0] == {"type": "region_open", "field": "reasoning_content"}
    for token_id in output:
        parser.feed(token_id)  # a single int is one id
    assert parser.finalize()[0] == expected


def test_spelled_out_control_token_stays_plain_text(tok, prompt_ids, control_ids):
    output = (
        ids(tok, "ok</think>Type ")
        + spelled(tok, "<tool_call>", control_ids)
        + ids(tok, " to call a tool, and ")
        + spelled(tok, "<|im_end|>", control_ids)
        + ids(tok, " to end.<|im_end|>")
    )
    expected_content = "Type <tool_call> to call a tool, and <|im_end|> to end."
    assert parse_response(output, TEMPLATE, prefix=prompt_ids, tokenizer=tok) == {
        "role": "assistant",
        "reasoning_content": "ok",
        "content": expected_content,
    }
    for chunks in ([output], one_at_a_time(output)):
        message, events = run_stream(tok, prompt_ids, chunks)
        assert message["content"] == expected_content
        assert "tool_calls" not in message
        assert MARKER not in shown(message) and MARKER not in shown(events)
        assert chunk_text(events, "content") == expected_content


def test_spelled_out_close_does_not_end_the_reasoning(tok, prompt_ids, control_ids):
    output = ids(tok, "the tag ") + spelled(tok, "</think>", control_ids) + ids(tok, " ends it</think>done")
    message, events = run_stream(tok, prompt_ids, one_at_a_time(output))
    assert message == {"role": "assistant", "reasoning_content": "the tag </think> ends it", "content": "done"}
    assert MARKER not in shown(events)


def test_spelled_out_control_tokens_inside_a_tool_call_reach_the_arguments_unaltered(tok, control_ids):
    call = '{"name": "echo", "arguments": {"text": "a <tool_call> b </tool_call> c <think>"}}'
    output = ids(tok, "<tool_call>") + spelled(tok, call, control_ids) + ids(tok, "</tool_call>")
    expected = {
        "role": "assistant",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "echo", "arguments": {"text": "a <tool_call> b </tool_call> c <think>"}},
            }
        ],
    }
    assert parse_response(output, TEMPLATE, prefix="", tokenizer=tok) == expected
    message, events = run_stream(tok, "", one_at_a_time(output))
    assert message == expected
    assert MARKER not in shown(events)
    assert chunk_text(events, "tool_calls") == call


def test_a_spelled_out_prefix_of_a_control_token_at_the_end_is_released(tok, control_ids):
    output = ids(tok, "almost ") + spelled(tok, "<tool_ca", control_ids)
    message, events = run_stream(tok, "", one_at_a_time(output))
    assert message == {"role": "assistant", "content": "almost <tool_ca"}
    assert chunk_text(events, "content") == "almost <tool_ca"
    assert parse_response(output, TEMPLATE, prefix="", tokenizer=tok) == message


def test_a_held_spelling_followed_by_a_real_control_token(tok, control_ids):
    output = ids(tok, "x ") + spelled(tok, "<", control_ids) + ids(tok, "<tool_call>" + CALL + "</tool_call>")
    message, _ = run_stream(tok, "", one_at_a_time(output))
    assert message == {"role": "assistant", "content": "x <", "tool_calls": [WEATHER_CALL]}


def test_multi_byte_characters_split_across_ids_are_never_torn(tok, prompt_ids):
    text = "Ça coûte 5€ — 東京 😀 ж 漢字 👩\u200d💻 e\u0301"
    output = ids(tok, "t</think>" + text)
    # the test is only meaningful when some character spans several ids
    assert any("\ufffd" in tok.decode([token_id]) for token_id in output)
    message, events = run_stream(tok, prompt_ids, one_at_a_time(output))
    assert message["content"] == text
    chunks = [event["text"] for event in events if event["type"] == "region_chunk"]
    assert all("\ufffd" not in chunk for chunk in chunks)
    assert chunk_text(events, "content") == text
    assert parse_response(output, TEMPLATE, prefix=prompt_ids, tokenizer=tok)["content"] == text


def test_multi_byte_character_cut_at_the_end_of_the_output(tok):
    output = ids(tok, "ok 😀")
    cut = output[:-1]  # the emoji's last byte is missing: the output was truncated mid-character
    message, events = run_stream(tok, "", one_at_a_time(cut))
    # the held-back bytes are released at the end, decoded as decode() does it
    assert message == {"role": "assistant", "content": tok.decode(cut).strip()}
    assert chunk_text(events, "content") == tok.decode(cut)
    assert parse_response(cut, TEMPLATE, prefix="", tokenizer=tok) == message


def test_truncated_with_ids(tok):
    output = ids(tok, f"<tool_call>{CALL}</tool_call><tool_call>" + '{"name": "get_')
    expected = {"role": "assistant", "tool_calls": [WEATHER_CALL]}
    assert parse_response(output, TEMPLATE, prefix="", tokenizer=tok, truncated=True) == expected
    message, events = run_stream(tok, "", one_at_a_time(output), truncated=True)
    assert message == expected
    assert events[-1] == {
        "type": "region_discard", "field": "tool_calls", "reason": "truncated", "raw": '<tool_call>{"name": "get_'
    }


def test_wrong_input_types(tok):
    parser = ResponseParser(TEMPLATE, "", tokenizer=tok)
    with pytest.raises(TypeError):
        parser.feed("text")
    with pytest.raises(TypeError):
        parser.feed([1, "2"])
    with pytest.raises(TypeError):
        parse_response("text", TEMPLATE, prefix="", tokenizer=tok)


def test_a_tokenizer_without_a_fast_backend_is_refused():
    class Slow:
        added_tokens_decoder = {}
        chat_template = None

        def encode(self, text, add_special_tokens=False):
            return [1]

    with pytest.raises(TypeError, match="fast"):
        ResponseParser(TEMPLATE, [], tokenizer=Slow())


def test_ids_without_spelled_control_tokens_parse_like_their_text(tok, prompt_ids):
    output = ids(tok, f"hmm 🙂</think>\n\nOK <tool_call>\n{CALL}\n</tool_call>")
    assert parse_response(output, TEMPLATE, prefix=prompt_ids, tokenizer=tok) == parse_response(
        tok.decode(output), TEMPLATE, prefix=tok.decode(prompt_ids)
    )


def _spelled_think_and_call(tok, control_ids):
    return (
        ids(tok, "a ")
        + spelled(tok, "<tool_call>", control_ids)
        + ids(tok, CALL + "</tool_call> ")
        + spelled(tok, "<think>", control_ids)
        + ids(tok, "x</think>")
    )


def test_without_a_chat_template_only_special_tokens_are_control_tokens(tmp_path, control_ids):
    tok = tokenizer_factory.make_tokenizer(tmp_path, chat_template=None)
    output = _spelled_think_and_call(tok, control_ids)
    # <tool_call> and <think> are ordinary added tokens that no chat template writes: spelled out, they still count
    assert parse_response(output, TEMPLATE, prefix="", tokenizer=tok) == {
        "role": "assistant",
        "tool_calls": [WEATHER_CALL],
        "reasoning_content": "x",
    }


def test_chat_control_tokens_lists_the_control_tokens(tmp_path, control_ids):
    tok = tokenizer_factory.make_tokenizer(tmp_path, extra_config={"chat_control_tokens": ["<think>", "</think>"]})
    if getattr(tok, "chat_control_tokens", None) is None:
        pytest.skip("this transformers release does not keep chat_control_tokens on the tokenizer")
    output = _spelled_think_and_call(tok, control_ids)
    message, events = run_stream(tok, "", one_at_a_time(output))
    # a spelled <think> is text now; a spelled <tool_call> (not listed) acts as a delimiter
    assert message == {"role": "assistant", "content": "<think>x</think>", "tool_calls": [WEATHER_CALL]}
    assert MARKER not in shown(events)
    assert parse_response(output, TEMPLATE, prefix="", tokenizer=tok) == message


# ---------------------------------------------------------------------------------------------------------------
# Same results as transformers' own parser (5.25 and later)


def _reference_parser():
    module = reference_module()
    import inspect

    if "tokenizer" not in inspect.signature(module.ResponseParser).parameters:
        pytest.skip("this transformers' response parser does not parse token ids (needs 5.25+)")
    return module.ResponseParser


def _sequences(tok, control_ids):
    rng = random.Random(1234)
    fixed = [
        ids(tok, f"plan</think>\n\nSure.\n<tool_call>\n{CALL}\n</tool_call><|im_end|>"),
        ids(tok, "a</think>quote ") + spelled(tok, "<tool_call>", control_ids) + ids(tok, " done"),
        ids(tok, "東京 😀 ж</think>漢字 ") + spelled(tok, "</think>", control_ids) + ids(tok, "<|im_end|>"),
        ids(tok, "tail ") + spelled(tok, "<|im_e", control_ids),
        [],
    ]
    pieces_as_ids = [
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<|im_end|>",
        "a",
        " 🙂",
        "ж",
        "\n",
        "<",
        "{}",
    ]
    random_ones = []
    for _ in range(25):
        sequence = []
        for _ in range(rng.randint(1, 8)):
            piece = rng.choice(pieces_as_ids)
            sequence += spelled(tok, piece, control_ids) if rng.random() < 0.3 else ids(tok, piece)
        random_ones.append(sequence)
    return fixed + random_ones


def test_results_equal_transformers_parser(tok, prompt_ids, control_ids):
    Reference = _reference_parser()

    def outcome(parser_class, prefix, chunks):
        try:
            parser = parser_class(TEMPLATE, prefix, tokenizer=tok)
            events = list(parser.initial_events)
            for chunk in chunks:
                events += parser.feed(chunk)
            message, final = parser.finalize()
            return message, merged(events + final)
        except ValueError as error:  # e.g. a region of invalid JSON: both must fail
            return type(error).__name__

    for prefix in (prompt_ids, []):
        for sequence in _sequences(tok, control_ids):
            theirs = outcome(Reference, prefix, [sequence])
            assert outcome(ResponseParser, prefix, [sequence]) == theirs, tok.decode(sequence)
            assert outcome(ResponseParser, prefix, one_at_a_time(sequence)) == theirs, tok.decode(sequence)
            if isinstance(theirs, tuple):
                assert parse_response(sequence, TEMPLATE, prefix=prefix, tokenizer=tok) == theirs[0]

"""Hostile token ids (issue 15, items 3 and 6): ids outside the vocabulary are a clear ValueError naming the id and
its position; a long run of ids that decode to U+FFFD streams in linear work (counted, not timed) without ever
tearing a multi-byte character; characters such as U+FDD2 survive decoding; deeply nested JSON parses from ids as
from text. The tokenizer is the tiny byte-level BPE of tests/tokenizer_factory.py, built offline."""

from __future__ import annotations

import json

import pytest

from response_templates import ResponseParser, parse_response
from response_templates.core.limits import MAX_JSON_DEPTH

pytest.importorskip("transformers", reason="token-id tests load their tokenizer with transformers")
pytest.importorskip("tokenizers", reason="token-id tests build their tokenizer with the tokenizers library")

import tokenizer_factory  # noqa: E402
from event_helpers import collect, merged  # noqa: E402

TEMPLATE = tokenizer_factory.RESPONSE_TEMPLATE


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return tokenizer_factory.make_tokenizer(tmp_path_factory.mktemp("hostile-ids"))


def ids(tok, text):
    return tok.encode(text, add_special_tokens=False)


def byte_id(tok, byte: int) -> int:
    """The id of the byte-level token for one raw byte."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = dict(zip(printable, map(chr, printable)))
    extra = 0
    for value in range(256):
        if value not in chars:
            chars[value] = chr(256 + extra)
            extra += 1
    token_id = tok.convert_tokens_to_ids(chars[byte])
    assert isinstance(token_id, int) and tok.decode([token_id]) == "\ufffd"
    return token_id


class CountingBackend:
    """The tokenizer's backend, counting how many ids `decode` was given in all (the work done)."""

    def __init__(self, backend):
        self._backend = backend
        self.decoded_ids = 0

    def decode(self, ids, **kwargs):
        self.decoded_ids += len(ids)
        return self._backend.decode(ids, **kwargs)

    def __getattr__(self, name):
        return getattr(self._backend, name)


class CountingTokenizer:
    def __init__(self, tok):
        self._tok = tok
        self.backend_tokenizer = CountingBackend(tok.backend_tokenizer)

    def __getattr__(self, name):
        return getattr(self._tok, name)


# ---------------------------------------------------------------------------------------------------------------
# Ids outside the vocabulary


def test_ids_outside_the_vocabulary_name_the_id_and_its_position(tok):
    last = max(tok.backend_tokenizer.get_vocab_size(with_added_tokens=True), max(tok.added_tokens_decoder) + 1) - 1
    good = ids(tok, "hi")
    assert parse_response(good + [last], TEMPLATE, prefix="", tokenizer=tok)["role"] == "assistant"
    for bad in (-1, 2**64, last + 1, 10**6):
        with pytest.raises(ValueError, match=rf"token ids: {bad} at position {len(good)} is not an id of this tokenizer"):
            parse_response(good + [bad], TEMPLATE, prefix="", tokenizer=tok)
        with pytest.raises(ValueError, match=rf"{bad} at position 0 "):
            parse_response(good, TEMPLATE, prefix=[bad], tokenizer=tok)
        parser = ResponseParser(TEMPLATE, "", tokenizer=tok)
        parser.feed(good)
        with pytest.raises(ValueError, match=rf"{bad} at position 1 "):
            parser.feed([good[0], bad])


# ---------------------------------------------------------------------------------------------------------------
# Runs of U+FFFD


@pytest.mark.parametrize("count", [1_500, 6_000])
def test_a_run_of_replacement_characters_streams_in_linear_work(tok, count):
    counting = CountingTokenizer(tok)
    run = [byte_id(tok, 0x80)] * count  # lone continuation bytes: each decodes to U+FFFD
    parser = ResponseParser(TEMPLATE, "", tokenizer=counting)
    streamed = ""
    for token_id in run:
        streamed += "".join(e.get("text", "") for e in parser.feed([token_id]))
    # everything but a bounded tail is out before finalize (it was all held until then)
    assert len(streamed) >= count - 16
    message, events = parser.finalize()
    streamed += "".join(e.get("text", "") for e in events)
    assert streamed == message["content"] == tok.decode(run) == "\ufffd" * count
    # work: each id is decoded a bounded number of times (it was decoded again at every step: count**2 / 2)
    assert counting.backend_tokenizer.decoded_ids <= 40 * count


def test_no_character_split_across_ids_is_torn_around_runs_of_replacement_characters(tok):
    lone = byte_id(tok, 0x80)
    text_ids = []
    for piece in ("a", "東京", "🙂", "é", " ok ", "Grüße", "🙂🙂"):
        # every character spelled byte by byte: each of its ids alone decodes to U+FFFD
        for char in piece:
            text_ids += [byte_id(tok, b) if b >= 0x80 else ids(tok, chr(b))[0] for b in char.encode("utf-8")]
        text_ids += [lone] * 11
    whole = tok.decode(text_ids)
    assert "東京" in whole and "🙂🙂" in whole
    for size in (1, 2, 3, 5):
        chunks = [text_ids[at:at + size] for at in range(0, len(text_ids), size)]
        message, events = collect(ResponseParser(TEMPLATE, "", tokenizer=tok), chunks)
        chunk_texts = [e["text"] for e in events if e["type"] == "region_chunk"]
        assert "".join(chunk_texts) == whole == message["content"]
        # no chunk starts with a piece of a character (a torn character would decode to U+FFFD on both sides)
        assert "".join(chunk_texts).count("\ufffd") == whole.count("\ufffd")


# ---------------------------------------------------------------------------------------------------------------
# Characters the marker used to be mistaken for


@pytest.mark.parametrize("text", ["a\ufdd2b", "\ufdd2", "x\ufdd0\ufdef\uffffy", "<tool\ufdd2_call>"])
def test_noncharacters_survive_decoding_as_in_text(tok, text):
    from_text = parse_response(text, TEMPLATE, prefix="")
    assert from_text["content"] == text
    assert parse_response(ids(tok, text), TEMPLATE, prefix="", tokenizer=tok) == from_text
    one_at_a_time = [[token_id] for token_id in ids(tok, text)]
    message, events = collect(ResponseParser(TEMPLATE, "", tokenizer=tok), one_at_a_time)
    assert message == from_text
    assert [e["text"] for e in merged(events) if e["type"] == "region_chunk"] == [text]


# ---------------------------------------------------------------------------------------------------------------
# Deep JSON from ids


@pytest.mark.parametrize("levels", [500, MAX_JSON_DEPTH - 2])
def test_deep_json_parses_from_ids_as_from_text(tok, levels):
    text = '<tool_call>{"name": "f", "arguments": {"x": ' + "[" * levels + "]" * levels + "}}</tool_call>"
    from_text = parse_response(text, TEMPLATE, prefix="")
    assert from_text["tool_calls"][0]["function"]["arguments"]["x"] == json.loads("[" * levels + "]" * levels)
    assert parse_response(ids(tok, text), TEMPLATE, prefix="", tokenizer=tok) == from_text
    one_at_a_time = [[token_id] for token_id in ids(tok, text)]
    assert collect(ResponseParser(TEMPLATE, "", tokenizer=tok), one_at_a_time)[0] == from_text


def test_json_past_the_limit_from_ids_is_the_same_value_error_as_from_text(tok):
    text = '<tool_call>{"name": "f", "arguments": {"x": ' + "[" * 2000 + "]" * 2000 + "}}</tool_call>"
    with pytest.raises(ValueError, match="nested more than"):
        parse_response(text, TEMPLATE, prefix="")
    with pytest.raises(ValueError, match="nested more than"):
        parse_response(ids(tok, text), TEMPLATE, prefix="", tokenizer=tok)


# ---------------------------------------------------------------------------------------------------------------
# Long control tokens


def test_a_long_control_token_costs_memory_linear_in_its_length(tmp_path):
    import tracemalloc

    from tokenizers import AddedToken

    tok = tokenizer_factory.make_tokenizer(tmp_path)
    long_token = "<" + "=" * 20_000 + ">"
    tok.add_tokens([AddedToken(long_token, special=True, normalized=False)])
    text = "a" + long_token + "b"
    token_ids = ids(tok, text)
    assert len(token_ids) == 3
    tracemalloc.start()
    try:
        parser = ResponseParser(TEMPLATE, "", tokenizer=tok)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # a set of every prefix of the token held 200 million characters
    assert peak < 20_000_000
    message, _ = collect(parser, [[token_id] for token_id in token_ids])
    assert message["content"] == text
    # spelled out with ordinary tokens, it stays text as well
    spelled = ids(tok, "a<") + ids(tok, "=" * 20_000) + ids(tok, ">b")
    assert long_token not in tok.convert_ids_to_tokens(spelled)
    assert parse_response(spelled, TEMPLATE, prefix="", tokenizer=tok)["content"] == text

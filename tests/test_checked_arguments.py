"""Arguments are checked, not read loosely (issue 29): `truncated=` is True or False everywhere it is taken (a list or
"no" would read as true and drop an unfinished call), and a failure inside a batch names the item."""

from __future__ import annotations

import json

import pytest

import response_templates as rt
from response_templates import OpenAIStreamAdapter, ResponseParser, parse_response

from tokenizer_factory import RESPONSE_TEMPLATE, build_tokenizer_dir, load_tokenizer  # noqa: E402

PROMPT = "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
CUT = 'Let me check.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
GOOD = "<think>\nEasy.\n</think>\n\nHello there!<|im_end|>"
BROKEN = '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call><|im_end|>'
NOT_BOOLS = [[False, False], "no", "", None, 0, 1, 1.0]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    pytest.importorskip("transformers")
    return load_tokenizer(build_tokenizer_dir(tmp_path_factory.mktemp("tok") / "t", response_template=RESPONSE_TEMPLATE))


@pytest.mark.parametrize("value", NOT_BOOLS)
def test_parse_response_takes_only_a_bool_truncated(value):
    with pytest.raises(TypeError, match="truncated= must be True or False"):
        parse_response(CUT, RESPONSE_TEMPLATE, prefix=PROMPT, truncated=value)


@pytest.mark.parametrize("value", NOT_BOOLS)
def test_finalize_takes_only_a_bool_truncated_and_the_parser_stays_usable(value):
    parser = ResponseParser(RESPONSE_TEMPLATE, prefix=PROMPT)
    parser.feed(CUT)
    with pytest.raises(TypeError, match="truncated= must be True or False"):
        parser.finalize(truncated=value)
    message, _ = parser.finalize(truncated=True)  # the refused call did not finalize it
    assert "tool_calls" not in message and message["content"] == "Let me check."


def test_bools_still_work():
    assert "tool_calls" not in parse_response(CUT, RESPONSE_TEMPLATE, prefix=PROMPT, truncated=True)
    with pytest.raises(ValueError):
        parse_response(CUT, RESPONSE_TEMPLATE, prefix=PROMPT, truncated=False)


@pytest.mark.parametrize("value", NOT_BOOLS)
def test_the_openai_adapter_takes_only_a_bool_truncated(value):
    adapter = OpenAIStreamAdapter(ResponseParser(RESPONSE_TEMPLATE, prefix=PROMPT))
    adapter.feed(CUT)
    with pytest.raises(TypeError, match="truncated= must be True or False"):
        adapter.finish(truncated=value)
    with pytest.raises(TypeError, match="truncated= must be True or False"):
        list(OpenAIStreamAdapter(ResponseParser(RESPONSE_TEMPLATE, prefix=PROMPT)).stream([CUT], truncated=value))


@pytest.mark.parametrize("value", NOT_BOOLS)
def test_tokenizer_parse_response_takes_only_a_bool_truncated(tok, value):
    with pytest.raises(TypeError, match="truncated= must be True or False"):
        tok.parse_response(CUT, prefix=PROMPT, truncated=value)
    with pytest.raises(TypeError, match="truncated= must be True or False"):
        tok.parse_response([CUT, CUT], prefix=PROMPT, truncated=value)


def test_a_malformed_item_of_a_batch_is_named_by_its_index(tok):
    with pytest.raises(ValueError, match=r"batch item 2 \(of 3\)") as info:
        tok.parse_response([GOOD, GOOD, BROKEN], prefix=PROMPT)
    assert "batch item" not in str(info.value.__cause__)  # the original error is chained, unchanged
    ids = [tok(text, add_special_tokens=False)["input_ids"] for text in (BROKEN, GOOD)]
    with pytest.raises(ValueError, match=r"batch item 0 \(of 2\)"):
        tok.parse_response(ids, prefix=PROMPT)


def test_a_single_item_error_is_not_relabelled(tok):
    with pytest.raises(ValueError) as info:
        tok.parse_response(BROKEN, prefix=PROMPT)
    assert "batch item" not in str(info.value)


def test_a_batch_error_keeps_a_class_callers_catch(tok):
    from response_templates.integrations.transformers_patch import _batch_error

    error = _batch_error(1, 2, json.JSONDecodeError("Expecting value", "{", 1))
    assert isinstance(error, ValueError) and str(error).startswith("batch item 1 (of 2): Expecting value")
    key = _batch_error(0, 2, rt.core.errors.TransformKeyError("no variable 'x'"))
    assert isinstance(key, KeyError) and str(key) == "batch item 0 (of 2): no variable 'x'"

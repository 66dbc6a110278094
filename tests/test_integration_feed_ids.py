"""tokenizer.get_response_parser(prefix=prompt_ids) then feed(ids): the README's streaming call (issue 14.3).

transformers 5.25's signature is kept (`token_ids=False` by default, text in); with the default, the first `feed`
decides between text and token ids, so the documented call works on a fast tokenizer.
"""

from __future__ import annotations

import pytest

import response_templates  # noqa: F401  (patches transformers)
from response_templates import ResponseParser
from response_templates.integrations import transformers_patch as integration

transformers = pytest.importorskip("transformers")
np = pytest.importorskip("numpy")

from tokenizer_factory import RESPONSE_TEMPLATE, WEATHER_TOOLS, build_tokenizer_dir, load_tokenizer  # noqa: E402

PROMPT = "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<think>\n"
OUTPUT = (
    "The user wants the weather. Quoting <tool_call> is fine here.\n</think>\n\nLet me check."
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call><|im_end|>'
)
EXPECTED = {
    "role": "assistant",
    "reasoning_content": "The user wants the weather. Quoting <tool_call> is fine here.",
    "content": "Let me check.",
    "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}],
}


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return load_tokenizer(build_tokenizer_dir(tmp_path_factory.mktemp("tok") / "t", response_template=RESPONSE_TEMPLATE))


def _ids(tok, text):
    return tok.encode(text, add_special_tokens=False)


def _generated_ids(tok):
    # What a model generates: the quoted <tool_call> spelled with ordinary tokens, the real ones as their own ids.
    head, tail = OUTPUT.split("<tool_call> is fine")
    spelled = [i for piece in ("<", "tool", "_call", ">") for i in _ids(tok, piece)]
    return _ids(tok, head) + spelled + _ids(tok, " is fine" + tail)


def _run(parser, chunks):
    events = list(parser.initial_events)
    for chunk in chunks:
        events += parser.feed(chunk)
    message, final = parser.finalize()
    return message, events + final


@pytest.mark.parametrize("prefix_kind", ["list", "numpy", "text"])
def test_id_prefix_then_id_feed_works_as_the_readme_shows(tok, prefix_kind):
    prompt_ids = _ids(tok, PROMPT)
    prefix = {"list": prompt_ids, "numpy": np.array(prompt_ids), "text": PROMPT}[prefix_kind]
    parser = tok.get_response_parser(prefix=prefix, tools=WEATHER_TOOLS)
    assert isinstance(parser, ResponseParser)
    message, events = _run(parser, [[i] for i in _generated_ids(tok)])
    assert message == EXPECTED
    # the same as saying token_ids=True up front
    explicit = tok.get_response_parser(prefix=prefix, tools=WEATHER_TOOLS, token_ids=True)
    assert _run(explicit, [[i] for i in _generated_ids(tok)]) == (message, events)


def test_id_prefix_then_text_feed_is_still_transformers_default(tok):
    parser = tok.get_response_parser(prefix=_ids(tok, PROMPT))
    text = OUTPUT.replace("<tool_call> is fine", "a tag is fine")
    message, _ = _run(parser, [text[i : i + 7] for i in range(0, len(text), 7)])
    assert message["content"] == "Let me check." and message["tool_calls"]


def test_mixing_text_and_ids_says_what_to_do(tok):
    parser = tok.get_response_parser(prefix=_ids(tok, PROMPT))
    parser.feed("The user")
    with pytest.raises(TypeError, match=r"token_ids=True"):
        parser.feed(_ids(tok, " wants"))
    parser = tok.get_response_parser(prefix=_ids(tok, PROMPT))
    parser.feed(_ids(tok, "The user"))
    with pytest.raises(TypeError, match=r"feed text"):
        parser.feed(" wants")
    parser = tok.get_response_parser(prefix="", token_ids=True)
    with pytest.raises(TypeError, match="token_ids=True"):
        parser.feed("text")


def test_slow_tokenizer_parser_says_to_decode(tok, monkeypatch):
    monkeypatch.setattr(integration, "_is_fast", lambda tokenizer: False)
    parser = tok.get_response_parser(prefix=_ids(tok, PROMPT))
    with pytest.raises(TypeError, match="not a fast tokenizer.*decode the ids"):
        parser.feed(_ids(tok, "The user"))

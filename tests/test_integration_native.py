"""On releases with a built-in parser (transformers 5.20+), ours replaces it with identical results.

The built-in methods saved by `patch()` serve as the oracle: same tokenizer, same inputs, both paths.
"""

from __future__ import annotations

import pytest

from response_templates.integrations import transformers_patch as integration

transformers = pytest.importorskip("transformers")
np = pytest.importorskip("numpy")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tokenizer_factory import RESPONSE_TEMPLATE, WEATHER_TOOLS, build_tokenizer_dir, load_tokenizer  # noqa: E402
from transformers.tokenization_utils_base import PreTrainedTokenizerBase  # noqa: E402

if tuple(int(part) for part in transformers.__version__.split(".")[:2]) < (5, 20):
    pytest.skip(
        f"transformers {transformers.__version__} has no built-in response parser to compare with",
        allow_module_level=True,
    )
from oracle import reference_module  # noqa: E402

reference_module()  # 5.20-5.24's built-in parser differs from 5.25's (e.g. no token ids): compare on 5.25+ only

NATIVE_PARSE = integration._ORIGINALS.get((PreTrainedTokenizerBase, "parse_response"))
NATIVE_STREAM = integration._ORIGINALS.get((PreTrainedTokenizerBase, "get_response_parser"))
NATIVE_INIT = integration._ORIGINALS.get((PreTrainedTokenizerBase, "__init__"))
if not callable(NATIVE_PARSE) or not callable(NATIVE_STREAM):
    pytest.skip("the built-in parser was not captured by patch()", allow_module_level=True)

PROMPT = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
PREFIXES = ["", PROMPT, PROMPT + "<think>\n"]
# Pieces of model output: delimiters, spelled-out halves of control tokens, JSON bodies, text, unicode.
PIECES = [
    "<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_end|>", "<tool", "_call>", "</th", "ink>",
    "\n", " ", "Hello", "Paris", "3", "é", "🙂", "{", "}",
    '{"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}',
    '{"name": "noop", "arguments": {}}',
]  # fmt: skip
TOOLS = WEATHER_TOOLS


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return load_tokenizer(build_tokenizer_dir(tmp_path_factory.mktemp("tok"), response_template=RESPONSE_TEMPLATE))


def outcome(call):
    """The result, or the exception type: both parsers must agree on failures too."""
    try:
        return ("ok", call())
    except Exception as error:  # noqa: BLE001 - compared, not swallowed
        return ("error", type(error).__name__)


def pieces_to_ids(tok, pieces):
    # Encoding piece by piece keeps "<tool" + "_call>" spelled out with ordinary tokens.
    return [token_id for piece in pieces for token_id in tok.encode(piece, add_special_tokens=False)]


def test_native_methods_were_replaced(tok):
    assert type(tok).parse_response is integration.parse_response
    assert NATIVE_PARSE.__module__.startswith("transformers")
    assert tok.response_template == RESPONSE_TEMPLATE


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
outputs = st.lists(st.sampled_from(PIECES), max_size=12)


@SETTINGS
@given(pieces=outputs, prefix=st.sampled_from(PREFIXES), with_tools=st.booleans())
def test_parse_response_matches_native(tok, pieces, prefix, with_tools):
    tools = TOOLS if with_tools else None
    text = "".join(pieces)
    ids = pieces_to_ids(tok, pieces)
    prefix_ids = tok.encode(prefix, add_special_tokens=False)
    cases = [
        (text, prefix),
        (ids, prefix_ids),
        (ids, prefix),
        (np.array(ids, dtype=np.int64), np.array(prefix_ids, dtype=np.int64)),
        ([text, text], prefix),
        ([ids, ids], [prefix_ids, prefix_ids]),
    ]
    for response, pfx in cases:
        ours = outcome(lambda: tok.parse_response(response, prefix=pfx, tools=tools))
        native = outcome(lambda: NATIVE_PARSE(tok, response, prefix=pfx, tools=tools))
        assert ours == native, (response, pfx)


@SETTINGS
@given(pieces=outputs, prefix=st.sampled_from(PREFIXES), step=st.integers(1, 4))
def test_streaming_events_match_native(tok, pieces, prefix, step):
    ids = pieces_to_ids(tok, pieces)
    prefix_ids = tok.encode(prefix, add_special_tokens=False)

    def run(factory, token_ids):
        def go():
            if token_ids:
                parser = factory(tok, prefix=prefix_ids, token_ids=True, tools=TOOLS)
                chunks = [ids[i : i + step] for i in range(0, len(ids), step)]
            else:
                text = tok.decode(ids)
                parser = factory(tok, prefix=prefix, tools=TOOLS)
                chunks = [text[i : i + step] for i in range(0, len(text), step)]
            events = list(parser.initial_events)
            for chunk in chunks:
                events += parser.feed(chunk)
            message, final = parser.finalize()
            return message, events + final

        return outcome(go)

    ours = type(tok).get_response_parser
    for token_ids in (False, True):
        assert run(ours, token_ids) == run(NATIVE_STREAM, token_ids), (pieces, token_ids)


def test_errors_match_native(tok):
    for kwargs in ({}, {"prefix": [PROMPT] * 3}):
        ours = outcome(lambda: tok.parse_response(["a", "b"], **kwargs))
        native = outcome(lambda: NATIVE_PARSE(tok, ["a", "b"], **kwargs))
        assert ours == native == ("error", "ValueError")

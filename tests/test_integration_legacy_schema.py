"""A legacy `response_schema` (the format transformers 5.0 to 5.14 parse) keeps working with this package installed.

On those releases our `parse_response` replaces transformers' own. A tokenizer that carries only a legacy
`response_schema` (TRL before 1.10 sets one; some Hub repositories ship one), or a legacy schema passed as `schema=`,
is parsed by the release's own parser, exactly as without this package. Elsewhere these tests skip: no release
before 5.0 or from 5.15 on has that parser.
"""

from __future__ import annotations

import pytest

import response_templates  # noqa: F401  (patches transformers)

pytest.importorskip("transformers")
import transformers.tokenization_utils_base as base  # noqa: E402
from tokenizer_factory import make_tokenizer  # noqa: E402

if getattr(base, "recursive_parse", None) is None:
    pytest.skip(
        "this transformers release has no parser for the legacy `response_schema` format (only 5.0 to 5.14 have one)",
        allow_module_level=True,
    )

# A legacy schema of our own: a regex with named groups for the fields, JSON-schema types for the values.
LEGACY_SCHEMA = {
    "type": "object",
    "x-regex": r"^(?:<think>\n?(?P<reasoning_content>.*?)\n?</think>\s*)?(?P<content>.*?)(?:<\|im_end\|>)?$",
    "properties": {
        "role": {"const": "assistant"},
        "content": {"type": "string"},
        "reasoning_content": {"type": "string"},
    },
}
TEXT = "<think>\nShort sum.\n</think>\n\nIt is 12.<|im_end|>"
EXPECTED = {"role": "assistant", "reasoning_content": "Short sum.", "content": "It is 12."}


def own_parse(text, schema):
    """What the release's own legacy parser gives."""
    from transformers.utils.chat_parsing_utils import recursive_parse

    return recursive_parse(text, schema)


def test_a_tokenizer_with_only_a_legacy_schema_parses_as_the_release_does(tmp_path):
    tokenizer = make_tokenizer(tmp_path)
    tokenizer.response_schema = LEGACY_SCHEMA
    assert tokenizer.response_template is None
    got = tokenizer.parse_response(TEXT)  # no prefix: the legacy call
    assert got == EXPECTED == own_parse(TEXT, LEGACY_SCHEMA)
    ids = tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    assert tokenizer.parse_response(ids) == EXPECTED


def test_a_legacy_schema_from_tokenizer_config_json(tmp_path):
    tokenizer = make_tokenizer(tmp_path, extra_config={"response_schema": LEGACY_SCHEMA})
    if getattr(tokenizer, "response_schema", None) is None:
        pytest.skip("this transformers release does not read `response_schema` from tokenizer_config.json (5.12 does)")
    assert tokenizer.parse_response(TEXT) == EXPECTED


def test_a_legacy_schema_passed_as_schema(tmp_path):
    tokenizer = make_tokenizer(tmp_path)
    assert tokenizer.parse_response(TEXT, LEGACY_SCHEMA) == EXPECTED
    with pytest.raises(ValueError, match="legacy `response_schema`"):
        tokenizer.parse_response(TEXT, LEGACY_SCHEMA, prefix="")


def test_a_response_template_wins_over_a_legacy_schema(tmp_path):
    from tokenizer_factory import RESPONSE_TEMPLATE

    tokenizer = make_tokenizer(tmp_path, response_template=RESPONSE_TEMPLATE)
    tokenizer.response_schema = LEGACY_SCHEMA
    with pytest.raises(ValueError, match="prefix"):
        tokenizer.parse_response(TEXT)  # the response template needs the prompt, whatever else is set
    got = tokenizer.parse_response(TEXT, prefix="<|im_start|>assistant\n")
    assert got == {"role": "assistant", "reasoning_content": "Short sum.", "content": "It is 12."}

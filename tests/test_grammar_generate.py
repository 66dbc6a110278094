"""transformers `generate` under the grammar (examples/constrained_tool_calls.py): a 1-layer model with random
weights writes noise, yet every constrained answer parses to calls of the tool asked for with arguments valid for
its schema. Skipped when xgrammar (or torch) is not installed."""

import os
import sys

import pytest

pytest.importorskip("xgrammar", reason="xgrammar is not installed (pip install response-templates[grammar])")
pytest.importorskip("torch")
jsonschema = pytest.importorskip("jsonschema")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import constrained_tool_calls as example  # noqa: E402  (after the skips: it imports xgrammar and torch)

SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in example.TOOLS}


@pytest.fixture(scope="module")
def model():
    return example.random_model()


@pytest.mark.parametrize("choice, parallel", [
    ("required", True),
    ({"type": "function", "function": {"name": "get_weather"}}, False),
])
def test_constrained_answers_are_valid_calls(model, choice, parallel):
    tokenizer, llm = model
    for seed in (1, 2):
        answer = example.generate(tokenizer, llm, choice, parallel_tool_calls=parallel, seed=seed)
        calls = answer["message"].get("tool_calls") or []
        where = f"{choice} parallel={parallel} seed={seed}: {answer['text']!r}"
        assert calls, where
        assert answer["text"].endswith("<|im_end|>"), f"the grammar ended but the model did not stop: {where}"
        if not parallel:
            assert len(calls) == 1, where
        for call in calls:
            name = call["function"]["name"]
            if isinstance(choice, dict):
                assert name == choice["function"]["name"], where
            jsonschema.validate(call["function"]["arguments"], SCHEMAS[name])


def test_tool_choice_none_writes_no_call(model):
    tokenizer, llm = model
    answer = example.generate(tokenizer, llm, "none", seed=3, max_new_tokens=200)
    assert not answer["message"].get("tool_calls"), answer["text"]
    assert "<tool_call>" not in answer["text"]

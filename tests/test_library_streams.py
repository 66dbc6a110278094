"""What a streaming client shows is what the message says: for every library template and every corpus case,
the region_chunk texts of a text field, concatenated, equal that field's final value exactly (no stray newline
after <think>, no blank line before a call, no separator the model never wrote)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from response_templates import ResponseParser
from response_templates import library

CORPORA = Path(__file__).parent / "data" / "corpora"


def _text_fields(template):
    """Fields whose final value is their text as streamed: `text` content (the default), no transform."""
    out = []
    for name, spec in template["fields"].items():
        if isinstance(spec, dict) and spec.get("content", "text") == "text" and "transform" not in spec:
            out.append(name)
    return out


def _cases():
    for path in sorted(CORPORA.glob("*.json")):
        corpus = json.loads(path.read_text(encoding="utf-8"))
        for case in corpus["cases"]:
            yield pytest.param(corpus["template"], case, id=f"{path.stem}/{case['name']}")


@pytest.mark.parametrize("chunking", ["char", "whole"])
@pytest.mark.parametrize("template_name, case", list(_cases()))
def test_streamed_text_equals_final_value(template_name, case, chunking):
    template = library.get_template(template_name)
    parser = ResponseParser(template, case["prefix"], tools=case.get("tools"))
    events = list(parser.initial_events)
    chunks = list(case["output"]) if chunking == "char" else [case["output"]]
    for chunk in chunks:
        events += parser.feed(chunk)
    message, final = parser.finalize(truncated=case.get("truncated", False))
    events += final
    for field in _text_fields(template):
        streamed = "".join(e["text"] for e in events if e["type"] == "region_chunk" and e["field"] == field)
        value = message.get(field)
        if value is None:
            assert streamed == "", f"{field}: streamed {streamed!r} but the message has no {field}"
        else:
            assert streamed == value, f"{field}: streamed {streamed!r} != final {value!r}"

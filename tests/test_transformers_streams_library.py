"""Our library templates as transformers' own streaming parser reads them (they are published for it).

A template can give the right messages in transformers and still stream badly there: a pattern that makes the
`regex` module report a partial match it never resolves makes transformers hold back everything after it, so a user
sees no text until the end and each chunk rescans the whole held buffer (gpt-oss's stray-header alternation did:
1 ms per chunk at 32K characters). For every template, a long generation is fed in 4-character chunks and the text
transformers holds back must stay short.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import response_templates as rt

from oracle import reference_module

ROOT = Path(__file__).resolve().parent.parent
reference = reference_module()  # transformers 5.25 (the reference release), else the module skips

# The longest stretch transformers may hold back: a delimiter being decided and the whitespace before it (the largest
# seen is about 250 characters, Cohere's grounded-answer markup), far below the generation's length.
MOST_HELD = 1000


def _bench():
    spec = importlib.util.spec_from_file_location("bench_templates", ROOT / "benchmarks" / "bench_templates.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return _bench()


@pytest.mark.parametrize("name", rt.list_templates())
def test_transformers_streams_the_library_template_without_holding_text_back(bench, name):
    corpus = json.loads((ROOT / "tests" / "data" / "corpora" / f"{name}.json").read_text(encoding="utf-8"))
    case = bench.pick_case(corpus)
    text = bench.generation(case, 6000)
    parser = reference.ResponseParser(rt.get_template(name), prefix=case["prefix"])
    held = 0
    for chunk in bench.chunks_of(text):
        parser.feed(chunk)
        # transformers keeps the undecided text from `_pos` on (5.25's ResponseParser; the reference release only)
        held = max(held, len(parser._buffer) - parser._pos)
    assert held <= MOST_HELD, f"{name}: transformers held back {held} characters of a {len(text)}-character stream"

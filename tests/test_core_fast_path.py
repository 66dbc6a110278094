"""The per-chunk fast paths of `feed` (issue 11) give what a full scan gives.

`feed` skips the scan when a chunk holds no character that can start a delimiter of the current state, and holds back
a run of a lead class (whitespace before `\\s*<tool_call>`) at the end of the chunk, remembering where a run that fills
whole chunks began. These tests feed library corpus outputs sprinkled with runs of ASCII and Unicode whitespace, in
chunkings that end chunks inside such runs, fill whole chunks with them and put non-ASCII text in them, and check
that the message and the events (merged, as a renderer shows them) are those of one single feed, and that the message
is the one-shot `parse_response` (the same error, when the text is damaged beyond parsing).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import response_templates as rt
from event_helpers import collect, merged

CORPORA = Path(__file__).parent / "data" / "corpora"
RUNS = ["   ", "\n\n", " \t ", "\u00a0\u3000 ", "\u2028", "\t", "    \n  ", "é  ", " 天 "]


def sprinkled(text: str, rng: random.Random) -> str:
    """`text` with runs of whitespace (some Unicode, some next to non-ASCII letters) put at random places."""
    points = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, 6)))
    pieces, last = [], 0
    for point in points:
        pieces += [text[last:point], rng.choice(RUNS)]
        last = point
    return "".join(pieces) + text[last:]


def chunkings(text: str, rng: random.Random):
    yield "fours", [text[i:i + 4] for i in range(0, len(text), 4)]
    yield "threes", [text[i:i + 3] for i in range(0, len(text), 3)]
    yield "chars", list(text)
    # cut at every boundary between whitespace and the rest, so that whole chunks are whitespace
    pieces, start = [], 0
    for index in range(1, len(text) + 1):
        if index == len(text) or text[index].isspace() != text[index - 1].isspace():
            pieces.append(text[start:index])
            start = index
    yield "runs", pieces
    points = sorted(rng.sample(range(1, max(2, len(text))), min(max(0, len(text) - 1), 12)))
    yield "random", [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]


def outcome(function):
    try:
        return "ok", function()
    except (ValueError, KeyError) as error:
        return "error", type(error).__name__


def _cases():
    for path in sorted(CORPORA.glob("*.json")):
        corpus = json.loads(path.read_text(encoding="utf-8"))
        yield pytest.param(path.stem, corpus["template"], corpus["cases"], id=path.stem)


@pytest.mark.parametrize("stem, template_name, cases", list(_cases()))
def test_chunks_ending_in_whitespace_runs_parse_as_one_feed(stem, template_name, cases):
    template = rt.get_template(template_name)
    rng = random.Random(stem)
    for case in cases:
        truncated = case.get("truncated", False)
        for text in (case["output"], sprinkled(case["output"], rng)):
            whole = outcome(lambda: collect(rt.ResponseParser(template, case["prefix"]), [text], truncated))
            one_shot = outcome(lambda: rt.parse_response(text, template, prefix=case["prefix"], truncated=truncated))
            assert (whole[0], whole[1][0] if whole[0] == "ok" else whole[1]) == one_shot, (case["name"], text)
            for label, chunks in chunkings(text, rng):
                streamed = outcome(lambda: collect(rt.ResponseParser(template, case["prefix"]), chunks, truncated))
                assert streamed[0] == whole[0], (case["name"], label, chunks)
                if whole[0] == "ok":
                    assert streamed[1][0] == whole[1][0], (case["name"], label, chunks)
                    assert merged(streamed[1][1]) == merged(whole[1][1]), (case["name"], label, chunks)
                else:
                    assert streamed[1] == whole[1], (case["name"], label, chunks)


@pytest.mark.parametrize("name", ["qwen3", "kimi-k2", "mistral", "olmo3"])
def test_a_long_run_of_whitespace_fed_in_small_chunks(name):
    """A run of whitespace longer than many chunks (it may precede a delimiter, so it is held) is found where it
    began, whatever the chunk size, and then goes where one feed puts it."""
    template = rt.get_template(name)
    corpus = json.loads((CORPORA / f"{name}.json").read_text(encoding="utf-8"))
    case = max((c for c in corpus["cases"] if not c.get("truncated")), key=lambda c: len(c["output"]))
    output = case["output"]
    cut = max(output.rfind("<"), output.rfind("["), 0)  # before the last marker the model wrote
    run = " \n\t" * 700 + "\u3000"
    text = run + output[:cut] + run + output[cut:]
    whole = outcome(lambda: collect(rt.ResponseParser(template, case["prefix"]), [text]))
    for size in (1, 2, 4, 7):
        chunks = [text[i:i + size] for i in range(0, len(text), size)]
        streamed = outcome(lambda: collect(rt.ResponseParser(template, case["prefix"]), chunks))
        assert streamed[0] == whole[0], size
        if whole[0] == "ok":
            assert streamed[1][0] == whole[1][0], size
            assert merged(streamed[1][1]) == merged(whole[1][1]), size
        else:
            assert streamed[1] == whole[1], size


@pytest.mark.parametrize("stem, template_name, cases", list(_cases()))
def test_a_search_from_the_first_candidate_finds_what_a_search_from_the_position_finds(stem, template_name, cases):
    """Short texts are parsed with one search per delimiter, started at the first position the template analysis
    allows (scan.first_candidate); it must find the same match as a search from the position itself."""
    from response_templates.core.scanner import first_candidate

    compiled = rt.load_template(template_name)
    delimiters = [d for f in compiled.fields.values() for d in (f.open, f.close) if d is not None and d.scan is not None]
    for case in cases:
        text = compiled.truncate_prefix(case["prefix"]) + case["output"]
        for delimiter in delimiters:
            for pos in range(len(text) + 1):
                start = first_candidate(delimiter.scan, text, pos)
                assert start >= pos
                expected = delimiter.regex.search(text, pos)
                found = delimiter.regex.search(text, start)
                assert (found and (found.span(), found.groupdict())) == (expected and (expected.span(), expected.groupdict())), (
                    case["name"], delimiter.regex.pattern, pos
                )

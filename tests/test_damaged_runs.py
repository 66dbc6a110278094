"""Damaged outputs with a long run of whitespace (a model stuck writing blank lines, spaces or tabs) right after call
markup, or after a cut piece of it, then some text: the parse returns the message, in time linear in the run.

The scans used to try a delimiter at every newline of such a run, each try running to the run's end, or the regex
backtracked over every way to split the run between two whitespace repeats (`\\s*\\[?\\s*`): time growing with the
square of the run, so long runs ran out of the regex time limit instead of returning a message. One-shot parses are
checked under a short limit (2 s) that the linear scan meets by far (milliseconds) and the old one overran by far
(tens of seconds). Streaming gets a fresh limit per feed, so it is checked with the scanner's work counter instead: a
long held run used to be scanned again at every feed.

No expected message is written out: each is the parse of the same output with a short run (40 characters), with
that run stretched to the long one's length.
"""

from __future__ import annotations

import re

import pytest

from response_templates import ResponseParser, parse_response
from response_templates.core import regex_syntax
from response_templates.library import get_template

SHORT = 40

# (template, text before the run, run character, text after the run, run length)
CUT_AFTER_MARKUP = [
    ("deepseek_v4", "Let me check.</｜DSML｜tool_calls><", "\n", "x", 8000),
    ("deepseek_v3.2", "Let me check.</｜DSML｜function_calls><", "\n", "x", 8000),
    ("deepseek_v3.2", "Let me check.<", "\n", "x", 8000),
    ("kimi-k2", "Let me check.<|tool_calls_section_end|><", "\n", "x", 8000),
    ("kimi-k2", "Let me check.<", "\n", "x", 8000),
    ("gemma-4", "Let me check.<", "\n", "x", 8000),
    ("gemma-4", "Let me check.<|tool_call>", " ", "x", 30000),
    ("deepseek_r1", "Let me check.<｜tool▁call▁begin｜>", "\t", "text", 30000),
    ("apriel_thinker", "Let me check.<tool_calls>", " ", "text", 30000),
    ("nemotron_nano_v2", "Let me check.<TOOLCALL>", " ", "text", 30000),
    ("nemotron_super_v1.5", "Let me check.<TOOLCALL>", " ", "text", 30000),
    ("phi-4-mini", "Let me check.<|tool_call|>", " ", "text", 30000),
    ("llama3.1", '{"name": "Alice"', " ", "text", 30000),
    ("llama4", '{"name": "Alice"', "\n", "text", 30000),
]


def _stretch(value, fill: str, size: int):
    """`value` (a message from an output with a run of SHORT `fill` characters) with that run grown to `size`: a
    run of SHORT characters, or a couple fewer when the parser took one or two as layout."""
    if isinstance(value, str):
        pattern = re.escape(fill) + "{%d,%d}" % (SHORT - 2, SHORT)
        return re.sub(pattern, lambda found: fill * (len(found.group()) + size - SHORT), value)
    if isinstance(value, list):
        return [_stretch(item, fill, size) for item in value]
    if isinstance(value, dict):
        return {key: _stretch(item, fill, size) for key, item in value.items()}
    return value


@pytest.fixture
def short_limit(regex_limit):
    regex_limit(2.0)


@pytest.mark.parametrize(
    ("name", "head", "fill", "tail", "size"),
    CUT_AFTER_MARKUP,
    ids=[f"{case[0]}-{case[1][-12:]!r}-{case[2]!r}" for case in CUT_AFTER_MARKUP],
)
def test_a_long_whitespace_run_after_cut_markup_parses_in_one_shot(short_limit, name, head, fill, tail, size):
    template = get_template(name)
    expected = _stretch(parse_response(head + fill * SHORT + tail, template, prefix=""), fill, size)
    message = parse_response(head + fill * size + tail, template, prefix="")
    assert message == expected
    assert "tool_calls" not in message  # no call was finished


@pytest.mark.parametrize(
    ("name", "head", "fill", "tail", "size"),
    CUT_AFTER_MARKUP,
    ids=[f"{case[0]}-{case[1][-12:]!r}-{case[2]!r}" for case in CUT_AFTER_MARKUP],
)
def test_a_long_whitespace_run_after_cut_markup_streams_in_linear_work(name, head, fill, tail, size):
    template = get_template(name)
    text = head + fill * 6000 + tail
    expected = parse_response(text, template, prefix="")
    for chunk in (1, 7, 64):
        before = regex_syntax.work[0]
        parser = ResponseParser(template, prefix="")
        for at in range(0, len(text), chunk):
            parser.feed(text[at : at + chunk])
        message, _ = parser.finalize()
        assert message == expected
        # a bounded number of scans of each character (the old scan walked the whole held run at every feed: a
        # thousand times and more per character for this run, growing with it)
        assert regex_syntax.work[0] - before < 200 * len(text), (chunk, regex_syntax.work[0] - before)


# A long run held at the end of the text while it streams: after content (any template whose content close or call
# open may start with whitespace), inside an open reasoning block, and between calls.
HELD_RUNS = [
    ("hermes", "<|im_start|>assistant\n", "Hi there.\n\n", " ", "- one"),
    ("hermes", "<|im_start|>assistant\n", "Hi there.", "\n", "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"),
    ("qwen3", "<|im_start|>assistant\n", "<think>\n", "\n", "Done.\n</think>\n\nAnswer."),
    (
        "qwen3",
        "<|im_start|>assistant\n",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
        "\n",
        "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>",
    ),
    ("deepseek_v4", "", "Hi. <｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n", "\n", "x"),
]


@pytest.mark.parametrize(("name", "prefix", "head", "fill", "tail"), HELD_RUNS, ids=[f"{c[0]}-{c[2][:12]!r}" for c in HELD_RUNS])
def test_a_long_held_whitespace_run_is_not_scanned_again_at_every_feed(name, prefix, head, fill, tail):
    template = get_template(name)
    text = head + fill * 6000 + tail
    expected = parse_response(text, template, prefix=prefix)
    short = parse_response(head + fill * SHORT + tail, template, prefix=prefix)
    assert expected == _stretch(short, fill, 6000)
    for chunk in (1, 16):
        before = regex_syntax.work[0]
        parser = ResponseParser(template, prefix=prefix)
        for at in range(0, len(text), chunk):
            parser.feed(text[at : at + chunk])
        assert parser.finalize()[0] == expected
        assert regex_syntax.work[0] - before < 200 * len(text), (chunk, regex_syntax.work[0] - before)

"""Scanning cost is linear, and the regex time limit is a budget per call (issues 11, 14.1, 15.1).

No wall-clock assertions: linearity is checked with the scanner's own work counter (characters searched, runs walked
back, characters matched by anchored tries), and the budget with hostile patterns whose unbounded cost would be many
times the limit.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import response_templates as rt
from response_templates.core import regex_syntax, scanner
from response_templates.core.pattern_scan import analyze
from response_templates.core.errors import grow_regex_budget, regex_budget, regex_time_left

CORPORA = Path(__file__).parent / "data" / "corpora"
PROSE = (
    "The forecast for Paris says 18 °C with light rain, so if x < 10 we stay in and otherwise we go out.  "
    "Ça va — 天气很好 🌤 today.\nCompare a<b with b > c, then weigh   the    options once more; nothing is final.\n\n"
)


def corpus_case(name: str) -> dict:
    """The complete corpus case of a library template with the most kinds of fields (then the longest)."""
    corpus = json.loads((CORPORA / f"{name}.json").read_text(encoding="utf-8"))
    cases = [case for case in corpus["cases"] if not case.get("truncated")]

    def score(case):
        expected = case["expected"]
        return sum(1 for key in ("reasoning_content", "content", "tool_calls") if expected.get(key)), len(case["output"])

    return max(cases, key=score)


def grown(case: dict, size: int) -> str:
    """The case's output with its reasoning or text grown by prose to about `size` characters."""
    output = case["output"]
    filler = (PROSE * (size // len(PROSE) + 1))[:size]
    for key in ("reasoning_content", "content"):
        value = case["expected"].get(key)
        if isinstance(value, str) and len(value.strip()) >= 4 and value in output:
            return output.replace(value, value + " " + filler.rstrip() + ".", 1)
    return filler + output


def work_of(function) -> int:
    before = regex_syntax.work[0]
    function()
    return regex_syntax.work[0] - before


def feed_all(template, prefix: str, chunks) -> dict:
    parser = rt.ResponseParser(template, prefix=prefix)
    for chunk in chunks:
        parser.feed(chunk)
    return parser.finalize()[0]


@pytest.fixture
def generous_limit(regex_limit):
    """Work is what these tests count; a loaded machine must not turn them into time-limit failures."""
    regex_limit(60)


@pytest.mark.usefixtures("generous_limit")
@pytest.mark.parametrize("name", rt.list_templates())
def test_one_big_feed_costs_what_small_chunks_cost(name):
    """One feed of 1 MB does about as much scanning work per character as 4-character chunks (it used to be
    quadratic: a partial regex search over the whole feed, and rescans after each delimiter), and the same message."""
    template = rt.get_template(name)
    case = corpus_case(name)
    big = grown(case, 1_000_000)
    small = grown(case, 64_000)
    chunks = [small[i:i + 4] for i in range(0, len(small), 4)]
    chunked = work_of(lambda: feed_all(template, case["prefix"], chunks))
    whole = work_of(lambda: feed_all(template, case["prefix"], [big]))
    per_char_whole, per_char_chunked = whole / len(big), chunked / len(small)
    # each regex delimiter scans the text about once (one search for its literal text), whatever the chunking
    delimiters = sum(
        1 for field in rt.load_template(template).fields.values() for d in (field.open, field.close) if d is not None
    )
    assert per_char_whole <= 2 * per_char_chunked + delimiters, (per_char_whole, per_char_chunked)
    assert per_char_whole <= 2 * delimiters + 1, per_char_whole
    assert feed_all(template, case["prefix"], [small]) == feed_all(template, case["prefix"], chunks)


@pytest.mark.usefixtures("generous_limit")
@pytest.mark.parametrize("name", rt.list_templates())
def test_scanning_work_grows_linearly_with_the_output(name):
    template = rt.get_template(name)
    case = corpus_case(name)
    works = [work_of(lambda size=size: rt.parse_response(grown(case, size), template, prefix=case["prefix"])) for size in (100_000, 800_000)]
    assert works[1] <= 8 * works[0] * 1.5 + 1000, works


def test_a_leading_whitespace_pattern_is_linear_on_a_long_run_of_spaces():
    # `regex` alone takes seconds on this (each start position runs \s* to the end of the run)
    template = {"start_anchor": "S", "fields": {"r": {"open_pattern": r"\s*<think>", "close": "</think>"}, "content": {}}}
    text = " " * 200_000 + "x<think>a</think>b"
    used = work_of(lambda: rt.parse_response(text, template, prefix=""))
    assert used < 4 * len(text)
    assert rt.parse_response(text, template, prefix="") == {"content": "b", "r": "a"}


HOSTILE_REPEAT = {"start_anchor": "S", "fields": {"x": {"open_pattern": "(a|aa)*c", "close": "</x>"}, "content": {}}}


def test_per_feed_cost_does_not_grow_with_a_long_held_partial_match():
    """`(a|aa)*c` fed "aaaa" 3000 times: the held text grows, but it is tried again only when it doubles."""
    parser = rt.ResponseParser(HOSTILE_REPEAT, prefix="")
    tries = []
    for _ in range(3000):
        before = regex_syntax.work[0]
        parser.feed("aaaa")
        tries.append(regex_syntax.work[0] - before)
    # the total work is linear (amortised) in the 12,000 characters fed, not quadratic (about 18 million)
    assert sum(tries) < 200_000, sum(tries)
    message, _ = parser.finalize()
    assert message == {"content": "a" * 12_000}


@pytest.fixture
def short_limit():
    old = rt.get_regex_timeout()
    rt.set_regex_timeout(0.2)
    yield 0.2
    rt.set_regex_timeout(old)


def test_the_limit_is_one_budget_for_all_the_searches_of_a_feed(short_limit):
    # about 160 tries, each catastrophic; with a limit per search this took seconds, with one budget per feed it
    # raises after about the limit
    template = {"start_anchor": "S", "fields": {"x": {"open_pattern": "X(?:(a|aa)*\N{SNOWMAN})?", "close": "</x>"}, "content": {}}}
    parser = rt.ResponseParser(template, prefix="")
    start = time.monotonic()
    with pytest.raises(rt.RegexTimeoutError) as info:
        parser.feed("X" + "a" * 32)
    elapsed = time.monotonic() - start
    assert elapsed < 20 * short_limit  # generous: the unbounded run takes seconds even on a fast machine
    message = str(info.value)
    assert "RESPONSE_TEMPLATES_REGEX_TIMEOUT" in message and "set_regex_timeout" in message
    assert "open_pattern" in message and "'x'" in message


def test_budget_is_shared_and_spent_budget_raises(short_limit):
    with regex_budget():
        assert 0 < regex_time_left() <= short_limit
        with regex_budget():  # nested calls join the outer budget
            pass
        # the budget is charged in this thread's CPU time (time spent waiting, asleep, is not: test_core_under_load)
        started = time.thread_time()
        while time.thread_time() - started < short_limit * 1.5:
            pass
        with pytest.raises(TimeoutError):
            regex_time_left()
    assert regex_time_left() == short_limit  # outside a call: the whole limit


def test_parse_response_shares_one_budget():
    # each search takes a fraction of the limit, all of them many times the limit: the limit is set from what one
    # region costs on this machine (a fixed limit passed here and failed on a faster machine)
    template = {"start_anchor": "S", "fields": {"x": {"open_pattern": "X(?:(a|aa)*\N{SNOWMAN})?", "close": "b"}, "content": {}}}
    region = "X" + "a" * 22 + "b"
    old = rt.get_regex_timeout()
    try:
        costs = []
        for _ in range(3):
            started = time.thread_time()
            rt.parse_response(region, template, prefix="")
            costs.append(time.thread_time() - started)
        one_region = sorted(costs)[1]
        rt.set_regex_timeout(max(8 * one_region, 0.01))
        with pytest.raises(rt.RegexTimeoutError, match="RESPONSE_TEMPLATES_REGEX_TIMEOUT"):
            rt.parse_response(region * 80, template, prefix="")
    finally:
        rt.set_regex_timeout(old)


HOSTILE_TAGS = {
    "start_anchor": "S",
    "fields": {
        "calls": {
            "open": "<c>",
            "close": "</c>",
            "repeats": True,
            "content": "xml-inline",
            # each region's tags take about a third of the limit to read (catastrophic backtracking)
            "content_args": {"tag_pattern": "<t>(?P<key>(?:a|aa)*)c</t>(?P<value>)"},
        },
        "content": {},
    },
}


@pytest.mark.parametrize("streamed", [False, True])
def test_xml_inline_tag_patterns_draw_on_the_same_budget(short_limit, streamed):
    """The tag_pattern searches of the regions a call closes share its budget with the delimiter searches: forty
    regions that each stay under the limit add up to many times it, and raise (they used to get the whole limit
    each)."""
    text = "<c><t>" + "a" * 28 + "</t></c>"
    text = text * 40
    with pytest.raises(rt.RegexTimeoutError) as info:
        if streamed:
            rt.ResponseParser(HOSTILE_TAGS, prefix="").feed(text)
        else:
            rt.parse_response(text, HOSTILE_TAGS, prefix="")
    message = str(info.value)
    assert "tag_pattern" in message and "'calls'" in message and "RESPONSE_TEMPLATES_REGEX_TIMEOUT" in message


def test_a_region_closed_by_a_small_chunk_brings_its_share_of_the_budget(short_limit):
    """A long region closed by a small last chunk: the content parser reads the whole region, so the budget of that
    feed grows by the region's share (the limit per million characters)."""
    with regex_budget(10):
        assert regex_time_left() <= short_limit
        grow_regex_budget(5_000_000)
        assert regex_time_left() > 4 * short_limit
    assert regex_time_left() == short_limit


@pytest.mark.parametrize(
    "pattern, texts",
    [
        (r"\s*<tool_call>\s*(?=\{)", ["a  <tool_call> {", "  \n<tool_call>x", "<tool_call>{"]),
        (r"(?<=\})\s*,\s*(?=\{)", ["{}, {", "} ,x", "a,{"]),
        (r"(?:(?<=</t>)|(?<=</t>\s))(?=\S)", ["</t>x", "</t> y", "</t>  z"]),
        (r"\A(?:\s*<think>)?", ["<think>a", "  <think>b", "c"]),
        (r"end$", ["the end", "end\n", "endless"]),
        (r"\s*(?:<a>|[ \t]*to=x)", ["b\n  to=x", "c <a>", "to="]),
        # a lookbehind ending in a run of spaces: starts after the `>` and in the run that follows it only
        (r"(?:(?<=</p>)|(?<=<sep>\s*))\s*</call>", ["<sep>\n</call>", "<sep>  x </call>", "a </call>", "x</p> </call>", "<sep></call>", "> </call><sep>"]),
        (r'(?<=<x\s+n="[^"]*"\s*>\s*)', ['<x n="a">  y', "a b > c", '<x n="a" >', '<y n="a">  ']),
        # nested runs of the same class: `\s*\]?\s*<e>` starts at the spaces before a `]` or a `<`
        (r"\s*\]?\s*(?:<e>|</e>)", ["a ] <e>", "x  </e>", "] ]<e>", " ]", "a b c"]),
        # lookbehinds after a leading run: at the start of the run before where they hold
        (
            r"\s*(?:<a>|(?:(?<![\s\S])|(?<=\n)|(?<=<c>))[ \t]*call:)",
            ["call:x", "  call:", "a \n call:", "a<c> call:", "a<c>\ncall:", "x call:", "a\n\n <a>", " \nx"],
        ),
    ],
)
def test_candidate_scan_agrees_with_search(pattern, texts):
    """The scanner's answer is the `regex` search's answer (the differential tests check this on every template)."""
    import regex

    compiled = regex.compile(pattern, regex.DOTALL)
    info = analyze(pattern)
    assert info is not None
    for text in texts:
        for pos in range(len(text) + 1):
            kind, match, at, _ = scanner.scan_pattern(compiled, info, text, pos, pos, True, len(text), lambda op, *a, **k: op(*a, **k))
            expected = compiled.search(text, pos)
            if expected is None:
                assert kind is None, (pattern, text, pos)
            else:
                assert kind == "match" and match.span() == expected.span(), (pattern, text, pos)


def test_patterns_the_analysis_cannot_read_fall_back_to_search():
    for pattern in [r"(?i)<think>", r"\p{L}+", r"\s*", r"(?:x)?", r"\1(a)"]:
        assert analyze(pattern) is None
    template = {"start_anchor": "S", "fields": {"r": {"open_pattern": r"(?i)<THINK>", "close": "</think>"}, "content": {}}}
    assert rt.parse_response("a<think>b</think>c", template, prefix="") == {"content": "c", "r": "b"}


BLOCK_TEMPLATE = {
    "start_anchor": "S",
    "fields": {
        # a call opens after `}` and a comma, but only inside an open <b> block (the apriel / nemotron / olmo3 idiom)
        "x": {"open_pattern": r"<b>|(?<=\})\s*,\s*(?=\{)(?<=<b>(?:(?!</b>)[\s\S])*)", "close_pattern": r"(?<=\})", "repeats": True},
        "content": {},
    },
}


@pytest.mark.parametrize(
    "text",
    ["a<b>{1}, {2} c", "a<b>{1}</b>, {2} c", "<b>{1}, </b>{2}, {3}", "{1}, <b>{2}, {3}</b>, {4}", "<b>{1}" + " y" * 3000 + "}, {2}"],
)
def test_block_lookbehinds_match_transformers(text):
    """A block lookbehind is decided by one forward pass over the block (then the pattern without it is tried):
    same messages as transformers' parser, one-shot and streamed a character at a time."""
    from oracle import reference_module

    reference = reference_module()
    expected = reference.parse_response(text, BLOCK_TEMPLATE, prefix="")
    assert rt.parse_response(text, BLOCK_TEMPLATE, prefix="") == expected
    assert feed_all(BLOCK_TEMPLATE, "", list(text)) == expected


def test_block_lookbehind_work_does_not_grow_with_the_block(generous_limit):
    """Each try of the block lookbehind used to scan back to the block's start: the work of a stream with a long
    block and many candidate places after it is linear in its length."""
    def work(size):
        text = "<b>{" + "y " * size + "}" + ", {1}" * (size // 100) + "</b>"
        return work_of(lambda: feed_all(BLOCK_TEMPLATE, "", [text[i:i + 64] for i in range(0, len(text), 64)]))

    small, large = work(20_000), work(80_000)
    assert large <= 4 * small * 1.5 + 10_000, (small, large)


def test_one_shot_skips_what_streaming_skips_in_a_gated_region(monkeypatch):
    # issue 31: a qwen3-coder call of 10^5 parameters took 4 times as long one-shot as streamed (and ran out of
    # its regex budget): one-shot parsing tried the close pattern at every parameter's end, where the streaming
    # parser's gated fast path skips text without a trigger. Counted, not timed: the anchored tries of the scan
    from response_templates.core import delimiters as parser_module

    tries = [0]
    counted = parser_module.regex_time_left

    def counting():
        tries[0] += 1
        return counted()

    monkeypatch.setattr(parser_module, "regex_time_left", counting)
    template = rt.get_template("qwen3-coder")
    made = []
    for count in (1_000, 8_000):
        params = "".join(f"<parameter=p{index}>\nvalue {index}\n</parameter>\n" for index in range(count))
        text = "<tool_call>\n<function=f>\n" + params + "</function>\n</tool_call>"
        tries[0] = 0
        message = rt.parse_response(text, template, prefix="")
        made.append(tries[0])
        assert message == feed_all(template, "", [text[start:start + 4096] for start in range(0, len(text), 4096)])
        assert len(message["tool_calls"][0]["function"]["arguments"]) == count
    assert made[1] <= made[0] + 8  # not growing with the number of parameters

"""Benign inputs of any size never hit the regex time limit, on any library template (issue 15.2).

10 MB generations (long prose with `<`, unicode and blank lines around the corpus case's reasoning, text and calls)
are parsed one-shot and fed whole to the streaming parser with the default limit; a tool call with an 8 MB
argument too (also fed in 64 KB chunks), and the scanning work of an argument written like code is counted. Those
sizes take minutes over all templates, so by default the same tests run at a tenth of the size
(1 MB, 800 KB); set RESPONSE_TEMPLATES_LARGE=1 for the full sizes. They sit outside the test_core_* files that CI
repeats on every transformers release.
"""

from __future__ import annotations

import json
import os

import pytest

import response_templates as rt

from test_core_linear import corpus_case, grown, work_of

FULL = bool(os.environ.get("RESPONSE_TEMPLATES_LARGE"))
SIZE = 10_000_000 if FULL else 1_000_000
ARGUMENT = 8_000_000 if FULL else 800_000

@pytest.fixture(autouse=True)
def default_limit():
    """The default limit (1 s per call and per million characters), whatever an earlier test set."""
    old = rt.get_regex_timeout()
    rt.set_regex_timeout(1.0)
    yield
    rt.set_regex_timeout(old)


@pytest.mark.parametrize("name", rt.list_templates())
def test_ten_megabytes_parse_one_shot_and_in_one_feed(name):
    template = rt.load_template(rt.get_template(name))
    case = corpus_case(name)
    text = grown(case, SIZE)
    message = rt.parse_response(text, template, prefix=case["prefix"])
    parser = rt.ResponseParser(template, prefix=case["prefix"], _events=False)
    parser.feed(text)
    assert parser.finalize()[0] == message
    # the structure of the corpus case survives the growth: same fields, and its calls
    assert set(message) == set(case["expected"]), (set(message), set(case["expected"]))
    if "tool_calls" in case["expected"]:
        assert len(message["tool_calls"]) == len(case["expected"]["tool_calls"])


# Prose, or code full of what delimiters start with: `<`, `>`, braces, brackets, commas (no quote, backslash or
# control character, so the argument stays a valid JSON string as well as XML text).
PLAIN = "lorem ipsum dolor é 天 "
CODE = "<div class=x>{a: [1, 2]}</div> if (a > b) { f(x, y); } <b>é</b> 天 "


def _with_huge_argument(case: dict, size: int, unit: str = PLAIN):
    """The case with the first string argument of its first call grown to `size` characters (None when the output
    spells no such argument plainly)."""
    calls = case["expected"].get("tool_calls") or []
    for call in calls[:1]:
        function = call.get("function", {})
        arguments = function.get("arguments")
        if not isinstance(arguments, dict):
            return None
        for key, value in arguments.items():
            if isinstance(value, str) and len(value) >= 3 and case["output"].count(value) == 1:
                filler = (unit * (size // len(unit) + 1))[:size]
                return case["output"].replace(value, value + filler), key, len(value) + size
    return None




@pytest.mark.parametrize("name", rt.list_templates())
def test_a_call_with_an_eight_megabyte_argument(name):
    case = corpus_case(name)
    grown_case = _with_huge_argument(case, ARGUMENT)
    if grown_case is None:
        pytest.skip(f"{name}: the corpus case has no plain string argument to grow")
    output, key, length = grown_case
    template = rt.load_template(rt.get_template(name))
    message = rt.parse_response(output, template, prefix=case["prefix"])
    parser = rt.ResponseParser(template, prefix=case["prefix"], _events=False)
    parser.feed(output)
    assert parser.finalize()[0] == message
    arguments = message["tool_calls"][0]["function"]["arguments"]
    if isinstance(arguments, str):
        arguments = json.loads(arguments)
    assert len(arguments[key]) == length


@pytest.mark.parametrize("name", rt.list_templates())
def test_a_call_with_an_eight_megabyte_argument_streamed_in_chunks(name):
    """The same call fed in 64 KB chunks: each feed's budget is its own chunk's share, and the feed that closes the
    call brings the call's share (its content parser reads all of it)."""
    case = corpus_case(name)
    grown_case = _with_huge_argument(case, ARGUMENT)
    if grown_case is None:
        pytest.skip(f"{name}: the corpus case has no plain string argument to grow")
    output = grown_case[0]
    template = rt.load_template(rt.get_template(name))
    parser = rt.ResponseParser(template, prefix=case["prefix"], _events=False)
    for start in range(0, len(output), 65536):
        parser.feed(output[start:start + 65536])
    assert parser.finalize()[0] == rt.parse_response(output, template, prefix=case["prefix"])


@pytest.mark.parametrize("name", rt.list_templates())
def test_scanning_work_is_linear_in_a_code_like_argument(name):
    """An argument of code or markup (a `>` or a brace every few characters) used to make every such character a
    place to try the call's close pattern, each try scanning back to the call's start: the scanning work (counted,
    not timed) now grows with the argument's size, one-shot and fed whole."""
    case = corpus_case(name)
    if _with_huge_argument(case, 10, CODE) is None:
        pytest.skip(f"{name}: the corpus case has no plain string argument to grow")
    template = rt.load_template(rt.get_template(name))

    def work(size):
        output = _with_huge_argument(case, size, CODE)[0]
        parser = rt.ResponseParser(template, prefix=case["prefix"], _events=False)
        used = work_of(lambda: (rt.parse_response(output, template, prefix=case["prefix"]), parser.feed(output)))
        assert parser.finalize()[0] == rt.parse_response(output, template, prefix=case["prefix"])
        return used

    small, large = work(50_000), work(200_000)
    assert large <= 4 * small * 1.5 + 10_000, (small, large)


@pytest.mark.parametrize("name", ["qwen3", "hermes", "olmo3", "apriel_thinker", "mistral", "gpt-oss"])
def test_large_output_streamed_in_small_chunks(name):
    template = rt.load_template(rt.get_template(name))
    case = corpus_case(name)
    text = grown(case, SIZE // 5)
    parser = rt.ResponseParser(template, prefix=case["prefix"], _events=False)
    for start in range(0, len(text), 64):
        parser.feed(text[start:start + 64])
    assert parser.finalize()[0] == rt.parse_response(text, template, prefix=case["prefix"])

"""Which delimiter patterns may run without the per-call regex timeout (core/backtracking.py `is_risky`).

A pattern judged safe has its anchored tries, and the one-shot plan's combined search, run without `regex`'s
per-call timeout (the budget of the call is still checked between calls). So a pattern judged safe must not be able
to backtrack badly: no repeat holding an alternation or another repeat, and no two unbounded repeats that can take
the same characters with nothing mandatory and different between them. Everything else keeps the timeout."""

from __future__ import annotations

import pytest

import response_templates as rt
from response_templates.core.oneshot import build_short_plan
from response_templates.core.pattern_scan import analyze
from response_templates.core.template import load_template

from oracle import reference_parse_or_ours

# Shapes that can backtrack exponentially or polynomially on some input: each must keep the timeout.
RISKY = [
    r"(a|aa)*b",  # alternation in a loop: exponential
    r"(a*)*b",  # nested repeats: exponential
    r"(?:a+)+b",
    r"(?:a?)*b",  # nested optional repeat
    r"(?:a?b?)*c",
    r"(?:a*b?)*c",  # nested optional repeats
    r"(?:<[^>]*)*x",  # a repeat inside a repeat whose body may take its own first character: exponential
    r"(?:<|<<)*x",
    r"(?:<(?:a+)+)*x",  # nested loops inside the loop
    r"(?:(?:<a*)*)*x",
    r"(?:<\w*)*\w*x",  # a loop led by a character it holds nowhere else, then a repeat over its characters
    r"(?:<.*)*x",
    r"\s*\s*x",  # adjacent repeats over the same characters: polynomial
    r"\s*\]?\s*x",  # ... with only something optional between them
    r"\s*,?\s*x",
    r"\s*\n\s*x",  # ... with something mandatory between them that the repeats also take
    r"\s*\s\s*x",
    r"\s*(?:\s|y)\s*x",  # ... an alternative that takes the same characters
    r"a*[ab]a*c",
    r"[a-z]*[ \t]*[a-z]*x",  # the middle repeat may be empty
    r"<k>\s*(.*?)\s*</k>",  # a group between them does not separate them
    r"\s*(?:<p>\s*)?\s*x",  # an optional group that may be skipped
    r"(?:ab)*(?:ab)*c",  # repeats of longer bodies are assumed to overlap
    r"[^<]+?(?::\d+)?\s*x",  # the optional group's digits are also taken by the lazy class
    r"x(?=\s*\s*y)",  # inside a lookahead
    r"(?<=\s*\s*y)x",  # inside a lookbehind
    r"(?>\s*\s*)x",  # inside an atomic group (analyzed as any group)
    r"[\w-]*(?![.])[^<]*x",  # a lookahead that does not end the run
    r"a*(?<!a)a*x",  # a lookbehind does not either
]

# Shapes with one way only to split any text between their repeats: judged safe.
SAFE = [
    r"\s*<tool_call>\s*(?=\{)",
    r"[a-z]*[ \t]*x",  # disjoint classes
    r"[^<]*<\s*x",
    r"[ \t]*\n\s*x",  # the newline is not in the first class: it ends the first run
    r"\s*x\s*y",
    r"[A-Za-z_][\w.-]*\s*\(",
    r"<a>\s*([^\s<]+)\s*</a>",
    r"\s*(?:<p>\s*)?<q>",
    r"(?:<c>\s*)?x",
    r"a*ba*c",
    r"[\w-]*(?![.\w-])[^<]*<x>",  # the lookahead makes the first run end where it must
    r"a*(?!a)a*x",
]


@pytest.mark.parametrize("pattern", RISKY)
def test_a_pattern_that_can_backtrack_badly_keeps_the_timeout(pattern):
    scan = analyze(pattern)
    assert scan is None or not scan.safe
    template = load_template({"start_anchor": "<|a|>", "fields": {"content": {}, "call": {"open_pattern": pattern, "close": "</call>"}}})
    plan = build_short_plan(template.idle_watch)
    assert plan is None or plan.timed or plan.gate is not None


@pytest.mark.parametrize("pattern", SAFE)
def test_a_pattern_with_one_way_to_split_runs_without_the_timeout(pattern):
    scan = analyze(pattern)
    assert scan is not None and scan.safe
    template = load_template({"start_anchor": "<|a|>", "fields": {"content": {}, "call": {"open_pattern": pattern, "close": "</call>"}}})
    assert not build_short_plan(template.idle_watch).timed


@pytest.mark.parametrize(
    ("pattern", "gated"),
    [
        (r"\s*\]?\s*x", True),  # one pair of repeats sharing whitespace
        (r"[^<]+?\s*<x>", True),
        (r"\s*\s*\s*x", True),  # a chain of three: a shorter run allowed
        (r"<k>\s*(.*?)\s*</k>", True),
        (r"\s*\s*\s*\s*x", False),  # a chain of four
        (r"\s*.*?\s*.*?\s*x", False),
        (r"[^\"]*,?[^,]*x", False),  # no small set of shared characters to look for
        (r"(a|aa)*b", False),  # exponential: always timed
        (r"(?:<c>\s*)*\s*x", True),  # the loop ends anywhere in its text, then `\s*`: a pair sharing spaces
        (r"(?:<\s*)*(?:<\s*)*x", True),  # two such loops: a pair sharing `<` and spaces (a chain: shorter runs)
        (r"(?:<[^>]*)*\s*x", False),
    ],
)
def test_only_a_pair_or_chain_of_three_repeats_sharing_few_characters_is_untimed_on_a_text_without_a_long_run(pattern, gated):
    scan = analyze(pattern)
    assert scan is None or not scan.safe
    template = load_template({"start_anchor": "<|a|>", "fields": {"content": {}, "call": {"open_pattern": pattern, "close": "</call>"}}})
    plan = build_short_plan(template.idle_watch)
    assert (plan.gate is not None) == gated and plan.timed == (not gated)


def test_the_gate_times_a_text_with_a_long_run_of_shared_characters():
    template = load_template({"start_anchor": "<|a|>", "fields": {"content": {}, "call": {"open_pattern": r"\s*\]?\s*<c>", "close": "."}}})
    for text, long_run in (("a ] <c>b.", False), ("a" + " " * 15 + "]\n<c>b.", False), ("a" + "\t" * 16 + "<c>b.", True), ("a\u3000" * 20 + "<c>b.", False)):
        assert rt.parse_response(text, template, prefix="")["call"] == "b"
        plan = template.idle_watch.short_plan
        assert plan.seen[0] == text and plan.seen[1] == long_run


def test_a_chain_of_three_repeats_allows_a_shorter_run():
    pair, chain = analyze(r"[^<]+?\s*<x>"), analyze(r"\s*[^<]+?\s*<x>")
    assert pair.shared_runs == chain.shared_runs == r"\s"
    assert pair.run_limit == 16 and chain.run_limit == 4
    template = load_template({"start_anchor": "<|a|>", "fields": {"content": {}, "call": {"open_pattern": r"\s*[^<]+?\s*<c>", "close": "."}}})
    for text, long_run in (("a   <c>b.", False), ("a    <c>b.", True)):
        assert rt.parse_response(text, template, prefix="") == {"call": "b"}
        assert template.idle_watch.short_plan.seen == (text, long_run)


def test_a_scoped_flag_keeps_the_timeout():
    # (?i:...) changes which characters a class takes: the analysis does not guess
    scan = analyze(r"(?i:[a-z]*)[A-Z]*x")
    assert scan is None or not scan.safe


def test_a_catastrophic_delimiter_still_times_out_and_a_safe_one_still_parses(regex_limit):
    regex_limit(0.05)
    template = {"start_anchor": "<|a|>", "fields": {"content": {}, "call": {"open_pattern": r"(a|aa)+$", "close": "."}}}
    with pytest.raises(rt.RegexTimeoutError, match="open_pattern"):
        rt.parse_response("a" * 80 + "b", template, prefix="")
    template = {"start_anchor": "<|a|>", "fields": {"content": {}, "call": {"open_pattern": r"[a-z]*[ \t]*<c>", "close": "."}}}
    assert rt.parse_response("hi " + " " * 300 + "x <c>y.", template, prefix="") == {"content": "hi", "call": "y"}


# xml-inline tag patterns (core/content.py): on a region of at most `_UNTIMED_MOST` characters, a tag pattern judged
# safe is read without the per-call timeout; the others keep it.
@pytest.mark.parametrize("pattern", RISKY + [r"<t>(?P<key>(?:a|aa)*)c</t>(?P<value>)", r"<a>(?P<key>\s*\s*)(?P<value>x*)</a>"])
def test_a_tag_pattern_that_can_backtrack_badly_keeps_the_timeout(pattern):
    from response_templates.core.content import _safe_tags

    assert not _safe_tags(pattern)


def test_library_tag_patterns_with_one_way_to_split_are_read_without_the_timeout():
    from response_templates.core.content import _safe_tags

    assert _safe_tags(r'<parameter=(?P<key>[^>\s]+)>\n?(?P<value>.*?)\n?</parameter>(?=\s*(?:<parameter=|$))')
    assert _safe_tags(r'<param\s+name="(?P<key>[^"]+)"\s*>(?:<!\[CDATA\[(?P<value>.*?)\]\]>|(?P<value>[^<]*))</param>')
    # a conditional takes one of its two branches: judged as an alternation of them
    assert _safe_tags(r'<parameter=(?P<key>[^>\s]+)>(?P<nl>\n)?(?P<value>.*?)(?(nl)\n)</parameter>(?=\s*(?:<parameter=|$))')


def test_runs_that_meet_only_where_a_literal_occurs_are_read_without_the_timeout_on_a_region_with_few_of_it():
    r"""`.*?` before `</arg_key>` and `.*?` after it can split a text only where `</arg_key>` occurs: a region with
    few of them (and no long run of the whitespace the `\s*` around the key share with it) is read without the
    timeout; more of them, or a long whitespace run, keep it."""
    from response_templates.core.content import _untimed_tags

    glm = r"<arg_key>\s*(?P<key>.*?)\s*</arg_key>\s*<arg_value>(?P<value>.*?)</arg_value>"
    call = "get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>unit</arg_key>\n<arg_value>c</arg_value>"
    assert _untimed_tags(glm, call)
    assert not _untimed_tags(glm, call + "<arg_key>a</arg_key><arg_value>b</arg_value>" * 2)  # 4 of them
    assert not _untimed_tags(glm, call.replace("Paris", "Paris    France"))  # a run of 4 blanks
    # a literal that may overlap itself ('aa' in 'aaa') is counted by its longest start that cannot ('a')
    assert _untimed_tags(r"<a>(?P<key>.*?)aa(?P<value>.*?)</a>", "<a>xaay</a>")
    assert not _untimed_tags(r"<a>(?P<key>.*?)aa(?P<value>.*?)</a>", "<a>x" + "a" * 14 + "y</a>")
    assert not _untimed_tags(r"<a>(?P<key>.*?)ab(?P<value>.*?)</a>", "<a>x" + "ab" * 16 + "y</a>")
    assert _untimed_tags(r"<a>(?P<key>.*?)ab(?P<value>.*?)</a>", "<a>x" + "ab" * 15 + "y</a>")


@pytest.mark.parametrize(
    "pattern",
    [
        r"<a>(?P<n>x)?(?(n)(?:y+)+|z)(?P<key>)(?P<value>)",  # nested repeats in a branch
        r"<a>(?P<n>x)?(?P<key>\s*)(?(n)\s*|)(?P<value>\s*)c",  # repeats sharing characters across the condition
        r"<a>(?:(?P<n>x)?(?(n)y|z))*(?P<key>)(?P<value>)",  # a condition inside a loop
    ],
)
def test_a_conditional_tag_pattern_that_can_backtrack_badly_keeps_the_timeout(pattern):
    from response_templates.core.content import _safe_tags

    assert not _safe_tags(pattern)


@pytest.mark.parametrize("size", [30, 600])
def test_a_catastrophic_tag_pattern_times_out_on_a_short_region_too(size, regex_limit):
    regex_limit(0.05)
    template = {
        "start_anchor": "S",
        "fields": {
            "calls": {
                "open": "<c>",
                "close": "</c>",
                "content": "xml-inline",
                "content_args": {"tag_pattern": r"<t>(?P<key>(?:a|aa)*)c</t>(?P<value>)"},
            },
            "content": {},
        },
    }
    text = "<c><t>" + "a" * size + "</t></c>"
    with pytest.raises(rt.RegexTimeoutError, match="tag_pattern"):
        rt.parse_response(text, template, prefix="")
    safe = {**template["fields"]["calls"], "content_args": {"tag_pattern": r"<t>(?P<key>[a-z]*)=(?P<value>[^<]*)</t>"}}
    template = {**template, "fields": {**template["fields"], "calls": safe}}
    assert rt.parse_response("<c><t>k=v</t><t>j=" + "w" * size + "</t></c>", template, prefix="") == {"calls": {"k": "v", "j": "w" * size}}


def test_a_tag_pattern_with_a_pair_of_repeats_sharing_spaces_is_untimed_only_without_a_long_run_of_them():
    from response_templates.core.content import _untimed_tags

    pattern = r"<p=(?P<key>[^>\n]+)>\n?(?P<value>.*?)\n?(?:</p>|\s*(?=<p=|\Z))"  # `.*?` then `\s*`: a shared pair
    assert _untimed_tags(pattern, "<p=a>\n1\n</p><p=b>x y</p>")
    assert not _untimed_tags(pattern, "<p=a>\n1" + " " * 16 + "\n</p>")  # a run of 16 spaces: timed
    assert not _untimed_tags(pattern, "<p=a>" + "x" * 600 + "</p>")  # a long region: timed
    for shape in (r"<t>(?P<key>(?:a|aa)*)c</t>(?P<value>)", r"<a>(?P<key>.*?)\s*.*?\s*.*?\s*(?P<value>x)</a>"):
        assert not _untimed_tags(shape, "<t>ac</t>")  # no small shared set, or exponential: always timed
    template = {"start_anchor": "S", "fields": {"calls": {"open": "<c>", "close": "</c>", "content": "xml-inline", "content_args": {"tag_pattern": pattern}}, "content": {}}}
    reference = reference_parse_or_ours()

    for body, calls in (("<p=a>\n1\n</p><p=b>x y</p>", {"a": "1", "b": "x y"}), ("<p=a>1" + " " * 20 + "</p><p=b>2", {"a": "1" + " " * 20, "b": "2"})):
        text = "<c>" + body + "</c>"
        assert rt.parse_response(text, template, prefix="") == reference(text, template, prefix="") == {"calls": calls}


# Loops of a body led by a character the body holds nowhere else split a text in one way only: `scan` judges them
# risky, the one-shot plan (core/oneshot.py `_loop_verdict`) runs them without the timeout.
LOOPS = [
    r"\s*(?:<think>\s*)+",
    r"\A\s*(?:<think>\s*)*",
    r"\s*(?:<channel\|>\s*)+|\s*(?=<\|tool_call>|<turn\|>)",
    r"(?:x\s*)*<y>",
    r"(?:<a*)*x",
    r"(?:<a>|<b>)*x",
    r"(?:<a|<aa)*x",
]


@pytest.mark.parametrize("pattern", LOOPS)
def test_a_loop_led_by_a_character_it_holds_nowhere_else_runs_without_the_timeout(pattern):
    import regex

    scan = analyze(pattern)
    assert scan is not None and not scan.safe and scan.shared_runs is None  # scan alone keeps the timeout
    template = load_template({"start_anchor": "<|a|>", "fields": {"content": {}, "call": {"open_pattern": pattern, "close": "</call>"}}})
    plan = build_short_plan(template.idle_watch)
    assert not plan.timed and plan.gate is None
    # texts made of the loop's pieces, where a pattern that splits them many ways would run for ages: each search
    # ends well within the limit (one anchored try per position, each linear)
    compiled = regex.compile(pattern, regex.DOTALL)
    for piece in ("<think> ", "<think>", "<channel|> ", "x ", "x", "<a", "<", "<aa", "<a>", "<b><a>"):
        for text in (piece * (500 // len(piece)), " " + piece * (400 // len(piece)) + "!"):
            compiled.search(text, timeout=5.0)
            assert rt.parse_response(text, template, prefix="") == streamed_message(template, text)


def streamed_message(template, text):
    parser = rt.ResponseParser(template, prefix="")
    for start in range(0, len(text), 7):
        parser.feed(text[start:start + 7])
    return parser.finalize()[0]


def test_a_loop_whose_end_may_run_into_what_follows_is_gated_on_runs_of_the_shared_characters():
    template = load_template({"start_anchor": "<|a|>", "fields": {"content": {}, "call": {"open_pattern": r"\s*(?:<\|channel>\s*)*<\|channel>(?:thought\s*|(?!thought)\s*)", "close": "."}}})
    for text, long_run in (("a <|channel>thought b.", False), ("a<|channel>" + " " * 16 + "<|channel>b.", True)):
        assert rt.parse_response(text, template, prefix="") == streamed_message(template, text)
        plan = template.idle_watch.short_plan
        assert not plan.timed and plan.seen == (text, long_run)

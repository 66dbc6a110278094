"""One-shot parsing of short texts (core/oneshot.py, issue 11): one combined search per parser state must give the
message the streaming parser gives (which searches each delimiter on its own), in every case the combination could
get wrong: several delimiters matching at one place, named groups shared between delimiters, patterns that cannot
join an alternation, long stretches without any delimiter, a template dict changed between calls, and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import response_templates as rt
from response_templates.core.oneshot import build_short_plan
from response_templates.core.template import load_template

from oracle import reference_parse_or_ours

CORPORA = Path(__file__).parent / "data" / "corpora"
PROSE = (
    "The forecast for Paris says 18 °C, so if x < 10 we stay in {and} otherwise we go out.  Ça va — 天气 🌤\n"
    "Compare a<b with b > c, then weigh   the    options; (nothing) here is final, [really].\n\n"
)


def streamed(template, text: str, prefix: str, chunk: int = 1, **options) -> dict:
    parser = rt.ResponseParser(template, prefix=prefix, **options)
    for start in range(0, len(text), chunk):
        parser.feed(text[start:start + chunk])
    return parser.finalize()[0]


def outcome(function, *args, **kwargs):
    """What a call gives: its result, or the type and message of what it raised."""
    try:
        return "ok", function(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - compared, not swallowed
        return type(error).__name__, str(error)


def _corpus_cases():
    for path in sorted(CORPORA.glob("*.json")):
        corpus = json.loads(path.read_text(encoding="utf-8"))
        for case in corpus["cases"]:
            yield pytest.param(corpus["template"], case, id=f"{path.stem}/{case['name']}")


@pytest.mark.parametrize("name, case", list(_corpus_cases()))
def test_library_one_shot_equals_streaming(name, case):
    template = rt.get_template(name)
    options = {"tools": case.get("tools"), "truncated": bool(case.get("truncated"))}
    one = outcome(rt.parse_response, case["output"], template, prefix=case["prefix"], **options)
    parser_options = {"tools": case.get("tools")}

    def stream():
        parser = rt.ResponseParser(template, prefix=case["prefix"], **parser_options)
        for char in case["output"]:
            parser.feed(char)
        return parser.finalize(truncated=options["truncated"])[0]

    assert one == outcome(stream)


@pytest.mark.parametrize("name", rt.list_templates())
def test_library_one_shot_on_prose_around_the_corpus_outputs(name):
    """Texts between 128 and 512 characters (where the combined search starts at the first possible delimiter):
    prose before, inside and after each corpus output."""
    corpus = json.loads((CORPORA / f"{name}.json").read_text(encoding="utf-8"))
    template = rt.get_template(name)
    checked = 0
    for case in corpus["cases"][:12]:
        output = case["output"]
        middle = len(output) // 2
        for text in (PROSE + output, output + PROSE, output[:middle] + PROSE + output[middle:], PROSE * 2):
            text = text[:500]
            one = outcome(rt.parse_response, text, template, prefix=case["prefix"])
            assert one == outcome(streamed, template, text, case["prefix"], 5), (case["name"], text)
            checked += 1
    assert checked


def _template(fields: dict) -> dict:
    return {"start_anchor": "<|assistant|>", "fields": fields}


def test_the_longest_delimiter_at_a_place_wins_even_when_a_shorter_one_comes_first_in_the_alternation():
    template = _template(
        {
            "a": {"open_pattern": r"<a", "close": "."},
            "b": {"open_pattern": r"<a+b>", "close": "."},
            "content": {"repeats": True, "join": ""},
        }
    )
    assert rt.parse_response("x<aab>y.z<a w.", template, prefix="") == {"content": "xz", "b": "y", "a": "w"}
    assert rt.parse_response("x<aab>y.", template, prefix="") == streamed(template, "x<aab>y.", "")


def test_equal_delimiters_at_a_place_go_to_the_first_field_by_name_and_opens_before_closes():
    template = _template(
        {
            "zeta": {"open_pattern": r"<t>", "close": "."},
            "alpha": {"open_pattern": r"<t>", "close": "."},
            "content": {"close_pattern": r"<t>|!"},
        }
    )
    text = "hi<t>there."
    assert rt.parse_response(text, template, prefix="") == streamed(template, text, "") == {"content": "hi", "alpha": "there"}


def test_named_groups_shared_between_delimiters_come_from_the_one_that_matched():
    template = _template(
        {
            "calls": {
                "open_pattern": r"<call (?P<name>\w+)>",
                "close": "</call>",
                "repeats": True,
                "transform": {"name": "{name}", "arguments": "{content}"},
            },
            "notes": {
                "open_pattern": r"<note (?P<name>\w+) (?P<extra>\w+)>",
                "close": "</note>",
                "repeats": True,
                "transform": {"by": "{name}", "extra": "{extra}", "text": "{content}"},
            },
            "content": {"repeats": True, "join": ""},
        }
    )
    text = "a<note ann x>hello</note>b<call f>1</call><note bob y>bye</note>"
    expected = {
        "content": "ab",
        "calls": [{"name": "f", "arguments": "1"}],
        "notes": [{"by": "ann", "extra": "x", "text": "hello"}, {"by": "bob", "extra": "y", "text": "bye"}],
    }
    assert rt.parse_response(text, template, prefix="") == expected
    assert streamed(template, text, "") == expected


def test_a_backreference_keeps_the_per_delimiter_search():
    template = _template(
        {
            "quoted": {"open_pattern": r"(['\"])q\1", "close": "."},
            "other": {"open_pattern": r"<o>", "close": "."},
            "content": {"repeats": True, "join": ""},
        }
    )
    compiled = load_template(template)
    assert build_short_plan(compiled.idle_watch) is None  # group numbers would shift in an alternation
    for text in ("a'q'b.c", "a'q\"b.<o>c.", "<o>x.'q'y."):
        assert rt.parse_response(text, template, prefix="") == streamed(template, text, "")
    assert rt.parse_response("a'q'b.c", template, prefix="") == {"content": "ac", "quoted": "b"}


def test_a_global_inline_flag_keeps_the_per_delimiter_search():
    template = _template({"loud": {"open_pattern": r"(?i)<LOUD>", "close": "."}, "other": {"open": "<o>", "close": "."}, "content": {"repeats": True, "join": ""}})
    assert build_short_plan(load_template(template).idle_watch) is None
    assert rt.parse_response("x<loud>hey.y<o>z.", template, prefix="") == {"content": "xy", "loud": "hey", "other": "z"}


def test_a_watch_with_nothing_to_watch_takes_the_rest_of_the_text():
    template = _template({"tail": {"open": "<tail>"}, "content": {}})
    assert rt.parse_response("a<tail>b<tail>c", template, prefix="") == {"content": "a", "tail": "b<tail>c"}


def test_a_changed_template_dict_gives_the_new_result():
    template = _template({"think": {"open": "<t>", "close": "</t>"}, "content": {}})
    assert rt.parse_response("<t>a</t>b", template, prefix="") == {"think": "a", "content": "b"}
    template["fields"]["think"]["open"] = "<think>"  # nested change, same dict object
    assert rt.parse_response("<t>a</t>b", template, prefix="") == {"content": "<t>a</t>b"}
    assert rt.parse_response("<think>a</t>b", template, prefix="") == {"think": "a", "content": "b"}
    template["fields"]["think"]["open_pattern"] = template["fields"]["think"].pop("open")
    template["fields"]["think"]["open_pattern"] = r"<th(?:ink)?>"
    assert rt.parse_response("<th>a</t>b", template, prefix="") == {"think": "a", "content": "b"}
    template["fields"]["think"]["content"] = "int"
    with pytest.raises(ValueError):
        rt.parse_response("<th>a</t>b", template, prefix="")
    del template["fields"]["think"]["content"]
    template["fields"]["think"]["bogus"] = 1
    with pytest.raises(rt.TemplateError, match="bogus"):
        rt.parse_response("<th>a</t>b", template, prefix="")


def test_errors_are_the_ones_of_the_streaming_parser():
    template = _template({"call": {"open": "<c>", "close_pattern": r"\s*</c>", "content": "json"}, "content": {}})
    one = outcome(rt.parse_response, "x<c>{broken</c>", template, prefix="")
    assert one[0] == "ValueError" and "json" in one[1]
    assert one == outcome(streamed, template, "x<c>{broken</c>", "")
    with pytest.raises(ValueError, match="prefix= is required"):
        rt.parse_response("x", template)


CATASTROPHIC = r"(a|aa)+$"


@pytest.fixture
def short_regex_timeout(regex_limit):
    regex_limit(0.05)


def test_a_timeout_names_the_delimiter_with_nested_repeats(short_regex_timeout):
    template = _template(
        {
            "safe": {"open_pattern": r"\s*<s>", "close": "."},
            "slow": {"open_pattern": CATASTROPHIC, "close": "."},
            "content": {"repeats": True, "join": ""},
        }
    )
    with pytest.raises(rt.RegexTimeoutError) as info:
        rt.parse_response("a" * 80 + "b", template, prefix="")
    message = str(info.value)
    assert "'slow'" in message and "open_pattern" in message and CATASTROPHIC in message


def test_a_longer_delimiter_at_the_same_place_brings_its_own_groups_not_the_first_alternatives():
    template = _template(
        {
            "short": {"open_pattern": r"<n (?P<name>\w+)", "close": ".", "transform": {"name": "{name}"}},
            "long": {"open_pattern": r"<n (?P<who>\w+)>", "close": ".", "transform": {"who": "{who}", "text": "{content}"}},
            "content": {},
        }
    )
    text = "<n bob>hi."
    assert rt.parse_response(text, template, prefix="") == {"long": {"who": "bob", "text": "hi"}}
    assert streamed(template, text, "") == {"long": {"who": "bob", "text": "hi"}}


def _last_anchor_end(pattern: str, prefix: str) -> str:
    """The prompt after the last match of the anchor, as the regex finds them left to right (the definition)."""
    import regex

    end = None
    for match in regex.finditer(pattern, prefix, flags=regex.DOTALL):
        end = match.end()
    return prefix if end is None else prefix[end:]


@pytest.mark.parametrize(
    "anchor",
    [
        r"\[/INST\]|\[/TOOL_RESULTS\]",
        r"<s>|<t>",
        r"(?:<a>|<b>)x",
        r"<a>|<a>b",  # one holds the other: not taken as literals
        r"aa|b",  # overlaps itself
        r"ab|ba",  # a suffix of one begins the other
        r"<\|assistant\|>",
        r"<a>(?:x)?",  # not only literals
    ],
)
def test_a_start_anchor_spelled_as_literals_cuts_the_prompt_where_its_last_match_ends(anchor):
    template = {"start_anchor_pattern": anchor, "fields": {"content": {}}}
    compiled = load_template(template)
    pieces = ["<a>", "<b>", "x", "b", "aa", "ab", "ba", "[/INST]", "[/TOOL_RESULTS]", "<s>", "<t>", "<|assistant|>", " "]
    import random

    chooser = random.Random(anchor)
    for _ in range(300):
        prefix = "".join(chooser.choice(pieces) for _ in range(chooser.randint(0, 12)))
        assert compiled.truncate_prefix(prefix) == _last_anchor_end(anchor, prefix), prefix


@pytest.mark.parametrize(
    "anchor, found_from_the_end",
    [
        (r"<a>(?:<a>)?", True),  # a match can reach over the next one: the scan decides then
        (r"<a>(?:</t>)?|<b>", True),
        (r"<a>\n?", True),
        (r"(?:<a>|<b>)x(?:yy)?", True),
        (r"<a>\s*", True),  # a final run that cannot hold a '<'
        (r"<a>.?<b>|<b>", True),  # '.' can take the '<' of the next candidate
        (r"x<a>|<a>", True),
        (r"<a>(?:b|<a>b)?", True),
        (r"<a>(?:x|y)?<a>b?", True),
        (r"<a>[^<]*<b>", True),  # '<b>' cannot begin a '<a>': a match reaches over a candidate within its '<a>'
        (r"<a>[^<]*<ab>", True),
        (r"<a>[^<]*<a>b", False),  # a match can end with a candidate: unbounded, scanned
        (r"<a>[^<]*<a>", False),
        (r"<a>[^a]*<b>", False),
        (r"<a>.*", False),
    ],
)
def test_a_start_anchor_found_from_the_end_of_the_prompt_cuts_where_its_last_match_ends(anchor, found_from_the_end):
    import random

    compiled = load_template({"start_anchor_pattern": anchor, "fields": {"content": {}}})
    assert (compiled.anchor_starts is not None) == found_from_the_end
    pieces = ["<a>", "<b>", "<", "a>", "x", "y", "</t>", "\n", " ", "yy", "b", "<a>b", "<a><a>", "<ab>"]
    chooser = random.Random(anchor)
    for _ in range(1500):
        prefix = "".join(chooser.choice(pieces) for _ in range(chooser.randint(0, 16)))
        assert compiled.truncate_prefix(prefix) == _last_anchor_end(anchor, prefix), prefix


@pytest.mark.parametrize(
    "name", ["mimo", "deepseek_v3.2", "gemma-4", "nemotron_super_v1.5", "apriel_thinker", "granite-4", "kimi-k2", "hunyuan3"]
)
def test_library_start_anchors_found_from_the_end_match_a_scan_of_the_whole_prompt(name):
    import random

    compiled = load_template(rt.get_template(name))
    assert compiled.anchor_starts is not None
    corpus = json.loads((CORPORA / f"{name}.json").read_text(encoding="utf-8"))
    prompts = [case["prefix"] for case in corpus["cases"]]
    chooser = random.Random(name)
    for _ in range(300):
        # pieces of real prompts run together, cut anywhere
        prefix = "".join(chooser.choice(prompts)[chooser.randint(0, 40):] for _ in range(chooser.randint(1, 3)))
        prefix = prefix[: chooser.randint(0, len(prefix))]
        assert compiled.truncate_prefix(prefix) == _last_anchor_end(compiled.start_anchor.regex.pattern, prefix)


def test_literal_anchors_are_read_as_literals_only_when_they_cannot_overlap():
    def literals(anchor):
        return load_template({"start_anchor_pattern": anchor, "fields": {"content": {}}}).anchor_literals

    assert literals(r"\[/INST\]|\[/TOOL_RESULTS\]") == ("[/INST]", "[/TOOL_RESULTS]")
    assert literals(r"<a>|<a>b") is None and literals("aa|b") is None and literals("ab|ba") is None
    assert literals(r"<a>(?:x)?") is None and literals(r"(?i)<a>") is None
    assert load_template({"start_anchor": ["<s>", "<t>"], "fields": {"content": {}}}).anchor_literals == ("<s>", "<t>")


def test_a_delimiter_anchored_at_the_start_competes_there_and_nowhere_else():
    template = _template(
        {
            "head": {"open_pattern": r"\A\s*<x>", "close": "."},
            "long": {"open_pattern": r"\s*<x>y", "close": "."},
            "content": {"repeats": True, "join": ""},
        }
    )
    for text in (" <x>y1.<x>2.", " <x>1.<x>y2.", "a <x>1.", "<x>1. <x>2." + " filler" * 60 + "<x>y3."):
        assert rt.parse_response(text, template, prefix="") == streamed(template, text, ""), text
    assert rt.parse_response(" <x>1.<x>y2.", template, prefix="") == {"head": "1", "long": "2"}


@pytest.mark.parametrize("name", ["qwen3", "deepseek_v3.2", "phi-4-mini", "gemma-4", "kimi-k2", "mistral_v3"])
def test_delimiters_far_into_a_short_text_are_found_as_when_streaming(name):
    """Delimiters 300 to 500 characters in (past the reach of the combined search, each delimiter is searched on
    its own)."""
    corpus = json.loads((CORPORA / f"{name}.json").read_text(encoding="utf-8"))
    template = rt.get_template(name)
    for case in corpus["cases"]:
        for lead in (PROSE * 2, (PROSE * 3)[:430]):
            text = (lead + case["output"])[:510]
            assert outcome(rt.parse_response, text, template, prefix=case["prefix"]) == outcome(
                streamed, template, text, case["prefix"], 9
            ), (case["name"], len(lead))


def test_delimiters_led_by_a_lookbehind_are_found_past_many_false_candidates():
    """A close led by lookbehinds (the search begins at the first candidate after a `]` or `}` from a short rest of
    the text on): the same message as streaming and as transformers, wherever the real close lies among the false
    ones."""
    reference = reference_parse_or_ours()

    template = _template(
        {
            "calls": {
                "open": "[CALLS]",
                "close_pattern": r"(?<=\])\s*</s>|(?<=\}\s*\])\s*\Z|(?<=\})(?=\n\n)",
                "content": "json",
            },
            "content": {"repeats": True, "join": ""},
        }
    )
    plan = build_short_plan(load_template(template).field_watch["calls"])
    assert plan is not None and plan.behind
    for falses in range(0, 12):
        body = json.dumps([{"n": [[i], {"k": [i]}]} for i in range(falses)])
        for tail in ("</s>", "  </s>rest", "", "\n\nafter"):
            text = "hi [CALLS]" + body + tail
            one = outcome(rt.parse_response, text, template, prefix="")
            assert one == outcome(streamed, template, text, "", 3), text
            expected = outcome(reference, text, template, prefix="")
            assert one[0] == expected[0] and (one[0] != "ok" or one == expected), text
    text = "hi [CALLS][1, [2], {\"a\": [3]}]</s>"
    assert rt.parse_response(text, template, prefix="") == {"content": "hi", "calls": [1, [2], {"a": [3]}]}


@pytest.mark.parametrize("name", rt.list_templates())
def test_longer_texts_found_at_the_first_candidates_give_the_streamed_message(name):
    """Texts past 512 characters (the one-shot plan tried at a few candidates for the first delimiters, the
    streaming search for the rest and whenever those candidates do not match): the message streaming gives."""
    corpus = json.loads((CORPORA / f"{name}.json").read_text(encoding="utf-8"))
    template = rt.get_template(name)
    for case in corpus["cases"][:8]:
        output = case["output"]
        for text in (output * 4, PROSE * 4 + output, output + PROSE * 4, (output + PROSE) * 3):
            one = outcome(rt.parse_response, text, template, prefix=case["prefix"])
            assert one == outcome(streamed, template, text, case["prefix"], 37), (case["name"], len(text))
            cut = text[: len(text) - len(output) // 2]  # cut off inside the last copy of the output
            one = outcome(rt.parse_response, cut, template, prefix=case["prefix"], truncated=True)
            assert one == outcome(streamed_cut, template, cut, case["prefix"]), (case["name"], len(cut))


def streamed_cut(template, text: str, prefix: str) -> dict:
    parser = rt.ResponseParser(template, prefix=prefix)
    for start in range(0, len(text), 41):
        parser.feed(text[start:start + 41])
    return parser.finalize(truncated=True)[0]


def test_a_group_name_an_earlier_alternative_set_before_failing_comes_from_the_delimiter_that_matched():
    reference = reference_parse_or_ours()

    template = _template(
        {
            "bang": {"open_pattern": r"<x (?P<n>\w)\w*!", "close": ".", "transform": {"n": "{n}", "text": "{content}"}},
            "pair": {"open_pattern": r"<x (?P<n>\w+) (?P<m>\w+)>", "close": ".", "transform": {"n": "{n}", "m": "{m}", "text": "{content}"}},
            "content": {"repeats": True, "join": ""},
        }
    )
    for text in ("a<x ab cd>hi.b", "<x ab!yo.<x cd ef>hi.", "<x ab cd>one.<x zz!two."):
        one = rt.parse_response(text, template, prefix="")
        assert one == streamed(template, text, "") == reference(text, template, prefix=""), text
    assert rt.parse_response("a<x ab cd>hi.b", template, prefix="")["pair"] == {"n": "ab", "m": "cd", "text": "hi"}


def test_a_close_led_by_lookbehinds_is_searched_behind_the_character_they_end_with():
    from response_templates.core.oneshot import _guard
    reference = reference_parse_or_ours()

    assert _guard(r"(?<=\])\s*</s>|(?<=\}\s*\])\s*\Z") == r"[\U0000005d]"
    assert _guard(r"(?<=\)\]|\[\])\s*<e>") == r"[\U0000005d]"
    for pattern in (
        r"(?<=x?)b",  # the lookbehind may be empty
        r"b|(?<=a)c",  # an alternative led by something else
        r"(?:(?<=a)|(?<=b))c",
        r"(?<=(?i:a))b",  # a scoped flag
        r"(?<=\}\s*)</c>",  # ends with whitespace: everywhere in text
        r"(?<!a)b",
    ):
        assert _guard(pattern) is None, pattern
    template = _template(
        {
            "calls": {"open": "[CALLS]", "close_pattern": r"(?<=\])\s*</s>|(?<=\}\s*\])\s*\Z|(?<=\)\])x", "content": "text"},
            "content": {"repeats": True, "join": ""},
        }
    )
    plan = build_short_plan(load_template(template).field_watch["calls"])
    assert plan.guarded
    for text in ("[CALLS]</s>", "a[CALLS] </s>b", "[CALLS][1] ]x </s>", "[CALLS]{}]", "[CALLS]{} ]  ", "[CALLS](a)]xy", "[CALLS]]", "]"):
        one = outcome(rt.parse_response, text, template, prefix="")
        assert one == outcome(streamed, template, text, "", 2) == outcome(reference, text, template, prefix=""), text
    assert rt.parse_response("[CALLS]</s>", template, prefix="") == {}
    assert rt.parse_response("a[CALLS][1] ]x </s>b", template, prefix="") == {"content": "a", "calls": "[1] ]x </s>b"}
    assert rt.parse_response("a[CALLS][1] ] </s>b", template, prefix="") == {"content": "ab", "calls": "[1] ]"}


def test_false_places_of_a_long_trigger_fall_through_to_the_search():
    """Triggers of two characters or more: the combined pattern is tried anchored at the first places a trigger
    occurs, then searched. Wherever the real close lies among places where the trigger occurs but the pattern fails,
    the message is the streamed one."""
    template = _template(
        {
            "reasoning_content": {"open_pattern": r"\s*<think>\s*", "close_pattern": r"\s*</think>(?!-)\s*"},
            "tool_calls": {"open_pattern": r"\s*<call>", "close_pattern": r"</call>(?!-)", "content": "json"},
            "content": {"repeats": True, "join": ""},
        }
    )
    plan = build_short_plan(load_template(template).field_watch["reasoning_content"])
    assert plan is not None and plan.pinpoint
    for falses in range(0, 6):
        decoys = " </think>- step" * falses
        for tail in (" </think> answer", "</think>", "", " <call>{\"a\": \"</call>-\"}</call> done"):
            text = "<think> plan" + decoys + tail
            assert rt.parse_response(text, template, prefix="") == streamed(template, text, "", 2), text
    text = "<think>a </think>- b </think>  c"
    assert rt.parse_response(text, template, prefix="") == {"reasoning_content": "a </think>- b", "content": "c"}


@pytest.mark.parametrize(
    "anchor", [r"<\|im_start\|>assistant\n?", r"<s>[^<]*</s>", r"(?:<s>)+\s*", r"<(?P<who>s|S)>\s*(?:<t>)?"]
)
def test_a_prompt_is_cut_where_the_last_match_of_the_start_anchor_ends_at_any_length(anchor):
    """Prompts up to 2,048 characters are cut without the regex time limit when the anchor pattern cannot backtrack
    badly, longer ones with it: the cut is the end of the last of the anchor's non-overlapping matches either way."""
    import regex

    reference = reference_parse_or_ours()
    template = {"start_anchor_pattern": anchor, "fields": {"content": {"repeats": True, "join": ""}}}
    pieces = ["<|im_start|>assistant\n", "<s>", "</s>", "<S> <t>", "<s><s>  ", "text ", "<|im_start|>user\n"]
    for size in (40, 600, 2040, 2060, 5000):
        for seed in range(3):
            prompt = "".join(pieces[(index * (seed + 3)) % len(pieces)] for index in range(size // 4))[:size]
            ends = [match.end() for match in regex.finditer(anchor, prompt, regex.DOTALL)]
            expected = prompt[ends[-1]:] if ends else prompt
            assert rt.parse_response("x", template, prefix=prompt) == {"content": (expected + "x").strip()}, size
            assert rt.parse_response("x", template, prefix=prompt) == reference("x", template, prefix=prompt)


def test_an_optional_whitespace_lead_may_start_a_match_inside_the_run_before_the_trigger():
    """`(?:(?<=>)\\s*|[ \\t]*\\n\\s*)?<call>`: the first place to try is the start of the whitespace run before
    `<call>`, but the match may start further in (here at the newline after a carriage return) or at `<call>`
    itself. One-shot, streamed and transformers' messages agree wherever it starts."""
    reference = reference_parse_or_ours()
    template = _template(
        {
            "tool_calls": {
                "open_pattern": r"(?:(?<=>)\s*|[ \t]*\n\s*)?<call>\s*(?P<name>\w+)",
                "close": "</call>",
                "content": "json",
                "repeats": True,
                "transform": {"name": "{name}", "arguments": "{content}"},
            },
            "content": {"repeats": True, "join": "", "content_args": {"strip": False}},
        }
    )
    runs = ["", " ", " \r", " \r\n", "\t\n ", "\r\r", "\n\n", " \u3000 "]
    for before in ("x", "<b>", "x>"):
        for run in runs:
            for after in ("", " tail", "\n<call> g {}</call>"):
                text = f"{before}{run}<call> f {{\"a\": 1}}</call>{after}"
                one = rt.parse_response(text, template, prefix="")
                for chunk in (1, 3, 64):
                    assert one == streamed(template, text, "", chunk), (text, chunk)
                assert one == reference(text, template, prefix=""), text
    assert rt.parse_response("x \r\n<call> f {}</call>", template, prefix="")["content"] == "x \r"


def test_a_start_anchor_found_from_the_end_of_a_long_prompt_keeps_the_time_limit(regex_limit):
    """Past 2,048 characters, the tries at the last candidates keep the per-call timeout (a lookahead may read to
    the end of the prompt at each of them)."""
    template = {"start_anchor_pattern": r"<a>(?:x)?(?=[\s\S]*z)", "fields": {"content": {}}}
    assert load_template(template).anchor_starts == ("<a>",)
    prompt = "q<a>" * 1000 + "<a>xz"
    assert rt.parse_response("hi", template, prefix=prompt) == {"content": "zhi"}
    regex_limit(1e-9)
    with pytest.raises(rt.RegexTimeoutError, match="start_anchor_pattern"):
        rt.parse_response("hi", template, prefix=prompt)

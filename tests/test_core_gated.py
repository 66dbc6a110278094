"""The gated chunk fast path (issue 11): a watch whose regex delimiters all start with whitespace then a literal
(`\\s*<tool_call>`, `(?:(?<=>)\\s*|[ \\t]*\\n\\s*)?<tool_call>`), or right after a lookbehind (`(?<=\\)[ \\t]*\\n)`),
checks the held text and the chunk for those literals only, so a lone `\\n`, `>` or `}` in prose, or a `<` that
ends a chunk and turns out not to begin a delimiter, no longer needs a full scan.

What a user observes must not change: the message and the merged events are those of one single feed (and the
message is the one-shot `parse_response`), whatever the chunking, including chunks that split a literal in two,
runs of whitespace before a delimiter, text that ends with a delimiter or with the beginning of one, and prose full
of decoys (cut literals, `\\n` after `)`, `>` and `}`).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import response_templates as rt
from event_helpers import collect, merged
from response_templates.core.regex_syntax import gate_of

CORPORA = Path(__file__).parent / "data" / "corpora"


def outcome(function):
    try:
        return "ok", function()
    except (ValueError, KeyError) as error:
        return "error", type(error).__name__


def trigger_literals(compiled) -> list[str]:
    """The literals the template's delimiters must contain (as the gates read them), plus its literal delimiters."""
    found = set()
    for field in compiled.fields.values():
        for delimiter in (field.open, field.close):
            if delimiter is None:
                continue
            if delimiter.literals is not None:
                found.update(delimiter.literals)
                continue
            gate = gate_of(delimiter.regex.pattern)
            for source, _, _ in gate[0] if gate else ():
                if not source.startswith("(?:"):
                    found.add(source.replace("\\", ""))
    return sorted(literal for literal in found if literal)


def decoyed(text: str, literals: list[str], rng: random.Random) -> str:
    """`text` with decoys put at random places: literals cut short (then a space), whitespace runs, and characters
    the lookbehind branches of library templates end with."""
    decoys = [" \n\n ", "x)\n", ") \t\ny", "a>b", "} ", "}\n", "\u3000 ", "é<"]
    for literal in literals:
        if len(literal) > 1:
            decoys.append(literal[: rng.randrange(1, len(literal))] + " ")
    points = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, 5)))
    pieces, last = [], 0
    for point in points:
        pieces += [text[last:point], rng.choice(decoys)]
        last = point
    return "".join(pieces) + text[last:]


def chunkings(text: str, literals: list[str], rng: random.Random):
    yield "fours", [text[i:i + 4] for i in range(0, len(text), 4)]
    yield "threes", [text[i:i + 3] for i in range(0, len(text), 3)]
    yield "chars", list(text)
    # a cut inside every occurrence of every literal, plus one just before and one just after it
    cuts = set()
    for literal in literals:
        start = text.find(literal)
        while start >= 0:
            cuts.update((start, start + max(1, len(literal) // 2), start + len(literal)))
            start = text.find(literal, start + 1)
    points = sorted(point for point in cuts if 0 < point < len(text))
    yield "literals", [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]
    points = sorted(rng.sample(range(1, max(2, len(text))), min(max(0, len(text) - 1), 15)))
    yield "random", [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]


def check_chunkings(template, prefix: str, text: str, literals: list[str], rng: random.Random, truncated=False):
    whole = outcome(lambda: collect(rt.ResponseParser(template, prefix), [text], truncated))
    one_shot = outcome(lambda: rt.parse_response(text, template, prefix=prefix, truncated=truncated))
    assert (whole[0], whole[1][0] if whole[0] == "ok" else whole[1]) == one_shot, text
    for label, chunks in chunkings(text, literals, rng):
        streamed = outcome(lambda: collect(rt.ResponseParser(template, prefix), chunks, truncated))
        assert streamed[0] == whole[0], (label, chunks)
        if whole[0] == "ok":
            assert streamed[1][0] == whole[1][0], (label, chunks)
            assert merged(streamed[1][1]) == merged(whole[1][1]), (label, chunks)
        else:
            assert streamed[1] == whole[1], (label, chunks)
    return whole


def _cases():
    for path in sorted(CORPORA.glob("*.json")):
        corpus = json.loads(path.read_text(encoding="utf-8"))
        yield pytest.param(path.stem, corpus["template"], corpus["cases"], id=path.stem)


@pytest.mark.parametrize("stem, template_name, cases", list(_cases()))
def test_decoys_and_split_literals_parse_as_one_feed(stem, template_name, cases):
    template = rt.load_template(template_name)
    literals = trigger_literals(template)
    rng = random.Random("gated-" + stem)
    for case in cases:
        truncated = case.get("truncated", False)
        for text in (case["output"], decoyed(case["output"], literals, rng)):
            check_chunkings(template, case["prefix"], text, literals, rng, truncated)


def every_split(text: str):
    """Every way to cut `text` into two chunks, and every fixed chunk size up to 5."""
    for point in range(1, len(text)):
        yield [text[:point], text[point:]]
    for size in range(1, 6):
        yield [text[i:i + size] for i in range(0, len(text), size)]


def check_every_split(template, prefix: str, text: str, truncated=False) -> dict:
    whole, events = collect(rt.ResponseParser(template, prefix), [text], truncated)
    assert whole == rt.parse_response(text, template, prefix=prefix, truncated=truncated)
    for chunks in every_split(text):
        message, streamed = collect(rt.ResponseParser(template, prefix), chunks, truncated)
        assert message == whole, chunks
        assert merged(streamed) == merged(events), chunks
    return whole


GLM_PREFIX = "<|user|>\nSave a note<|assistant|>"
GLM_TEXT = (
    "\n<think>If a > b then\n  go on; x<y.</think>So a>b \n\n holds.\n \t\n<tool_call>save_note\n"
    "<arg_key>title</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"
)


def test_glm_whitespace_runs_and_tags_before_a_tool_call():
    """glm's tool open may start after a `>` (`(?<=>)\\s*`) or at a newline (`[ \\t]*\\n\\s*`): prose with `>`,
    newlines and runs of whitespace before the real `<tool_call>` streams as one feed, the whitespace before the
    call is not content, and the call is found however the chunks cut it."""
    message = check_every_split("glm", GLM_PREFIX, GLM_TEXT)
    assert message["reasoning_content"] == "If a > b then\n  go on; x<y."
    assert message["content"] == "So a>b \n\n holds."
    assert message["tool_calls"] == [{"type": "function", "function": {"name": "save_note", "arguments": {"title": "3"}}}]


@pytest.mark.parametrize(
    "tail",
    ["\n<tool_call>save_note\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>", "  \n", "\n<tool_ca", "</thi", "<"],
)
def test_glm_text_that_ends_with_a_delimiter_or_its_beginning(tail):
    """Text that ends right after a delimiter, inside a run of whitespace, or with a literal cut short."""
    text = "<think>Plan.</think>Answer a<b, c>d.\n" + tail
    for truncated in (False, True):
        check_every_split("glm", GLM_PREFIX, text, truncated)


OLMO_PREFIX = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"
OLMO_TEXT = (
    "Let me check (twice)\nthen act (now) \n\n<function_calls>\nget_weather(city='Paris')\n"
    "search_web(query='a) b')\n</function_calls>\nDone (really).\n<|im_end|>"
)


def test_olmo3_newlines_after_a_parenthesis_outside_and_inside_a_call_block():
    """olmo3's second and later calls start after `)` and a newline (a lookbehind): in prose a `)` then a newline
    starts nothing, inside a call block it starts the next call, whatever the chunking."""
    message = check_every_split("olmo3", OLMO_PREFIX, OLMO_TEXT)
    assert message["content"] == "Let me check (twice)\nthen act (now)\nDone (really)."
    assert [call["function"]["name"] for call in message["tool_calls"]] == ["get_weather", "search_web"]


def test_the_gated_path_matches_transformers_on_decoyed_text():
    """The same handwritten texts give transformers' own parser's message (the reference for the default
    behaviour)."""
    reference = pytest.importorskip("transformers.utils.chat_parsing")
    texts = [
        ("glm", GLM_PREFIX, GLM_TEXT),
        ("olmo3", OLMO_PREFIX, OLMO_TEXT),
        ("glm", GLM_PREFIX, "<think>a > b\n</think>x>y \n\n<tool_call>f\n<arg_key>k</arg_key>\n<arg_value>2</arg_value>\n</tool_call>"),
        ("olmo3", OLMO_PREFIX, "See (this)\nand <that> too.\n<function_calls>\nf(a=1)\ng(b='x')\n</function_calls>\n<|im_end|>"),
        ("phi-4-mini", "<|user|>Hi<|end|><|assistant|>", 'Use {a} , then } , f x <|x <|tool_call|>[{"name": "f", "arguments": {}}]<|/tool_call|><|end|>'),
    ]
    for name, prefix, text in texts:
        expected = reference.parse_response(text, rt.get_template(name), prefix=prefix)
        for chunks in every_split(text):
            assert collect(rt.ResponseParser(name, prefix), chunks)[0] == expected, (name, chunks)


@pytest.mark.parametrize(
    "pattern, triggers, begin, blank",
    [
        (r"\s*<tool_call>\s*(?=\{)", [("<tool_call>", 0)], False, True),
        (r"(?:(?<=>)\s*|[ \t]*\n\s*)?<tool_call>\s*(?P<name>[^\s<]+)", [("<tool_call>", 0)], False, True),
        (r"\A\s*<think>\s*", [], True, False),
        (r"\s*</think>\s*|\s*\Z", [("</think>", 0)], False, True),
        # a short literal after a lookbehind: the lookbehind's literal, searched from one character back
        (r"(?<=\})\s*,\s*(?=\{)", [(r"\}", 1)], False, False),
        # an unbounded lookbehind: the character it ends with, where it holds
        (r"(?<=\)[ \t]*\n)[ \t]*[a-z]+\(", [(r"(?:[\U0000000a])(?<=\)[ \t]*\n)", 1)], False, False),
        (r"</tool_call>", [("</tool_call>", 0)], False, False),
        (r"(?:(?<=</x>)|(?<=</x>\s))(?=\S)", [("</x>", 4), ("</x>", 5)], False, False),
    ],
)
def test_gate_of_reads_the_literal_a_delimiter_must_contain(pattern, triggers, begin, blank):
    gate = gate_of(pattern)
    assert gate is not None
    assert sorted((source, back) for source, _, back in gate[0]) == sorted(triggers)
    assert gate[1:] == (begin, blank)


@pytest.mark.parametrize("pattern", [r"\s*[A-Za-z]+\(", r"\s*", r"\s*<x>|\s*$", r"(?i)\s*<x>", r"\s*<x>|[a-z]\w*"])
def test_gate_of_declines_patterns_it_cannot_bound(pattern):
    """A start followed by a class, an empty match, `$`, flags: no gate (full scans)."""
    assert gate_of(pattern) is None


@pytest.mark.parametrize(
    "open_pattern, close_pattern, text",
    [
        # a repeated literal before the marker: the first copy is where the match starts
        (r"(?:ab)+<x>", r"</x>", "say a abab<x>1</x> then ab <x>2</x> end"),
        # an optional literal before the marker (a run of literals each followed by the marker)
        (r"\s*(?:x|yz)?<w>", r"</w>\s*", "a x<w>1</w> b yz <w>2</w>\n\n yz<w>3</w>"),
        # a lookahead holding the literal, and a close that ends at the end of the text
        (r"\s*(?=<v>)", r"\s*\Z", "prose >> \n <v>rest of it"),
        # a lookbehind of bounded width that begins with a literal
        (r"(?<=<go>\s)(?=\S)", r"(?=</go>)", "x <go> y</go> <go>\tzz"),
    ],
)
def test_user_templates_with_other_gate_shapes_stream_as_one_feed(open_pattern, close_pattern, text):
    """Templates written other ways than the library's: the gate reads them (or declines) and streaming stays the
    one-shot parse for every two-chunk split and chunk size."""
    template = rt.load_template(
        {"start_anchor": "S", "fields": {"f": {"open_pattern": open_pattern, "close_pattern": close_pattern, "repeats": True}, "content": {}}}
    )
    check_every_split(template, "", text)


def test_a_watch_whose_delimiters_have_no_trigger_takes_long_and_unicode_chunks():
    """A state whose only delimiter matches at the start or at the end of the text (no literal to look for): long
    chunks and non-ASCII chunks go to the region as they come."""
    template = rt.load_template(
        {"start_anchor": "S", "fields": {"r": {"open_pattern": r"\A\s*<r>", "close_pattern": r"\s*\Z"}, "content": {}}}
    )
    text = "<r>" + "é天 " * 40 + "x" * 100 + "  \n"
    message = check_every_split(template, "", text)
    assert message["r"] == ("é天 " * 40 + "x" * 100).strip()


# -- feed's hot path (issue 11): chunk after chunk in a region that has begun -------------------------------------


class GeneralPathParser(rt.ResponseParser):
    """The same parser with feed's hot path switched off: every chunk takes the general path."""

    def _heat(self):
        self._hot = None


# whitespace outside ASCII, `\x1c` (whitespace for `str.isspace`, not for `\s`), non-ASCII text before whitespace,
# chunks of whitespace only, trigger characters that begin no trigger, and beginnings of one trigger that is itself
# the beginning of another (gpt-oss's `to=` and `to=functions.`)
HOT_DECOYS = [" \u3000", "\u3000\u3000", "好 ", "🌤 \n", "\u00a0 ", "\u2003", "\x1c ", "    ", "\n\n", "x<y ", "f fu ",
              "to= ", "to=functi ", "} ,", "a)\n", "é<"]


def per_feed(parser_class, template, prefix: str, chunks, truncated: bool):
    """What a user sees: the events of each feed (and of finalize), and the message."""
    parser = parser_class(template, prefix)
    events = [parser.initial_events] + [parser.feed(chunk) for chunk in chunks]
    message, final = parser.finalize(truncated=truncated)
    return message, events + [final]


@pytest.mark.parametrize(
    "name", ["qwen3", "phi-4-mini", "gpt-oss", "glm", "deepseek_v4", "olmo3", "llama4_pythonic", "apriel_thinker", "cohere-command"]
)
def test_the_hot_path_returns_the_events_of_the_general_path(name):
    """Every feed returns the same events, and the message is the same, with or without the hot path, on corpus
    outputs grown with prose and decoys, for chunkings that cut literals, whitespace runs and characters."""
    template = rt.load_template(name)
    literals = trigger_literals(template)
    corpus = json.loads((CORPORA / f"{name}.json").read_text(encoding="utf-8"))
    rng = random.Random("hot-" + name)
    decoys = HOT_DECOYS + [literal[: rng.randrange(1, len(literal))] for literal in literals if len(literal) > 1]
    for case in corpus["cases"]:
        truncated = case.get("truncated", False)
        text = case["output"]
        points = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, 12)))
        pieces, last = [], 0
        for point in points:
            pieces += [text[last:point], "".join(rng.choice(decoys) for _ in range(3))]
            last = point
        for sample in (text, "".join(pieces) + text[last:]):
            for label, chunks in chunkings(sample, literals, rng):
                with_hot = outcome(lambda: per_feed(rt.ResponseParser, template, case["prefix"], chunks, truncated))
                general = outcome(lambda: per_feed(GeneralPathParser, template, case["prefix"], chunks, truncated))
                assert with_hot == general, (label, chunks)


def test_whitespace_for_the_lead_class_is_whitespace_for_str_isspace():
    """The hot path asks `str.isspace` before the regex `\\s` about a character outside ASCII: every character `\\s`
    matches must be one `str.isspace` accepts (the converse does not hold: `\\x1c`)."""
    import sys

    import regex

    space = regex.compile(r"\s")
    assert all(chr(code).isspace() for code in range(sys.maxunicode + 1) if space.match(chr(code)))
    assert "\x1c".isspace() and not space.match("\x1c")

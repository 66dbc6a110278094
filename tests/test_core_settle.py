"""Settling a regex delimiter's match while streaming (core/delimiters.py `_settle_probe`, `_preferred_twin`, issue 29).

A complete match from whose start some way through the pattern also reaches the end of the buffer may still change
with more text. The parser used to try a few hundred continuations (probes) before committing such a match, about
2 ms per stream for a call opener with a lazy `.*?`: more than all the rest of a short stream. Now one try of the
pattern with every way `regex` would take after the match pruned tells whether a way it prefers reaches the end;
only then do the probes run. The message and the events must not change for any split of the output."""

from __future__ import annotations

import random

import pytest

from response_templates import ResponseParser, parse_response
from response_templates.core import delimiters as parser_module

from event_helpers import collect, merged  # noqa: E402

GPT_OSS_LIKE = {
    "version": 1,
    "defaults": {"role": "assistant"},
    "start_anchor": "<|start|>assistant",
    "fields": {
        "reasoning_content": {"open": "<|channel|>analysis<|message|>", "close": "<|end|>"},
        "content": {"open": "<|channel|>final<|message|>", "close": "<|end|>"},
        "tool_calls": {
            "open_pattern": r"<\|channel\|>commentary to=functions\.(?P<name>[\w.-]+).*?<\|message\|>",
            "close": "<|call|>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
    },
}

OUTPUT = (
    "<|channel|>analysis<|message|>Need the weather; x < 10 means rain.<|end|><|start|>assistant<|channel|>final"
    "<|message|>Checking.<|end|><|start|>assistant<|channel|>commentary to=functions.weather.get <|constrain|>json"
    '<|message|>{"city": "Paris"}<|call|>'
)


def _tokens(text: str, seed: int) -> list[str]:
    sizes = random.Random(seed)
    out, at = [], 0
    while at < len(text):
        size = sizes.randint(1, 6)
        out.append(text[at:at + size])
        at += size
    return out


def _count_settles(monkeypatch) -> tuple[list[int], list[int]]:
    """Count the calls of `_settle_probe` and the anchored tries it makes (each runs through `_quick` or `_timer`)."""
    settles, tries, inside = [0], [0], [False]
    original_settle = parser_module._settle_probe

    def settle(*args, **kwargs):
        settles[0] += 1
        inside[0] = True
        try:
            return original_settle(*args, **kwargs)
        finally:
            inside[0] = False

    monkeypatch.setattr(parser_module, "_settle_probe", settle)
    for name in ("_quick", "_timer"):
        original = getattr(parser_module, name)

        def counting(item, original=original):
            run = original(item)

            def counted(*args, **kwargs):
                tries[0] += inside[0]
                return run(*args, **kwargs)

            return counted

        monkeypatch.setattr(parser_module, name, counting)
    return settles, tries


def test_a_lazy_call_opener_is_settled_with_a_few_tries_not_hundreds(monkeypatch):
    settles, tries = _count_settles(monkeypatch)
    parser = ResponseParser(GPT_OSS_LIKE, prefix="")
    for token in _tokens(OUTPUT, 0):
        parser.feed(token)
    message, _ = parser.finalize()
    assert message["tool_calls"][0]["function"] == {"name": "weather.get", "arguments": {"city": "Paris"}}
    assert settles[0] >= 1  # the opener was settled while streaming (a way through `.*?` reaches the end)
    assert tries[0] <= 3 * settles[0], f"{tries[0]} tries for {settles[0]} settles"


@pytest.mark.parametrize("seed", range(25))
def test_streaming_a_lazy_call_opener_gives_the_one_shot_message_and_events(seed):
    expected = parse_response(OUTPUT, GPT_OSS_LIKE, prefix="")
    parser = ResponseParser(GPT_OSS_LIKE, prefix="")
    one = merged(collect(ResponseParser(GPT_OSS_LIKE, prefix=""), [OUTPUT])[1])
    message, events = collect(parser, _tokens(OUTPUT, seed))
    assert message == expected
    assert merged(events) == one


# Patterns where a way regex prefers to the first complete match reaches the end: the match must be held.
HELD = [
    (r"<a(?:x{5}y)?", "<axxx", "<axxxxxy"),  # a greedy optional group that more text completes
    (r"<a.*b", "<axbyy", "<axbyyb"),  # a greedy repeat: the last `b` wins
    (r"<(?:abcd|ab)", "<abc", "<abcd"),  # an earlier alternative still open
    (r"<ab\s*", "<ab  ", "<ab   x"),  # a greedy run of spaces at the end
]


@pytest.mark.parametrize("pattern, held, whole", HELD)
def test_the_twin_is_partial_when_a_preferred_way_reaches_the_end(pattern, held, whole):
    import regex

    compiled = regex.compile(pattern, regex.DOTALL)
    twin = parser_module._preferred_twin(compiled)
    assert twin is not None
    assert twin.match(held, 0, partial=True) is not None
    assert compiled.match(whole).end() > compiled.match(held).end() or compiled.match(held).end() == len(held)


# Patterns where only ways tried after the match reach the end: the match is final.
FINAL = [
    (r"<a.*?b", "<axbyy"),  # a lazy repeat past its first stop
    (r"<(?:ab|abcd)", "<abc"),  # a later alternative
    (r"<n=(?P<name>[\w.-]+).*?>", "<n=get_x a>bc"),
]


@pytest.mark.parametrize("pattern, text", FINAL)
def test_the_twin_fails_when_only_later_ways_reach_the_end(pattern, text):
    import regex

    compiled = regex.compile(pattern, regex.DOTALL)
    assert parser_module._preferred_twin(compiled).match(text, 0, partial=True) is None


@pytest.mark.parametrize("pattern", [r"a$", r"a\b", r"a\B", r"a(?!b)", r"(*PRUNE)a", r"(?i)a"])
def test_no_twin_for_syntax_that_may_lean_on_the_end_unseen(pattern):
    import regex

    assert parser_module._preferred_twin(regex.compile(pattern, regex.DOTALL)) is None


@pytest.mark.parametrize(
    "open_pattern, output",
    [
        (r"<c(?:x{5}y)?>?", "<cxxxxxy>body</c>"),
        (r"<c.*>", "<c a>b>body</c>"),
        (r"<c(?:abcd|ab)", "<cabcdbody</c>"),
        (r"<c\s*(?=\w)", "<c   body</c>"),
    ],
)
def test_streaming_equals_one_shot_where_more_text_changes_the_match(open_pattern, output):
    template = {
        "version": 1,
        "start_anchor": "<s>",
        "fields": {"content": {"open_pattern": open_pattern, "close": "</c>"}},
    }
    expected = parse_response(output, template, prefix="")
    for size in (1, 2, 3):
        parser = ResponseParser(template, prefix="")
        chunks = [output[i:i + size] for i in range(0, len(output), size)]
        assert collect(parser, chunks)[0] == expected, (size, expected)

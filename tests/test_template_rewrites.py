"""Library patterns rewritten for speed match exactly what their old spellings matched (issue 11).

Some library patterns were respelled so that the one-shot parse of a short text runs faster (a lookbehind tried at a
few places instead of at every character, a repeat whose split is unique so the pattern no longer keeps the per-call
regex timeout). Such a rewrite must change nothing a user can observe: at every position of every text, `match` and
`search` of the new spelling give the same span and the same named groups as the old one. The old spellings are kept
here as the reference and compared with the library's current patterns on generated texts: pieces of text that the
patterns match (drawn by walking the pattern's structure, a lookaround's text written or left out), cut
or altered, mixed with the patterns' literal fragments, whitespace, `<`, `>`, letters and unicode.

Each entry says why the two spellings are the same; this test checks it on examples, it does not time anything."""

from __future__ import annotations

import re

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import response_templates as rt
from response_templates.core.regex_syntax import sre_constants as C
from response_templates.core.regex_syntax import sre_parse

# (template, field, "open" or "close", the old spelling, why the current one matches the same)
REWRITES = [
    (
        "gpt-oss",
        "reasoning_content",
        "open",
        r"(?:<\|start\|>assistant)?(?<!to=(?!assistant[ \t]*<\|channel\|>)[^\s<]+[ \t]*)<\|channel\|>analysis<\|message\|>\s*",
        "the lookbehind moved after the literal '<|channel|>' it preceded, with that literal appended to its body: "
        "'(?<!X)L' at p holds iff L matches at p and X does not end at p, iff 'L(?<!XL)' holds at p (L is fixed text)",
    ),
    (
        "gpt-oss",
        "content",
        "open",
        r"(?:<\|start\|>assistant)?(?<!to=(?!assistant[ \t]*<\|channel\|>)[^\s<]+[ \t]*)<\|channel\|>(?:final|commentary)[ \t]*(?:<\|constrain\|>[^<]*)?<\|message\|>\s*",
        "as reasoning_content's open",
    ),
    (
        "gpt-oss",
        "tool_calls",
        "open",
        r"(?:<\|start\|>assistant)?(?:[ \t]*to=functions\.(?P<name>[^\s<]+)[ \t]*<\|channel\|>(?:commentary|analysis)|<\|channel\|>(?:commentary|analysis)[ \t]+to=functions\.(?P<name>[^\s<]+)|[ \t]*to=(?P<name>(?!(?:python|browser|container)(?![\w-]))[A-Za-z_][\w-]*)(?![.\w-])[ \t]*<\|channel\|>commentary|<\|channel\|>commentary[ \t]+to=(?P<name>(?!(?:python|browser|container)(?![\w-]))[A-Za-z_][\w-]*)(?![.\w-]))[^<]*(?:<\|constrain\|>[^<]*)?<\|message\|>",
        "'(?![^\\s<])' after the second alternative's name: what follows the name ('[^<]*' then '<') must end at the "
        "first '<' after it, the same for every split of the name's run (which holds no '<'), so only the longest "
        "name, the one the greedy repeat tries first, can be part of the first match found",
    ),
    (
        "minimax_m1",
        "tool_calls",
        "close",
        r"[ \t]*\n\s*(?=\{|</tool_calls>)|(?<=\})[ \t]*(?=</tool_calls>)|(?<=\})\s*(?=<end_of_sentence>|\Z)",
        "the lookbehind '(?<=\\})' that led the last two alternatives is written once before a group of both, in the "
        "same order: at a position, the group is tried exactly when the lookbehind holds, as each alternative was",
    ),
    (
        "mimo",
        "tool_calls",
        "close",
        r"(?<=\}\s*)</tool_call>|(?<=\})\s*(?=<\|im_end\|>|<\|endoftext\|>|\Z)",
        "the first alternative's lookbehind moved after the literal '</tool_call>' it preceded, with that literal "
        "appended to its body: '(?<=X)L' at p holds iff 'L(?<=XL)' does (L is fixed text)",
    ),
]

# Characters a generated piece may take for a class, a negated class or '.'.
_POOL = [chr(code) for code in range(32, 127)] + list(" \t\n\r\x0b\x0c\xa0\u3000\u2028éß日本€😀｜")
_FREE = [" ", "  ", "\t", "\n", " \n ", "\n\n", "<", ">", "a", "Z", "_", "-", ".", "7", ":", "=", '"', "{", "}", "é", "日本", "\u3000", "\xa0", "|"]
_NAMED = regex.compile(r"\(\?P<[A-Za-z_]\w*>")
_LITERAL_RUN = regex.compile(r"(?:\\[^A-Za-z0-9]|[^\\()\[\]?*+{}|^$.])+")
_classes: dict = {}


def _tree(pattern: str):
    # Python's parser refuses a group name used twice (the `regex` module allows it): names do not matter here
    return sre_parse.parse(_NAMED.sub("(", pattern), re.DOTALL)


def _members(op, av) -> list:
    key = repr((op, av))
    if key not in _classes:
        sub = sre_parse.SubPattern(sre_parse.State(), [(op, av)])
        test = re.compile("(?s)" + "".join(_source(sub)))
        _classes[key] = [char for char in _POOL if test.fullmatch(char)] or ["\x00"]
    return _classes[key]


def _source(items) -> list:
    """Source text of one class item (LITERAL, NOT_LITERAL, IN, ANY) for `re`."""
    out = []
    for op, av in items:
        if op is C.ANY:
            out.append(".")
        elif op is C.NOT_LITERAL:
            out.append("[^" + re.escape(chr(av)) + "]")
        elif op is C.IN:
            parts = []
            for kind, value in av:
                if kind is C.NEGATE:
                    parts.insert(0, "^")
                elif kind is C.LITERAL:
                    parts.append(re.escape(chr(value)))
                elif kind is C.RANGE:
                    parts.append(re.escape(chr(value[0])) + "-" + re.escape(chr(value[1])))
                elif kind is C.CATEGORY:
                    parts.append({C.CATEGORY_SPACE: r"\s", C.CATEGORY_NOT_SPACE: r"\S", C.CATEGORY_WORD: r"\w",
                                  C.CATEGORY_NOT_WORD: r"\W", C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D"}[value])
                else:
                    raise ValueError(kind)
            out.append("[" + "".join(parts) + "]")
    return out


def _walk(draw, items, out: list, depth: int) -> None:
    for op, av in items:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op in (C.NOT_LITERAL, C.IN, C.ANY):
            out.append(draw(st.sampled_from(_members(op, av))))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT) or op is getattr(C, "POSSESSIVE_REPEAT", None):
            least, most, body = av
            most = least + 3 if most is C.MAXREPEAT else min(most, least + 3)
            for _ in range(draw(st.integers(least, most)) if depth < 5 else least):
                _walk(draw, body, out, depth + 1)
        elif op is C.SUBPATTERN:
            _walk(draw, av[3], out, depth)
        elif op is getattr(C, "ATOMIC_GROUP", None):
            _walk(draw, av, out, depth)
        elif op is C.BRANCH:
            _walk(draw, draw(st.sampled_from(av[1])), out, depth)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            # a lookaround's own text, written where it looks (before or after), or left out: either may hold (a
            # positive one's text is written more often, so that matches are frequent)
            if draw(st.integers(0, 3)) > (0 if op is C.ASSERT else 1):
                _walk(draw, av[1], out, depth + 1)
        elif op is C.AT:
            continue
        else:
            raise ValueError(f"no generator for {op}")


def _fragments(*patterns: str) -> list:
    found = set()
    for pattern in patterns:
        for run in _LITERAL_RUN.finditer(pattern):
            text = regex.sub(r"\\(.)", r"\1", run.group())
            found.update({text, text[: len(text) // 2], text[len(text) // 2:]} - {""})
    return sorted(found)


@st.composite
def _texts(draw, patterns: tuple):
    trees = [_tree(pattern) for pattern in patterns]
    pieces = _fragments(*patterns) + _FREE
    parts = []
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            out: list = []
            _walk(draw, draw(st.sampled_from(trees)), out, 0)
            piece = "".join(out)
            if piece and draw(st.booleans()):
                at = draw(st.integers(0, len(piece) - 1))
                how = draw(st.sampled_from(["cut", "drop", "insert"]))
                piece = piece[:at] if how == "cut" else piece[:at] + piece[at + 1:] if how == "drop" else piece[:at] + draw(st.sampled_from(pieces)) + piece[at:]
            parts.append(piece)
        else:
            parts.append("".join(draw(st.lists(st.sampled_from(pieces), min_size=1, max_size=4))))
    return "".join(parts)


def _current(name: str, field: str, kind: str) -> str:
    return rt.get_template(name)["fields"][field][f"{kind}_pattern"]


def _outcome(found):
    return None if found is None else (found.span(), found.groupdict())


@pytest.mark.parametrize("name, field, kind, old, why", REWRITES, ids=[f"{n}-{f}-{k}" for n, f, k, _, _ in REWRITES])
def test_rewrite_matches_what_the_old_spelling_matched(name, field, kind, old, why):
    new = _current(name, field, kind)
    old_regex, new_regex = regex.compile(old, regex.DOTALL), regex.compile(new, regex.DOTALL)
    others = tuple(
        value for key, value in rt.get_template(name)["fields"][field].items() if key.endswith("_pattern") and value != new
    )

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(text=_texts((old, new) + others))
    def check(text):
        for pos in range(len(text) + 1):
            assert _outcome(new_regex.match(text, pos)) == _outcome(old_regex.match(text, pos)), (text, pos)
            assert _outcome(new_regex.search(text, pos)) == _outcome(old_regex.search(text, pos)), (text, pos)

    check()


@pytest.mark.parametrize("name, field, kind, old, why", REWRITES, ids=[f"{n}-{f}-{k}" for n, f, k, _, _ in REWRITES])
def test_generated_texts_reach_matches(name, field, kind, old, why):
    """The generator is good enough to test with: the old spelling matches somewhere in many generated texts."""
    old_regex = regex.compile(old, regex.DOTALL)
    seen = []

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)
    @given(text=_texts((old,)))
    def collect(text):
        seen.append(old_regex.search(text) is not None)

    collect()
    assert sum(seen) >= len(seen) // 10

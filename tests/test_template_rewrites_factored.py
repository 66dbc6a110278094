"""(Rewrites that write a shared lead or lookbehind once; the moved lookbehinds are in test_template_rewrites.py.) Library patterns rewritten for speed match exactly what their former spellings matched.

Some library patterns were respelled so that the regex engine tries fewer alternatives at each position (one
`\\s*` shared by alternatives that each need a non-blank character or the end of the text right after it, instead
of one `\\s*` per alternative; a zero-width lookbehind shared by alternatives instead of repeated in each). Such a
rewrite must not change any result: here the former spelling is kept as the reference, and both are run on
generated strings (built from the literal pieces of both patterns, blanks, brackets, letters and non-ASCII text)
at every start position, with `match`, `search` and `fullmatch`, with and without an end position, and with
`partial=True` (transformers' streaming parser and ours hold text back on partial matches). Span, named groups and
partial flag must be the same.
"""

from __future__ import annotations

import regex
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from response_templates import get_template

# (template, field, "open" or "close", the pattern as it was spelled before the rewrite)
REWRITES = [
    (
        "llama4_pythonic", "content", "close",
        r"(?<![\s\S])\s+|\s*(?:<\|eot\|>|<\|eom\|>|<\|end_of_text\|>).*|\s+\Z|\s*<\|python_end\|>\s*",
    ),
    (
        "qwen2.5", "tool_calls", "close",
        r"(?<=\}\s*)(?:```\s*)?</tool_call>|(?<=\}\s*)</(?:function_call|tools?|response|json|xml|JSON)>(?:\s*```(?!`))?"
        r"|(?<=\}\s*)\s*(?=<tool_call>)|(?<=\}\s*)\s*(?:<\|im_end\|>|<\|endoftext\|>).*",
    ),
    (
        "hermes", "tool_calls", "close",
        r"(?<=\}\s*)(?:```\s*)?</tool_call>|(?<=\}\s*)</(?:function_call|tools?|response|json|xml|JSON)>(?:\s*```(?!`))?"
        r"|(?<=\}\s*)\s*(?=<tool_call>)|(?<=\}\s*)\s*(?:<\|im_end\|>|<\|end_of_text\|>|<\|eot_id\|>).*",
    ),
]

_PIECES = [
    " ", "  ", "\n", "\n\n", "\t", " \n ", "\r\n", "\u00a0", "\u2028", "<", ">", "a", "x", "Z", "_", "1", "é", "日本",
    "[", "]", "(", ")", "{", "}", "=", ",", ":", '"', "'", "|", "\\", ".", "-", "`", "```",
]


def _literal_pieces(pattern: str) -> list:
    """The runs of literal characters in a pattern (escapes of punctuation undone), with their halves: the text a
    generated string needs to reach the interesting branches."""
    pieces, out, current, index = [], [], "", 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            following = pattern[index + 1]
            if not following.isalnum():
                current += following
            else:
                out.append(current)
                current = ""
            index += 2
            continue
        if char in "|()[]{}*+?^$.":
            out.append(current)
            current = ""
        else:
            current += char
        index += 1
    out.append(current)
    for run in out:
        if run:
            pieces += [run, run[: len(run) // 2], run[len(run) // 2:]]
    return [piece for piece in pieces if piece]


def _outcome(found):
    if found is None:
        return None
    return found.span(), found.groupdict(), bool(found.partial)


def _cases():
    for name, field, kind, old in REWRITES:
        yield pytest.param(name, field, kind, old, id=f"{name}-{field}-{kind}")


@pytest.mark.parametrize("name,field,kind,old", list(_cases()))
def test_rewrite_is_in_the_library(name, field, kind, old):
    # the entry documents a rewrite the library carries: the current spelling differs from the old one
    current = get_template(name)["fields"][field][f"{kind}_pattern"]
    assert current != old
    assert regex.compile(current, regex.DOTALL).groupindex.keys() == regex.compile(old, regex.DOTALL).groupindex.keys()


@pytest.mark.parametrize("name,field,kind,old", list(_cases()))
def test_rewrite_matches_what_the_old_spelling_matched(name, field, kind, old):
    new = get_template(name)["fields"][field][f"{kind}_pattern"]
    before, after = regex.compile(old, regex.DOTALL), regex.compile(new, regex.DOTALL)
    alphabet = _PIECES + _literal_pieces(old) + _literal_pieces(new)

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.lists(st.sampled_from(alphabet), max_size=14).map("".join), st.data())
    def check(text, data):
        size = len(text)
        for pos in range(size + 1):
            end = data.draw(st.integers(pos, size), label="endpos")
            for bounds in ((pos,), (pos, end)):
                for partial in (False, True):
                    for method in ("match", "search", "fullmatch"):
                        expected = _outcome(getattr(before, method)(text, *bounds, partial=partial))
                        got = _outcome(getattr(after, method)(text, *bounds, partial=partial))
                        assert got == expected, (text, bounds, method, partial)

    check()

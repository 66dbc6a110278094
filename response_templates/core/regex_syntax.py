"""A regex pattern's structure, read with Python's own parser (`re._parser`): character sets, where a match may
start, literal runs, top-level alternatives and gates (the literals a match must begin with). The analyses above it
(`pattern_scan`, `backtracking`, `oneshot`) reason on what this module reads. Patterns with syntax only the `regex`
module knows (`REGEX_ONLY_SYNTAX`) are not read here: their callers fall back to a plain, time-limited search.

Also `work`, the count of characters searched and anchored tries the scanners make: tests read it to check that a
scan is linear without timing anything.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

import regex

from .unicode_tables import LARGE_CATEGORIES, SMALL_CATEGORIES, category_members, universe

# (the ignores: mypy checks against Python 3.10, whose stubs lack these two; at 3.11+ the second pair applies)
try:  # Python 3.11+
    from re import _constants as sre_constants  # type: ignore[attr-defined, unused-ignore]
    from re import _parser as sre_parse  # type: ignore[attr-defined, unused-ignore]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants  # type: ignore[no-redef, unused-ignore]
    import sre_parse  # type: ignore[no-redef, unused-ignore]


_C = sre_constants
ATOMIC = getattr(_C, "ATOMIC_GROUP", object())  # Python 3.11+
POSSESSIVE = getattr(_C, "POSSESSIVE_REPEAT", object())
MAXREPEAT = _C.MAXREPEAT
_CATEGORIES = {
    _C.CATEGORY_DIGIT: r"\d",
    _C.CATEGORY_NOT_DIGIT: r"\D",
    _C.CATEGORY_SPACE: r"\s",
    _C.CATEGORY_NOT_SPACE: r"\S",
    _C.CATEGORY_WORD: r"\w",
    _C.CATEGORY_NOT_WORD: r"\W",
}
# Syntax that Python's parser reads differently from the `regex` module (or not at all): such patterns are not analyzed.
REGEX_ONLY_SYNTAX = regex.compile(r"\[:|\\[pPXGKmMLNh]|\(\?[rf]|\(\?V|\(\?\||\(\?&|\(\?R|\(\?P>|\(\?\d|\{[eisd]|--|&&|\|\||~~")

NAMED_GROUP = regex.compile(r"(?<!\\)((?:\\\\)*)\(\?P?<[A-Za-z_]\w*>")
# Work done by regex calls of the scanners: characters searched plus anchored attempts. Tests read it to check that
# the scan is linear without timing anything.
work = [0]


class Unanalyzable(Exception):
    """The analysis cannot bound where this pattern may start."""


@dataclass(frozen=True)
class Charset:
    """A set of characters as regex class pieces: `parts` go inside one `[...]`, `negated` are whole classes."""

    parts: frozenset = frozenset()
    negated: frozenset = frozenset()
    small: bool = True  # only a few explicit characters (a selective trigger)

    def __or__(self, other: "Charset") -> "Charset":
        return Charset(self.parts | other.parts, self.negated | other.negated, self.small and other.small)

    def source(self) -> str | None:
        pieces = []
        if self.parts:
            pieces.append("[" + "".join(sorted(self.parts)) + "]")
        pieces.extend(sorted(self.negated))
        return "|".join(pieces) if pieces else None


EMPTY_CHARSET = Charset()


def _char(code: int) -> str:
    return f"\\U{code:08x}"


def charset_of(op, av) -> Charset:
    if op is _C.LITERAL:
        return Charset(frozenset([_char(av)]))
    if op is _C.NOT_LITERAL:
        return Charset(negated=frozenset(["[^" + _char(av) + "]"]), small=False)
    if op is _C.ANY:
        return Charset(frozenset([r"\s", r"\S"]), small=False)
    if op is _C.IN:
        negate, parts, small = False, [], True
        for kind, value in av:
            if kind is _C.NEGATE:
                negate = True
            elif kind is _C.LITERAL:
                parts.append(_char(value))
            elif kind is _C.RANGE:
                parts.append(_char(value[0]) + "-" + _char(value[1]))
                small = small and value[1] - value[0] < 8
            elif kind is _C.CATEGORY and value in _CATEGORIES:
                parts.append(_CATEGORIES[value])
                small = False
            else:
                raise Unanalyzable
        if negate:
            return Charset(negated=frozenset(["[^" + "".join(parts) + "]"]), small=False)
        return Charset(frozenset(parts), small=small and len(parts) <= 16)
    raise Unanalyzable


def single_charset(sub) -> Charset | None:
    items = list(sub)
    if len(items) == 1 and items[0][0] in (_C.LITERAL, _C.NOT_LITERAL, _C.ANY, _C.IN):
        return charset_of(*items[0])
    return None


def _within(inner: Charset, outer: Charset) -> bool:
    """Whether every character of `inner` is surely in `outer` (same pieces; negated classes only when equal)."""
    return inner == outer or (not inner.negated and not outer.negated and inner.parts <= outer.parts)


def last_charset(items) -> tuple[Charset, bool]:
    """The characters a sequence can end with, and whether it can be empty."""
    found = EMPTY_CHARSET
    for op, av in reversed(list(items)):
        if op in (_C.LITERAL, _C.NOT_LITERAL, _C.ANY, _C.IN):
            return found | charset_of(op, av), False
        if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, POSSESSIVE):
            chars, empty = last_charset(av[2])
            found = found | chars
            if av[0] > 0 and not empty:
                return found, False
        elif op in (_C.SUBPATTERN, ATOMIC):
            chars, empty = last_charset(av[-1] if op is _C.SUBPATTERN else av)
            found = found | chars
            if not empty:
                return found, False
        elif op is _C.BRANCH:
            empty_any = False
            for alternative in av[1]:
                chars, empty = last_charset(alternative)
                found = found | chars
                empty_any = empty_any or empty
            if not empty_any:
                return found, False
        elif op in (_C.ASSERT, _C.ASSERT_NOT, _C.AT):
            continue
        else:
            raise Unanalyzable
    return found, True


def _near(sub) -> list | None:
    """For a lookbehind of bounded width that starts with literal text (`(?<=</tool_calls>\\s)`): the start is a
    bounded distance after that text. Returns [("near", literal, least, most)] or None."""
    try:
        low, high = sub.getwidth()
        inner, empty = match_starts(sub)
    except (Unanalyzable, Exception):
        return None
    if empty or high > 64 or not inner or any(k[0] != "first" or k[2] is not None or not k[3] for k in inner):
        return None
    return [("near", k[3], low, high) for k in inner]


def _tail_run(sub) -> tuple[Charset, Charset] | None:
    """For a lookbehind that ends with a run of one class after a few characters (`(?<=<tool_sep>\\s*)`): the
    characters before the run and the run's class, or None. The start is then right after one of those characters,
    or inside or at the end of the run of the class that follows it (not after every character of the class)."""
    items = list(sub)
    if len(items) < 2:
        return None
    op, av = items[-1]
    if op not in (_C.MAX_REPEAT, _C.MIN_REPEAT, POSSESSIVE) or av[0] != 0 or av[1] is not MAXREPEAT:
        return None
    run = single_charset(av[2])
    if run is None:
        return None
    chars, empty = last_charset(items[:-1])
    if empty or not chars.small or not chars.parts or chars.negated:
        return None
    return chars, run


def _literal_runs(items, depth: int = 0) -> list[str]:
    """The literal texts a sequence that starts with a literal can begin with: its run of literal characters, each
    extended by the runs of the alternatives that follow it when all of them start with a literal."""
    run = []
    index = 0
    for op, av in items:
        if op is not _C.LITERAL:
            break
        run.append(chr(av))
        index += 1
    head = "".join(run)
    rest = list(items[index:])
    if not head or not rest or depth > 4:
        return [head]
    op, av = rest[0]
    if op is _C.SUBPATTERN and not (av[1] | av[2]):
        branch = list(av[3])
        if len(branch) == 1 and branch[0][0] is _C.BRANCH:
            op, av = branch[0]
    if op is not _C.BRANCH:
        return [head]
    runs: list[str] = []
    for alternative in av[1]:
        alternative = list(alternative)
        if not alternative or alternative[0][0] is not _C.LITERAL:
            return [head]
        runs.extend(head + tail for tail in _literal_runs(alternative, depth + 1))
    return runs if len(runs) <= 16 else [head]


def match_starts(items, loose: bool = False) -> tuple[list, bool]:
    """Where a match of a sequence can start: a list of filters, and whether the sequence can match empty anywhere.

    `loose`: an optional group that takes whitespace only (`(?:(?<=>)\\s*|[ \\t]*\\n\\s*)?<x>`) counts as a lead run of
    whitespace, as `\\s*<x>` does, and a lookbehind before anything is passed over (`(?<=\\})\\s*<end>` starts where
    `\\s*<end>` does, at fewer places). A match then starts somewhere within the run of whitespace before what follows
    (assertions only rule places out), so the filters still tell a place before which no match starts (`prefilter`,
    `first_candidate`); unlike with `\\s*`, a match may start inside the run and not at its start, so nothing that
    relies on the start of the run (`leads`) may use them."""
    items = list(items)
    out: list = []
    for index, (op, av) in enumerate(items):
        if op is _C.LITERAL:
            # a run of literal characters: the whole run must be there, so search for it (a prefilter); when
            # alternatives of literals follow (`<(?:end_of_turn>|start>)`, as Python's parser factors out a common
            # prefix), one run per alternative
            for run in _literal_runs(items[index:]):
                out.append(("first", charset_of(op, av), None, run))
            return out, False
        if op in (_C.NOT_LITERAL, _C.ANY, _C.IN):
            out.append(("first", charset_of(op, av), None, None))
            return out, False
        if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, POSSESSIVE):
            low, high, sub = av
            lead = single_charset(sub)
            if lead is None or high is not MAXREPEAT:
                lead = SPACE_CHARSET if loose and low == 0 and blank_only(sub) and not _zero_width(sub) else None
            if lead is not None:
                try:
                    rest, rest_empty = match_starts(items[index + 1:], loose)
                except Unanalyzable:
                    rest, rest_empty = None, True
                if rest_empty or rest is None:
                    if low == 0:
                        raise Unanalyzable  # `\s*` followed by something that may be empty: matches anywhere
                    out.append(("first", lead, None, None))  # `\s+` ...: at each character of the class
                    return out, False
                for kind in rest:
                    if kind[0] == "first":
                        if kind[2] is None or _within(kind[2], lead):
                            # `\\s*<x>`, or `\\s*\\s*<x>` (a run of the same class twice is one run)
                            out.append(("first", kind[1], lead, kind[3]))
                        else:
                            out.append(("first", kind[1] | kind[2], lead, None))
                    elif kind[0] == "end":
                        out.append(("first", EMPTY_CHARSET, lead, None))
                        out.append(kind)
                    elif kind[0] == "near" and len(kind) == 4:
                        # `\\s*(?<=\\n)x`: at the start of the run of the class that ends where the lookbehind holds
                        out.append((*kind, lead))
                    elif kind[0] == "begin":
                        out.append(kind)  # `\\s*(?<![\\s\\S])`: the run is empty, at the start
                    else:
                        raise Unanalyzable
                return out, False
            sub_starts, sub_empty = match_starts(sub, loose)
            out.extend(sub_starts)
            if low == 0 or sub_empty:
                continue
            return out, False
        if op in (_C.SUBPATTERN, ATOMIC):
            if op is _C.SUBPATTERN:
                if (av[1] | av[2]) & (re.IGNORECASE | re.MULTILINE):
                    raise Unanalyzable
                sub = av[3]
            else:
                sub = av
            sub_starts, sub_empty = match_starts(sub, loose)
            out.extend(sub_starts)
            if sub_empty:
                continue
            return out, False
        if op is _C.BRANCH:
            empty_any = False
            for alternative in av[1]:
                alt_starts, alt_empty = match_starts(alternative, loose)
                out.extend(alt_starts)
                empty_any = empty_any or alt_empty
            if empty_any:
                continue
            return out, False
        if op is _C.ASSERT:
            direction, sub = av
            if direction == 1:  # lookahead: the character here must be able to start it
                try:
                    ahead, ahead_empty = match_starts(sub, loose)
                except Unanalyzable:
                    continue
                if not ahead_empty and all(k[0] == "end" or (k[0] == "first" and k[2] is None) for k in ahead):
                    out.extend(ahead)
                    return out, False
                if not ahead_empty and not out and index == len(items) - 1 and all(k[0] in ("first", "end") for k in ahead):
                    # a lone lookahead such as (?=\s*<x>): the leftmost place it holds is where its match would start
                    return ahead, False
                continue
            if not out and loose:
                continue  # a lookbehind only rules places out: the rest tells where a match may start
            if not out:  # a lookbehind before anything: the character before the start is constrained
                near = _near(sub)
                if near is not None:
                    return near, False
                try:
                    chars, behind_empty = last_charset(sub)
                except Unanalyzable:
                    behind_empty = True
                if not behind_empty:
                    if not chars.small:
                        try:
                            rest, rest_empty = match_starts(items[index + 1:], loose)
                        except Unanalyzable:
                            rest, rest_empty = None, True
                        if rest is not None and not rest_empty and all(k[0] == "first" and k[1].small for k in rest):
                            return rest, False
                        try:
                            tail = _tail_run(sub)
                        except Unanalyzable:
                            tail = None
                        if tail is not None:
                            return [("after_run", *tail)], False
                    return [("after", chars)], False
            continue
        if op is _C.ASSERT_NOT:
            direction, sub = av
            if direction == -1 and not out:
                lone = single_charset(sub)
                if lone is not None and lone.parts >= {r"\s", r"\S"}:
                    # (?<![\s\S]): no character before, the start of the text
                    return [("begin",)], False
            continue
        if op is _C.AT:
            if av in (_C.AT_BEGINNING, _C.AT_BEGINNING_STRING):
                out.append(("begin",))
                return out, False
            if av in (_C.AT_END, _C.AT_END_STRING):
                out.append(("end", av is _C.AT_END))
                return out, False
            continue  # \b, \B
        raise Unanalyzable
    return out, True


# Whitespace characters a gate may treat as held text (each is in `\s` for both `re` and `regex`).
_BLANKS = frozenset(_char(ord(char)) for char in " \t\n\r\f\v") | {r"\s"}
# At most this many (lead, literal) entries per pattern, else no gate.
_GATE_LIMIT = 32


def _blank(chars: Charset) -> bool:
    return not chars.negated and bool(chars.parts) and chars.parts <= _BLANKS


def _gate(items, blank: bool = False, depth: int = 0) -> list:
    """A coarse picture of where a match of a sequence can start, for the chunk fast path: a list of entries
    ("literal", text, blank) -- a start is followed by a run of whitespace, then `text` -- and ("end", blank) -- a run
    of whitespace that reaches the end of the text (`\\s*\\Z`); `blank` says whether whitespace may come first.
    Zero-width assertions are ignored (they only remove matches); a branch anchored at the beginning of the text gives
    ("begin",). Raises `Unanalyzable` when a start can be followed by something else (a class, the end of the pattern)."""
    if depth > 12:
        raise Unanalyzable
    items = list(items)
    for index, (op, av) in enumerate(items):
        rest = items[index + 1:]
        if op is _C.LITERAL:
            if _blank(charset_of(op, av)):
                blank = True
                continue
            return [("literal", run, blank) for run in _literal_runs(items[index:])]
        if op in (_C.NOT_LITERAL, _C.ANY, _C.IN):
            if _blank(charset_of(op, av)):
                blank = True
                continue
            raise Unanalyzable
        if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, POSSESSIVE):
            low, high, sub = av
            chars = single_charset(sub)
            if chars is not None and _blank(chars):
                blank = True
                continue
            # a first copy of what repeats, then (when it may repeat) the repeat again: a literal run stops there
            out = _gate(list(sub) + (rest if high == 1 else [(op, av)] + rest), blank, depth + 1)
            if low == 0:
                out = out + _gate(rest, blank, depth + 1)
            return _capped(out)
        if op is _C.SUBPATTERN:
            if av[1] | av[2]:
                raise Unanalyzable  # inline flags (case-insensitive...): not read here
            return _gate(list(av[3]) + rest, blank, depth + 1)
        if op is ATOMIC:
            return _gate(list(av) + rest, blank, depth + 1)
        if op is _C.BRANCH:
            out = []
            for alternative in av[1]:
                out += _gate(list(alternative) + rest, blank, depth + 1)
            return _capped(out)
        if op is _C.ASSERT:
            direction, sub = av
            if direction == 1:  # a lookahead: the text from here must match it too
                try:
                    return _gate(sub, blank, depth + 1)
                except Unanalyzable:
                    pass
            continue
        if op is _C.ASSERT_NOT:
            direction, sub = av
            if direction == -1:
                chars = single_charset(sub)
                if chars is not None and chars.parts >= {r"\s", r"\S"}:
                    return [("begin",)]  # (?<![\s\S]): only at the start of the text
            continue
        if op is _C.AT:
            if av in (_C.AT_BEGINNING, _C.AT_BEGINNING_STRING):
                return [("begin",)]
            if av is _C.AT_END_STRING:
                return [("end", blank)]
            if av is _C.AT_END:
                raise Unanalyzable  # `$` also matches before a final newline
            continue  # \b, \B
        raise Unanalyzable
    raise Unanalyzable  # the sequence may end here: a match could start anywhere


def _capped(entries: list) -> list:
    entries = list(dict.fromkeys(entries))
    if len(entries) > _GATE_LIMIT:
        raise Unanalyzable
    return entries


def _structure(pattern: str, start: int = 0):
    """The pattern's characters from `start` that carry structure: (index, character) outside escapes and character
    classes (`[|(]` and `\\(` yield nothing)."""
    index, in_class = start, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
        elif char == "[":
            in_class = True
            if pattern[index + 1:index + 2] == "]":
                index += 1  # a `]` right after `[` is a member, not the end of the class
        else:
            yield index, char
        index += 1


def top_alternatives(pattern: str) -> list[str]:
    """The pattern's top-level alternatives (source text)."""
    pieces, depth, last = [], 0, 0
    for index, char in _structure(pattern):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            pieces.append(pattern[last:index])
            last = index + 1
    pieces.append(pattern[last:])
    return pieces


def gate_of(pattern: str) -> tuple | None:
    """For the chunk fast path: (triggers, begin, blank) such that, away from the start of the text (`begin`: a branch
    matches only there), a match can only start in a run of whitespace (`blank`: whitespace may come first) followed
    by a trigger's literal (which may still be cut by the end of the text), in such a run that reaches the end of
    the text, or right after a trigger that tests a lookbehind (`\\n(?<=\\)\\n)`: the character the lookbehind ends
    with, where it holds), or within a bounded distance after a trigger (`</x>` for `(?<=</x>\\s)`). Triggers are
    (regex source, source of a class of its first character, how far before a start it may begin). None when the
    pattern is not of that form."""
    if REGEX_ONLY_SYNTAX.search(pattern) or regex.match(r"\(\?[a-zA-Z]+\)", pattern):
        return None
    triggers: list[tuple] = []
    begin = blank = False
    for alternative in top_alternatives(pattern):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                parsed = sre_parse.parse(NAMED_GROUP.sub(lambda m: m.group(1) + "(", alternative), re.DOTALL)
            if parsed.state.flags & (re.IGNORECASE | re.MULTILINE):
                return None
            behind = _behind_trigger(alternative)
            try:
                entries = _gate(parsed)
            except Unanalyzable:
                entries = None
            if entries is None or (
                behind is not None and behind[1] and any(e[0] == "literal" and len(e[1]) < 3 for e in entries)
            ):
                # where the lookbehind that leads the branch holds (preferred to a short literal, such as `,` in
                # `(?<=\})\s*,`, which prose holds often)
                if behind is None:
                    return None
                triggers.extend(behind[0])
                continue
        except (Unanalyzable, re.error, RecursionError, OverflowError, Warning, ValueError, TypeError, KeyError, IndexError):
            return None
        for entry in entries:
            if entry[0] == "begin":
                begin = True
                continue
            blank = blank or entry[-1]
            if entry[0] == "literal":
                if not entry[1]:
                    return None
                triggers.append((regex.escape(entry[1]), regex.escape(entry[1][0]), 0))
    try:
        regex.compile("|".join(source for source, _, _ in triggers) or "(?!)", regex.DOTALL)
    except (regex.error, RecursionError, OverflowError):
        return None
    return tuple(sorted(set(triggers), key=lambda trigger: (-len(trigger[0]), trigger))), begin, blank


def _behind_trigger(alternative: str) -> tuple | None:
    """For a branch led by a lookbehind (`(?<=\\))...`), or by a group of lookbehinds (`(?:(?<=a)|(?<=b\\s))...`):
    (triggers, whether every one is selective: no whitespace class). A lookbehind of bounded width that begins
    with literal text (`(?<=</tool_calls>\\s)`) gives that literal, searched from as far before the held text as the
    lookbehind reaches; another gives the regex of a character it ends with followed by the lookbehind itself."""
    if alternative.startswith("(?<="):
        heads = [alternative[:group_end(alternative, 0) or 0]]
    elif alternative.startswith("(?:(?<="):
        stop = group_end(alternative, 0)
        if stop is None:
            return None
        heads = top_alternatives(alternative[3:stop - 1])
    else:
        return None
    triggers, few = [], True
    for head in heads:
        if not head.startswith("(?<=") or group_end(head, 0) != len(head):
            return None
        items = list(sre_parse.parse(NAMED_GROUP.sub(lambda m: m.group(1) + "(", head), re.DOTALL))
        if len(items) != 1 or items[0][0] is not _C.ASSERT or items[0][1][0] != -1:
            return None
        sub = items[0][1][1]
        near = _near(sub)
        if near is not None:
            most = max(entry[3] for entry in near)
            for entry in near:
                triggers.append((regex.escape(entry[1]), regex.escape(entry[1][0]), most))
                few = few and not entry[1][0].isspace()
            continue
        chars, empty = last_charset(sub)
        source = chars.source()
        if empty or not source:
            return None
        triggers.append((f"(?:{source}){head}", source, 1))
        few = few and chars.small and not chars.negated and not (chars.parts & _BLANKS)
    return triggers, few


def group_end(pattern: str, at: int) -> int | None:
    """The index just past the group opening at `at` (its closing parenthesis), or None."""
    depth = 0
    for index, char in _structure(pattern, at):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


# Whitespace (as `regex` reads `\s`): the runs `run_rest_search` is about.
SPACE_CHARSET = Charset(frozenset([r"\s"]), small=False)


def _zero_width(items) -> bool:
    """Whether a sequence takes no character at all (assertions only)."""
    return all(op in (_C.ASSERT, _C.ASSERT_NOT, _C.AT) for op, _ in items)


def blank_only(items) -> bool:
    """Whether everything a sequence can consume is whitespace (zero-width assertions are let through)."""
    for op, av in items:
        if op in (_C.LITERAL, _C.NOT_LITERAL, _C.ANY, _C.IN):
            if not subset(charset_of(op, av), SPACE_CHARSET):
                return False
        elif op in (_C.MAX_REPEAT, _C.MIN_REPEAT, POSSESSIVE):
            if not blank_only(av[2]):
                return False
        elif op is _C.SUBPATTERN:
            if av[1] | av[2] or not blank_only(av[3]):
                return False
        elif op is ATOMIC:
            if not blank_only(av):
                return False
        elif op is _C.BRANCH:
            if not all(blank_only(alternative) for alternative in av[1]):
                return False
        elif op not in (_C.ASSERT, _C.ASSERT_NOT, _C.AT):
            return False
    return True


def parse_pattern(source: str):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return sre_parse.parse(NAMED_GROUP.sub(lambda m: m.group(1) + "(", source), re.DOTALL)


# Any character (a repeat whose body is more than one character).
ANY_RUN = Charset(frozenset([r"\s", r"\S"]), small=False)


def union(first: tuple, second: tuple) -> tuple:
    return first + tuple(chars for chars in second if chars not in first)


# Code points in two pieces (lone surrogates included), built when first needed: the BMP, where a set with many
# members has them or shows that it is not a subset, and the rest, scanned only when the BMP cannot tell.
_UNIVERSE: dict = {}
_MEMBERS: dict = {}
_MOST_MEMBERS = 4096
_LITERAL = regex.compile(r"\\U([0-9a-f]{8})(?:-\\U([0-9a-f]{8}))?")


def _universe(piece: str) -> str:
    if piece not in _UNIVERSE:
        _UNIVERSE[piece] = universe(0, 0x10000) if piece == "bmp" else universe(0x10000, 0x110000)
    return _UNIVERSE[piece]


def _part_members(part: str) -> set | None:
    """The members of one piece of a class (`charset`): a character, a range or a category; None past the limit.
    Listed without scanning the code points (a category from unicode_tables)."""
    if part in SMALL_CATEGORIES:
        return set(category_members(part))
    if part in LARGE_CATEGORIES:
        return None
    found = _LITERAL.fullmatch(part)
    if found is None:
        raise Unanalyzable
    low = int(found.group(1), 16)
    high = int(found.group(2), 16) if found.group(2) else low
    return set(map(chr, range(low, high + 1))) if high - low < _MOST_MEMBERS else None


def _scanned(source: str) -> str | None:
    """The members of a class found by trying code points, the BMP first; None past the limit."""
    found: list = []
    for piece in ("bmp", "rest"):
        for match in regex.finditer(source, _universe(piece), regex.DOTALL):
            if len(found) >= _MOST_MEMBERS:
                return None
            found.append(match.group())
    return "".join(found)


def charset_members(chars: Charset) -> str | None:
    """The characters of a set as a string (in code point order), or None when it has more than `_MOST_MEMBERS`."""
    source = chars.source()
    if source is None:
        return ""
    if source not in _MEMBERS:
        listed: str | None = None
        try:
            if not chars.negated:
                members: set = set()
                for part in chars.parts:
                    more = _part_members(part)
                    if more is None:
                        break
                    members |= more
                    if len(members) > _MOST_MEMBERS:
                        break
                else:
                    listed = "".join(sorted(members))
            else:
                listed = _scanned(source)
        except Unanalyzable:
            listed = _scanned(source)
        _MEMBERS[source] = listed
    return _MEMBERS[source]


_SUBSETS: dict = {}


def subset(inner: Charset, outer: Charset) -> bool:
    """Whether every character of `inner` is in `outer` (exact, over every code point)."""
    key = (inner.source(), outer.source())
    if key not in _SUBSETS:
        if key[0] is None:
            _SUBSETS[key] = True
        elif key[1] is None:
            _SUBSETS[key] = False
        elif _within(inner, outer):
            _SUBSETS[key] = True
        else:
            outside = regex.compile(f"(?!{key[1]})(?:{key[0]})", regex.DOTALL)
            members = charset_members(inner)
            if members is not None:
                _SUBSETS[key] = outside.search(members) is None
            else:  # a character outside is most often found in the BMP
                _SUBSETS[key] = all(outside.search(_universe(piece)) is None for piece in ("bmp", "rest"))
    return _SUBSETS[key]


def overlaps(first: Charset, second: Charset) -> bool:
    """Whether two character sets share a character (exact when one of them is small, else assumed)."""
    if first == second:
        return True
    for one, other in ((first, second), (second, first)):
        members = charset_members(one)
        if members is not None:
            source = other.source()
            return source is not None and regex.search(source, members, regex.DOTALL) is not None
    return True

"""Fast, linear scanning for regex delimiters.

The `regex` module's search is quadratic on patterns that start with a repeated class (`\\s*<tool_call>` over a run of
spaces, or over prose in partial mode): it tries every start position, and from each one runs the repeat to its end.
So we never let it pick start positions. At compile time (`analyze`) we read the pattern's structure and derive where
a match can start:

* `first`: at a character of a small set (the literal a branch begins with, such as `<` in `<tool_call>`), possibly
  preceded by a run of a *lead* class (`\\s*<tool_call>` starts at the beginning of the run of whitespace before a
  `<`, or at a run of whitespace that reaches the end of the text, which is a partial match);
* `after`: right after a character of a set, for a branch led by a lookbehind (`(?<=\\})\\s*,` starts after a `}`);
* `begin` / `end`: at the start (`\\A`, `^`) or the end (`\\Z`, `$`) of the text.

At run time (`scan_pattern`) a compiled search for the trigger characters finds the candidate starts in increasing
order, and the real pattern is tried (anchored) at each candidate only. The first candidate where the pattern matches
(or could still match with more text) decides, exactly as a search would. Every position before it is known dead for
good (more text cannot revive it), so the caller remembers how far the scan got and never rescans.

Patterns the analysis cannot read (backreferences, syntax only the `regex` module has, case-insensitive flags...)
fall back to the plain search, still bounded by the regex time budget.
"""

from __future__ import annotations

import bisect
import re
import warnings
from dataclasses import dataclass

import regex

from .errors import grow_regex_budget, regex_time_left
from .unicode_tables import LARGE_CATEGORIES, SMALL_CATEGORIES, category_members, universe

try:  # Python 3.11+
    from re import _constants as sre_constants
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

_C = sre_constants
_ATOMIC = getattr(_C, "ATOMIC_GROUP", object())  # Python 3.11+
_POSSESSIVE = getattr(_C, "POSSESSIVE_REPEAT", object())
_MAXREPEAT = _C.MAXREPEAT
_CATEGORIES = {
    _C.CATEGORY_DIGIT: r"\d",
    _C.CATEGORY_NOT_DIGIT: r"\D",
    _C.CATEGORY_SPACE: r"\s",
    _C.CATEGORY_NOT_SPACE: r"\S",
    _C.CATEGORY_WORD: r"\w",
    _C.CATEGORY_NOT_WORD: r"\W",
}
# Syntax that Python's parser reads differently from the `regex` module (or not at all): such patterns are not analyzed.
_REGEX_ONLY = regex.compile(r"\[:|\\[pPXGKmMLNh]|\(\?[rf]|\(\?V|\(\?\||\(\?&|\(\?R|\(\?P>|\(\?\d|\{[eisd]|--|&&|\|\||~~")

_NAMED = regex.compile(r"(?<!\\)((?:\\\\)*)\(\?P?<[A-Za-z_]\w*>")
# Work done by regex calls of the scanners: characters searched plus anchored attempts. Tests read it to check that
# the scan is linear without timing anything.
work = [0]


class _Unknown(Exception):
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


_EMPTY = Charset()


def _char(code: int) -> str:
    return f"\\U{code:08x}"


def _charset(op, av) -> Charset:
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
                raise _Unknown
        if negate:
            return Charset(negated=frozenset(["[^" + "".join(parts) + "]"]), small=False)
        return Charset(frozenset(parts), small=small and len(parts) <= 16)
    raise _Unknown


def _single(sub) -> Charset | None:
    items = list(sub)
    if len(items) == 1 and items[0][0] in (_C.LITERAL, _C.NOT_LITERAL, _C.ANY, _C.IN):
        return _charset(*items[0])
    return None


def _within(inner: Charset, outer: Charset) -> bool:
    """Whether every character of `inner` is surely in `outer` (same pieces; negated classes only when equal)."""
    return inner == outer or (not inner.negated and not outer.negated and inner.parts <= outer.parts)


def _last(items) -> tuple[Charset, bool]:
    """The characters a sequence can end with, and whether it can be empty."""
    found = _EMPTY
    for op, av in reversed(list(items)):
        if op in (_C.LITERAL, _C.NOT_LITERAL, _C.ANY, _C.IN):
            return found | _charset(op, av), False
        if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, _POSSESSIVE):
            chars, empty = _last(av[2])
            found = found | chars
            if av[0] > 0 and not empty:
                return found, False
        elif op in (_C.SUBPATTERN, _ATOMIC):
            chars, empty = _last(av[-1] if op is _C.SUBPATTERN else av)
            found = found | chars
            if not empty:
                return found, False
        elif op is _C.BRANCH:
            empty_any = False
            for alternative in av[1]:
                chars, empty = _last(alternative)
                found = found | chars
                empty_any = empty_any or empty
            if not empty_any:
                return found, False
        elif op in (_C.ASSERT, _C.ASSERT_NOT, _C.AT):
            continue
        else:
            raise _Unknown
    return found, True


def _near(sub) -> list | None:
    """For a lookbehind of bounded width that starts with literal text (`(?<=</tool_calls>\\s)`): the start is a
    bounded distance after that text. Returns [("near", literal, least, most)] or None."""
    try:
        low, high = sub.getwidth()
        inner, empty = _starts(sub)
    except (_Unknown, Exception):
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
    if op not in (_C.MAX_REPEAT, _C.MIN_REPEAT, _POSSESSIVE) or av[0] != 0 or av[1] is not _MAXREPEAT:
        return None
    run = _single(av[2])
    if run is None:
        return None
    chars, empty = _last(items[:-1])
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
    runs = []
    for alternative in av[1]:
        alternative = list(alternative)
        if not alternative or alternative[0][0] is not _C.LITERAL:
            return [head]
        runs.extend(head + tail for tail in _literal_runs(alternative, depth + 1))
    return runs if len(runs) <= 16 else [head]


def _starts(items, loose: bool = False) -> tuple[list, bool]:
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
                out.append(("first", _charset(op, av), None, run))
            return out, False
        if op in (_C.NOT_LITERAL, _C.ANY, _C.IN):
            out.append(("first", _charset(op, av), None, None))
            return out, False
        if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, _POSSESSIVE):
            low, high, sub = av
            lead = _single(sub)
            if lead is None or high is not _MAXREPEAT:
                lead = _SPACE if loose and low == 0 and _blank_only(sub) and not _zero_width(sub) else None
            if lead is not None:
                try:
                    rest, rest_empty = _starts(items[index + 1:], loose)
                except _Unknown:
                    rest, rest_empty = None, True
                if rest_empty or rest is None:
                    if low == 0:
                        raise _Unknown  # `\s*` followed by something that may be empty: matches anywhere
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
                        out.append(("first", _EMPTY, lead, None))
                        out.append(kind)
                    elif kind[0] == "near" and len(kind) == 4:
                        # `\\s*(?<=\\n)x`: at the start of the run of the class that ends where the lookbehind holds
                        out.append((*kind, lead))
                    elif kind[0] == "begin":
                        out.append(kind)  # `\\s*(?<![\\s\\S])`: the run is empty, at the start
                    else:
                        raise _Unknown
                return out, False
            sub_starts, sub_empty = _starts(sub, loose)
            out.extend(sub_starts)
            if low == 0 or sub_empty:
                continue
            return out, False
        if op in (_C.SUBPATTERN, _ATOMIC):
            if op is _C.SUBPATTERN:
                if (av[1] | av[2]) & (re.IGNORECASE | re.MULTILINE):
                    raise _Unknown
                sub = av[3]
            else:
                sub = av
            sub_starts, sub_empty = _starts(sub, loose)
            out.extend(sub_starts)
            if sub_empty:
                continue
            return out, False
        if op is _C.BRANCH:
            empty_any = False
            for alternative in av[1]:
                alt_starts, alt_empty = _starts(alternative, loose)
                out.extend(alt_starts)
                empty_any = empty_any or alt_empty
            if empty_any:
                continue
            return out, False
        if op is _C.ASSERT:
            direction, sub = av
            if direction == 1:  # lookahead: the character here must be able to start it
                try:
                    ahead, ahead_empty = _starts(sub, loose)
                except _Unknown:
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
                    chars, behind_empty = _last(sub)
                except _Unknown:
                    behind_empty = True
                if not behind_empty:
                    if not chars.small:
                        try:
                            rest, rest_empty = _starts(items[index + 1:], loose)
                        except _Unknown:
                            rest, rest_empty = None, True
                        if rest is not None and not rest_empty and all(k[0] == "first" and k[1].small for k in rest):
                            return rest, False
                        try:
                            tail = _tail_run(sub)
                        except _Unknown:
                            tail = None
                        if tail is not None:
                            return [("after_run", *tail)], False
                    return [("after", chars)], False
            continue
        if op is _C.ASSERT_NOT:
            direction, sub = av
            if direction == -1 and not out:
                chars = _single(sub)
                if chars is not None and chars.parts >= {r"\s", r"\S"}:
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
        raise _Unknown
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
    ("begin",). Raises `_Unknown` when a start can be followed by something else (a class, the end of the pattern)."""
    if depth > 12:
        raise _Unknown
    items = list(items)
    for index, (op, av) in enumerate(items):
        rest = items[index + 1:]
        if op is _C.LITERAL:
            if _blank(_charset(op, av)):
                blank = True
                continue
            return [("literal", run, blank) for run in _literal_runs(items[index:])]
        if op in (_C.NOT_LITERAL, _C.ANY, _C.IN):
            if _blank(_charset(op, av)):
                blank = True
                continue
            raise _Unknown
        if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, _POSSESSIVE):
            low, high, sub = av
            chars = _single(sub)
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
                raise _Unknown  # inline flags (case-insensitive...): not read here
            return _gate(list(av[3]) + rest, blank, depth + 1)
        if op is _ATOMIC:
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
                except _Unknown:
                    pass
            continue
        if op is _C.ASSERT_NOT:
            direction, sub = av
            if direction == -1:
                chars = _single(sub)
                if chars is not None and chars.parts >= {r"\s", r"\S"}:
                    return [("begin",)]  # (?<![\s\S]): only at the start of the text
            continue
        if op is _C.AT:
            if av in (_C.AT_BEGINNING, _C.AT_BEGINNING_STRING):
                return [("begin",)]
            if av is _C.AT_END_STRING:
                return [("end", blank)]
            if av is _C.AT_END:
                raise _Unknown  # `$` also matches before a final newline
            continue  # \b, \B
        raise _Unknown
    raise _Unknown  # the sequence may end here: a match could start anywhere


def _capped(entries: list) -> list:
    entries = list(dict.fromkeys(entries))
    if len(entries) > _GATE_LIMIT:
        raise _Unknown
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
    if _REGEX_ONLY.search(pattern) or regex.match(r"\(\?[a-zA-Z]+\)", pattern):
        return None
    triggers: list[tuple] = []
    begin = blank = False
    for alternative in top_alternatives(pattern):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                parsed = sre_parse.parse(_NAMED.sub(lambda m: m.group(1) + "(", alternative), re.DOTALL)
            if parsed.state.flags & (re.IGNORECASE | re.MULTILINE):
                return None
            behind = _behind_trigger(alternative)
            try:
                entries = _gate(parsed)
            except _Unknown:
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
        except (_Unknown, re.error, RecursionError, OverflowError, Warning, ValueError, TypeError, KeyError, IndexError):
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
        heads = [alternative[:_group_end(alternative, 0) or 0]]
    elif alternative.startswith("(?:(?<="):
        stop = _group_end(alternative, 0)
        if stop is None:
            return None
        heads = top_alternatives(alternative[3:stop - 1])
    else:
        return None
    triggers, few = [], True
    for head in heads:
        if not head.startswith("(?<=") or _group_end(head, 0) != len(head):
            return None
        items = list(sre_parse.parse(_NAMED.sub(lambda m: m.group(1) + "(", head), re.DOTALL))
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
        chars, empty = _last(sub)
        source = chars.source()
        if empty or not source:
            return None
        triggers.append((f"(?:{source}){head}", source, 1))
        few = few and chars.small and not chars.negated and not (chars.parts & _BLANKS)
    return triggers, few


@dataclass(frozen=True)
class PatternScan:
    """Where a regex delimiter may start, compiled for scanning (see the module docstring)."""

    leads: tuple  # ((trigger regex or None, lead class regex, reverse run regex), ...): `first` filters with a lead
    plain: object  # trigger regex of `first` filters without a lead, or None
    after: object  # regex of the characters an `after` start follows, or None
    # ((literal regex, its length, least, most, backwards regex of a character not in a lead class or None), ...):
    # starts `least`..`most` after the literal's start (or at the start of the run of the lead class before that)
    near: tuple
    begin: bool
    end: bool  # a branch can match at the end of the text (candidate there at the end of the stream)
    dollar: bool  # `$` may match before a final newline
    triggers: str  # regex source of every character that can trigger a candidate (for the chunk fast path)
    lead_sources: tuple  # regex sources of the lead classes
    reach: int = 0  # how far after a trigger a candidate may be (`near`)
    # The same pattern as `(?:pattern)|(?!)`: it matches the same, but `regex` no longer checks the text the pattern
    # requires up to the end of the string before each anchored try (which made every try cost the rest of the text).
    twin: object = None
    safe: bool = False  # no way to backtrack badly (`_risky`): one anchored try cannot blow up (tries skip the per-call timeout)
    # Not safe only because of pairs of repeats that share characters: a class inside of those (see `_risky`), else None.
    shared_runs: object = None
    run_limit: int = 0  # how long a run of them a text may hold for the tries to run without the timeout (`_risky`)
    long_run: object = None  # a search for a run of `run_limit` of those characters (see `quiet`)
    # The characters a match can end with, when nothing else decides a match (no lookaround, `$`, `\Z`, `\b`):
    # text without them cannot complete a match that is only partly there. None: unknown.
    completion: object = None
    # Unbounded lookbehinds that begin with literal text (`(?<=<tool_calls>(?:(?!</tool_calls>)[\s\S])*)`):
    # `regex` scans them back to the start of the text (greedy, right to left) on every try. `guards` finds those
    # literals; `unguarded` is the pattern with such lookbehinds replaced by a failure, exact while none of the
    # literals occurs in the text; otherwise tries run on a slice of the text that starts at the last occurrence.
    guards: object = None
    unguarded: object = None
    relaxed: object = None  # such lookbehinds removed (always true): matches at least wherever the pattern does
    guard_bodies: tuple = ()
    guard_block: object = None  # (literal length, repeat regex) when the only such lookbehind is a block (_block_form)
    free: object = None  # the pattern with every lookbehind removed (matches wherever it does), None without any  # those lookbehinds' own patterns (what they must match, ending where they are tried)
    # ((regex of one of the characters and the run of the class after it, a backwards regex of a character not in the
    # class), ...): starts right after one of those
    # characters or anywhere in the run of the class that follows it (a lookbehind such as `(?<=<tool_sep>\\s*)`)
    after_runs: tuple = ()
    after_run_sources: tuple = ()  # ((characters source, class source), ...) for the chunk fast path
    # For one plain search over a short text: `triggers` compiled, how far before the position a search for them
    # must begin (a near literal's start, an `after` character just before it), and a reverse search over the lead classes together (the first candidate is at or after
    # the start of the lead run before the first trigger).
    prefilter: object = None
    back_reach: int = 0
    lead_back: object = None
    candidate_leads: tuple = ()  # the sources of the lead classes `lead_back` walks back over
    gate: object = None  # gate_of(pattern): the coarser picture of starts the chunk fast path may use
    # A match that starts inside a run of whitespace goes on after the run's end (see `_run_rest`): this matches
    # there whenever the pattern can match from inside the run. None: unknown.
    run_rest: object = None


def analyze(pattern: str) -> PatternScan | None:
    """Derive a `PatternScan` from a pattern, or None when its starts cannot be bounded (scan with search)."""
    if _REGEX_ONLY.search(pattern):
        return None
    original = pattern
    # Python's parser refuses a group name used twice (the `regex` module allows it): names do not matter here
    pattern = _NAMED.sub(lambda m: m.group(1) + "(", pattern)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            parsed = sre_parse.parse(pattern, re.DOTALL)
        if parsed.state.flags & (re.IGNORECASE | re.MULTILINE):
            return None
        filters, empty = _starts(parsed)
    except (_Unknown, re.error, RecursionError, OverflowError, Warning, ValueError, TypeError, KeyError, IndexError):
        return None
    if empty:
        return None
    bound = _candidate_bound(filters)  # (strict)
    try:
        loose, loose_empty = _starts(parsed, True)
        if not loose_empty:
            # the loose filters, when all their triggers are two characters or more (few places); a lookbehind
            # passed over may leave a class of one character (`(?<=\))[ \t]*(?P<name>[A-Za-z_]...`), where the
            # strict filters are more selective
            loose_bound = _candidate_bound(loose)
            if loose_bound["prefilter"] is not None and min_width(loose_bound["prefilter"].pattern) >= 2:
                bound = loose_bound
    except (_Unknown, RecursionError):
        pass
    risky, shared_runs, run_limit = _risky(parsed)
    guards_of = _guards(original)
    by_lead, plain, after, near, runs, begin, end, dollar = _grouped(filters)
    leads = []
    for lead_source, pieces in by_lead.items():
        source = _alternation(pieces)
        leads.append(
            (
                regex.compile(source, regex.DOTALL) if source else None,
                regex.compile(lead_source),
                regex.compile(f"(?r)(?!{lead_source}).", regex.DOTALL),
                regex.compile(f"(?!{lead_source}).", regex.DOTALL),
            )
        )
    plain_source = _alternation(plain)
    near_sources = []
    for literal, least, most, lead_source in sorted(set(near), key=repr):
        back = regex.compile(f"(?r)(?!{lead_source}).", regex.DOTALL) if lead_source else None
        near_sources.append((regex.compile(regex.escape(literal)), len(literal), least, most, back))
    triggers = _trigger_sources(by_lead, plain, after, near, runs, dollar)
    return PatternScan(
        leads=tuple(leads),
        plain=regex.compile(plain_source, regex.DOTALL) if plain_source else None,
        after=regex.compile(after.source()) if after.source() else None,
        near=tuple(near_sources),
        begin=begin,
        end=end,
        dollar=dollar,
        triggers="|".join(triggers),
        lead_sources=tuple(by_lead),
        reach=max((most for _, _, _, most, _ in near_sources), default=0),
        after_runs=tuple(
            (regex.compile(f"(?:{chars_source})(?:{run_source})*"), regex.compile(f"(?r)(?!{run_source}).", regex.DOTALL))
            for chars_source, run_source in sorted(runs)
        ),
        after_run_sources=tuple(sorted(runs)),
        free=_without_lookbehinds(original),
        # a pattern risky only through pairs of repeats keeps the twin: its tries stay within a run's length times a
        # linear try, and keep the per-call timeout
        twin=None if risky and shared_runs is None else _twin(original),
        safe=not risky,
        shared_runs=shared_runs,
        run_limit=run_limit,
        long_run=_long_run(shared_runs, run_limit),
        completion=_completion(parsed),
        **guards_of,
        **bound,
        gate=gate_of(original),
        run_rest=None if guards_of else _run_rest(original),
    )


def min_width(pattern: str) -> int:
    """The fewest characters a match of `pattern` takes (0 when it cannot be told)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return sre_parse.parse(pattern).getwidth()[0]
    except (re.error, RecursionError, OverflowError, Warning, ValueError, TypeError):
        return 0


def _grouped(filters: list) -> tuple:
    """The filters of `_starts` by kind: trigger pieces by lead class source, plain trigger pieces, the characters
    an `after` start follows, the `near` literals (literal, least, most, lead source or None), the `after_run`
    sources, and whether a start may be at the beginning, at the end, or before a final newline (`$`)."""
    by_lead: dict[str, list] = {}
    plain: list = []
    after = _EMPTY
    near: list = []
    runs: set = set()
    begin = end = dollar = False
    for kind in filters:
        if kind[0] == "first":
            piece = regex.escape(kind[3]) if kind[3] else kind[1].source()
            target = plain if kind[2] is None else by_lead.setdefault(kind[2].source(), [])
            if piece:
                target.append(piece)
        elif kind[0] == "after":
            after = after | kind[1]
        elif kind[0] == "near":
            near.append((*kind[1:4], kind[4].source() if len(kind) > 4 else None))
            if len(kind) > 4:
                by_lead.setdefault(kind[4].source(), [])  # a run of it at the end may still become a match
        elif kind[0] == "after_run":
            runs.add((kind[1].source(), kind[2].source()))
        elif kind[0] == "begin":
            begin = True
        elif kind[0] == "end":
            end = True
            dollar = dollar or kind[1]
    return by_lead, plain, after, near, runs, begin, end, dollar


def _alternation(pieces: list) -> str:
    """Regex sources as one alternation, longest first (the same text for the same set)."""
    return "|".join(sorted(set(pieces), key=lambda piece: (-len(piece), piece)))


def _trigger_sources(by_lead: dict, plain: list, after: Charset, near: list, runs: set, dollar: bool) -> list:
    """The regex sources of every character run that can trigger a candidate, in a fixed order."""
    triggers = [source for source in map(_alternation, by_lead.values()) if source]
    if plain:
        triggers.append(_alternation(plain))
    if after.source():
        triggers.append(after.source())
    triggers.extend(regex.escape(literal) for literal, _, _, _ in sorted(set(near), key=repr))
    triggers.extend(chars_source for chars_source, _ in sorted(runs))
    if dollar:
        triggers.append(r"\n")
    return triggers


def _candidate_bound(filters: list) -> dict:
    """`prefilter`, `back_reach` and `lead_back` of a PatternScan, for `first_candidate`: the triggers of the filters,
    how far before a position a search for them begins, and a reverse search over their lead classes together. No
    prefilter for kinds of starts first_candidate does not know (a start before its trigger must be a lead run's)."""
    by_lead, plain, after, near, runs, _, _, dollar = _grouped(filters)
    triggers = _trigger_sources(by_lead, plain, after, near, runs, dollar)
    known = all(k[0] in ("first", "after", "begin", "end") or (k[0] == "near" and len(k) == 4) for k in filters)
    return {
        "prefilter": regex.compile("|".join(triggers) or "(?!)") if known else None,
        "back_reach": max([most + len(literal) for literal, _, most, _ in near] + [1 if after.source() else 0]),
        "lead_back": regex.compile(f"(?r)(?!{'|'.join(by_lead)}).", regex.DOTALL) if by_lead else None,
        "candidate_leads": tuple(by_lead),
    }


# A lookbehind that can scan back over any text (not just a run of spaces or of a few characters).
_WIDE = regex.compile(r"\\[SWD]|\[\^|(?<!\\)\.|\\s\\S|\\S\\s|\\w\\W|\\d\\D")
_LOOKBEHIND = regex.compile(r"(?<!\\)(?:\\\\)*\(\?<=")


def _group_end(pattern: str, at: int) -> int | None:
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


_ANY_LOOKBEHIND = regex.compile(r"(?<!\\)(?:\\\\)*\(\?<[=!]")


def _without_lookbehinds(pattern: str):
    """The pattern with its lookbehinds removed (each becomes an empty group), or None when it has none."""
    pieces, last = [], 0
    for found in _ANY_LOOKBEHIND.finditer(pattern):
        start = found.end() - 4
        if start < last:
            continue  # inside a lookbehind already removed
        stop = _group_end(pattern, start)
        if stop is None:
            return None
        pieces.append(pattern[last:start] + "(?:)")
        last = stop
    if not pieces:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return regex.compile("".join(pieces) + pattern[last:], regex.DOTALL)
    except (regex.error, Warning, RecursionError, OverflowError):
        return None


def _guards(pattern: str) -> dict:
    literals, pieces, bodies, last = [], [], [], 0
    for found in _LOOKBEHIND.finditer(pattern):
        start = found.end() - 4
        stop = _group_end(pattern, start)
        if stop is None:
            return {}
        inner = _NAMED.sub(lambda m: m.group(1) + "(", pattern[start + 4:stop - 1])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                sub = sre_parse.parse(inner, re.DOTALL)
            low, high = sub.getwidth()
            if high <= 256 or not _WIDE.search(inner):
                continue  # bounded, or a run of a few kinds of characters (`\}\s*`): cheap to scan back
            starts, empty = _starts(sub)
        except Exception:
            return {}
        if empty or not starts or any(k[0] != "first" or k[2] is not None or not k[3] for k in starts):
            return {}  # an unbounded lookbehind we cannot guard: tries see the whole text
        literals.extend(k[3] for k in starts)
        bodies.append(pattern[start + 4:stop - 1])
        pieces.append((pattern[last:start], start, stop))
        last = stop
    if not literals:
        return {}
    tail = pattern[last:]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            unguarded = "".join(p + "(?!)" for p, _, _ in pieces) + tail
            relaxed = "".join(p for p, _, _ in pieces) + tail
            unguarded, relaxed = (_twin(source) or regex.compile(source, regex.DOTALL) for source in (unguarded, relaxed))
            bodies = tuple(regex.compile(body, regex.DOTALL) for body in bodies)
    except (regex.error, Warning, RecursionError, OverflowError):
        return {}
    ordered = sorted(set(literals), key=lambda literal: (-len(literal), literal))
    return {
        "guards": regex.compile("|".join(map(regex.escape, ordered))),
        "unguarded": unguarded,
        "relaxed": relaxed,
        "guard_bodies": bodies,
        "guard_block": _block_form(bodies[0].pattern) if len(bodies) == 1 else None,
    }


def _block_form(body: str):
    """For a lookbehind of the "inside an open block" form, literal text then a repeat of one character at a time
    (`<tool_calls>(?:(?!</tool_calls>)[\\s\\S])*`): (the literal's length, the repeat compiled). It holds exactly
    from the end of the literal up to where the repeat first fails, so one forward pass tells where."""
    split = body.find("(")
    if split <= 0:
        return None
    head, rest = body[:split], body[split:]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            literal = list(sre_parse.parse(head, re.DOTALL))
            repeat = list(sre_parse.parse(_NAMED.sub(lambda m: m.group(1) + "(", rest), re.DOTALL))
            if not literal or any(op is not _C.LITERAL for op, _ in literal) or len(repeat) != 1:
                return None
            op, av = repeat[0]
            if op not in (_C.MAX_REPEAT, _C.MIN_REPEAT, _POSSESSIVE) or av[0] != 0 or av[1] is not _MAXREPEAT:
                return None
            if av[2].getwidth() != (1, 1):
                return None
            return len(literal), regex.compile(f"(?:{rest[:-1] if rest.endswith('?') else rest})", regex.DOTALL)
    except Exception:
        return None


def _completion(parsed):
    """The characters a match must end with (the last it consumes), when nothing past its end decides it: no
    lookahead, `$`, `\\Z` or word boundary (lookbehinds and start anchors only look back). None otherwise."""
    try:
        if _looks_ahead(parsed):
            return None
        chars, empty = _last(parsed)
    except _Unknown:
        return None
    source = chars.source()
    return None if empty or not source else regex.compile(source)


def _looks_ahead(items) -> bool:
    """Whether a sequence holds an assertion that can look past where it is tested (a lookahead, an end anchor, a
    word boundary), at any depth; unknown constructs count as looking ahead."""
    for op, av in items:
        if op in (_C.LITERAL, _C.NOT_LITERAL, _C.ANY, _C.IN):
            continue
        if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, _POSSESSIVE):
            if _looks_ahead(av[2]):
                return True
        elif op is _C.SUBPATTERN:
            if _looks_ahead(av[3]):
                return True
        elif op is _ATOMIC:
            if _looks_ahead(av):
                return True
        elif op is _C.BRANCH:
            if any(_looks_ahead(alternative) for alternative in av[1]):
                return True
        elif op in (_C.ASSERT, _C.ASSERT_NOT):
            if av[0] != -1 or _looks_ahead(av[1]):
                return True
        elif op is _C.AT:
            if av not in (_C.AT_BEGINNING, _C.AT_BEGINNING_STRING):
                return True
        else:
            raise _Unknown
    return False


# Whitespace (as `regex` reads `\s`): the runs `_run_rest` is about.
_SPACE = Charset(frozenset([r"\s"]), small=False)
_QUANTIFIER = regex.compile(r"(?:[*+?]|\{\d+(?:,\d*)?\}|\{,\d+\})[?+]?")
_BACKREF = regex.compile(r"\\[1-9gk]|\(\?P=|\(\?\(")


def _atoms(source: str) -> list[str] | None:
    """A sequence (no top-level `|`) split into its top-level atoms, each with its quantifier, or None."""
    atoms, index = [], 0
    while index < len(source):
        char = source[index]
        if char == "\\":
            if source[index + 1:index + 2] in ("x", "u", "U", "N", "0", ""):
                return None  # escapes longer than one character: not split here
            stop = index + 2
        elif char == "[":
            stop = index + 1
            if source[stop:stop + 1] == "^":
                stop += 1
            if source[stop:stop + 1] == "]":
                stop += 1
            while stop < len(source) and source[stop] != "]":
                stop += 2 if source[stop] == "\\" else 1
            if stop >= len(source):
                return None
            stop += 1
        elif char == "(":
            stop = _group_end(source, index)
            if stop is None:
                return None
        elif char in "|)*+?{":
            return None
        else:
            stop = index + 1
        found = _QUANTIFIER.match(source, stop)
        if found is not None:
            stop = found.end()
        atoms.append(source[index:stop])
        index = stop
    return atoms


def _zero_width(items) -> bool:
    """Whether a sequence takes no character at all (assertions only)."""
    return all(op in (_C.ASSERT, _C.ASSERT_NOT, _C.AT) for op, _ in items)


def _blank_only(items) -> bool:
    """Whether everything a sequence can consume is whitespace (zero-width assertions are let through)."""
    for op, av in items:
        if op in (_C.LITERAL, _C.NOT_LITERAL, _C.ANY, _C.IN):
            if not _subset(_charset(op, av), _SPACE):
                return False
        elif op in (_C.MAX_REPEAT, _C.MIN_REPEAT, _POSSESSIVE):
            if not _blank_only(av[2]):
                return False
        elif op is _C.SUBPATTERN:
            if av[1] | av[2] or not _blank_only(av[3]):
                return False
        elif op is _ATOMIC:
            if not _blank_only(av):
                return False
        elif op is _C.BRANCH:
            if not all(_blank_only(alternative) for alternative in av[1]):
                return False
        elif op not in (_C.ASSERT, _C.ASSERT_NOT, _C.AT):
            return False
    return True


def _parse(source: str):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return sre_parse.parse(_NAMED.sub(lambda m: m.group(1) + "(", source), re.DOTALL)


def _rests(source: str, depth: int = 0) -> list[str] | None:
    """For each top-level alternative of `source` that can match away from the start of the text: what must match
    at the end of a run of whitespace for the alternative to match from inside the run. The alternative is split into
    a head that consumes whitespace only and a rest that cannot begin with whitespace (nor be empty), so the rest
    starts where the run ends; an alternative that is one lookahead stands for what it holds. None when an
    alternative is not of that form."""
    if depth > 4:
        return None
    rests = []
    for alternative in top_alternatives(source):
        atoms = _atoms(alternative)
        if not atoms:
            return None
        if len(atoms) == 1 and atoms[0].startswith("(?=") and atoms[0].endswith(")"):
            inner = _rests(atoms[0][3:-1], depth + 1)
            if inner is None:
                return None
            rests.extend(inner)
            continue
        parsed = [_parse(atom) for atom in atoms]
        head = 0  # atoms of the head: the longest blank prefix, without its trailing zero-width atoms
        for index, atom in enumerate(parsed):
            if not _blank_only(atom):
                break
            if atom.getwidth()[1] > 0:
                head = index + 1
        rest = "".join(atoms[head:])
        if not rest:
            starts, _ = _starts(_parse(alternative))
            if starts and all(kind[0] == "begin" for kind in starts):
                continue  # only at the start of the text, never inside a run
            return None
        starts, empty = _starts(_parse(rest))
        if empty or not starts:
            return None
        for kind in starts:
            if kind[0] == "first":
                if _overlap(kind[1], _SPACE) or (kind[2] is not None and _overlap(kind[2], _SPACE)):
                    return None
            elif kind[0] not in ("end", "begin"):
                return None
        rests.append(rest)
    return rests


def _run_rest(pattern: str):
    """A regex that matches (or partly matches) at the end of a run of whitespace whenever the pattern can match
    from a position inside the run (see `_rests`), or None. After a failed try inside a long run, `scan_pattern`
    checks it once at the run's end: when it fails there, no position of the run can start a match."""
    if regex.match(r"\(\?[a-zA-Z]+\)", pattern) or _BACKREF.search(pattern):
        return None
    try:
        rests = _rests(pattern)
        if rests is None:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return regex.compile("|".join(f"(?:{rest})" for rest in rests) or "(?!)", regex.DOTALL)
    except (_Unknown, re.error, regex.error, RecursionError, OverflowError, Warning, ValueError, TypeError, KeyError, IndexError):
        return None


def risk(pattern: str) -> tuple | None:
    """Whether one anchored try of a pattern read on its own (a tag_pattern, whose starts need not be bounded) may
    backtrack badly: (safe, None), or (False, a test that a complete short text keeps its tries within `LONG_RUN`
    linear tries, or None), from `_risky` with the pairs bounded by literals (`_ambiguous`); None when the pattern
    cannot be read. Group names are kept when Python's parser takes them, as a conditional (`(?(nl)\\n)`) refers to
    one."""
    if _REGEX_ONLY.search(pattern):
        return None
    try:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                parsed = sre_parse.parse(pattern, re.DOTALL)
        except re.error:  # a group name used twice, which the `regex` module allows
            parsed = _parse(pattern)
    except (re.error, RecursionError, OverflowError, Warning, ValueError, TypeError, KeyError, IndexError):
        return None
    if parsed.state.flags & (re.IGNORECASE | re.MULTILINE):
        return None
    bounded: list = []
    risky, shared_runs, run_limit = _risky(parsed, bounded)
    if not risky:
        return True, None
    if not run_limit:
        return False, None
    long_run = _long_run(shared_runs, run_limit)
    literals = tuple(sorted({literal for literal, _ in bounded}))

    def quiet(text: str) -> bool:
        """No run of `run_limit` characters the pairs share, and fewer occurrences of each bounding literal."""
        if long_run is not None and long_run.search(text) is not None:
            return False
        return all(text.count(literal) < run_limit for literal in literals)

    return False, quiet


def _long_run(shared_runs: str | None, run_limit: int) -> object:
    """A search for a run of `run_limit` characters of the class inside `shared_runs` (see `quiet`), or None."""
    return regex.compile(f"[{shared_runs}]{{{run_limit}}}") if shared_runs else None


def _risky(items, bounded: list | None = None) -> tuple[bool, str | None, int]:
    """Whether one anchored try of a pattern could take more than linear time: a repeat that holds an alternation or
    another repeat (`(a|aa)*`, `(a+)+`: exponential), or two unbounded repeats that can share the same characters
    with nothing mandatory and different between them (`\\s*\\s*`, `\\s*\\]?\\s*`, `\\s*\\n\\s*`: polynomial).
    Repeats over disjoint characters (`[a-z]*[ \\t]*`, `[^<]*<\\s*`) split a text in one way only. Such patterns can
    backtrack badly, and `regex` then only stays fast thanks to its required-text check, which the twin turns off;
    their tries also keep the per-call timeout. Anything the analysis does not know counts as risky.

    The second and third values, for a risky pattern whose only risk is such repeats in chains of two or three
    (`\\s*\\]?\\s*`, `\\s*[^<]+?\\s*`): a class (its inside) of the characters two repeats of some pair take, and maybe
    a few more (`_shared`), and the longest run of them a text may hold for the pattern's tries to run without the
    per-call timeout: a try then costs at most the run's length (to the power of the chain's length less one) times a
    linear try, `LONG_RUN` times at most. Otherwise (None, 0).

    With `bounded` (a list, see `_ambiguous`), the literals whose occurrences bound some pairs instead are noted
    there: the limit then holds for how many times each of them occurs too (the class may be None)."""
    pairs: list = []
    try:
        if _nested(items, False):
            return True, None, 0
        if _ambiguous(items, (), None)[0]:
            if _ambiguous(items, (), pairs, bounded)[0]:
                return True, None, 0
            shared = _shared(pairs) if pairs else ""
            if shared is None:
                return True, None, 0
            depths = [depth for _, _, depth in pairs] + [depth for _, depth in bounded or ()]
            return True, shared or None, LONG_RUN if max(depths) <= 2 else _CHAIN_RUN
    except (_Unknown, RecursionError):
        return True, None, 0
    return False, None, 0


# A complete short text with no run of this many characters shared by two repeats of a pattern (`shared_runs`)
# keeps each try of the pattern within this many times a linear try: its searches run without the per-call timeout.
LONG_RUN = 16
_CHAIN_RUN = 4  # the same for chains of three repeats: 4 * 4 = 16


def quiet(scan: PatternScan, text: str, memo: dict) -> bool:
    """Whether a complete short text lets a pattern risky only through pairs of repeats run without the per-call
    timeout: it has no run of `run_limit` characters two repeats of a pair take (`memo` keeps the answer per text)."""
    if scan.long_run is None:
        return False
    key = ("long_run", id(scan))
    seen = memo.get(key)
    if seen is None or seen[0] is not text:
        seen = memo[key] = (text, scan.long_run.search(text) is None)
    return seen[1]


def _shared(pairs: list) -> str | None:
    """The inside of a regex class holding every character both repeats of some pair take (the smaller set of each
    pair, a few listed characters or classes), or None when some pair has no such small set."""
    parts: set = set()
    for first, second, _ in pairs:
        small = [chars for chars in (first, second) if not chars.negated and _members(chars) is not None]
        if not small:
            return None
        parts.update(min(small, key=lambda chars: len(_members(chars))).parts)
    return "".join(sorted(parts)) or None


def _nested(items, inside_loop: bool) -> bool:
    for op, av in items:
        if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, _POSSESSIVE):
            loops = av[1] is _MAXREPEAT or av[1] > 1
            # inside a loop, any repeat of variable length (`(?:a?)*`, `(?:a?b?)*`) may split the text many ways
            if (inside_loop and (loops or av[0] != av[1])) or _nested(av[2], inside_loop or loops):
                return True
        elif op is _C.BRANCH:
            if inside_loop or any(_nested(alternative, inside_loop) for alternative in av[1]):
                return True
        elif op is _C.GROUPREF_EXISTS:  # `(?(name)yes|no)`: one of two sequences, as an alternation
            if inside_loop or any(_nested(branch, inside_loop) for branch in av[1:] if branch is not None):
                return True
        elif op is _C.SUBPATTERN:
            if _nested(av[3], inside_loop):
                return True
        elif op in (_ATOMIC,):
            if _nested(av, inside_loop):
                return True
        elif op in (_C.ASSERT, _C.ASSERT_NOT):
            if _nested(av[1], inside_loop):
                return True
    return False


# Any character (a repeat whose body is more than one character).
_ANY_RUN = Charset(frozenset([r"\s", r"\S"]), small=False)


def _ambiguous(items, pending: tuple, pairs: list | None, bounded: list | None = None) -> tuple[bool, tuple]:
    """Walk a sequence left to right with `pending`: (character set, chain length, literals passed) of the unbounded
    repeats whose run may still be going on (nothing mandatory and disjoint from them since). A new repeat that shares
    a character with one of them makes the pattern risky; with `pairs` (a list), such a pair is noted there instead,
    with the length of the chain it makes, unless that is more than three. Returns (risky, the pending sets after the
    sequence).

    With `bounded` too (a list), a run stops before a mandatory character its set lacks even when another pending
    run may take it, and a run that went on past a run of literals (`.*?` before `</arg_key>`) meets a later repeat
    only where those literals occur in the text, so the ways to split between them are at most their occurrences:
    such a pair is noted in `bounded` as (the literals, the chain length) instead of `pairs`."""
    run = ""  # the literals met in a row up to this item
    for op, av in items:
        if op is not _C.LITERAL:
            run = ""
        if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, _POSSESSIVE):
            least, most, body = av
            chars = _single(body)
            many = most is _MAXREPEAT or most > 1
            if chars is not None:
                if many:
                    shared = [entry for entry in pending if _overlap(entry[0], chars)]
                    depth = 1 + max((entry[1] for entry in shared), default=0)
                    if shared and (pairs is None or depth > 3):
                        return True, pending
                    if pairs is not None:
                        for other, _, passed in shared:
                            if bounded is not None and passed:
                                bounded.append((passed, depth))
                            else:
                                pairs.append((other, chars, depth))
                    entry = (chars, depth, "")
                    pending = (entry,) if least >= 1 and not shared else pending + (entry,)
                elif least >= 1 and most >= 1 and not any(_overlap(other, chars) for other, *_ in pending):
                    pending = ()
                # `x?` leaves the pending runs as they are (taken or not, nothing new runs on)
            elif many:
                if pending or _ambiguous(body, (), None)[0]:
                    return True, pending
                pending = ((_ANY_RUN, 3, ""),)  # no pair with it is noted
            elif most >= 1:
                risky, taken = _ambiguous(body, pending, pairs, bounded)
                if risky:
                    return True, pending
                pending = taken if least >= 1 else _union(pending, taken)
        elif op in (_C.LITERAL, _C.NOT_LITERAL, _C.ANY, _C.IN):
            chars = _charset(op, av)
            if bounded is None:
                if not any(_overlap(other, chars) for other, *_ in pending):
                    pending = ()
            else:
                pending = tuple(entry for entry in pending if _overlap(entry[0], chars))
                if op is _C.LITERAL:
                    run += chr(av)
                    # (counting a literal's occurrences counts its places only when two of them cannot overlap)
                    if not any(run[:size] == run[-size:] for size in range(1, len(run))):
                        pending = tuple(
                            (other, depth, run if len(run) > len(passed) else passed) for other, depth, passed in pending
                        )
        elif op is _C.SUBPATTERN:
            if av[1] or av[2]:  # scoped flags change what the sets mean
                raise _Unknown
            risky, pending = _ambiguous(av[3], pending, pairs, bounded)
            if risky:
                return True, pending
        elif op is _ATOMIC:
            risky, pending = _ambiguous(av, pending, pairs, bounded)
            if risky:
                return True, pending
        elif op is _C.BRANCH or op is _C.GROUPREF_EXISTS:
            # a conditional `(?(name)yes|no)` takes one of its two sequences (`no` may be empty): as an alternation
            alternatives = av[1] if op is _C.BRANCH else [branch if branch is not None else [] for branch in av[1:]]
            outs: tuple = ()
            for alternative in alternatives:
                risky, out = _ambiguous(alternative, pending, pairs, bounded)
                if risky:
                    return True, pending
                outs = _union(outs, out)
            pending = outs
        elif op in (_C.ASSERT, _C.ASSERT_NOT):
            if _ambiguous(av[1], (), pairs, bounded)[0]:
                return True, pending
            ahead = _single(av[1]) if op is _C.ASSERT_NOT and av[0] == 1 else None
            if ahead is not None:
                # `[\w-]*(?![\w-])`: a run of those characters cannot stop before its end here, so no later repeat
                # shares it
                pending = tuple(entry for entry in pending if not _subset(entry[0], ahead))
        elif op is not _C.AT:
            raise _Unknown
    return False, pending


def _union(first: tuple, second: tuple) -> tuple:
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
    """The members of one piece of a class (`_charset`): a character, a range or a category; None past the limit.
    Listed without scanning the code points (a category from unicode_tables)."""
    if part in SMALL_CATEGORIES:
        return set(category_members(part))
    if part in LARGE_CATEGORIES:
        return None
    found = _LITERAL.fullmatch(part)
    if found is None:
        raise _Unknown
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


def _members(chars: Charset) -> str | None:
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
        except _Unknown:
            listed = _scanned(source)
        _MEMBERS[source] = listed
    return _MEMBERS[source]


_SUBSETS: dict = {}


def _subset(inner: Charset, outer: Charset) -> bool:
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
            members = _members(inner)
            if members is not None:
                _SUBSETS[key] = outside.search(members) is None
            else:  # a character outside is most often found in the BMP
                _SUBSETS[key] = all(outside.search(_universe(piece)) is None for piece in ("bmp", "rest"))
    return _SUBSETS[key]


def _overlap(first: Charset, second: Charset) -> bool:
    """Whether two character sets share a character (exact when one of them is small, else assumed)."""
    if first == second:
        return True
    for one, other in ((first, second), (second, first)):
        members = _members(one)
        if members is not None:
            source = other.source()
            return source is not None and regex.search(source, members, regex.DOTALL) is not None
    return True


def _twin(pattern: str):
    if regex.match(r"\(\?[a-zA-Z]+\)", pattern):
        return None  # global flags must stay first
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return regex.compile(f"(?:{pattern})|(?!)", regex.DOTALL)
    except (regex.error, Warning, RecursionError, OverflowError):
        return None


def _run_start(back, buffer: str, low: int, at: int) -> int:
    """Start of the run of lead-class characters that ends at `at` (not before `low`)."""
    found = back.search(buffer, low, at)
    work[0] += at - (found.end() if found is not None else low) + 1
    return found.end() if found is not None else low


# A failed try this far from the end of a run of whitespace checks the run's end (`PatternScan.run_rest`).
_RUN_SKIP = 32
NOT_SPACE = regex.compile(r"\S")


def scan_pattern(pattern, scan: PatternScan, buffer: str, pos: int, start: int, eos: bool, limit: int, timed, guards=None):
    """Find the first candidate at or after `start` (>= `pos`; positions before `start` are known dead) where
    `pattern` matches or could still match. Candidates past `limit` are not examined.

    Returns (kind, match, at, dead): kind is "match" (a complete match `match` at `at`), "hold" (a match may start at
    `at` once more text comes) or None; `dead` is how far every position is now known not to start a match."""
    end = len(buffer)
    stop = min(limit, end)
    if scan.twin is not None:
        pattern = scan.twin
    # the next candidate of each source (-1: not looked for yet), recomputed after it is examined; None once a
    # source has no candidate up to `stop` (it stays so: the window only shrinks from the left)
    sources: list = []
    for trigger, lead, back, forward in scan.leads:
        sources.append(["lead", trigger, lead, (back, forward), start, -1])
    if scan.plain is not None:
        sources.append(["plain", scan.plain, None, None, start, -1])
    if scan.after is not None:
        sources.append(["after", scan.after, None, None, start, -1])
    for trigger, back in scan.after_runs:
        sources.append(["after_run", trigger, back, [], None, -1])
    for literal, size, least, most, back in scan.near:
        sources.append(["near", literal, (size, least, most, back), [], max(0, start - most), -1, None])
    fixed: list[int] = []
    if scan.begin and start == 0:
        fixed.append(0)
    if scan.dollar and end and buffer[end - 1] == "\n" and end - 1 >= start:
        fixed.append(end - 1)
    if eos and scan.end:
        fixed.append(end)
    for trigger, lead, back, _ in scan.leads:  # a run of the lead class reaching the end: a partial (or `\Z`) match
        if end > start and lead.match(buffer, end - 1):
            at = _run_start(back, buffer, max(pos, start), end)
            if at >= start:
                fixed.append(at)
    tried = -1
    while True:
        best = None
        for source in sources:
            cand = source[5]
            if cand is not None and cand <= tried:
                cand = _next(source, buffer, pos, max(start, tried + 1), stop, end)
                source[5] = cand
            if cand is not None and (best is None or cand < best):
                best = cand
        for cand in fixed:
            if cand > tried and cand <= stop and (best is None or cand < best):
                best = cand
        if best is None or best > stop:
            return None, None, None, max(start, stop + 1 if stop < end else end)
        tried = best
        if best == end and not eos:
            # an empty partial match at the very end holds nothing
            continue
        work[0] += 1
        kind, match = _try(pattern, scan, buffer, best, eos, timed, guards)
        if kind is None:
            if (
                scan.run_rest is not None
                and end - best > _RUN_SKIP
                and NOT_SPACE.search(buffer, best, best + _RUN_SKIP) is None
            ):
                # inside a long run of whitespace: a match from anywhere in it needs `run_rest` at its end
                found = NOT_SPACE.search(buffer, best + _RUN_SKIP)
                run_end = found.start() if found is not None else end
                work[0] += run_end - best
                if timed(scan.run_rest.match, buffer, run_end, partial=not eos) is None:
                    tried = run_end - 1
            continue
        return kind, match, best, best


def _decide(pattern, text: str, at: int, eos: bool, timed, whole: bool, end: int | None = None, free=None):
    """Try `pattern` at `at`. Returns (kind, match) as `scan_pattern` does, or ("more", None) when `text` is a window
    that ends before the real text (not `whole`; at `end` when given) and the answer may depend on what follows.
    `free` is the pattern without its lookbehinds (scan.PatternScan.free)."""
    if end is None:
        end = len(text)
    if eos and whole:
        match = timed(pattern.match, text, at)
        return ("match", match) if match is not None else (None, None)
    # The preferred way through the pattern from here: a complete match, or a partial one (it reaches the end of the
    # text first: more text decides), or none.
    match = timed(pattern.match, text, at, end, partial=True)
    if match is None:
        return None, None
    if match.partial and free is not None and timed(free.fullmatch, text, at, end, partial=True) is None:
        # `regex` reports a failing lookbehind that holds a repeat (`(?<=/>\s*)`) as a partial match running to the
        # end of the text; without lookbehinds no way through the pattern even reaches the end: decide as complete
        match = timed(pattern.match, text, at, end)
        if match is None:
            return None, None
    if match.partial or match.end() == end:
        return ("hold", None) if whole else ("more", None)  # at the edge: a repeat or an alternative may still grow
    work[0] += match.end() - at
    if eos:
        return "match", match
    if timed(pattern.fullmatch, text, at, end, partial=True) is None:
        return "match", match  # no way through the pattern reaches the end
    if free is not None and timed(free.fullmatch, text, at, end, partial=True) is None:
        # `regex` reports a lookbehind that holds a repeat as a partial match to the end of the text (see above);
        # without lookbehinds (which only take ways away) none reaches the end: final, no probing (each probe
        # copies the text from the match on)
        return "match", match
    return ("probe", match) if whole else ("more", None)


class Shifted:
    """A match found in a slice of the text, with positions in the whole text."""

    def __init__(self, match, offset: int):
        self._match, self._offset = match, offset
        self.partial = match.partial

    def start(self, *group):
        return self._match.start(*group) + self._offset

    def end(self, *group):
        return self._match.end(*group) + self._offset

    def span(self, *group):
        return self.start(*group), self.end(*group)

    def groupdict(self, *default):
        return self._match.groupdict(*default)

    def group(self, *groups):
        return self._match.group(*groups)


def _try(pattern, scan, buffer: str, at: int, eos: bool, timed, guards):
    if guards is None:
        return _decide(pattern, buffer, at, eos, timed, True, None, scan.free)
    if not guards:  # no literal of an unbounded lookbehind anywhere yet: those lookbehinds cannot succeed
        return _decide(scan.unguarded, buffer, at, eos, timed, True, None, scan.free)
    # Try on a slice that starts at the first such literal before `at` whose lookbehind text may still reach `at` (or
    # a little context before `at`), so the lookbehinds do not scan back through the whole text; widen the window
    # while the answer depends on its end.
    if _decide(scan.relaxed, buffer, at, eos, timed, True, None, scan.free)[0] is None:
        return None, None  # not even without those lookbehinds
    if scan.guard_block is not None:
        live, sure = guards.live_block(scan, buffer, at, timed)
        if live is not None and sure >= at:
            # the lookbehind surely holds from `at` to `sure`: there the pattern is the pattern without it
            whole = sure >= len(buffer)
            kind, match = _decide(scan.relaxed, buffer, at, eos, timed, whole, None if whole else sure, scan.free)
            if kind != "more":
                return kind, match
    else:
        live = guards.live(scan, buffer, at, eos, timed)
    if live is None:
        # No lookbehind text reaches `at`: those lookbehinds fail here and up to the next such literal (and, at the
        # end of what has come, a try that runs into more text is partial either way).
        following = guards.following(at)
        if following is None:
            return _decide(scan.unguarded, buffer, at, eos, timed, True, None, scan.free)
        kind, match = _decide(scan.unguarded, buffer, at, eos, timed, False, following, scan.free)
        if kind != "more":
            return kind, match
    start = max(0, at - 256) if live is None else min(max(0, at - 256), live)
    end = len(buffer)
    width = 1024
    while True:
        stop = min(end, at + width)
        whole = stop == end or scan.end or scan.dollar
        stop = end if whole else stop
        work[0] += stop - start
        kind, match = _decide(pattern, buffer[start:stop], at - start, eos, timed, whole, None, scan.free)
        if kind != "more":
            return kind, (Shifted(match, start) if match is not None else None)
        width *= 4


def track_guards(scan, buffer: str, positions: list, state: list, base: int) -> "Guards":
    """Record (in `positions`, stream positions) where the literals of the unbounded lookbehinds occur, scanning
    only the text added since the last call (`state` holds how far that was, and what `Guards` learnt)."""
    start = max(0, state[0] - base - 64)
    for found in scan.guards.finditer(buffer, start):
        where = found.start() + base
        if not positions or where > positions[-1]:
            positions.append(where)
    work[0] += len(buffer) - start
    state[0] = len(buffer) + base
    if len(state) < 4:
        state.extend(({}, [0]))
    return Guards(positions, state[2], state[3], base)


class Guards:
    """The occurrences of the literals that begin a pattern's unbounded lookbehinds, and how far the text of such a
    lookbehind that begins at each may reach: a lookbehind tried at `at` can only hold if its text, from one of
    these occurrences, is a prefix of what it matches up to `at`. Far from every live occurrence (the usual case in
    a long argument: `<invoke name="f">` is long closed), tries need no more than a little context."""

    __slots__ = ("positions", "reach", "front", "base")

    def __init__(self, positions: list, reach: dict, front: list, base: int):
        # stream positions; stream position -> (how far, still open at the end of the text checked, that end);
        # index of the first occurrence not known dead (tries come at increasing positions)
        self.positions, self.reach, self.front, self.base = positions, reach, front, base

    def __bool__(self) -> bool:
        return bool(self.positions)

    def following(self, at: int) -> int | None:
        """The first occurrence after `at` (buffer positions), or None."""
        index = bisect.bisect_right(self.positions, at + self.base)
        return self.positions[index] - self.base if index < len(self.positions) else None

    def live_block(self, scan, buffer: str, at: int, timed) -> tuple[int | None, int]:
        """For a block lookbehind (scan.guard_block): the first occurrence at or before `at` whose block may still be
        open at `at`, and up to where the lookbehind surely holds (before `at` when that is not known), or None. The
        block's repeat is followed forward once, as far as tries need it, with the call's budget grown by that text
        (checked again a margin back, for lookaheads near where the last pass stopped)."""
        size, repeat = scan.guard_block
        positions, base, end = self.positions, self.base, len(buffer)
        index = self.front[0]
        while index < len(positions):
            where = positions[index] - base
            if where > at:
                return None, -1
            known = self.reach.get(positions[index])
            if known is None:
                known = self.reach[positions[index]] = [where + size + base, False]
            reached = known[0] - base
            if not known[1] and reached < min(at + 2 * _MARGIN, end):
                begin = max(where + size, reached - _MARGIN)
                target = min(end, max(at + 2 * _MARGIN + 4096, where + 2 * (at - where)))
                grow_regex_budget(target - begin)
                work[0] += target - begin
                # by windows: `regex` keeps state for every repetition and runs out of memory over megabytes
                step = begin
                while True:
                    upto = min(target, step + 65536)
                    stop = timed(repeat.match, buffer, step, upto).end()
                    if upto >= target or stop < upto - _MARGIN:
                        break
                    step = max(step + 1, stop - _MARGIN)  # a margin again: lookaheads near a window's end
                known[0], known[1] = stop + base, stop < target
                reached = stop
            if known[1] and reached < at:
                index += 1
                self.front[0] = index  # its block ended before `at`: dead for every later try
                continue
            if at < where + size:
                return where, -1
            return where, reached if known[1] or reached >= end else reached - _MARGIN
        return None, -1

    def live(self, scan, buffer: str, at: int, eos: bool, timed) -> int | None:
        """The first occurrence at or before `at` (buffer position) whose lookbehind text may reach `at`, or None."""
        positions, base, end = self.positions, self.base, len(buffer)
        index = self.front[0]
        while index < len(positions):
            where = positions[index] - base
            if where > at:
                return None
            known = self.reach.get(positions[index])
            if known is not None and known[1] and known[0] == known[2] and at > known[2] - base and known[2] - base - where < _REACH_LIMIT:
                known = None  # it reached the end of the text when last checked, which has grown since: check again
            if known is None:
                reach, still_open = _reach(scan.guard_bodies, buffer, max(where, 0), end, timed)
                known = (reach + base, still_open, end + base)
                self.reach[positions[index]] = known
            if known[1] or known[0] - base >= at:
                return max(where, 0)
            index += 1
            self.front[0] = index  # its lookbehind text ends before `at`: dead for every later try
        return None


# How far ahead of a try a block lookbehind's repeat is followed (and checked again), for lookaheads in it.
_MARGIN = 256
# How far `_reach` follows a lookbehind's text: past this it counts as reaching every later try (which then sees the
# text from where it begins: exact, but each such try costs the distance, as it would in `regex` itself).
_REACH_LIMIT = 4096


def _reach(bodies: tuple, buffer: str, start: int, end: int, timed) -> tuple[int, bool]:
    """How far the text from `start` may still be the beginning of a match of one of `bodies`, and whether that is
    open (the end of the text, or past `_REACH_LIMIT`). Their prefixes are closed under shortening: doubling a
    window then halving it finds the end."""

    def viable(stop: int) -> bool:
        work[0] += stop - start
        return any(timed(body.fullmatch, buffer, start, stop, partial=True) is not None for body in bodies)

    low, step = start, 64
    while True:
        stop = min(start + step, end)
        if not viable(stop):
            high = stop
            break
        if stop >= end or step >= _REACH_LIMIT:
            return stop, True
        low, step = stop, step * 4
    while high - low > 1:
        middle = (low + high) // 2
        if viable(middle):
            low = middle
        else:
            high = middle
    return low, False


def _next(source: list, buffer: str, pos: int, low: int, stop: int, end: int) -> int | None:
    """The next candidate of one source at or after `low` (None when none up to `stop`)."""
    kind, trigger, lead, back = source[0], source[1], source[2], source[3]
    if kind == "near":
        size, least, most, run_back = lead
        pending = back
        while True:
            while pending and pending[0] < low:
                pending.pop(0)
            if pending:
                if run_back is None:
                    return pending[0]
                walked = source[6]  # (position, start of the lead run that ends there) of the last walk back
                if walked is not None and walked[0] <= pending[0]:
                    # only the text since that position: a run that fills it goes on from that run's start
                    found = run_back.search(buffer, max(pos, walked[0]), pending[0])
                    work[0] += pending[0] - (found.end() if found is not None else walked[0]) + 1
                    cand = found.end() if found is not None else max(walked[1], pos)
                else:
                    cand = _run_start(run_back, buffer, pos, pending[0])  # a run of the lead class before it
                source[6] = (pending[0], cand)
                if cand >= low:
                    return cand
                pending.pop(0)  # its run starts at a position already examined
                continue
            anchor_from = max(source[4], low - most)
            horizon = min(end, stop - least + size)
            if anchor_from >= horizon:
                return None
            found = trigger.search(buffer, anchor_from, horizon)
            work[0] += (found.start() if found is not None else horizon) - anchor_from
            if found is None:
                source[4] = max(anchor_from, horizon - size + 1)
                return None
            at = found.start()
            source[4] = at + 1
            pending.extend(at + width for width in range(least, most + 1) if at + width >= low)
    if kind == "plain":
        if low >= min(stop + 1, end):
            return None
        found = trigger.search(buffer, low, min(stop + 1, end), partial=True)
        if found is not None and found.start() == found.end():
            found = None  # `regex` reports an empty partial match at the end of the window
        work[0] += (found.start() if found is not None else min(stop + 1, end)) - low
        return found.start() if found is not None else None
    if kind == "after_run":
        # right after a character of the set, or inside (or at the end of) the run of the class that follows it:
        # `trigger` finds a character of the set and that run at once
        span = source[3]  # [first, last]: the candidates after the last character of the set found
        while True:
            if span and span[1] >= low:
                at = max(span[0], low)
                return at if at <= stop else None
            begin = source[4]
            if begin is None:  # a run of the class that ends at `low` may follow a character of the set
                begin = max(_run_start(lead, buffer, 0, low) - 1, 0) if low > 0 else 0
            horizon = min(stop, end)
            if begin >= horizon:
                source[4] = begin
                return None
            found = trigger.search(buffer, begin, horizon)
            work[0] += (found.end() if found is not None else horizon) - begin
            if found is None:
                source[4] = horizon
                return None
            span[:] = [found.start() + 1, found.end()]
            source[4] = found.start() + 1
    if kind == "after":
        begin = max(low - 1, 0)
        if begin >= min(stop, end):
            return None
        found = trigger.search(buffer, begin, min(stop, end))
        work[0] += (found.start() if found is not None else min(stop, end)) - begin
        return found.end() if found is not None else None
    # lead: an anchor character, walked back over the lead run before it
    if trigger is None:
        return None
    back, forward = source[3]
    anchor_from = source[4] if source[4] > low else low
    while True:
        horizon = min(stop + 1, end)  # anchors before this position
        if 0 < horizon < end and lead.match(buffer, horizon - 1):
            # `stop` is inside a run of the lead class: an anchor right after the run starts a candidate <= stop
            found = forward.search(buffer, horizon)
            run_end = found.start() if found is not None else end
            work[0] += run_end - horizon
            horizon = min(run_end + 1, end)
        if anchor_from >= horizon:
            return None
        found = trigger.search(buffer, anchor_from, horizon, partial=True)
        if found is not None and found.start() == found.end():
            found = None
        work[0] += (found.start() if found is not None else horizon) - anchor_from
        if found is None:
            source[4] = horizon
            return None
        at = found.start()
        cand = _run_start(back, buffer, pos, at)
        source[4] = at + 1
        if cand >= low:
            return cand
        anchor_from = at + 1


def first_candidate(scan: PatternScan, buffer: str, pos: int) -> int:
    """A position at or after `pos` before which no match of the pattern can start, now or once more text comes (the
    first candidate, or a little before it): the start of the lead run before the first trigger (or the first
    beginning of one at the end of the text), or of a lead run that ends the text; the text's length when none."""
    if scan.prefilter is None or (scan.begin and pos == 0):
        return pos
    end = len(buffer)
    first = end
    found = scan.prefilter.search(buffer, max(0, pos - scan.back_reach), partial=True)  # a trigger cut by the end counts
    if found is not None:
        first = found.start()
    if scan.lead_back is not None and first > pos:
        # back over the lead run before the first trigger (or, without one, over the run that ends the text)
        found = scan.lead_back.search(buffer, pos, first)
        first = found.end() if found is not None else pos
    return max(first, pos)


__all__ = ["PatternScan", "analyze", "scan_pattern", "work", "regex_time_left", "first_candidate"]


@dataclass(frozen=True)
class FastPath:
    """What a chunk must avoid for a watch (a parser state) to skip the scan: none of its trigger characters, and
    not ending in a run of a lead class (held back: a delimiter may still start there).

    A `gated` fast path (every delimiter of the watch has a `gate_of`) is exact from any position: when the text from
    the first held character (`back` characters before it, for lookbehind triggers) holds no trigger, no delimiter
    starts there except in the run of whitespace that ends the text. So it also takes chunks that follow held text."""

    trigger: object  # regex of every character that can make a candidate, or None
    any_lead: object  # regex matching one character of any lead class, or None
    leads: tuple  # (reverse "not in the class" regex, ...) one per lead class
    after: object  # regex of the characters an `after` start follows, or None
    begin: bool
    reach: int  # how far before the chunk a trigger may still make a candidate in it
    # The ASCII characters that can begin a trigger (an ASCII chunk without any of them cannot make a candidate),
    # and the ASCII characters of the lead classes.
    chars: frozenset = frozenset()
    lead_chars: frozenset = frozenset()
    single: object = None  # the one entry of `leads`, when there is one
    lead_string: str = ""  # the ASCII characters of that one lead class
    gated: bool = False
    back: int = 0  # gated: how far before the first held character a trigger may begin (for lookbehind triggers)
    # gated: every trigger begins with one of `chars` (so a chunk of any text without them holds none)
    exact: bool = False
    # gated, `split`: every trigger is a literal, so a trigger only partly there at the end of a text is a proper
    # beginning of one; then a plain search of `trigger` finds the whole ones (`regex` prefers a whole match anywhere
    # to a partial one), and `cuts` (None when no literal has a proper beginning) those beginnings at the end.
    # `cut_chars`: the characters they end with; `cut_reach`: the longest one's length (see parser.ResponseParser.feed).
    split: bool = False
    cuts: object = None
    cut_chars: frozenset = frozenset()
    cut_reach: int = 0


_ASCII = tuple(map(chr, range(128)))


def build_fast_path(literals: list[str], scans: list) -> FastPath | None:
    """The fast path of a watch whose regex delimiters all have a `PatternScan` (else None): gated when every one of
    them has a gate, else from the scans' triggers and lead classes. `literals` are the watch's literal delimiters."""
    if any(scan is None for scan in scans):
        return None
    gated = _gated_fast_path(literals, scans) if all(scan.gate is not None for scan in scans) else None
    if gated is not None:
        return gated
    triggers = [regex.escape(char) for char in sorted({literal[0] for literal in literals})]
    triggers += [scan.triggers for scan in scans if scan.triggers]
    lead_sources = sorted({source for scan in scans for source in scan.lead_sources})
    after = [scan.after.pattern for scan in scans if scan.after is not None]
    # a start may follow a character of the set and a run of the class (which may reach the chunk)
    after += [f"{chars}|(?<=(?:{chars})(?:{run})*)(?:{run})" for scan in scans for chars, run in scan.after_run_sources]
    trigger = regex.compile("|".join(triggers)) if triggers else None
    any_lead = regex.compile("|".join(lead_sources)) if lead_sources else None
    leads = tuple(regex.compile(f"(?r)(?!{source}).", regex.DOTALL) for source in lead_sources)
    return FastPath(
        trigger=trigger,
        any_lead=any_lead,
        leads=leads,
        single=leads[0] if len(leads) == 1 else None,
        lead_string="".join(char for char in _ASCII if len(leads) == 1 and any_lead.match(char) is not None),
        after=regex.compile("|".join(after)) if after else None,
        begin=any(scan.begin for scan in scans),
        reach=max((most + size for scan in scans for _, size, _, most, _ in scan.near), default=0),
        chars=frozenset(char for char in _ASCII if trigger is not None and _begins(trigger.match(char, partial=True))),
        lead_chars=frozenset(char for char in _ASCII if any_lead is not None and any_lead.match(char) is not None),
    )


def _gated_fast_path(literals: list[str], scans: list) -> FastPath | None:
    try:
        return _gated(literals, scans)
    except (regex.error, RecursionError, OverflowError):
        return None  # the triggers of several patterns do not compile together (duplicate names...): full scans


def _gated(literals: list[str], scans: list) -> FastPath:
    triggers = {(regex.escape(literal), regex.escape(literal[0]), 0) for literal in literals}
    triggers.update(trigger for scan in scans for trigger in scan.gate[0])
    ordered = sorted(triggers, key=lambda trigger: (-len(trigger[0]), trigger))
    trigger = regex.compile("|".join(source for source, _, _ in ordered), regex.DOTALL) if ordered else None
    firsts = regex.compile("|".join(first for _, first, _ in ordered), regex.DOTALL) if ordered else None
    blank = any(scan.gate[2] for scan in scans)
    # the whitespace a start may be followed by, before its literal: held while it ends the text
    any_lead = regex.compile(r"\s") if blank else None
    leads = (regex.compile(r"(?r)(?!\s).", regex.DOTALL),) if blank else ()
    chars = frozenset(char for char in _ASCII if firsts is not None and firsts.match(char) is not None)
    literals = [_literal_of(source) for source, _, _ in ordered]
    # (a trigger led by a lookbehind is not split: `regex` reports a partial match where its lookbehind reaches the
    # start of the text, which the search for literal beginnings would not find; nor are long literals, whose
    # beginnings would take memory growing with the square of their length)
    split = bool(literals) and all(literal is not None and len(literal) <= _SPLIT_LONGEST for literal in literals)
    beginnings = sorted({literal[:size] for literal in literals for size in range(1, len(literal))}) if split else []
    return FastPath(
        trigger=trigger,
        any_lead=any_lead,
        leads=leads,
        single=leads[0] if leads else None,
        lead_string="".join(char for char in _ASCII if blank and any_lead.match(char) is not None),
        after=None,
        begin=any(scan.gate[1] for scan in scans),
        reach=0,
        chars=chars,
        lead_chars=frozenset(char for char in _ASCII if blank and any_lead.match(char) is not None),
        gated=True,
        back=max((back for _, _, back in ordered), default=0),
        exact=all(_literal_of(first) in chars for _, first, _ in ordered),
        split=split,
        cuts=(
            regex.compile("(?:" + "|".join(map(regex.escape, sorted(beginnings, key=len, reverse=True))) + r")\Z", regex.DOTALL)
            if split and beginnings
            else None
        ),
        cut_chars=frozenset(beginning[-1] for beginning in beginnings),
        cut_reach=max(map(len, beginnings), default=0),
    )


# The longest literal trigger a gated fast path searches for by its beginnings (see FastPath.split).
_SPLIT_LONGEST = 64


def _literal_of(source: str) -> str | None:
    """The text a regex source spells when it is only literal characters (`regex.escape` output), else None."""
    try:
        items = list(sre_parse.parse(source))
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    if not items or any(op is not _C.LITERAL for op, _ in items):
        return None
    return "".join(chr(value) for _, value in items)


def _begins(found) -> bool:
    return found is not None and found.end() > found.start()

"""`PatternScan`: what compile-time analysis (`analyze`) finds about a delimiter pattern, so the scanner never lets
`regex` pick start positions: the trigger characters a match starts at (maybe after a run of a lead class, or right
after a lookbehind's character), the lookbehind guards, whether one try is safe from backtracking, and the twin
pattern that tells a partial match. See `scanner` for how it is used.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import cast

import regex

from .backtracking import is_risky, long_run_search, run_rest_search, twin_pattern
from .regex_syntax import (
    ATOMIC,
    EMPTY_CHARSET,
    MAXREPEAT,
    NAMED_GROUP,
    POSSESSIVE,
    REGEX_ONLY_SYNTAX,
    Charset,
    Unanalyzable,
    gate_of,
    group_end,
    last_charset,
    match_starts,
    sre_parse,
)
from .regex_syntax import sre_constants as _C


@dataclass(frozen=True)
class PatternScan:
    """Where a regex delimiter may start, compiled for scanning (see the module docstring)."""

    leads: tuple  # ((trigger regex or None, lead class regex, reverse run regex), ...): `first` filters with a lead
    plain: regex.Pattern | None  # trigger regex of `first` filters without a lead, or None
    after: regex.Pattern | None  # regex of the characters an `after` start follows, or None
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
    twin: regex.Pattern | None = None
    safe: bool = False  # no way to backtrack badly (`is_risky`): one anchored try cannot blow up (tries skip the per-call timeout)
    # Not safe only because of pairs of repeats that share characters: a class inside of those (see `is_risky`), else None.
    shared_runs: str | None = None
    run_limit: int = 0  # how long a run of them a text may hold for the tries to run without the timeout (`is_risky`)
    long_run: regex.Pattern | None = None  # a search for a run of `run_limit` of those characters (see `quiet`)
    # The characters a match can end with, when nothing else decides a match (no lookaround, `$`, `\Z`, `\b`):
    # text without them cannot complete a match that is only partly there. None: unknown.
    completion: object = None
    # Unbounded lookbehinds that begin with literal text (`(?<=<tool_calls>(?:(?!</tool_calls>)[\s\S])*)`):
    # `regex` scans them back to the start of the text (greedy, right to left) on every try. `guards` finds those
    # literals; `unguarded` is the pattern with such lookbehinds replaced by a failure, exact while none of the
    # literals occurs in the text; otherwise tries run on a slice of the text that starts at the last occurrence.
    guards: regex.Pattern | None = None
    unguarded: regex.Pattern | None = None
    relaxed: regex.Pattern | None = None  # such lookbehinds removed (always true): matches at least wherever the pattern does
    guard_bodies: tuple = ()
    guard_block: object = None  # (literal length, repeat regex) when the only such lookbehind is a block (_block_form)
    free: regex.Pattern | None = None  # the pattern with every lookbehind removed (matches wherever it does), None without any  # those lookbehinds' own patterns (what they must match, ending where they are tried)
    # ((regex of one of the characters and the run of the class after it, a backwards regex of a character not in the
    # class), ...): starts right after one of those
    # characters or anywhere in the run of the class that follows it (a lookbehind such as `(?<=<tool_sep>\\s*)`)
    after_runs: tuple = ()
    after_run_sources: tuple = ()  # ((characters source, class source), ...) for the chunk fast path
    # For one plain search over a short text: `triggers` compiled, how far before the position a search for them
    # must begin (a near literal's start, an `after` character just before it), and a reverse search over the lead classes together (the first candidate is at or after
    # the start of the lead run before the first trigger).
    prefilter: regex.Pattern | None = None
    back_reach: int = 0
    lead_back: regex.Pattern | None = None
    candidate_leads: tuple = ()  # the sources of the lead classes `lead_back` walks back over
    gate: tuple | None = None  # gate_of(pattern): the coarser picture of starts the chunk fast path may use
    # A match that starts inside a run of whitespace goes on after the run's end (see `run_rest_search`): this matches
    # there whenever the pattern can match from inside the run. None: unknown.
    run_rest: regex.Pattern | None = None


def analyze(pattern: str) -> PatternScan | None:
    """Derive a `PatternScan` from a pattern, or None when its starts cannot be bounded (scan with search)."""
    if REGEX_ONLY_SYNTAX.search(pattern):
        return None
    original = pattern
    # Python's parser refuses a group name used twice (the `regex` module allows it): names do not matter here
    pattern = NAMED_GROUP.sub(lambda m: m.group(1) + "(", pattern)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            parsed = sre_parse.parse(pattern, re.DOTALL)
        if parsed.state.flags & (re.IGNORECASE | re.MULTILINE):
            return None
        filters, empty = match_starts(parsed)
    except (Unanalyzable, re.error, RecursionError, OverflowError, Warning, ValueError, TypeError, KeyError, IndexError):
        return None
    if empty:
        return None
    bound = _candidate_bound(filters)  # (strict)
    try:
        loose, loose_empty = match_starts(parsed, True)
        if not loose_empty:
            # the loose filters, when all their triggers are two characters or more (few places); a lookbehind
            # passed over may leave a class of one character (`(?<=\))[ \t]*(?P<name>[A-Za-z_]...`), where the
            # strict filters are more selective
            loose_bound = _candidate_bound(loose)
            if loose_bound["prefilter"] is not None and min_width(loose_bound["prefilter"].pattern) >= 2:
                bound = loose_bound
    except (Unanalyzable, RecursionError):
        pass
    risky, shared_runs, run_limit = is_risky(parsed)
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
        twin=None if risky and shared_runs is None else twin_pattern(original),
        safe=not risky,
        shared_runs=shared_runs,
        run_limit=run_limit,
        long_run=long_run_search(shared_runs, run_limit),
        completion=_completion(parsed),
        **guards_of,
        **bound,
        gate=gate_of(original),
        run_rest=None if guards_of else run_rest_search(original),
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
    """The filters of `match_starts` by kind: trigger pieces by lead class source, plain trigger pieces, the characters
    an `after` start follows, the `near` literals (literal, least, most, lead source or None), the `after_run`
    sources, and whether a start may be at the beginning, at the end, or before a final newline (`$`)."""
    by_lead: dict[str, list] = {}
    plain: list = []
    after = EMPTY_CHARSET
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
        triggers.append(cast(str, after.source()))  # not None: checked just above
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

_ANY_LOOKBEHIND = regex.compile(r"(?<!\\)(?:\\\\)*\(\?<[=!]")


def _without_lookbehinds(pattern: str):
    """The pattern with its lookbehinds removed (each becomes an empty group), or None when it has none."""
    pieces, last = [], 0
    for found in _ANY_LOOKBEHIND.finditer(pattern):
        start = found.end() - 4
        if start < last:
            continue  # inside a lookbehind already removed
        stop = group_end(pattern, start)
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
    literals: list[str]
    pieces: list[tuple[str, int, int]]
    bodies: list[str] | tuple[regex.Pattern, ...]  # sources, then compiled
    literals, pieces, bodies, last = [], [], [], 0
    for found in _LOOKBEHIND.finditer(pattern):
        start = found.end() - 4
        stop = group_end(pattern, start)
        if stop is None:
            return {}
        inner = NAMED_GROUP.sub(lambda m: m.group(1) + "(", pattern[start + 4:stop - 1])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                sub = sre_parse.parse(inner, re.DOTALL)
            low, high = sub.getwidth()
            if high <= 256 or not _WIDE.search(inner):
                continue  # bounded, or a run of a few kinds of characters (`\}\s*`): cheap to scan back
            starts, empty = match_starts(sub)
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
            unguarded, relaxed = (twin_pattern(source) or regex.compile(source, regex.DOTALL) for source in (unguarded, relaxed))
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
            repeat = list(sre_parse.parse(NAMED_GROUP.sub(lambda m: m.group(1) + "(", rest), re.DOTALL))
            if not literal or any(op is not _C.LITERAL for op, _ in literal) or len(repeat) != 1:
                return None
            op, av = repeat[0]
            if op not in (_C.MAX_REPEAT, _C.MIN_REPEAT, POSSESSIVE) or av[0] != 0 or av[1] is not MAXREPEAT:
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
        chars, empty = last_charset(parsed)
    except Unanalyzable:
        return None
    source = chars.source()
    return None if empty or not source else regex.compile(source)


def _looks_ahead(items) -> bool:
    """Whether a sequence holds an assertion that can look past where it is tested (a lookahead, an end anchor, a
    word boundary), at any depth; unknown constructs count as looking ahead."""
    for op, av in items:
        if op in (_C.LITERAL, _C.NOT_LITERAL, _C.ANY, _C.IN):
            continue
        if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, POSSESSIVE):
            if _looks_ahead(av[2]):
                return True
        elif op is _C.SUBPATTERN:
            if _looks_ahead(av[3]):
                return True
        elif op is ATOMIC:
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
            raise Unanalyzable
    return False

"""Backtracking risk: whether one anchored try of a pattern may take more than linear time (`is_risky`, `risk`).

A repeat holding an alternation or another repeat (`(a|aa)*`, `(a+)+`) is exponential; two unbounded repeats that
can share characters with nothing mandatory between them (`\\s*\\s*`) are polynomial. Patterns judged risky keep
the per-call regex timeout; for pairs of repeats, a text without a long run of the characters they share
(`shared_class`, `LONG_RUN`) bounds a try, so short texts may still run untimed.
"""

from __future__ import annotations

import re
import warnings
from typing import cast

import regex

from .regex_syntax import (
    ANY_RUN,
    ATOMIC,
    MAXREPEAT,
    POSSESSIVE,
    REGEX_ONLY_SYNTAX,
    SPACE_CHARSET,
    Unanalyzable,
    blank_only,
    charset_members,
    charset_of,
    group_end,
    match_starts,
    overlaps,
    parse_pattern,
    single_charset,
    sre_parse,
    subset,
    top_alternatives,
    union,
)
from .regex_syntax import sre_constants as _C

_QUANTIFIER = regex.compile(r"(?:[*+?]|\{\d+(?:,\d*)?\}|\{,\d+\})[?+]?")
_BACKREF = regex.compile(r"\\[1-9gk]|\(\?P=|\(\?\(")


def _atoms(source: str) -> list[str] | None:
    """A sequence (no top-level `|`) split into its top-level atoms, each with its quantifier, or None."""
    atoms, index = [], 0
    stop: int | None
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
            stop = group_end(source, index)
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
        parsed = [parse_pattern(atom) for atom in atoms]
        head = 0  # atoms of the head: the longest blank prefix, without its trailing zero-width atoms
        for index, atom in enumerate(parsed):
            if not blank_only(atom):
                break
            if atom.getwidth()[1] > 0:
                head = index + 1
        rest = "".join(atoms[head:])
        if not rest:
            starts, _ = match_starts(parse_pattern(alternative))
            if starts and all(kind[0] == "begin" for kind in starts):
                continue  # only at the start of the text, never inside a run
            return None
        starts, empty = match_starts(parse_pattern(rest))
        if empty or not starts:
            return None
        for kind in starts:
            if kind[0] == "first":
                if overlaps(kind[1], SPACE_CHARSET) or (kind[2] is not None and overlaps(kind[2], SPACE_CHARSET)):
                    return None
            elif kind[0] not in ("end", "begin"):
                return None
        rests.append(rest)
    return rests


def run_rest_search(pattern: str):
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
    except (Unanalyzable, re.error, regex.error, RecursionError, OverflowError, Warning, ValueError, TypeError, KeyError, IndexError):
        return None


def risk(pattern: str) -> tuple | None:
    """Whether one anchored try of a pattern read on its own (a tag_pattern, whose starts need not be bounded) may
    backtrack badly: (safe, None), or (False, a test that a complete short text keeps its tries within `LONG_RUN`
    linear tries, or None), from `is_risky` with the pairs bounded by literals (`ambiguous_repeats`); None when the pattern
    cannot be read. Group names are kept when Python's parser takes them, as a conditional (`(?(nl)\\n)`) refers to
    one."""
    if REGEX_ONLY_SYNTAX.search(pattern):
        return None
    try:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                parsed = sre_parse.parse(pattern, re.DOTALL)
        except re.error:  # a group name used twice, which the `regex` module allows
            parsed = parse_pattern(pattern)
    except (re.error, RecursionError, OverflowError, Warning, ValueError, TypeError, KeyError, IndexError):
        return None
    if parsed.state.flags & (re.IGNORECASE | re.MULTILINE):
        return None
    bounded: list = []
    risky, shared_runs, run_limit = is_risky(parsed, bounded)
    if not risky:
        return True, None
    if not run_limit:
        return False, None
    long_run = long_run_search(shared_runs, run_limit)
    literals = tuple(sorted({literal for literal, _ in bounded}))

    def quiet(text: str) -> bool:
        """No run of `run_limit` characters the pairs share, and fewer occurrences of each bounding literal."""
        if long_run is not None and long_run.search(text) is not None:
            return False
        return all(text.count(literal) < run_limit for literal in literals)

    return False, quiet


def long_run_search(shared_runs: str | None, run_limit: int) -> regex.Pattern | None:
    """A search for a run of `run_limit` characters of the class inside `shared_runs` (see `quiet`), or None."""
    return regex.compile(f"[{shared_runs}]{{{run_limit}}}") if shared_runs else None


def is_risky(items, bounded: list | None = None) -> tuple[bool, str | None, int]:
    """Whether one anchored try of a pattern could take more than linear time: a repeat that holds an alternation or
    another repeat (`(a|aa)*`, `(a+)+`: exponential), or two unbounded repeats that can share the same characters
    with nothing mandatory and different between them (`\\s*\\s*`, `\\s*\\]?\\s*`, `\\s*\\n\\s*`: polynomial).
    Repeats over disjoint characters (`[a-z]*[ \\t]*`, `[^<]*<\\s*`) split a text in one way only. Such patterns can
    backtrack badly, and `regex` then only stays fast thanks to its required-text check, which the twin turns off;
    their tries also keep the per-call timeout. Anything the analysis does not know counts as risky.

    The second and third values, for a risky pattern whose only risk is such repeats in chains of two or three
    (`\\s*\\]?\\s*`, `\\s*[^<]+?\\s*`): a class (its inside) of the characters two repeats of some pair take, and maybe
    a few more (`shared_class`), and the longest run of them a text may hold for the pattern's tries to run without the
    per-call timeout: a try then costs at most the run's length (to the power of the chain's length less one) times a
    linear try, `LONG_RUN` times at most. Otherwise (None, 0).

    With `bounded` (a list, see `ambiguous_repeats`), the literals whose occurrences bound some pairs instead are noted
    there: the limit then holds for how many times each of them occurs too (the class may be None)."""
    pairs: list = []
    try:
        if nested_repeats(items, False):
            return True, None, 0
        if ambiguous_repeats(items, (), None)[0]:
            if ambiguous_repeats(items, (), pairs, bounded)[0]:
                return True, None, 0
            shared = shared_class(pairs) if pairs else ""
            if shared is None:
                return True, None, 0
            depths = [depth for _, _, depth in pairs] + [depth for _, depth in bounded or ()]
            return True, shared or None, LONG_RUN if max(depths) <= 2 else CHAIN_RUN
    except (Unanalyzable, RecursionError):
        return True, None, 0
    return False, None, 0


# A complete short text with no run of this many characters shared by two repeats of a pattern (`shared_runs`)
# keeps each try of the pattern within this many times a linear try: its searches run without the per-call timeout.
LONG_RUN = 16
CHAIN_RUN = 4  # the same for chains of three repeats: 4 * 4 = 16


def shared_class(pairs: list) -> str | None:
    """The inside of a regex class holding every character both repeats of some pair take (the smaller set of each
    pair, a few listed characters or classes), or None when some pair has no such small set."""
    parts: set = set()
    for first, second, _ in pairs:
        small = [chars for chars in (first, second) if not chars.negated and charset_members(chars) is not None]
        if not small:
            return None
        # `small` holds only sets whose members were listed (not None)
        parts.update(min(small, key=lambda chars: len(cast(str, charset_members(chars)))).parts)
    return "".join(sorted(parts)) or None


def nested_repeats(items, inside_loop: bool) -> bool:
    for op, av in items:
        if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, POSSESSIVE):
            loops = av[1] is MAXREPEAT or av[1] > 1
            # inside a loop, any repeat of variable length (`(?:a?)*`, `(?:a?b?)*`) may split the text many ways
            if (inside_loop and (loops or av[0] != av[1])) or nested_repeats(av[2], inside_loop or loops):
                return True
        elif op is _C.BRANCH:
            if inside_loop or any(nested_repeats(alternative, inside_loop) for alternative in av[1]):
                return True
        elif op is _C.GROUPREF_EXISTS:  # `(?(name)yes|no)`: one of two sequences, as an alternation
            if inside_loop or any(nested_repeats(branch, inside_loop) for branch in av[1:] if branch is not None):
                return True
        elif op is _C.SUBPATTERN:
            if nested_repeats(av[3], inside_loop):
                return True
        elif op in (ATOMIC,):
            if nested_repeats(av, inside_loop):
                return True
        elif op in (_C.ASSERT, _C.ASSERT_NOT):
            if nested_repeats(av[1], inside_loop):
                return True
    return False


def ambiguous_repeats(items, pending: tuple, pairs: list | None, bounded: list | None = None) -> tuple[bool, tuple]:
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
        if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, POSSESSIVE):
            least, most, body = av
            chars = single_charset(body)
            many = most is MAXREPEAT or most > 1
            if chars is not None:
                if many:
                    shared = [entry for entry in pending if overlaps(entry[0], chars)]
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
                elif least >= 1 and most >= 1 and not any(overlaps(other, chars) for other, *_ in pending):
                    pending = ()
                # `x?` leaves the pending runs as they are (taken or not, nothing new runs on)
            elif many:
                if pending or ambiguous_repeats(body, (), None)[0]:
                    return True, pending
                pending = ((ANY_RUN, 3, ""),)  # no pair with it is noted
            elif most >= 1:
                risky, taken = ambiguous_repeats(body, pending, pairs, bounded)
                if risky:
                    return True, pending
                pending = taken if least >= 1 else union(pending, taken)
        elif op in (_C.LITERAL, _C.NOT_LITERAL, _C.ANY, _C.IN):
            chars = charset_of(op, av)
            if bounded is None:
                if not any(overlaps(other, chars) for other, *_ in pending):
                    pending = ()
            else:
                pending = tuple(entry for entry in pending if overlaps(entry[0], chars))
                if op is _C.LITERAL:
                    run += chr(av)
                    # (counting a literal's occurrences counts its places only when two of them cannot overlap)
                    if not any(run[:size] == run[-size:] for size in range(1, len(run))):
                        pending = tuple(
                            (other, depth, run if len(run) > len(passed) else passed) for other, depth, passed in pending
                        )
        elif op is _C.SUBPATTERN:
            if av[1] or av[2]:  # scoped flags change what the sets mean
                raise Unanalyzable
            risky, pending = ambiguous_repeats(av[3], pending, pairs, bounded)
            if risky:
                return True, pending
        elif op is ATOMIC:
            risky, pending = ambiguous_repeats(av, pending, pairs, bounded)
            if risky:
                return True, pending
        elif op is _C.BRANCH or op is _C.GROUPREF_EXISTS:
            # a conditional `(?(name)yes|no)` takes one of its two sequences (`no` may be empty): as an alternation
            alternatives = av[1] if op is _C.BRANCH else [branch if branch is not None else [] for branch in av[1:]]
            outs: tuple = ()
            for alternative in alternatives:
                risky, out = ambiguous_repeats(alternative, pending, pairs, bounded)
                if risky:
                    return True, pending
                outs = union(outs, out)
            pending = outs
        elif op in (_C.ASSERT, _C.ASSERT_NOT):
            if ambiguous_repeats(av[1], (), pairs, bounded)[0]:
                return True, pending
            ahead = single_charset(av[1]) if op is _C.ASSERT_NOT and av[0] == 1 else None
            if ahead is not None:
                # `[\w-]*(?![\w-])`: a run of those characters cannot stop before its end here, so no later repeat
                # shares it
                pending = tuple(entry for entry in pending if not subset(entry[0], ahead))
        elif op is not _C.AT:
            raise Unanalyzable
    return False, pending


def twin_pattern(pattern: str):
    if regex.match(r"\(\?[a-zA-Z]+\)", pattern):
        return None  # global flags must stay first
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return regex.compile(f"(?:{pattern})|(?!)", regex.DOTALL)
    except (regex.error, Warning, RecursionError, OverflowError):
        return None

"""One-shot parsing of a short text: one combined search per parser state.

`parse_response` on a short output (at most `delimiters.SHORT_SEARCH` characters, prompt tail included) is mostly
per-call setup, and most of it used to be one search per watched delimiter (each running to the end of the text when
that delimiter comes late or never). Here each parser state (`Watch`) gets a `ShortPlan`: its delimiters joined in
one alternation, each alternative wrapped in a named group. One search finds the leftmost position where any of them
matches, and the group that took part says which alternative matched first there. The delimiters before it in the
alternation do not match at that position (the alternation tried them there and they failed); the ones after it are
tried there anchored, and the longest wins, then the rank (opens before closes, then the field name): the same
answer as a search per delimiter, which `find_delimiter` gives at the end of a text.

A pattern keeps its meaning inside the alternation, except for what refers to group numbers or names across it
(backreferences, conditionals) and inline flags that apply to the whole pattern: a watch with such a delimiter gets
no plan and keeps the per-delimiter search.

On a short text the combined search costs at most the sum of the separate searches (each bounded by the square of
the text's length for patterns that `backtracking.is_risky` judges safe); when a delimiter may backtrack badly, the search
keeps the regex time limit (the budget of the call), and the error names that delimiter. A delimiter whose only risk
is two or three repeats that share a few characters (`\\s*\\]?\\s*`) keeps it only on a text that holds a long run of
those characters (`scan.PatternScan.shared_runs`, `run_limit`): without one, its tries cost at most 16 times a
linear try.

When every trigger of a state's delimiters is two characters or more (`ShortPlan.pinpoint`), the combined pattern
is first tried anchored at the first two candidates (`_first_candidate`: the start of the lead run before the next
trigger): one attempt per alternative, where the search tries every alternative at every character before it.

A delimiter whose every alternative begins with a lookbehind ending with one of a few characters is searched as
that character followed by the pattern (`_guard`), which `regex` skips to as to a literal. A loop of a body led by a
character it holds nowhere else splits a text one way only and is judged safe on that ground (`_loop_verdict`).

A longer text (`find_near`) gets the plan too, for its first few delimiters only, and only tried anchored at the
first few places where one of them may start: a bounded number of linear tries. When none of them matches, the
streaming search (`delimiters.find_delimiter`) takes over, as it does for every delimiter past the first few.
"""

from __future__ import annotations

import re
import warnings
from time import perf_counter
from typing import Any

import regex

from .backtracking import CHAIN_RUN, LONG_RUN, ambiguous_repeats, nested_repeats, shared_class
from .errors import RegexTimeoutError, excerpt, regex_time_left, timeout_message
from .pattern_scan import min_width
from .regex_syntax import (
    NAMED_GROUP,
    Unanalyzable,
    charset_of,
    last_charset,
    single_charset,
    sre_constants,
    sre_parse,
    top_alternatives,
    work,
)

# Backreferences and conditionals point at groups by number or name, which change meaning in an alternation.
_CROSS_GROUP = regex.compile(r"\\[1-9]|\\g<|\(\?P=|\(\?\(|\(\?&|\(\?R|\(\?\d|\(\?P>")
_PLAIN_FLAGS = regex.compile("", regex.DOTALL).flags
# The rest of the text from which the search begins at the first candidate (see build_short_plan).
_BOUND_FROM = 128
_BOUND_FROM_TIMED = 32
# In a longer text (`find_near`), the combined pattern is tried anchored at this many candidates at most.
_CANDIDATES = 4
# In a short text (`find_short`), the combined pattern is tried anchored at this many candidates before it searches.
_SHORT_CANDIDATES = 2
# Past this much text from the first candidate, which of the combined search (it tries every alternative at every
# character, but stops at the first delimiter) and one search per delimiter (each skips what the regex engine rules
# out fast, but runs to that delimiter's own first match) costs less depends on the patterns and the text. Each plan
# measures both a few times (`_TRIALS`, time per character), then keeps the cheaper; `find_short` answers FAR when
# the per-delimiter search is to run (the caller runs it and reports its time with `note_far`). Both give the same
# answer: only the time differs.
_COMBINED_MOST = 256
_TRIALS = 3
# A sentinel, compared with `is` only; typed Any so it may stand where a found delimiter (a tuple) or None is expected.
FAR: Any = object()
_WRAPPER = "_rt_alternative_{}"


class ShortPlan:
    """A watch's delimiters as one alternation (see the module docstring)."""

    __slots__ = (
        "search", "match", "names", "tries", "timed", "culprit", "single", "bound", "begins", "costs", "gate",
        "seen", "behind", "guarded", "alternative_of", "pinpoint",
    )

    def __init__(
        self, combined: Any, names: tuple, tries: tuple, timed: bool, culprit: Any, single: bool, bound: Any, gate: Any
    ):
        self.search = combined.search
        self.match = combined.match
        self.names = names  # the number of the wrapper group of each alternative, in order
        self.alternative_of = {number: index for index, number in enumerate(names)}
        # per alternative: (item, its pattern's bound match, whether that try keeps the time limit, its pattern's
        # named groups (names, their numbers in the combined pattern, in its own), a cheap test that it may start at a
        # position or None)
        self.tries = tries
        self.timed = timed  # some delimiter has nested or adjacent repeats (or could not be analyzed)
        # when no delimiter is always timed but some are unless the text has no long run of the characters their
        # repeats share (`scan.PatternScan.shared_runs`): a search for such a run; `seen` is (the last text, found)
        self.gate = gate
        self.seen: tuple[str | None, bool] = (None, True)
        self.culprit = culprit  # the item a timeout of the combined search names
        self.single = single
        self.bound = bound  # where the search may begin (`_Bound`), or None: at the position
        # some delimiter may match at the start of the text only (`\\A`, `^`): the first candidate ignores that
        # far from the first candidate: [combined search seconds per character summed, searches; the same for
        # one search per delimiter]
        self.costs = [0.0, 0, 0.0, 0]
        self.begins = any(item.delimiter.scan is not None and item.delimiter.scan.begin for item, *_ in tries)
        # every delimiter is led by a lookbehind, which the search tries at every character (slower, as a timed
        # search): the search begins at the first candidate from a shorter rest of the text on
        self.behind = bound is not None and all(
            item.delimiter.scan is not None and (item.delimiter.scan.after is not None or item.delimiter.scan.near)
            for item, *_ in tries
        )
        self.guarded = False  # `search` is the pattern behind the character every match follows (`_guard`)
        # every trigger is two characters or more, so its first places are few: `find_short` tries the combined
        # pattern anchored there before it searches
        self.pinpoint = bound is not None and min_width(bound.prefilter.pattern) >= 2


class _Bound:
    """The starts of every delimiter of a watch together (the form `scan.first_candidate` reads): the trigger
    characters of all, the longest reach back, and the lead classes of all (a run of any of them before the first
    trigger). It gives a position no delimiter can start before (at or before each one's own first candidate),
    except at the start of the text for delimiters anchored there (`find_short` tries the start itself)."""

    __slots__ = ("prefilter", "back_reach", "lead_back")

    def __init__(self, prefilter: Any, back_reach: int, lead_back: Any):
        self.prefilter, self.back_reach, self.lead_back = prefilter, back_reach, lead_back


def _first_candidate(bound: _Bound, text: str, pos: int) -> int:
    """A position at or after `pos` before which no delimiter of the watch starts in this complete text: the start
    of the run of lead-class characters before the first trigger (or before the end of the text). As
    `scan.first_candidate`, without partial matches: at the end of the text, a trigger the end cuts cannot be part
    of a match (a match holds its trigger whole), and a partial search costs ten times more."""
    first = len(text)
    found = bound.prefilter.search(text, max(0, pos - bound.back_reach))
    if found is not None:
        first = found.start()
    if bound.lead_back is not None and first > pos:
        found = bound.lead_back.search(text, pos, first)
        first = found.end() if found is not None else pos
    return max(first, pos)


def _bound(items: list) -> _Bound | None:
    triggers, leads = [], set()
    back_reach = 0
    for item in items:
        delimiter = item.delimiter
        if delimiter.literals is not None:
            triggers.append(delimiter.regex.pattern)
            continue
        scan = delimiter.scan
        if scan is None or scan.prefilter is None:
            return None
        if scan.prefilter.pattern != "(?!)":  # no trigger (a delimiter anchored at the start only)
            triggers.append(scan.prefilter.pattern)
        leads.update(scan.candidate_leads)
        back_reach = max(back_reach, scan.back_reach)
    try:
        return _Bound(
            # one level of alternatives (nested groups make `regex` give up its fast scan for literals)
            regex.compile("|".join(sorted(set(piece for source in triggers for piece in top_alternatives(source)), key=lambda piece: (-len(piece), piece))) or "(?!)"),
            back_reach,
            regex.compile(f"(?r)(?!{'|'.join(sorted(leads))}).", regex.DOTALL) if leads else None,
        )
    except (regex.error, OverflowError, RecursionError, ValueError):
        return None


_SAFE, _TIMED, _GATED = 0, 1, 2


def _unsafe(item: Any) -> tuple:
    """Whether the tries of a delimiter keep the per-call timeout: never, always, or on a text with a long run (then
    with the characters of such a run and how long it may be)."""
    delimiter = item.delimiter
    scan = delimiter.scan
    if delimiter.literals is not None or (scan is not None and scan.safe):
        return _SAFE, None, 0
    if scan is not None and scan.shared_runs:
        return _GATED, scan.shared_runs, scan.run_limit
    if scan is not None:
        return _loop_verdict(delimiter.regex.pattern)
    return _TIMED, None, 0


# -- repeats of a body led by a character it holds nowhere else ---------------------------------------------------
#
# `backtracking.is_risky` judges any repeat of more than one character that holds a repeat risky (`(?:x*)*` splits a text in
# many ways). A body that begins with a character it cannot take anywhere else (`(?:<think>\s*)+`: `<`, which
# `think>\s*` never takes) splits a text in one way only: each repetition starts at one of those characters and ends
# before the next. Backtracking into such a loop can only end it earlier: at any place within the text the loop took,
# as a repeat of one class holding every character of the body would. So the pattern is judged as the one with the
# loop written as its body once (optional when the loop may repeat zero times), followed by an optional run that
# starts with that character and goes on with any character of the body (`(?:<[<think>\s]*)?`): the repeats after
# it that share characters with that run are pairs as `backtracking.is_risky` counts them (a gate on long runs of the shared
# characters, or the timeout), and nested loops, or bodies of other shapes, keep the timeout.


def _loop_verdict(pattern: str) -> tuple:
    """`_unsafe` for a pattern `scan` judged risky without pairs (see above)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            parsed = sre_parse.parse(NAMED_GROUP.sub(lambda m: m.group(1) + "(", pattern), re.DOTALL)
        if parsed.state.flags & (re.IGNORECASE | re.MULTILINE):
            return _TIMED, None, 0
        model = _unrolled(list(parsed))
        if model is None or nested_repeats(model, False):
            return _TIMED, None, 0
        pairs: list = []
        if not ambiguous_repeats(model, (), None)[0]:
            return _SAFE, None, 0
        if ambiguous_repeats(model, (), pairs)[0]:
            return _TIMED, None, 0
        shared = shared_class(pairs)
        if shared is None:
            return _TIMED, None, 0
        return _GATED, shared, LONG_RUN if max(depth for _, _, depth in pairs) <= 2 else CHAIN_RUN
    except (Unanalyzable, re.error, RecursionError, OverflowError, Warning, ValueError, TypeError, KeyError, IndexError):
        return _TIMED, None, 0


_REPEATS = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, getattr(sre_constants, "POSSESSIVE_REPEAT", object()))
_TAKERS = (sre_constants.LITERAL, sre_constants.NOT_LITERAL, sre_constants.ANY, sre_constants.IN)


def _unrolled(items: list) -> list | None:
    """`items` with each loop of a body led by a character it holds nowhere else written as described above, or
    None when a loop of another body (more than one character) has a repeat or an alternation inside."""
    out: list = []
    for op, av in items:
        if op in _REPEATS:
            least, most, body = av
            body = list(body)
            loops = most is sre_constants.MAXREPEAT or most > 1
            if not loops or single_charset(body) is not None or not nested_repeats(body, True):
                inner = _unrolled(body)
                if inner is None:
                    return None
                out.append((op, (least, most, inner)))
                continue
            if not body or body[0][0] is not sre_constants.LITERAL or nested_repeats(body, False):
                return None
            lead = body[0][1]
            run = _run_of(body[1:], chr(lead))
            if run is None:
                return None
            once = [(sre_constants.SUBPATTERN, (None, 0, 0, body))]
            out.append((sre_constants.MAX_REPEAT, (0, 1, once)) if least == 0 else once[0])
            rest = [(sre_constants.LITERAL, lead), (sre_constants.MAX_REPEAT, (0, sre_constants.MAXREPEAT, [run]))]
            out.append((sre_constants.MAX_REPEAT, (0, 1, [(sre_constants.SUBPATTERN, (None, 0, 0, rest))])))
        elif op is sre_constants.SUBPATTERN:
            inner = _unrolled(list(av[3]))
            if inner is None:
                return None
            out.append((op, (av[0], av[1], av[2], inner)))
        elif op is sre_constants.BRANCH:
            alternatives = [_unrolled(list(alternative)) for alternative in av[1]]
            if any(alternative is None for alternative in alternatives):
                return None
            out.append((op, (av[0], alternatives)))
        elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
            inner = _unrolled(list(av[1]))
            if inner is None:
                return None
            out.append((op, (av[0], inner)))
        elif op is getattr(sre_constants, "ATOMIC_GROUP", object()):
            inner = _unrolled(list(av))
            if inner is None:
                return None
            out.append((op, inner))
        else:
            out.append((op, av))
    return out


def _run_of(items: list, lead: str) -> tuple | None:
    """A one-character class holding every character `items` may take (any character when one of them is a negated
    class), or None when some of them may take `lead` (or the analysis cannot tell)."""
    pieces: list = []
    wide = False
    for op, av in _takers(items):
        chars = charset_of(op, av)
        source = chars.source()
        if source is None or regex.match(source, lead, regex.DOTALL) is not None:
            return None
        if op is sre_constants.LITERAL:
            pieces.append((sre_constants.LITERAL, av))
        elif op is sre_constants.IN and not any(kind is sre_constants.NEGATE for kind, _ in av):
            pieces.extend(av)
        else:
            wide = True
    pieces.append((sre_constants.LITERAL, ord(lead)))
    return (sre_constants.ANY, None) if wide else (sre_constants.IN, pieces)


def _takers(items: list):
    """Every item of a sequence that takes a character, inside groups, repeats and alternations (not lookarounds,
    which take none); raises `Unanalyzable` on anything else that could (a backreference)."""
    for op, av in items:
        if op in _TAKERS:
            yield op, av
        elif op in _REPEATS:
            yield from _takers(list(av[2]))
        elif op is sre_constants.SUBPATTERN:
            yield from _takers(list(av[3]))
        elif op is sre_constants.BRANCH:
            for alternative in av[1]:
                yield from _takers(list(alternative))
        elif op is getattr(sre_constants, "ATOMIC_GROUP", object()):
            yield from _takers(list(av))
        elif op not in (sre_constants.ASSERT, sre_constants.ASSERT_NOT, sre_constants.AT):
            raise Unanalyzable


def build_short_plan(watch: Any) -> ShortPlan | None:
    """The plan of a watch, or None when it watches nothing or a pattern cannot join an alternation."""
    if not watch.items:
        return None
    pieces, tries, verdicts = [], [], []
    names = tuple(_WRAPPER.format(index) for index in range(len(watch.items)))
    for index, item in enumerate(watch.items):
        pattern = item.delimiter.regex
        if item.delimiter.literals is None:
            if pattern.flags != _PLAIN_FLAGS or _CROSS_GROUP.search(pattern.pattern):
                return None
            if any(name in pattern.groupindex for name in names):
                return None
        pieces.append(f"(?P<{names[index]}>{pattern.pattern})")
        verdict = _unsafe(item)
        verdicts.append(verdict)
        tries.append((item, pattern.match, verdict[0], tuple(pattern.groupindex), _may_start(item)))
    try:
        combined = regex.compile("|".join(pieces), regex.DOTALL)
    except (regex.error, OverflowError, RecursionError, ValueError):
        return None
    if combined.flags != _PLAIN_FLAGS:
        return None
    # each alternative's named groups, with their numbers in the combined pattern and in its own (`match.group` by
    # number costs a seventh of a lookup by name)
    tries = [
        (item, matcher, timed, (named, _numbers(combined, named), _numbers(item.delimiter.regex, named)), may_start)
        for item, matcher, timed, named, may_start in tries
    ]
    unsafe = [item for item, _, timed, _, _ in tries if timed]
    always = any(timed == _TIMED for _, _, timed, _, _ in tries)
    gated = [(shared, limit) for kind, shared, limit in verdicts if kind == _GATED]
    gate = None
    if gated and not always:
        try:
            shared = "".join(runs for runs, _ in gated)
            gate = regex.compile(f"[{shared}]{{{min(limit for _, limit in gated)}}}")
        except (regex.error, OverflowError, RecursionError, ValueError):
            always = True
    regexes = [item for item in watch.items if item.delimiter.literals is None]
    culprit = unsafe[0] if unsafe else (regexes[0] if regexes else watch.items[0])
    # Where to begin the search: the first candidate of any delimiter, found with two more searches, which pay off
    # over a long enough rest of the text (sooner when the search keeps the time limit, which slows it).
    bound = _bound(watch.items)
    numbers = tuple(combined.groupindex[name] for name in names)
    plan = ShortPlan(combined, numbers, tuple(tries), always, culprit, len(tries) == 1, bound, gate)
    if plan.single and watch.items[0].delimiter.literals is None:
        guard = _guard(watch.items[0].delimiter.regex.pattern)
        if guard is not None:
            try:
                plan.search = regex.compile(f"(?:{guard}){pieces[0]}", regex.DOTALL).search
                plan.guarded = True
                plan.pinpoint = False
            except (regex.error, OverflowError, RecursionError, ValueError):
                pass
    return plan


_SCOPED_FLAGS = regex.compile(r"\(\?[aiLmsux-]+[:)]")


def _guard(pattern: str) -> str | None:
    """When every match of `pattern` starts right after a character of some set (each top-level alternative begins
    with a lookbehind that cannot be empty and ends with one of them: `(?<=\\])`, `(?<=\\}\\s*\\])`), a regex of one
    such character, else None. The search for that character followed by the pattern skips to the candidates as
    fast as a search for a literal, where the pattern alone has its lookbehinds tried at every character; the
    match of the pattern starts where the search's match starts plus one, and no match can start elsewhere."""
    if _SCOPED_FLAGS.search(pattern):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            items = list(sre_parse.parse(NAMED_GROUP.sub(lambda m: m.group(1) + "(", pattern), re.DOTALL))
        if len(items) == 1 and items[0][0] is sre_constants.BRANCH:
            alternatives = [list(alternative) for alternative in items[0][1][1]]
        else:
            alternatives = [items]
        sources = set()
        for alternative in alternatives:
            if not alternative or alternative[0][0] is not sre_constants.ASSERT or alternative[0][1][0] != -1:
                return None
            chars, empty = last_charset(alternative[0][1][1])
            source = chars.source()
            if empty or not source:
                return None
            sources.add(source)
    except (Unanalyzable, re.error, RecursionError, OverflowError, Warning, ValueError, TypeError, KeyError, IndexError):
        return None
    guard = "|".join(sorted(sources))
    if regex.search(guard, _BLANKS) is not None:
        return None  # whitespace is everywhere: the search would stop at every run of it
    return guard


_BLANKS = " \t\n\r\f\v\x85\xa0\u2028\u3000"


def _may_start(item: Any) -> Any:
    """A cheap test that a delimiter can start at a position (a bound `match` that fails where it cannot), or None
    when any position may do: a literal delimiter starts with one of its literals; a pattern whose every match
    begins with a trigger of its scan, possibly after a run of a lead class (`\\s*<tool_call>`), starts with one or
    the other. Patterns led by a lookbehind, or that may match at the very start or end of the text, get none."""
    delimiter = item.delimiter
    if delimiter.literals is not None:
        return delimiter.regex.match
    scan = delimiter.scan
    if scan is None or scan.after is not None or scan.near or scan.after_runs or scan.begin or scan.end:
        return None
    sources = [scan.plain.pattern] if scan.plain is not None else []
    for trigger, lead, *_ in scan.leads:
        if trigger is not None:
            sources.append(trigger.pattern)
        sources.append(lead.pattern)
    if not sources:
        return None
    try:
        return regex.compile("|".join(f"(?:{source})" for source in sources), regex.DOTALL).match
    except (regex.error, OverflowError, RecursionError, ValueError):
        return None


def note_far(plan: ShortPlan, seconds: float, chars: int) -> None:
    """Record the time a per-delimiter search took over `chars` characters, after `find_short` answered FAR."""
    plan.costs[2] += seconds / chars
    plan.costs[3] += 1


def _timeout(item: Any) -> RegexTimeoutError:
    return RegexTimeoutError(
        timeout_message(f"field {item.field.name!r}: {item.kind}_pattern {excerpt(item.delimiter.regex.pattern)}")
    )


def _timed_for(plan: ShortPlan, text: str) -> bool:
    """Whether the plan's searches on this text keep the per-call timeout: always when some delimiter must; when the
    plan is gated, only if the text holds a long run of the characters the risky repeats share (found once per
    text)."""
    if plan.gate is None:
        return plan.timed
    seen = plan.seen
    if seen[0] is not text:
        seen = plan.seen = (text, plan.gate.search(text) is not None)
    return seen[1]


def find_short(plan: ShortPlan, text: str, pos: int) -> tuple | None:
    """The delimiter at or after `pos` in a complete short text: (item, start, end, named groups or None), or None
    (also when the first one starts at the very end of the text, as `find_delimiter`)."""
    # (called a few times per short message: the gate check of `_timed_for` is inlined)
    if plan.gate is None:
        timed = plan.timed
    else:
        seen = plan.seen
        if seen[0] is not text:
            seen = plan.seen = (text, plan.gate.search(text) is not None)
        timed = seen[1]
    size = len(text)
    match = None
    try:
        # the time left, read once for the timed searches: it raises when the budget of the call is spent (the
        # searches below are few and short, so the timed ones may take what was left at the start of this call;
        # the untimed ones are bounded by the square of a short text and need no clock)
        left = regex_time_left() if timed else None
        if pos == 0 and plan.begins:
            # a delimiter anchored at the start of the text: try the start first (the first candidate skips it)
            match = plan.match(text, 0, timeout=left) if timed else plan.match(text, 0)
            if match is None:
                pos = 1
        if match is None and plan.pinpoint:
            # the combined pattern tried anchored at the first few places where a delimiter may start: each try is
            # one attempt of each alternative, where the search would try every alternative at every character
            # (`_first_candidate`, inlined: this loop runs a few times per short message, and the call cost 2-6% of a
            # short message's parse for glm, kimi-k2 and mimo, measured)
            bound = plan.bound
            prefilter, back_reach, lead_back = bound.prefilter.search, bound.back_reach, bound.lead_back
            for _ in range(_SHORT_CANDIDATES):
                found = prefilter(text, pos - back_reach if pos > back_reach else 0)
                first = size if found is None else found.start()
                if lead_back is not None and first > pos:
                    found = lead_back.search(text, pos, first)
                    first = pos if found is None else found.end()
                if first > pos:
                    pos = first
                if pos >= size:
                    work[0] += _SHORT_CANDIDATES
                    return None
                match = plan.match(text, pos, timeout=left) if timed else plan.match(text, pos)
                if match is not None:
                    break
                pos += 1
        elif match is None and plan.bound is not None and not plan.guarded and size - pos > (
            _BOUND_FROM_TIMED if timed or plan.behind else _BOUND_FROM
        ):
            pos = max(pos, _first_candidate(plan.bound, text, pos))
        if match is None:
            timing = None
            if size - pos > _COMBINED_MOST:
                costs = plan.costs
                if (costs[3] < _TRIALS and costs[3] < costs[1]) or (
                    costs[1] >= _TRIALS and costs[2] * costs[1] < costs[0] * costs[3]
                ):
                    return FAR
                timing = perf_counter()
            at = pos - 1 if plan.guarded and pos else pos  # a guarded search takes the character before the match
            match = plan.search(text, at, timeout=left) if timed else plan.search(text, at)
            if timing is not None:
                plan.costs[0] += (perf_counter() - timing) / (size - pos)
                plan.costs[1] += 1
    except TimeoutError:
        raise _timeout(plan.culprit) from None
    work[0] += size - pos
    if match is None:
        return None
    return _resolve(plan, text, match, timed)


def find_near(plan: ShortPlan, text: str, pos: int) -> tuple | None:
    """`find_short` for a longer text, linear: the combined pattern tried anchored at the first `_CANDIDATES`
    candidates only (each try is linear in the text for the patterns that run without the time limit). FAR when
    none of them matches: the caller runs the streaming search (`find_delimiter`), which never rescans."""
    if plan.bound is None:
        return FAR
    match = None
    timed = _timed_for(plan, text)
    size = len(text)
    try:
        if pos == 0 and plan.begins:
            match = plan.match(text, 0, timeout=regex_time_left()) if timed else plan.match(text, 0)
            if match is None:
                pos = 1
        if match is None:
            if not timed:
                regex_time_left()  # the budget of the call may already be spent
            for _ in range(_CANDIDATES):
                pos = _first_candidate(plan.bound, text, pos)
                if pos >= size:
                    work[0] += _CANDIDATES
                    return None
                match = plan.match(text, pos, timeout=regex_time_left()) if timed else plan.match(text, pos)
                if match is not None:
                    break
                pos += 1
            else:
                return FAR
    except TimeoutError:
        raise _timeout(plan.culprit) from None
    work[0] += _CANDIDATES
    return _resolve(plan, text, match, timed)


def _resolve(plan: ShortPlan, text: str, match: Any, timed: bool) -> tuple | None:
    """The delimiter a match of the combined pattern found: the longest (then by rank) of the delimiters matching
    where it starts, with its named groups."""
    if plan.single:
        start = match.start(plan.names[0])  # (a guarded search's match begins one character before)
        if start >= len(text):
            return None
        item, _, _, (named, numbers, _), _ = plan.tries[0]
        if item.delimiter.literals is not None:
            return item, start, match.end(), None
        # one alternative: its groups (the combined match also has the wrapper's)
        return item, start, match.end(), _groups(match, named, numbers)
    start, best_end = match.span()
    if start >= len(text):
        return None
    tries = plan.tries
    # the wrapper group of the alternative that matched is the last group closed
    first = plan.alternative_of.get(match.lastindex)
    if first is None:
        first, numbers = 0, plan.names
        while match.start(numbers[first]) < 0:
            first += 1
    best, best_match = tries[first][0], None
    for index in range(first + 1, len(tries)):
        other, other_matcher, other_timed, _, may_start = tries[index]
        if may_start is not None and may_start(text, start) is None:
            continue
        try:
            slow = other_timed == _TIMED or (other_timed == _GATED and timed)
            found = other_matcher(text, start, timeout=regex_time_left()) if slow else other_matcher(text, start)
        except TimeoutError:
            raise _timeout(other) from None
        if found is None:
            continue
        end = found.end()
        if end > best_end or (end == best_end and other.rank < best.rank):
            best, best_end, best_match, best_index = other, end, found, index
    if best.delimiter.literals is not None:
        return best, start, best_end, None
    if best_match is None:
        # the first alternative that matched here won: its own groups are those of the combined match (a name shared
        # with other alternatives is one group there, which only the branch that matched set)
        named, numbers, _ = tries[first][3]
        return best, start, best_end, _groups(match, named, numbers)
    named, _, own = tries[best_index][3]
    return best, start, best_end, _groups(best_match, named, own)


def _numbers(pattern: Any, names: tuple) -> tuple:
    return tuple(pattern.groupindex[name] for name in names)


def _groups(match: Any, names: tuple, numbers: tuple) -> dict:
    """The named groups of a match, read by number (what `groupdict` gives)."""
    if not names:
        return {}
    if len(names) == 1:
        return {names[0]: match.group(numbers[0])}
    return dict(zip(names, match.group(*numbers)))

"""Fast, linear scanning for regex delimiters.

The `regex` module's search is quadratic on patterns that start with a repeated class (`\\s*<tool_call>` over a run of
spaces, or over prose in partial mode): it tries every start position, and from each one runs the repeat to its end.
So we never let it pick start positions. At compile time (`pattern_scan.analyze`) we read the pattern's structure
and derive where a match can start:

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
import sys

import regex

from .errors import grow_regex_budget
from .pattern_scan import PatternScan
from .regex_syntax import sre_parse, work


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


def _run_start(back, buffer: str, low: int, at: int) -> int:
    """Start of the run of lead-class characters that ends at `at` (not before `low`)."""
    found = back.search(buffer, low, at)
    work[0] += at - (found.end() if found is not None else low) + 1
    return found.end() if found is not None else low


# A failed try this far from the end of a run of whitespace checks the run's end (`PatternScan.run_rest`).
_RUN_SKIP = 32
NOT_SPACE = regex.compile(r"\S")


def scan_pattern(
    pattern, scan: PatternScan, buffer: str, pos: int, start: int, eos: bool, limit: int, timed, guards=None,
    live: bool = False,
):
    """Find the first candidate at or after `start` (>= `pos`; positions before `start` are known dead) where
    `pattern` matches or could still match. Candidates past `limit` are not examined. `live`: `start` was such a
    candidate when the text was shorter; it is tried first (a position where no match can start fails the try, so
    this finds what the search of candidates would, without it when the try succeeds).

    Returns (kind, match, at, dead): kind is "match" (a complete match `match` at `at`), "hold" (a match may start at
    `at` once more text comes) or None; `dead` is how far every position is now known not to start a match."""
    end = len(buffer)
    stop = min(limit, end)
    if scan.twin is not None:
        pattern = scan.twin
    tried = -1
    if live and start < end and start <= stop:
        work[0] += 1
        kind, match = _try(pattern, scan, buffer, start, eos, timed, guards)
        if kind is not None:
            return kind, match, start, start
        tried = start
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


class Found:
    """A match remembered by its positions and named groups (it keeps no reference to the text)."""

    __slots__ = ("_start", "_end", "_groups")
    partial = False

    def __init__(self, start: int, end: int, groups: dict):
        self._start, self._end, self._groups = start, end, groups

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._end

    def span(self) -> tuple[int, int]:
        return self._start, self._end

    def groupdict(self) -> dict:
        return dict(self._groups)


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
        at = leftmost_start(trigger, buffer, low, min(stop + 1, end))
        work[0] += (at if at is not None else min(stop + 1, end)) - low
        return at
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


# The widest match of each trigger regex, by its source (see `leftmost_start`).
_WIDTHS: dict = {}


def _widest(trigger) -> int:
    width = _WIDTHS.get(trigger.pattern)
    if width is None:
        try:
            width = min(sre_parse.parse(trigger.pattern).getwidth()[1], sys.maxsize)
        except Exception:  # syntax Python's parser does not read: assume any width
            width = sys.maxsize
        _WIDTHS[trigger.pattern] = width
    return width


def leftmost_start(trigger, buffer: str, low: int, end: int) -> int | None:
    """The leftmost position in `low`..`end` where `trigger` matches, or matches partly up to `end` (more text may
    complete it); None when there is none. `regex`'s partial search prefers a complete match anywhere to an earlier
    partial one (`ab|c` finds `c` in `ac`), so the few positions before a complete match that a partial one could
    start at (within the trigger's width of `end`) are tried one by one."""
    found = trigger.search(buffer, low, end, partial=True)
    if found is None:
        return None
    at = found.start()
    if found.partial:
        return at if found.end() > at else None  # `regex` reports an empty partial match at the end of the window
    for start in range(max(low, end - _widest(trigger) + 1), at):
        partial = trigger.match(buffer, start, end, partial=True)
        if partial is not None and partial.partial and partial.end() > start:
            return start
    return at


def first_candidate(scan: PatternScan, buffer: str, pos: int) -> int:
    """A position at or after `pos` before which no match of the pattern can start, now or once more text comes (the
    first candidate, or a little before it): the start of the lead run before the first trigger (or the first
    beginning of one at the end of the text), or of a lead run that ends the text; the text's length when none."""
    if scan.prefilter is None or (scan.begin and pos == 0):
        return pos
    end = len(buffer)
    first = end
    found = leftmost_start(scan.prefilter, buffer, max(0, pos - scan.back_reach), end)  # one cut by the end counts
    if found is not None:
        first = found
    if scan.lead_back is not None and first > pos:
        # back over the lead run before the first trigger (or, without one, over the run that ends the text)
        found = scan.lead_back.search(buffer, pos, first)
        first = found.end() if found is not None else pos
    return max(first, pos)


"""Finding the delimiter to commit next in a parser state (`find_delimiter`): the earliest match of the state's
delimiters, then the longest, then the rank (opens before closes), and where text must be held back because a
delimiter may still start there. Literal delimiters are found with one combined search; regex delimiters with the
linear scanner (`scanner.scan_pattern`) or, on short texts, one plain search. `memo` remembers how far each
delimiter's scan got, so no text is scanned twice.
"""

from __future__ import annotations

from typing import Any

import regex

from .errors import (
    RegexTimeoutError,
    excerpt,
    regex_time_left,
    retry_after_timeout,
    timeout_message,
)
from .regex_syntax import REGEX_ONLY_SYNTAX, work
from .scanner import NOT_SPACE, Found, first_candidate, quiet, scan_pattern, track_guards
from .template import Watch, WatchItem, literal_runs

# Consumed text kept before the scan position, for \b and the like in delimiter patterns (templates whose
# patterns have lookbehinds keep everything).
CONTEXT_KEPT = 256
# A partial match held back over more text than this is tried again only once the held text doubles, unless the text
# added may settle it (see _scan_item).
LONG_HOLD = 256

# A try on at most this much text runs the pattern itself rather than its twin (see `_scan_item`).
SHORT_REST = 256

# At the end of a text at most this long, a regex delimiter is found with one plain search (lookbehinds included,
# its cost is bounded by the square of this length).
SHORT_SEARCH = 512


def find_delimiter(watch: Watch, buffer: str, pos: int, eos: bool, memo: dict | None = None, base: int = 0) -> tuple[tuple | None, int]:
    """The delimiter to commit now at or after `pos`: (item, start, end, named groups), or None; and where
    held-back text starts (the buffer's length when nothing is held, and always at the end of the stream).

    `memo` (a dict the caller keeps for one text, with `base` the text position of `buffer[0]`) remembers how far
    each delimiter's scan got, so text is never scanned twice for the same delimiter: one feed of any size, or one
    parse, costs time linear in its length."""
    end_of_text = len(buffer)
    if not watch.items:
        return None, end_of_text
    if watch.literal_only:
        match = watch.combined.search(buffer, pos)
        hold = end_of_text if eos else _literal_hold(watch, buffer, pos)
        if match is not None and match.start() < hold:
            return (watch.owner[match.group()], match.start(), match.end(), None), hold
        return None, hold
    best, best_key, hold = None, None, end_of_text
    for index, item in enumerate(watch.items):
        # nothing starting after the best match so far (or after held text) can be committed now
        limit = hold if best is None or best[1] > hold else best[1]
        delimiter = item.delimiter
        if delimiter.literals is not None:
            single = watch.singles[index]
            match = _literal_search(item, single, buffer, pos, limit, memo, base)
            if not eos:
                hold = min(hold, _literal_hold(single, buffer, pos))
            groups = None
        else:
            if delimiter.scan is not None:
                match, pending = _scan_item(item, buffer, pos, eos, limit, memo, base)
            else:
                match, pending = pattern_scan_item(item, buffer, pos, eos)
            hold = min(hold, pending)
            groups = match.groupdict() if match is not None else None
        if match is None:
            continue
        key = (match.start(), match.start() - match.end(), item.rank)
        if best_key is None or key < best_key:
            best_key, best = key, (item, match.start(), match.end(), groups)
    if best is not None and best[1] >= hold:
        best = None
    return best, hold


def _literal_search(item: WatchItem, single: Watch, buffer: str, pos: int, limit: int, memo: dict | None, base: int):
    """The leftmost-longest occurrence of a literal delimiter at or after `pos` (None when there is none up to
    `limit`), remembering where it is (or how far there is none) in `memo`."""
    start = pos
    record = memo.get(id(item)) if memo is not None else None
    if record is not None:
        found, resume = record
        if found is not None and found - base >= pos:
            return single.combined.match(buffer, found - base)
        start = max(pos, resume - base)
    end = len(buffer)
    stop = min(end, limit + single.longest)
    match = single.combined.search(buffer, start, stop) if start < stop else None
    if memo is not None:
        if match is not None:
            memo[id(item)] = (match.start() + base, match.start() + base)
        else:
            memo[id(item)] = (None, max(start, stop - single.longest + 1) + base)
    return match


def _scan_item(item: WatchItem, buffer: str, pos: int, eos: bool, limit: int, memo: dict | None, base: int) -> tuple[Any, int]:
    """`pattern_scan_item` for a regex delimiter whose starts the template analysis bounded (scan.PatternScan): only
    candidate starts are tried, and only from where the last scan of this delimiter stopped."""
    key = id(item)
    start = pos
    end = len(buffer)
    scan = item.delimiter.scan
    live = False
    quick = scan.safe
    if eos and end <= SHORT_SEARCH:
        return _short_search(item, buffer, pos, memo, key, base), end
    if memo is not None:
        start = max(pos, memo.get(key, 0) - base)
        held = memo.get((key, "held"))
        if held is not None and not eos:
            # A long partial match held at `at` was checked when the text ended at `then`: trying it again costs its
            # length, so (when the text added since cannot complete it) wait until the held text has doubled.
            # Holding longer only delays events; the message is the same.
            at, then = held[0] - base, held[1] - base
            if at >= pos and end - at < 2 * (then - at) and _still_held(scan, buffer, held[2] - base):
                memo[(key, "held")] = (held[0], held[1], end + base)  # the text up to here is checked
                return None, at
            del memo[(key, "held")]
        if start > limit:
            # every candidate left lies past what can be committed now (an earlier delimiter holds before it)
            return None, end
        if not eos:  # (at the end of the text every scan is the last: nothing to carry over)
            final = memo.get((key, "final"))
            if final is not None and final[0] - base == start:
                # the match found there by the last scan, which no text added since can change (see below), still waits
                # behind a delimiter held before it
                return Found(start, final[1] - base, final[2]), end
            # The last scan stopped at a candidate where a match began (held back, or a match that more text could
            # change): it is tried first, without looking for candidates (text added since cannot start an earlier one).
            live = memo.get((key, "live")) == start + base
            quick = scan.safe or (scan.long_run is not None and _spaceless(scan) and _quiet_stream(scan, buffer, memo, base))
            if live and start < end and scan.guards is None:
                # That first try (`scanner._decide` on the whole text), inlined for its common outcome: the match begun
                # there is still cut by the end of the text (a short stream meets it at every chunk of a delimiter).
                # (the twin spares each try a look for the text the pattern requires up to the end of the text; on a short
                # rest of the text that look costs less than the twin, which `regex` runs several times slower)
                pattern = scan.twin if scan.twin is not None and end - start > SHORT_REST else item.delimiter.regex
                if quick:
                    _check_budget(item)
                    again = pattern.match(buffer, start, end, partial=True)
                    if again is not None and again.partial and scan.free is not None:
                        # (a failing lookbehind may be reported as partial: still held when the pattern without its
                        # lookbehinds reaches the end, else `scan_pattern` decides)
                        _check_budget(item)
                        again = scan.free.fullmatch(buffer, start, end, partial=True) and again
                else:
                    again = timed_call(item, pattern.match, buffer, start, end, partial=True)
                    if again is not None and again.partial and scan.free is not None:
                        again = timed_call(item, scan.free.fullmatch, buffer, start, end, partial=True) and again
                if again is not None and (again.partial or again.end() == end):
                    work[0] += 1
                    if end - start > LONG_HOLD:
                        memo[(key, "held")] = (start + base, end + base, end + base)
                    return None, start
        if not live and not eos and first_candidate(scan, buffer, start) >= end:
            # no trigger in the text since the last scan and no lead run at its end: nothing can start there
            memo[key] = end + base
            return None, end
    guards = None
    if scan.guards is not None:
        # where the literals of the pattern's unbounded lookbehinds occur (buffer positions), see scanner._try
        if memo is None:
            memo, base = {}, 0
        state = memo.setdefault((key, "guards"), [0, []])
        guards = track_guards(scan, buffer, state[1], state, base)
    kind, match, at, dead = scan_pattern(
        item.delimiter.regex, scan, buffer, pos, start, eos, limit, _quick(item) if quick else _timer(item), guards,
        live,
    )
    if memo is not None:
        memo[key] = dead + base
        if kind is not None and not eos:
            memo[(key, "live")] = at + base
        if kind == "hold" and end - at > LONG_HOLD:
            memo[(key, "held")] = (at + base, end + base, end + base)
    if kind is None:
        return None, end
    if kind == "match":
        found = match, end
        if not eos and end - match.end() <= CONTEXT_KEPT:
            # no way through the pattern reaches the end, but `$`, `\b` or a lookahead may still lean on it
            found = _settle_probe(item, buffer, match, end, ("\x00",))
        if memo is not None and not eos and found[1] == end and scan.guards is None and _preferred_twin(item.delimiter.regex) is not None:
            # A complete match in partial mode, where no way tried before it (nor its own) reached the end of the text,
            # and no syntax that partial mode may take as final at the end (`$`, `\b`, a negative lookahead: no twin):
            # no text added later can change it, so a later scan that starts here (another delimiter held before it
            # kept it from being committed) takes it as it is.
            # (kept as positions and groups: a match object would keep the buffer alive, which `feed` then copies)
            memo[(key, "final")] = (at + base, match.end() + base, match.groupdict())
        return found
    if kind == "hold":
        return None, at
    return _settle_probe(item, buffer, match, end)


_SPACELESS: dict = {}


def _spaceless(scan: Any) -> bool:
    """Whether the characters of a pattern's pairs of repeats leave out the space: then a search for a long run of them
    (`_quiet_stream`) is cheap on prose, and spares the tries `regex`'s per-call timeout; with the space it costs more
    than the timeouts it spares."""
    known = _SPACELESS.get(id(scan))
    if known is None or known[0] is not scan:
        if len(_SPACELESS) >= 1024:
            _SPACELESS.clear()
        known = _SPACELESS[id(scan)] = (scan, scan.long_run.match(" " * scan.run_limit) is None)
    return known[1]


def _quiet_stream(scan: Any, buffer: str, memo: dict, base: int) -> bool:
    """`scanner.quiet` for a stream: whether the buffer holds no run of `run_limit` characters that two repeats of a
    pair take (the only way a try of the pattern may take long), so that tries may run without `regex`'s per-call
    timeout. Only the text added since the last call is searched; a run found counts until it leaves the buffer."""
    key = ("long_run", id(scan))
    state = memo.get(key)
    checked, seen = state if state is not None else (base, -1)
    end = len(buffer)
    begin = max(0, checked - base - scan.run_limit + 1)
    if begin < end:
        work[0] += end - begin
        if scan.long_run.search(buffer, begin) is not None:
            seen = end + base  # (a run ends before the end of the buffer: it counts until the buffer starts there)
        memo[key] = (end + base, seen)
    return seen <= base


def _still_held(scan: Any, buffer: str, checked: int) -> bool:
    """Whether the text from `checked` (added since the hold was last checked) may leave a held partial match as it
    is, so that trying it again can wait: whitespace only (it goes on with a run of whitespace, which a match held
    that long as good as always takes or waits for), or text without a character a match can end with
    (`PatternScan.completion`). Either way a wrong guess only delays events: the message is the same."""
    if NOT_SPACE.search(buffer, checked) is None:
        return True
    return scan.completion is not None and scan.completion.search(buffer, checked) is None


def find_short_delimiter(watch: Watch, text: str, pos: int, found: dict) -> tuple | None:
    """`find_delimiter` at the end of a short text (`SHORT_SEARCH`), for one-shot parsing: one search per delimiter,
    each begun at its own first candidate and kept in `found` while the match lies ahead. `oneshot.find_short`
    searches all of a state's delimiters at once, which is cheaper unless much text lies before the first one (the
    search of one delimiter skips text the regex engine can rule out fast, the combined search cannot)."""
    best, best_key = None, None
    for index, item in enumerate(watch.items):
        hit = found.get(id(item))
        if hit is None or hit[0] > pos or (hit[1] is not None and hit[1].start() < pos):
            delimiter = item.delimiter
            scan = delimiter.scan
            if delimiter.literals is not None:
                match = watch.singles[index].combined.search(text, pos)
            elif scan is None:
                match = pattern_scan_item(item, text, pos, True)[0]
            elif scan.safe or quiet(scan, text, found):  # one-shot: the text is complete and short
                try:
                    regex_time_left()
                except TimeoutError:
                    raise RegexTimeoutError(
                        timeout_message(f"field {item.field.name!r}: {item.kind}_pattern {excerpt(delimiter.regex.pattern)}")
                    ) from None
                match = delimiter.regex.search(text, first_candidate(scan, text, pos))
            else:  # nested or adjacent repeats: the search keeps the time limit
                match = timed_call(item, delimiter.regex.search, text, first_candidate(scan, text, pos))
            work[0] += len(text) - pos
            found[id(item)] = (pos, match)
        else:
            match = hit[1]
        if match is None:
            continue
        start = match.start()
        key = (start, start - match.end(), item.rank)
        if best_key is None or key < best_key:
            best_key, best = key, (item, match, start)
    if best is None or best[2] >= len(text):
        return None  # as find_delimiter: nothing starts at the very end of the text
    item, match, start = best
    return item, start, match.end(), (match.groupdict() if item.delimiter.literals is None else None)


def _short_search(item: WatchItem, buffer: str, pos: int, memo: dict | None, key: int, base: int) -> Any:
    """At the end of a short text: one `search` (its cost is bounded by the square of `SHORT_SEARCH` for a pattern
    without nested or adjacent repeats; others keep the time limit), reused while the match found lies ahead. Same answer as
    the candidate scan (which a search gives by definition), without its per-call setup: short messages are mostly
    setup."""
    if memo is not None:
        found = memo.get((key, "found"))
        if found is not None and found[0] is buffer and (found[1] is None or found[1].start() >= pos) and found[2] <= pos:
            return found[1]
    pattern = item.delimiter.regex
    if item.delimiter.scan.safe:
        try:
            regex_time_left()
        except TimeoutError:
            raise RegexTimeoutError(
                timeout_message(f"field {item.field.name!r}: {item.kind}_pattern {excerpt(pattern.pattern)}")
            ) from None
        match = pattern.search(buffer, first_candidate(item.delimiter.scan, buffer, pos))
    else:  # nested or adjacent repeats: even a short text may take long, so the search keeps the time limit
        match = timed_call(item, pattern.search, buffer, first_candidate(item.delimiter.scan, buffer, pos))
    work[0] += len(buffer) - pos
    if memo is not None:
        memo[(key, "found")] = (buffer, match, pos)
        memo[key] = (match.start() if match is not None else len(buffer)) + base
    return match


def _literal_hold(watch: Watch, buffer: str, pos: int) -> int:
    """The first position from which the rest of the buffer is a proper prefix of a watched literal (text that
    may still become a delimiter), or the buffer's length."""
    end = len(buffer)
    start = max(pos, end - watch.longest + 1)
    found = watch.starters.search(buffer, start)
    while found is not None:
        at = found.start()
        if buffer[at:] in watch.prefixes:
            return at
        found = watch.starters.search(buffer, at + 1)
    return end


def _timer(item: WatchItem):
    return lambda *args, **kwargs: timed_call(item, *args, **kwargs)


def _check_budget(item: WatchItem) -> None:
    """Before a try without `regex`'s per-call timeout (see `_quick`): raise when the budget of the call is spent."""
    try:
        regex_time_left()
    except TimeoutError:
        raise RegexTimeoutError(
            timeout_message(f"field {item.field.name!r}: {item.kind}_pattern {excerpt(item.delimiter.regex.pattern)}")
        ) from None


def _quick(item: WatchItem):
    """Anchored tries of a pattern without nested or adjacent repeats (scan.PatternScan.safe): each is cheap, so they
    run without `regex`'s per-call timeout, which costs tens of microseconds a call; the budget of the call is still
    checked before each try."""

    def run(operation, *args, **kwargs):
        _check_budget(item)
        return operation(*args, **kwargs)

    return run


def timed_call(item: WatchItem, operation, *args, **kwargs):
    while True:
        try:
            return operation(*args, timeout=regex_time_left(), **kwargs)
        except TimeoutError:
            if not retry_after_timeout():  # (other threads advanced regex's clock: run it again)
                break
    # the timeout stands
    key = f"{item.kind}_pattern"
    raise RegexTimeoutError(timeout_message(f"field {item.field.name!r}: {key} {excerpt(item.delimiter.regex.pattern)}"))


def pattern_scan_item(item: WatchItem, buffer: str, pos: int, eos: bool) -> tuple[Any, int]:
    """Search a regex delimiter. Returns (the leftmost complete match or None, where a still-undecided match could
    start). A complete match is undecided while more text could make the pattern match elsewhere at or before it
    (an alternative or a greedy repeat still open at the end of the buffer), or while it leans on the end of the
    buffer (`$`, lookaheads). (For patterns the template analysis could not bound; see `_scan_item`.)"""
    pattern = item.delimiter.regex
    end = len(buffer)
    if eos:
        return timed_call(item, pattern.search, buffer, pos), end
    first = timed_call(item, pattern.search, buffer, pos, partial=True)
    if first is None:
        return None, end
    if first.partial:
        return None, first.start()
    # `regex` prefers a complete match anywhere to a partial one, so look for partial matches before it.
    match = first
    for start in range(pos, match.start()):
        if timed_call(item, pattern.fullmatch, buffer, start, partial=True) is not None:
            return match, start
    if match.end() == end:
        return match, match.start()  # at the edge: a repeat or an alternative may still grow it
    if timed_call(item, pattern.fullmatch, buffer, match.start(), partial=True) is None:
        return _settle_probe(item, buffer, match, end, ("\x00",))
    return _settle_probe(item, buffer, match, end)


def _settle_probe(item: WatchItem, buffer: str, match: Any, end: int, probes: tuple | None = None) -> tuple[Any, int]:
    """A complete match from whose start a way through the pattern also reaches the end of the buffer: more text may
    take precedence (a greedy repeat, an earlier alternative), and `$` or a lookahead may lean on the end. Lazy
    repeats and alternatives that already failed cannot change the match. Probe with the continuations the pattern
    spells: the match is final when none changes it."""
    pattern = item.delimiter.regex
    start = match.start()
    # Probing needs the text from the match on, plus some context for lookbehinds.
    offset = max(0, start - CONTEXT_KEPT)
    window = buffer[offset:]
    span = (start - offset, match.end() - offset)
    scan = item.delimiter.scan
    # anchored tries of a pattern without nested or adjacent repeats skip regex's per-call timeout (see _quick; None:
    # the probe loop below checks the budget itself)
    run = None if scan is not None and scan.safe else _timer(item)
    if probes is None:
        twin = _preferred_twin(pattern)
        if twin is not None:
            if (run or _quick(item))(twin.match, window, span[0], partial=True) is None:
                # no way regex prefers to this match reaches the end, so more text cannot change it, unless the match
                # itself leans on the end (a lookahead, `\Z`): the one probe for that
                probes = ("\x00",)
            elif not _LOOKBEHIND.search(pattern.pattern):
                # a preferred way reaches the end: more text may change the match, whether or not a probe shows it
                # (`<a(?:x{5}y)?` on `<axxx`). With a lookbehind, `regex` may report a failing one as reaching the
                # end: the probes decide.
                return match, start
    if probes is None:
        # The fixed probes are the shortest continuations only: a long literal cut by the end of the buffer
        # (`<|START_R`) is completed with its own rest, which may give a preferred, longer match at the same start.
        # Those few are tried first: when one changes the match, the hundreds of fixed probes need not run (the answer
        # does not depend on the order).
        # Then the fixed probes that go on with a literal run from the end of the window (`ought` after `<|channel>th`
        # in `<\|channel>(?:thought|...)`): those the completions miss where a run is written inside a group.
        fixed = item.delimiter.probes
        probes = (*_completions(pattern.pattern, window, span[1]), *_continuations(pattern.pattern, window, fixed), *fixed)
    at, groups, match_at = span[0], match.groupdict(), pattern.match
    for index, probe in enumerate(probes):
        if run is None:
            # (`_quick`, inlined: hundreds of probes may run; the budget is checked before every eighth, each try
            # costing about the window's length)
            if not index & 7:
                _check_budget(item)
            extended = match_at(window + probe, at)
        else:
            extended = run(match_at, window + probe, at)
        if extended is None or extended.span() != span or extended.groupdict() != groups:
            return match, start
    return match, end


# Syntax whose test at the end of the text `regex`'s partial mode may take as final (a negative lookahead, `$`, `\b`,
# `\B`...), backtracking verbs, and global inline flags (which must lead the pattern): no `_preferred_twin` for those.
_NO_TWIN = regex.compile(r"\$|\\[bBGK]|\(\?!|\(\*|\(\?[a-zA-Z-]+\)")
_TWINS: dict = {}
_LOOKBEHIND = regex.compile(r"\(\?<[=!]")


def _preferred_twin(pattern: Any) -> Any:
    """`(?:pattern)(*PRUNE)(*FAIL)`, or None. Tried in partial mode at the start of a match, it fails on reaching the
    end of the pattern by the preferred (first complete) way, with every way `regex` would try after it pruned: so it
    is partial exactly when a way tried before the match reaches the end of the text, the only way more text can
    change the match (a positive lookahead that reaches the end counts: `regex` reports it partial). One call instead
    of `_settle_probe`'s hundreds of probes, which a short stream feels (a few milliseconds per match, issue 29)."""
    source = pattern.pattern
    if source not in _TWINS:
        twin = None
        if not _NO_TWIN.search(source) and not REGEX_ONLY_SYNTAX.search(source):
            try:
                twin = regex.compile(f"(?:{source})(*PRUNE)(*FAIL)", pattern.flags)
            except (regex.error, OverflowError, RecursionError):
                twin = None
        if len(_TWINS) >= 1024:
            _TWINS.clear()
        _TWINS[source] = twin
    return _TWINS[source]


_PROBE_SETS: dict = {}


def _continuations(pattern: str, window: str, fixed: tuple) -> list[str]:
    """The fixed probes (`fixed`) that complete a literal run of the pattern whose inside ends the window (its last
    one or two characters), for `_settle_probe` to try first."""
    known = _PROBE_SETS.get(id(fixed))
    if known is None or known[0] is not fixed:
        if len(_PROBE_SETS) >= 1024:
            _PROBE_SETS.clear()
        known = _PROBE_SETS[id(fixed)] = (fixed, frozenset(fixed))
    found = []
    for size in (2, 1):
        tail = window[-size:]
        if len(tail) < size:
            continue
        for literal in literal_runs(pattern):
            at = literal.find(tail)
            while at >= 0:
                rest = literal[at + size:]
                if rest and rest in known[1]:
                    found.append(rest)
                at = literal.find(tail, at + 1)
    return found


def _completions(pattern: str, window: str, after: int) -> list[str]:
    """The rests of the pattern's literal runs whose beginnings end the window after position `after` (each also
    followed by a NUL, for lookaheads and `$` after it)."""
    rests = []
    for literal in literal_runs(pattern):
        for size in range(min(len(literal) - 1, len(window) - after), 0, -1):
            if window.endswith(literal[:size]):
                rests.append(literal[size:])
                rests.append(literal[size:] + "\x00")
    return rests

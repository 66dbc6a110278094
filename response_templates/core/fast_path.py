"""`FastPath`: what a chunk must avoid for a parser state (a watch) to skip the scan entirely: none of the watch's
trigger characters, and no run of a lead class at its end (held back: a delimiter may still start there). Built
once per watch when a template is compiled (`build_fast_path`); the streaming parser's hot path reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import regex

from .regex_syntax import sre_constants as _C
from .regex_syntax import sre_parse


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
        # (any_lead is not None when there are leads)
        lead_string="".join(char for char in _ASCII if len(leads) == 1 and any_lead.match(char) is not None),  # type: ignore[union-attr]
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
    # (None for a trigger that is not a literal: `split` below checks before the beginnings are read)
    literals = [_literal_of(source) for source, _, _ in ordered]  # type: ignore[misc]
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
        # (any_lead is not None when `blank`)
        lead_string="".join(char for char in _ASCII if blank and any_lead.match(char) is not None),  # type: ignore[union-attr]
        after=None,
        begin=any(scan.gate[1] for scan in scans),
        reach=0,
        chars=chars,
        lead_chars=frozenset(char for char in _ASCII if blank and any_lead.match(char) is not None),  # type: ignore[union-attr]
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

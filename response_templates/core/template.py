"""Validation and compilation of response templates (format version 1).

A template is compiled once into immutable objects the parser reads: each delimiter becomes a `Delimiter`, and
for each parser state the delimiters it watches are grouped into a `Watch` ready for scanning. Compiled templates
are cached by content, so parsing a thousand messages with the same template dict compiles it once.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import warnings
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any, Callable, cast

import regex

from .content import PARSERS, TEXT_LIKE, compile_transform, mixed_placeholder
from .errors import RegexTimeoutError, TemplateError, excerpt, regex_time_left, retry_after_timeout, timeout_message
from .fast_path import build_fast_path
from .limits import MAX_REPEAT_PRODUCT, MAX_VALUE_PARSER_NESTING, check_limits, template_location
from .pattern_scan import analyze
from .regex_syntax import REGEX_ONLY_SYNTAX, single_charset, sre_constants, sre_parse

TEMPLATE_KEYS = ("version", "defaults", "start_anchor", "start_anchor_pattern", "fields")
FIELD_KEYS = (
    "open", "open_pattern", "close", "close_pattern", "content", "content_args",
    "repeats", "join", "optional", "transform", "transform_each",
)
# The content_args each parser reads, with the type each must have.
_STRIP = {"strip": bool}
CONTENT_ARGS: dict[str, dict[str, Any]] = {
    "text": _STRIP,
    "int": _STRIP,
    "float": _STRIP,
    "bool": _STRIP,
    "json": {
        "strip": bool, "unquoted_keys": bool, "string_delims": list, "allow_non_json": bool,
        # ours (docs/differences.md): with unquoted_keys, an object's members written without braces read as it
        "braceless_members": bool,
    },
    "xml-inline": {
        "tag_pattern": str, "value_parser": dict, "value_parser_by": dict, "merge_duplicates": bool,
        # ours (docs/differences.md): keys and the open/close captures are XML attribute values, entities decoded
        "unescape_attributes": bool,
        # ours (docs/differences.md): values written as nested child elements (MiniMax M3) read into dicts and lists
        "nested_elements": dict,
        # ours (docs/differences.md): a body without tags read as one JSON object, between optional literals
        "json_body": dict,
    },
    "kv-lines": {"strip": bool, "line_sep": str, "kv_sep": str, "value_parser": dict},
    # ours (docs/differences.md): the list may hold JSON call objects, [{"name": ..., "arguments": {...}}]; strings
    # pasted raw between quotes, read where the strict reading fails
    "python-call-list": {"json_calls": bool, "raw_strings": bool},
}


@dataclass(frozen=True)
class Delimiter:
    """An open, close or start delimiter: literals (one or several) or a regex."""

    regex: Any
    literals: tuple[str, ...] | None  # None for a regex delimiter
    extendable: bool  # one literal is a strict prefix of another
    probes: tuple[str, ...] = ()  # for a regex: continuations to try when deciding whether a match is final
    scan: Any = None  # for a regex: where its matches can start (scan.PatternScan), None to scan with search


@dataclass(frozen=True)
class Field:
    name: str
    open: Delimiter | None
    close: Delimiter | None
    content: str
    content_args: dict
    repeats: bool
    join: str | None
    optional: bool
    transform: Any
    transform_each: bool
    parse: Any = None  # the content parser function
    build: Any = None  # the compiled transform (scope -> value), or None

    @property
    def text_like(self) -> bool:
        return self.content in TEXT_LIKE


@dataclass(frozen=True)
class WatchItem:
    kind: str  # "open" or "close"
    field: Field
    delimiter: Delimiter
    # Sort key among matches at the same start and length: opens before closes, then by field name.
    rank: tuple = ()


@dataclass
class Watch:
    """The delimiters one parser state looks for, prepared for scanning.

    When every delimiter is literal, one alternation (longest first) finds the leftmost-longest of them, and the
    set of their proper prefixes tells which buffer tail could still grow into one."""

    items: list[WatchItem]
    literal_only: bool = False
    combined: Any = None
    owner: dict = dataclass_field(default_factory=dict)  # literal -> WatchItem that wins it
    prefixes: frozenset = frozenset()
    longest: int = 0
    starters: Any = None  # a character class of the first characters of the literals
    lone_starter: str | None = None  # the only first character, when there is one
    # Literal delimiters only (or none): a chunk without any of their first characters cannot hold one.
    simple: bool = False
    # In a watch mixing literals and regexes: item index -> a Watch of that literal item alone.
    singles: dict = dataclass_field(default_factory=dict)
    # In a watch with regexes: the chunk fast path (scan.FastPath), None when a regex could not be analyzed.
    fast: Any = None
    # One-shot parsing of a short text: the delimiters as one alternation (oneshot.ShortPlan), built on first use;
    # False when a pattern cannot join one.
    short_plan: Any = dataclass_field(default=None, compare=False, repr=False)

    @classmethod
    def build(cls, items: list[WatchItem]) -> "Watch":
        watch = cls(items)
        if not items:
            watch.simple = True
            return watch
        if any(item.delimiter.literals is None for item in items):
            watch.singles = {i: cls.build([item]) for i, item in enumerate(items) if item.delimiter.literals is not None}
            watch.fast = build_fast_path(
                [literal for item in items if item.delimiter.literals is not None for literal in item.delimiter.literals],
                [item.delimiter.scan for item in items if item.delimiter.literals is None],
            )
            return watch
        owner: dict[str, WatchItem] = {}
        for item in sorted(items, key=lambda item: item.rank):
            for literal in cast(tuple, item.delimiter.literals):  # not None: a watch with a regex returned above
                owner.setdefault(literal, item)
        literals = sorted(owner, key=len, reverse=True)
        watch.literal_only = True
        watch.owner = owner
        watch.combined = regex.compile("|".join(regex.escape(literal) for literal in literals), regex.DOTALL)
        watch.prefixes = frozenset(literal[:size] for literal in literals for size in range(1, len(literal)))
        watch.longest = max(map(len, literals))
        firsts = sorted({literal[0] for literal in literals})
        watch.starters = regex.compile("|".join(regex.escape(char) for char in firsts))
        watch.lone_starter = firsts[0] if len(firsts) == 1 else None
        watch.simple = True
        return watch

    def may_start_in(self, text: str) -> bool:
        """Whether a watched delimiter could start somewhere in `text` (only meaningful when `simple`)."""
        if self.lone_starter is not None:
            return self.lone_starter in text
        return self.starters is not None and self.starters.search(text) is not None


# A prompt at most this long is cut at its last start anchor without `regex`'s per-call timeout (which costs about
# 2 us a call, as much as the whole search of a short prompt) when the anchor pattern cannot backtrack badly
# (`pattern_scan.analyze(...).safe`: each try is linear): at most one try per character, so at most the square of this
# length in steps (about 4 million, tens of milliseconds), far below the regex time limit. Longer prompts keep it.
_UNTIMED_PROMPT = 2048


@dataclass(frozen=True)
class CompiledTemplate:
    """A validated, compiled response template. Build it with `load_template`."""

    source: dict
    defaults: dict
    fields: dict
    implicit: str | None
    start_anchor: Delimiter
    # Always given by `load_template`; the None defaults only let the fields after them have defaults.
    idle_watch: Watch = None  # type: ignore[assignment]  # in the implicit region (or nowhere): every open, and the implicit close
    field_watch: dict = None  # type: ignore[assignment]  # in an explicit region: its close
    # A delimiter regex with a lookbehind may look arbitrarily far back, so the stream keeps all consumed text.
    keeps_history: bool = False
    flat_defaults: bool = True  # no default is a list or dict
    required: tuple = ()  # fields with optional: false
    # A single literal anchor that cannot overlap itself: its last occurrence is the last non-overlapping one.
    simple_anchor: str | None = None
    # Otherwise, literals (one or several, a pattern that only spells literals counts) no two of whose occurrences
    # can overlap: the last match of the anchor ends where the last occurrence of any of them ends.
    anchor_literals: tuple | None = None
    # Otherwise, for a safe anchor pattern whose every match begins with one of a few literals: those literals, and
    # how far past its start a match can hold one of their first characters (`_anchor_starts`), or None.
    anchor_starts: tuple | None = None
    anchor_reach: int = 0

    def fresh_defaults(self) -> dict:
        """A copy of `defaults` that parsing may fill in (deep only when some default is a container)."""
        if self.flat_defaults:
            return dict(self.defaults)
        return copy.deepcopy(self.defaults)

    def to_dict(self) -> dict:
        """A deep copy of the template dict this was compiled from."""
        return copy.deepcopy(self.source)

    def __reduce__(self):
        # pickled as the template dict it came from (compiled regexes and closures do not pickle; compiling again
        # gives the same template, and an equal one already compiled in the process is reused)
        return (load_template, (self.source,))

    def truncate_prefix(self, prefix: str) -> str:
        """What follows the last start anchor in the prompt (the whole prompt when there is none)."""
        anchor = self.simple_anchor
        if anchor is not None:
            at = prefix.rfind(anchor)
            return prefix if at < 0 else prefix[at + len(anchor):]
        literals = self.anchor_literals
        if literals is not None:
            last = -1
            for literal in literals:
                at = prefix.rfind(literal)
                if at >= 0 and at + len(literal) > last:
                    last = at + len(literal)
            return prefix if last < 0 else prefix[last:]
        end = None
        try:
            if self.anchor_starts is not None:
                end = self._last_anchor_end(prefix)
                if end is not _UNDECIDED:
                    return prefix if end is None else prefix[end:]
                end = None
            scan = self.start_anchor.scan
            left = regex_time_left()  # (raises when the budget of the call is spent)
            if len(prefix) <= _UNTIMED_PROMPT and scan is not None and scan.safe:
                matches = self.start_anchor.regex.finditer(prefix)
            else:
                matches = self.start_anchor.regex.finditer(prefix, timeout=left)
            for match in matches:
                end = match.end()
        except TimeoutError:
            if retry_after_timeout():  # other threads advanced regex's clock, not this search: run it again
                return self.truncate_prefix(prefix)
            raise RegexTimeoutError(
                timeout_message(f"response_template.start_anchor_pattern {excerpt(self.start_anchor.regex.pattern)} on the prompt")
            ) from None
        return prefix if end is None else prefix[end:]

    def _last_anchor_end(self, prefix: str) -> Any:
        """Where the last match of the start anchor ends (as a scan of the whole prompt finds it), or None when there
        is none, found from the end of the prompt: the last place where the anchor matches, once no match that
        starts before it can reach over it (then a scan would skip it). `_UNDECIDED` when that cannot be told
        cheaply (many candidates that do not match, or a match reaching over the last one): the caller scans."""
        match, starts = self.start_anchor.regex.match, self.anchor_starts
        assert starts is not None  # the caller checked
        if len(prefix) > _UNTIMED_PROMPT:  # a try may still read far (a lookahead): a long prompt keeps the limit
            match = functools.partial(match, timeout=regex_time_left())
        before = len(prefix) + 1  # the next candidate starts before this
        for _ in range(_ANCHOR_TRIES):
            at = _last_start(prefix, starts, 0, before)
            if at < 0:
                return None  # every match starts with one of the literals: there is none
            found = match(prefix, at)
            if found is not None:
                break
            before = at
        else:
            return _UNDECIDED
        # A match that starts before `at` and ends after it starts within `anchor_reach` of it.
        low, before = max(0, at - self.anchor_reach + 1), at
        while True:
            other = _last_start(prefix, starts, low, before)
            if other < 0:
                return found.end()
            reaching = match(prefix, other)
            if reaching is not None and reaching.end() > at:
                return _UNDECIDED
            before = other


def _last_start(text: str, starts: tuple, low: int, before: int) -> int:
    """The last position from `low` on and before `before` where one of the literals `starts` occurs, or -1."""
    if len(starts) == 1:
        return text.rfind(starts[0], low, before - 1 + len(starts[0]))
    last = -1
    for start in starts:
        at = text.rfind(start, low, before - 1 + len(start))
        if at > last:
            last = at
    return last


def _overlaps_itself(literal: str) -> bool:
    """Whether two occurrences of `literal` can overlap (a proper prefix is also a suffix)."""
    return any(literal[:size] == literal[-size:] for size in range(1, len(literal)))


_UNDECIDED = object()
# `_last_anchor_end` tries this many candidates from the end of the prompt before it leaves the prompt to the scan.
_ANCHOR_TRIES = 8
# The longest reach `_anchor_starts` accepts (the candidates before the last match it looks at).
_MOST_ANCHOR_REACH = 1024


def _overlap(first: str, second: str) -> bool:
    """Whether an occurrence of `first` and one of `second` can overlap (one holds the other, or a proper suffix of
    one is a prefix of the other)."""
    if first in second or second in first:
        return True
    return any(first[-size:] == second[:size] or second[-size:] == first[:size] for size in range(1, min(len(first), len(second))))


_MOST_ANCHOR_LITERALS = 16


def spelled_literals(items: Any, optional: bool = False, most: int = _MOST_ANCHOR_LITERALS) -> list | None:
    """The strings a parsed regex (Python's parser) can match when it only spells literals and alternatives of them
    (and, with `optional`, optional parts of them: `s?`), at most `most` of them, or None."""
    results = [""]
    for op, av in items:
        if op is sre_constants.LITERAL:
            results = [text + chr(av) for text in results]
        elif optional and op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT) and av[0] == 0 and av[1] == 1:
            spelled = spelled_literals(av[2], optional, most)
            if spelled is None:
                return None
            results = [text + option for text in results for option in [""] + spelled]
        elif op is sre_constants.BRANCH:
            options = []
            for alternative in av[1]:
                spelled = spelled_literals(alternative, optional, most)
                if spelled is None:
                    return None
                options += spelled
            results = [text + option for text in results for option in options]
        elif op is sre_constants.SUBPATTERN and not (av[1] or av[2]):
            spelled = spelled_literals(av[3], optional, most)
            if spelled is None:
                return None
            results = [text + option for text in results for option in spelled]
        else:
            return None
        if len(results) > most:
            return None
    return results


def _parsed_anchor(anchor: Delimiter) -> Any:
    """A regex start anchor as Python's parser reads it, or None when that reading may differ from the `regex`
    module's (its own syntax, flags other than DOTALL)."""
    pattern = anchor.regex.pattern
    if REGEX_ONLY_SYNTAX.search(pattern) or anchor.regex.flags != regex.compile("", regex.DOTALL).flags:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            parsed = sre_parse.parse(pattern, re.DOTALL)
    except (re.error, RecursionError, OverflowError, Warning, ValueError, TypeError):
        return None
    return None if parsed.state.flags & ~(re.DOTALL | re.UNICODE) else parsed


def _anchor_literals(anchor: Delimiter) -> tuple | None:
    """The literals of a start anchor whose matches are exactly the occurrences of a few literals that cannot
    overlap, or None."""
    literals: tuple | list | None = anchor.literals
    if literals is None:
        parsed = _parsed_anchor(anchor)
        if parsed is None:
            return None
        literals = spelled_literals(parsed)
        if literals is None:
            return None
    literals = tuple(dict.fromkeys(literals))
    if not literals or "" in literals or any(_overlaps_itself(literal) for literal in literals):
        return None
    if any(_overlap(first, second) for index, first in enumerate(literals) for second in literals[index + 1:]):
        return None
    return literals


def _anchor_starts(anchor: Delimiter) -> tuple | None:
    """For a start anchor that `_anchor_literals` leaves to a scan, cannot backtrack badly, and whose every match
    begins with one of a few literals: those literals and the anchor's reach (`_reach`). None when the pattern is of
    another shape, or reaches farther than `_MOST_ANCHOR_REACH`."""
    if anchor.literals is not None or anchor.scan is None or not anchor.scan.safe:
        return None
    parsed = _parsed_anchor(anchor)
    if parsed is None:
        return None
    try:
        starts = _leading_literals(list(parsed))
        if not starts:
            return None
        reach = _reach(parsed.state, list(parsed), starts)
    except (re.error, RecursionError, OverflowError, ValueError, TypeError, IndexError):
        return None
    if reach is None or reach > _MOST_ANCHOR_REACH:
        return None
    # a literal that begins with another one adds no candidate
    starts = sorted(set(starts), key=len)
    kept = [start for index, start in enumerate(starts) if not start.startswith(tuple(starts[:index]))]
    return tuple(kept), max(reach, 1)


def _leading_literals(items: list) -> list | None:
    """Literals one of which begins every match of a parsed regex, or None."""
    results = [""]
    for op, av in items:
        spelled = [chr(av)] if op is sre_constants.LITERAL else None
        whole = True
        if op is sre_constants.BRANCH:
            spelled = spelled_literals([(op, av)])
            if spelled is None:  # alternatives that go on past their literals: what each begins with, then stop
                whole, spelled = False, []
                for alternative in av[1]:
                    leading = _leading_literals(list(alternative))
                    if leading is None:
                        spelled = None
                        break
                    spelled += leading
        elif op is sre_constants.SUBPATTERN and not (av[1] or av[2]):
            spelled = spelled_literals(list(av[3]))
            if spelled is None:
                whole, spelled = False, _leading_literals(list(av[3]))
        if not spelled or "" in spelled:
            break
        results = [text + piece for text in results for piece in spelled]
        if len(results) > _MOST_ANCHOR_LITERALS:
            return None
        if not whole:
            break
    return None if "" in results else results


def _reach(state: Any, items: list, starts: list) -> int | None:
    """How far from its start a match of a parsed regex can hold the beginning of an occurrence of one of the
    literals `starts`, or None when unbounded: its widest match, less what ends it and cannot hold one: a repeat of a
    class without their first characters (`\\s*`, `[^<]*`), a run of literals that disagrees with each of them
    wherever it has one's first character (`<|end_of_role|>` for `<|start_of_role|>`)."""
    firsts = {start[0] for start in starts}
    while items:
        op, av = items[-1]
        if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT):
            chars = single_charset(av[2])
            source = chars.source() if chars is not None else None
            if source is None or any(regex.match(source, first, regex.DOTALL) for first in firsts):
                break
            items = items[:-1]
        elif op is sre_constants.LITERAL:
            size = 1
            while size < len(items) and items[-size - 1][0] is sre_constants.LITERAL:
                size += 1
            run = "".join(chr(code) for _, code in items[-size:])
            if any(_agree(run[offset:], start) for offset in range(len(run)) for start in starts):
                break
            items = items[:-size]
        else:
            break
    last = None
    if items and items[-1][0] is sre_constants.BRANCH:
        reaches = [_reach(state, list(alternative), starts) for alternative in items[-1][1][1]]
        last = None if None in reaches else max(cast("list[int]", reaches))  # no None in it: checked first
        if last is None:
            return None
        items = items[:-1]
    widest = sre_parse.SubPattern(state, items).getwidth()[1] if items else 0
    return None if widest >= sre_constants.MAXREPEAT else widest + (last or 0)


def _agree(first: str, second: str) -> bool:
    """Whether two strings agree where both have characters (one is a prefix of the other)."""
    size = min(len(first), len(second))
    return first[:size] == second[:size]


_COUNTED = regex.compile(r"(?<!\\)\{(\d*),?(\d*)\}")


def _compile_regex(pattern: Any, where: str) -> Any:
    if not isinstance(pattern, str):
        raise TemplateError(f"{where} must be a regex string, got {type(pattern).__name__}")
    # Counted repeats are expanded when compiling: nested ones like ((a{1000}){1000}){1000} exhaust memory.
    product = 1
    for low, high in _COUNTED.findall(pattern):
        product *= max(int(low or 0), int(high or 0), 1)
        if product > MAX_REPEAT_PRODUCT:
            raise TemplateError(f"{where}: counted repetitions ({{m,n}}) multiply past {MAX_REPEAT_PRODUCT}; simplify the regex")
    try:
        return regex.compile(pattern, regex.DOTALL)
    except (regex.error, OverflowError, RecursionError) as error:
        raise TemplateError(f"{where} is not a valid regex: {error}") from None


def _delimiter(spec: dict, field_name: str | None, literal_key: str, pattern_key: str) -> Delimiter | None:
    if literal_key in spec and pattern_key in spec:
        raise TemplateError(
            f"{template_location(field_name, literal_key)} and {pattern_key!r} are both given; use one or the other"
        )
    if pattern_key in spec:
        compiled = _compile_regex(spec[pattern_key], template_location(field_name, pattern_key))
        return Delimiter(compiled, None, False, _probes(compiled.pattern), analyze(compiled.pattern))
    if literal_key not in spec:
        return None
    where = template_location(field_name, literal_key)
    raw = spec[literal_key]
    if isinstance(raw, str):
        literals = [raw]
    elif isinstance(raw, list):
        if not raw:
            raise TemplateError(f"{where} is an empty list; give at least one literal")
        for item in raw:
            if not isinstance(item, str):
                raise TemplateError(f"{where} must list strings only, found {type(item).__name__} {excerpt(item)}")
        literals = list(dict.fromkeys(raw))
    else:
        raise TemplateError(f"{where} must be a string or a list of strings, got {type(raw).__name__}")
    if "" in literals:
        raise TemplateError(f"{where} holds an empty string, which would match everywhere")
    ordered = sorted(literals, key=len, reverse=True)
    pattern = regex.compile("|".join(regex.escape(literal) for literal in ordered), regex.DOTALL)
    # one literal is a strict prefix of another: in code point order, the shorter one is followed by one it begins
    by_text = sorted(literals)
    extendable = any(later.startswith(earlier) for earlier, later in zip(by_text, by_text[1:]))
    return Delimiter(pattern, tuple(literals), extendable)


_META = regex.compile(r"\\[AbBdDsSwWZ]|\\(.)|[\[\](){}?*+.^$|]")


@functools.lru_cache(maxsize=1024)
def literal_runs(pattern: str) -> tuple[str, ...]:
    """The runs of literal text a regex spells (`<|START_RESPONSE|>` in `<\\|START_RESPONSE\\|>\\s*|...`)."""
    return tuple(run for run in _META.sub(lambda m: m.group(1) or "\0", pattern).split("\0") if run)


def _probes(pattern: str) -> tuple[str, ...]:
    """Texts that could follow a buffer and change a regex match: the tails of the literal runs the pattern spells
    (what an unfinished alternative or repeat waits for), each single character of the pattern, and a few generic
    characters (a NUL stands for "anything else", as for `$` and lookaheads).

    The 300 shortest (then in code point order) are kept, built one length at a time: listing every tail of a long
    literal run first would take memory growing with the square of its length. The literal runs themselves follow."""
    runs = literal_runs(pattern)
    singles = {"\x00", "\n", " ", "a", "A", "0", "9", "_", "-", "."} | set("".join(runs))
    longest = max(map(len, runs), default=0)
    tails: dict[int, set] = {}

    def tails_of(size: int) -> set:
        if size not in tails:
            tails[size] = {run[-size:] for run in runs if len(run) >= size}
        return tails[size]

    chosen: list[str] = []
    for size in range(1, longest + 4):
        level = set(tails_of(size))
        if size == 1:
            level |= singles
        # what a character class or repeat may still want before a literal tail: one to three characters, then the tail
        for char in ("0", "a", " ", "\n"):
            for count in (1, 2, 3):
                if count == size:
                    level.add(char * count)
                elif count < size:
                    level.update(char * count + tail for tail in tails_of(size - count))
        chosen.extend(sorted(level))
        if len(chosen) >= 300:
            break
    # and each literal run whole: a lookahead that a later marker would defeat (`(?=(?:(?!</arg_value>).)*\Z)`) is
    # only undone by the marker written out in full, which the short tails above may not reach
    kept = chosen[:300]
    return tuple(kept + sorted(set(runs) - set(kept)))


_TYPE_NAMES = {str: "string", bool: "bool (true or false)", dict: "dict", list: "list"}


def _check_type(value: Any, expected: type, where: str) -> None:
    if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
        raise TemplateError(f"{where} must be a {_TYPE_NAMES.get(expected, expected.__name__)}, got {type(value).__name__} {excerpt(value)}")


def _check_value_parser(spec: Any, where: str, depth: int = 0) -> None:
    if not isinstance(spec, dict):
        raise TemplateError(f"{where} must be a dict like {{'name': 'json', 'args': {{}}}}, got {type(spec).__name__}")
    unknown = sorted(set(spec) - {"name", "args"})
    if unknown:
        raise TemplateError(f"{where} has unknown keys {unknown}; allowed: ['args', 'name']")
    name = spec.get("name", "text")
    if not isinstance(name, str) or name not in PARSERS:
        raise TemplateError(f"{where}.name: unknown content parser {name!r}; known: {sorted(PARSERS)}")
    if depth > MAX_VALUE_PARSER_NESTING:
        raise TemplateError(f"{where}: value parsers nested more than {MAX_VALUE_PARSER_NESTING} levels deep")
    _check_content_args(name, spec.get("args", {}), f"{where}.args", depth + 1)


def _check_nested_elements(spec: dict, where: str) -> None:
    unknown = sorted(set(spec) - {"prefix", "item_tag"})
    if unknown:
        raise TemplateError(f"{where} has unknown keys {unknown}; allowed: ['item_tag', 'prefix']")
    if "prefix" not in spec:
        raise TemplateError(f"{where}.prefix is required: the text written before every tag (a namespace token)")
    for key, value in spec.items():
        # a leaf's text ends at the next prefix, so an empty one would end every value at once
        if not isinstance(value, str) or not value:
            raise TemplateError(f"{where}.{key} must be a non-empty string, got {excerpt(value)}")


def _check_json_body(spec: dict, where: str) -> None:
    unknown = sorted(set(spec) - {"open", "close"})
    if unknown:
        raise TemplateError(f"{where} has unknown keys {unknown}; allowed: ['close', 'open']")
    for key, value in spec.items():
        if not isinstance(value, str):
            raise TemplateError(f"{where}.{key} must be a string (the literal written around the JSON object), got {excerpt(value)}")


def _check_content_args(content: str, args: Any, where: str, depth: int = 0) -> None:
    if not isinstance(args, dict):
        raise TemplateError(f"{where} must be a dict, got {type(args).__name__}")
    allowed = CONTENT_ARGS[content]
    unknown = sorted(set(args) - set(allowed))
    if unknown:
        raise TemplateError(f"{where} has keys {unknown} that the {content!r} parser does not read; it reads {sorted(allowed)}")
    for key, value in args.items():
        _check_type(value, allowed[key], f"{where}.{key}")
    if content == "json":
        for index, pair in enumerate(args.get("string_delims", [])):
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(s, str) and s for s in pair)):
                raise TemplateError(f"{where}.string_delims[{index}] must be a pair [open, close] of non-empty strings, got {excerpt(pair)}")
    if content == "kv-lines":
        for key in ("line_sep", "kv_sep"):
            if args.get(key) == "":
                raise TemplateError(f"{where}.{key} must not be empty")
    if content == "xml-inline":
        if "tag_pattern" not in args:
            raise TemplateError(f"{where}.tag_pattern is required by the 'xml-inline' parser")
        tag = _compile_regex(args["tag_pattern"], f"{where}.tag_pattern")
        if "key" not in tag.groupindex:
            raise TemplateError(f"{where}.tag_pattern must have a named group 'key' (and usually 'value')")
        if "value_parser" in args:
            _check_value_parser(args["value_parser"], f"{where}.value_parser", depth)
        if "nested_elements" in args:
            _check_nested_elements(args["nested_elements"], f"{where}.nested_elements")
        if "json_body" in args:
            _check_json_body(args["json_body"], f"{where}.json_body")
        if "value_parser_by" in args:
            by = args["value_parser_by"]
            if set(by) != {"group", "parsers"} or not isinstance(by.get("group"), str) or not isinstance(by.get("parsers"), dict):
                raise TemplateError(
                    f"{where}.value_parser_by must be {{'group': <named group of tag_pattern>, 'parsers': {{capture: value parser}}}}"
                )
            if by["group"] not in tag.groupindex:
                raise TemplateError(f"{where}.value_parser_by.group {by['group']!r} is not a named group of tag_pattern")
            for capture, parser in by["parsers"].items():
                _check_value_parser(parser, f"{where}.value_parser_by.parsers[{capture!r}]", depth)
    if content == "kv-lines" and "value_parser" in args:
        _check_value_parser(args["value_parser"], f"{where}.value_parser", depth)


def _field(name: str, spec: Any) -> Field:
    if not isinstance(spec, dict):
        raise TemplateError(f"response_template.fields[{name!r}] must be a dict, got {type(spec).__name__}")
    unknown = sorted(set(spec) - set(FIELD_KEYS))
    if unknown:
        raise TemplateError(f"response_template.fields[{name!r}] has unknown keys {unknown}; allowed: {sorted(FIELD_KEYS)}")
    content = spec.get("content", "text")
    if not isinstance(content, str) or content not in PARSERS:
        raise TemplateError(f"{template_location(name, 'content')}: unknown content parser {content!r}; known: {sorted(PARSERS)}")
    content_args = spec.get("content_args", {})
    _check_content_args(content, content_args, template_location(name, "content_args"))
    opener = _delimiter(spec, name, "open", "open_pattern")
    closer = _delimiter(spec, name, "close", "close_pattern")
    for key in ("repeats", "optional", "transform_each"):
        if key in spec:
            _check_type(spec[key], bool, template_location(name, key))
    repeats = spec.get("repeats", False)
    join = spec.get("join")
    if join is not None:
        _check_type(join, str, template_location(name, "join"))
        if not repeats:
            raise TemplateError(f"{template_location(name, 'join')}: 'join' requires 'repeats': true (it joins the repeated matches)")
    transform = spec.get("transform")
    transform_each = spec.get("transform_each", False)
    if transform_each and transform is None:
        raise TemplateError(f"{template_location(name, 'transform_each')} is true but the field has no 'transform'")
    if transform is not None:
        mixed = mixed_placeholder(transform)
        if mixed is not None:
            raise TemplateError(
                f"{template_location(name, 'transform')}: the string {excerpt(mixed)} mixes a {{placeholder}} with other text; "
                'a string is either a whole placeholder such as "{content}" or a plain literal (string interpolation is not '
                "supported)"
            )
    else:
        for key, delimiter in (("open_pattern", opener), ("close_pattern", closer)):
            if delimiter is not None and delimiter.literals is None and delimiter.regex.groupindex:
                raise TemplateError(
                    f"{template_location(name, key)} has named groups {sorted(delimiter.regex.groupindex)} but the field has no "
                    "'transform'; captures only reach the message through a transform, so add one that uses them "
                    "or drop the names"
                )
    return Field(
        name=name,
        open=opener,
        close=closer,
        content=content,
        content_args=copy.deepcopy(content_args),
        repeats=repeats,
        join=join,
        optional=spec.get("optional", True),
        transform=copy.deepcopy(transform),
        transform_each=transform_each,
        parse=PARSERS[content],
        build=compile_transform(transform) if transform is not None else None,
    )


def _compile(spec: Any) -> CompiledTemplate:
    if not isinstance(spec, dict):
        raise TemplateError(f"response_template must be a dict, got {type(spec).__name__}")
    version = spec.get("version", 1)
    if version != 1 or isinstance(version, bool):
        raise TemplateError(f"response_template.version: unsupported version {version!r} (this package reads version 1)")
    unknown = sorted(set(spec) - set(TEMPLATE_KEYS))
    if unknown:
        raise TemplateError(f"response_template has unknown keys {unknown}; allowed: {sorted(TEMPLATE_KEYS)}")
    defaults = spec.get("defaults", {})
    if not isinstance(defaults, dict):
        raise TemplateError(f"response_template.defaults must be a dict, got {type(defaults).__name__}")
    raw_fields = spec.get("fields")
    if not isinstance(raw_fields, dict) or not raw_fields:
        raise TemplateError("response_template.fields must be a non-empty dict of field name -> field spec")
    fields = {}
    for name, field_spec in raw_fields.items():
        if not isinstance(name, str) or not name:
            raise TemplateError(f"response_template.fields: field names must be non-empty strings, got {name!r}")
        fields[name] = _field(name, field_spec)
    _check_defaults(defaults, fields)
    implicit = [name for name, field in fields.items() if field.open is None]
    if len(implicit) > 1:
        raise TemplateError(
            f"response_template.fields: {implicit} have no 'open'/'open_pattern'; at most one field may "
            "(it receives the text outside every other field)"
        )
    anchor = _delimiter(spec, None, "start_anchor", "start_anchor_pattern")
    if anchor is None:
        raise TemplateError("response_template needs 'start_anchor' or 'start_anchor_pattern' (where the assistant turn starts)")

    def rank(kind: str, field: Field) -> tuple:
        return (0 if kind == "open" else 1, field.name)

    idle = [WatchItem("open", f, f.open, rank("open", f)) for f in fields.values() if f.open is not None]
    implicit_name = implicit[0] if implicit else None
    if implicit_name is not None and fields[implicit_name].close is not None:
        implicit_field = fields[implicit_name]
        # (its close is not None: checked just above)
        idle.append(WatchItem("close", implicit_field, cast(Delimiter, implicit_field.close), rank("close", implicit_field)))
    field_watch = {
        name: Watch.build([WatchItem("close", f, f.close, rank("close", f))] if f.close is not None else [])
        for name, f in fields.items()
        if name != implicit_name
    }
    patterns = [d.regex.pattern for f in fields.values() for d in (f.open, f.close) if d is not None and d.literals is None]
    anchor_literals = _anchor_literals(anchor)
    starts, reach = (_anchor_starts(anchor) if anchor_literals is None else None) or (None, 0)
    return CompiledTemplate(
        simple_anchor=(
            anchor.literals[0]
            if anchor.literals is not None and len(anchor.literals) == 1 and not _overlaps_itself(anchor.literals[0])
            else None
        ),
        anchor_literals=anchor_literals,
        anchor_starts=starts,
        anchor_reach=reach,
        required=tuple(name for name, f in fields.items() if not f.optional),
        flat_defaults=not any(isinstance(value, (list, dict)) for value in defaults.values()),
        keeps_history=any("(?<=" in p or "(?<!" in p for p in patterns),
        source=copy.deepcopy(spec),
        defaults=copy.deepcopy(defaults),
        fields=fields,
        implicit=implicit_name,
        start_anchor=anchor,
        idle_watch=Watch.build(idle),
        field_watch=field_watch,
    )


def _check_defaults(defaults: dict, fields: dict) -> None:
    """A default of a field is where its matches are added: a repeating field appends to a list, a `join` field
    adds to a string (or starts from None). Anything else would load and then fail at the first match."""
    for name, value in defaults.items():
        field = fields.get(name)
        if field is None:
            continue
        where = f"response_template.defaults[{name!r}]"
        if field.join is not None:
            if value is not None and not isinstance(value, str):
                raise TemplateError(
                    f"{where} must be a string or null: field {name!r} joins its matches into a string ('join'), "
                    f"got {type(value).__name__} {excerpt(value)}"
                )
        elif field.repeats and not isinstance(value, list):
            raise TemplateError(
                f"{where} must be a list: field {name!r} repeats (each match is appended to a list), got "
                f"{type(value).__name__} {excerpt(value)}"
            )


# Compiled templates by the id of the dict they came from, and by content (the repr) for equal templates held in
# other dicts. An entry by id holds the dict itself, so that its id cannot be given to another dict while the entry
# lives (a new dict at a freed dict's address got the freed one's template), and a snapshot of it, so that a dict
# changed in place is compiled again (a change `==` cannot see, such as 1 -> true or reordered keys, is not noticed).
_BY_ID: dict[int, tuple[dict, dict, CompiledTemplate]] = {}
_BY_CONTENT: dict[str, CompiledTemplate] = {}
_CACHE_LIMIT = 256


# How a str names a template: set by the package root to the shipped library's lookup. The core does not import
# the library (it sits above the core); without a resolver a name is an error.
_name_resolver: Callable[[str], dict] | None = None


def set_name_resolver(resolver: Callable[[str], dict] | None) -> None:
    """Make `load_template(name)` look `name` up with `resolver` (which raises KeyError for an unknown name)."""
    global _name_resolver
    _name_resolver = resolver


def _library_template(name: str) -> dict:
    if name.lstrip().startswith("{"):
        raise TemplateError("response_template is a str holding JSON; pass the dict (json.loads(text)), or a library name")
    if _name_resolver is None:
        raise TemplateError(f"response_template is the str {name!r:.60}, but no template library is available to look it up")
    try:
        return _name_resolver(name)
    except KeyError as error:
        raise TemplateError(f"a str response_template is a library template name: {error}") from None


def load_template(spec: dict | str | CompiledTemplate) -> CompiledTemplate:
    """Validate and compile a response template dict (or return an already compiled one). A str is the name of a
    template of the shipped library (`get_template(name)`), such as "qwen3".

    Raises `TemplateError` (a `ValueError`) naming the field and key at fault."""
    if isinstance(spec, CompiledTemplate):
        return spec
    if isinstance(spec, str):
        spec = _library_template(spec)
    cached = _BY_ID.get(id(spec))
    if cached is not None and cached[0] is spec and cached[1] == spec:
        return cached[2]
    if not isinstance(spec, dict):
        raise TemplateError(f"response_template must be a dict, got {type(spec).__name__}")
    check_limits(spec)  # size limits first: everything below is linear in the size of a template within them
    try:
        json.dumps(spec)
    except (TypeError, ValueError) as error:
        raise TemplateError(f"response_template must be plain JSON data (dicts, lists, strings, numbers): {error}") from None
    key = repr(spec)  # keeps key order and tells 1 from True and "1": equal keys mean the same template
    compiled = _BY_CONTENT.get(key)
    if compiled is None:
        compiled = _compile(spec)
        if len(_BY_CONTENT) >= _CACHE_LIMIT:
            _BY_CONTENT.clear()
        _BY_CONTENT[key] = compiled
    if len(_BY_ID) >= _CACHE_LIMIT:
        _BY_ID.clear()
    _BY_ID[id(spec)] = (spec, compiled.source, compiled)
    return compiled

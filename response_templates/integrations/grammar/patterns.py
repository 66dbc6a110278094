"""Reading a template's delimiter patterns: the canonical writing of each (literal text, whitespace, named
groups, optional parts the grammar allows) and the marker texts free text must not hold."""

from __future__ import annotations

import functools
import importlib
import re as _re
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import regex

from ...core.template import spelled_literals


def _regex_internals() -> tuple:
    """Python's own regex parser (its module names changed in 3.11)."""
    try:
        return importlib.import_module("re._parser"), importlib.import_module("re._constants")
    except ImportError:  # pragma: no cover - Python 3.10
        return importlib.import_module("sre_parse"), importlib.import_module("sre_constants")


_sre_parse, _sre = _regex_internals()


# Optional whitespace where a pattern has \s*: a few characters at most (models write a newline or a space; an
# unbounded run would only let a sampler ramble).
_WS_MAX = 4
# Whitespace between JSON tokens: enough for a newline and three levels of four-space indentation, as chat templates
# write pretty-printed call lists (Cohere's `[\n    {...}\n]`).
_JSON_WS_MAX = 16
# Characters that make a literal run a marker worth keeping out of free text and argument strings.
_MARKER_CHARS = set("<>|[]{}`\uff5c")
# The character classes an optional part may use, as a regex element spells them.
_CLASSES = {_sre.CATEGORY_DIGIT: "0-9", _sre.CATEGORY_WORD: "A-Za-z0-9_", _sre.CATEGORY_SPACE: " \\t\\r\\n"}
# How many spellings of one literal run the marker search follows (optional letters multiply them).
_RUN_VARIANTS = 8
# How many characters the grammar lets a model write where a pattern allows any run of all but a few characters
# (`[^<]*`: an id, a header's attributes).
_SLOT_MAX = 32


# The prompt the compiler reads a template for (set while it plans): optional spellings of markers follow it.
PROMPT: ContextVar[str] = ContextVar("response_templates_grammar_prompt", default="")
# Set while the compiler writes a template's other spelling: every optional spelling inside a marker is written.
SPELL_ALL: ContextVar[bool] = ContextVar("response_templates_grammar_spell_all", default=False)


class _Dead(Exception):
    """This alternative of a pattern cannot be written as canonical text."""


@dataclass(frozen=True)
class _Piece:
    kind: str  # "lit", "ws" (whitespace, at least `size` characters), "group" (a named group's text), "opt" (an
    # optional part the grammar allows but the canonical writing leaves out: `text` is its regex)
    text: str = ""  # the literal, the group's name, or for "ws" the whitespace characters the pattern allows
    size: int = 0
    most: int = -1  # for "ws": the most characters the pattern allows there (-1: no bound)
    sample: str = ""  # for "opt": one text it matches, for the compiler's check


def _unique_groups(pattern: str) -> str:
    """Python's parser refuses a group name used twice (the `regex` module allows it): number the copies."""
    seen: dict = {}

    def rename(match: Any) -> str:
        name = match.group(1)
        seen[name] = seen.get(name, 0) + 1
        return match.group(0) if seen[name] == 1 else f"(?P<{name}__{seen[name]}>"

    return regex.sub(r"\(\?P<([A-Za-z_]\w*)>", rename, pattern)


@functools.lru_cache(maxsize=1024)
def _parse_pattern(pattern: str) -> tuple:
    """(Python's parse of the pattern, the names of its groups by number). Cached: a tag reads the same patterns for
    every tool; callers only read the parse."""
    try:
        parsed = _sre_parse.parse(_unique_groups(pattern))
    except (_re.error, RecursionError) as error:  # the regex module's syntax beyond Python's (rare in templates)
        raise _Dead(f"pattern {pattern!r} is beyond Python's regex syntax ({error})") from None
    names = {number: name.rsplit("__", 1)[0] for name, number in parsed.state.groupdict.items()}
    return parsed, names


def _space_chars(items: Any) -> str:
    """For a one-character class of whitespace only (\\s, [ \\t], \\n): its characters; else ""."""
    items = list(items)
    if len(items) != 1:
        return ""
    op, av = items[0]
    if op is _sre.LITERAL:
        return chr(av) if chr(av).isspace() else ""
    if op is _sre.IN:
        chars = ""
        for kind, value in av:
            if kind is _sre.LITERAL and chr(value).isspace():
                chars += chr(value)
            elif kind is _sre.CATEGORY and value is _sre.CATEGORY_SPACE:
                chars += " \t\r\n"
            else:
                return ""
        return "".join(sorted(set(chars)))
    return ""


def _negated_space(items: Any) -> str:
    """For a negated class of a few literal characters (`[^<]`), the whitespace it lets through; else ""."""
    items = list(items)
    if len(items) == 1 and items[0][0] is _sre.NOT_LITERAL:  # how Python's parser reads `[^<]`
        items = [(_sre.IN, [(_sre.NEGATE, None), (_sre.LITERAL, items[0][1])])]
    if len(items) != 1 or items[0][0] is not _sre.IN:
        return ""
    av = items[0][1]
    if not av or av[0][0] is not _sre.NEGATE or any(kind is not _sre.LITERAL for kind, _ in av[1:]):
        return ""
    return "".join(char for char in " \t" if all(chr(value) != char for _, value in av[1:]))


def _stops_at_tags(items: Any) -> bool:
    """A negated class of a few literal characters, `<` among them (`[^<]`, `[^<\\s]`)."""
    items = list(items)
    if len(items) == 1 and items[0][0] is _sre.NOT_LITERAL:
        return items[0][1] == ord("<")
    if len(items) != 1 or items[0][0] is not _sre.IN:
        return False
    av = items[0][1]
    return bool(av) and av[0][0] is _sre.NEGATE and (_sre.LITERAL, ord("<")) in av[1:]


def _negated_class(items: Any) -> str:
    """A negated class of a few literal characters (`[^<]`) as xgrammar's regex spells it, without line breaks or
    other control characters (a header or an id is written on one line)."""
    items = list(items)
    if items[0][0] is _sre.NOT_LITERAL:
        excluded = [items[0][1]]
    else:
        excluded = [value for _, value in items[0][1][1:]]
    return "[^" + "".join(_re.escape(chr(value)) for value in excluded) + "\\x00-\\x1f]"


def _is_anything(items: Any) -> bool:
    """`.` or `[\\s\\S]`: a repeat of it eats the rest of the text."""
    items = list(items)
    if len(items) != 1:
        return False
    op, av = items[0]
    if op is _sre.ANY:
        return True
    if op is _sre.IN:
        categories = {value for kind, value in av if kind is _sre.CATEGORY}
        return {_sre.CATEGORY_SPACE, _sre.CATEGORY_NOT_SPACE} <= categories
    return False


def _walked(items: Any, names: dict, fill: dict | None = None) -> tuple:
    """(the pieces of the canonical writing of `items`, or None when it cannot be written; why not)."""
    out: list = []
    try:
        _walk(items, names, out, fill)
    except _Dead as dead:
        return None, str(dead)
    return out, ""


def _walk(items: Any, names: dict, out: list, fill: dict | None = None) -> None:
    """Pieces of the canonical writing of `items`. `fill`: named groups written as the given text (the optional
    part around such a group is then written too)."""
    for op, av in items:
        if op is _sre.LITERAL:
            out.append(_Piece("lit", chr(av)))
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
            continue
        elif op is _sre.AT:
            if av in (_sre.AT_END, _sre.AT_END_STRING):
                raise _Dead("matches only at the end of the text")
        elif op is _sre.SUBPATTERN:
            group, _, _, body = av
            name = names.get(group)
            if fill and name in fill:
                out.append(_Piece("lit", fill[name]))
            elif name is not None:
                out.append(_Piece("group", name))
            else:
                _walk(body, names, out, fill)
        elif op is _sre.BRANCH:
            reasons = []
            for alternative in av[1]:
                attempt, reason = _walked(alternative, names, fill)
                if attempt is None:
                    reasons.append(reason)
                    continue
                out.extend(attempt)
                break
            else:
                raise _Dead("; ".join(reasons))
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)):
            low, high, body = av
            if _space_chars(body):
                out.append(_Piece("ws", _space_chars(body), size=low, most=-1 if high is _sre.MAXREPEAT else high))
            elif not low and _negated_space(body):
                # `[^<]*` (gpt-oss's header, Solar Open's call id, Kimi K3's ` index="1"`): optional whitespace is
                # written, and the grammar allows a few characters of the class after it where the compiler's check
                # finds that calls written with them parse the same (after gpt-oss's name they would lengthen it)
                out.append(_Piece("ws", _negated_space(body), size=0, most=-1 if high is _sre.MAXREPEAT else high))
                most = _SLOT_MAX if high is _sre.MAXREPEAT else min(high, _SLOT_MAX)
                out.append(_Piece("opt", f"{_negated_class(body)}{{0,{most}}}", sample='a1 b="2"'[:most]))
            elif _is_anything(body):
                raise _Dead("eats the rest of the text")
            elif low or fill and _holds_group(body, names, fill):
                for _ in range(max(low, 1)):
                    _walk(body, names, out, fill)
            else:  # an optional part, left out of the canonical writing; the grammar allows it where it can say it
                optional = _as_regex(body, names) if high == 1 else None
                if optional and _spelled_in_prompt(out, optional):
                    out.append(_Piece("lit", optional[1]))
                elif optional:
                    out.append(_Piece("opt", f"({optional[0]})?", sample=optional[1]))
        elif op is _sre.GROUPREF_EXISTS:
            _group, _yes, no = av
            if no:  # the optional groups were left out, so the "no" branch is the one taken
                _walk(no, names, out, fill)
        elif op is _sre.IN and _space_chars([(op, av)]):
            out.append(_Piece("ws", _space_chars([(op, av)]), size=1, most=1))
        else:
            raise _Dead(f"needs a character the compiler cannot choose ({op})")


def _spelled_in_prompt(out: list, optional: tuple) -> bool:
    """An optional spelling inside a marker (Hunyuan's `<tool_call(?::opensource)?>`) is written where the prompt
    writes it after the same text (at least four characters of it: `</think:opensource>` is written where the
    prompt holds `<think:opensource>`): the model spells its markers as its prompt does. While SPELL_ALL is set,
    every such spelling is written (the template's other spelling, which the grammar admits too)."""
    prompt = PROMPT.get()
    regex_text, sample = optional
    if not sample or regex_text.replace("(", "").replace(")", "") != _re.escape(sample):
        return False
    tail = ""
    for piece in reversed(out):
        if piece.kind != "lit":
            break
        tail = piece.text + tail
    return len(tail) >= 2 and (SPELL_ALL.get() or tail[-4:] + sample in prompt)


def _holds_group(items: Any, names: dict, wanted: Any) -> bool:
    """`items` hold a named group among `wanted`."""
    for op, av in items:
        if op is _sre.SUBPATTERN:
            if names.get(av[0]) in wanted or _holds_group(av[3], names, wanted):
                return True
        elif op is _sre.BRANCH:
            if any(_holds_group(alternative, names, wanted) for alternative in av[1]):
                return True
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)):
            if _holds_group(av[2], names, wanted):
                return True
    return False


def _as_regex(items: Any, names: dict) -> tuple | None:
    """(an optional part as xgrammar's regex element spells it, one text it matches), for literals, digit and word
    classes, bounded repeats of them, groups and alternatives; None for anything else (a named group, a lookaround,
    an open-ended run of any character). The compiler's check keeps it only where the parser reads a
    call written with it as the same call."""
    out, sample = "", ""
    for op, av in items:
        if op is _sre.LITERAL:
            out += _re.escape(chr(av))
            sample += chr(av)
        elif op is _sre.IN or op is _sre.NOT_LITERAL:
            if op is _sre.NOT_LITERAL:
                av = [(_sre.NEGATE, None), (_sre.LITERAL, av)]
            if av and av[0][0] is _sre.NEGATE:
                # any character but a few punctuation marks: where `<` is one of them, a run of the class stops
                # before any tag (MiroThinker's `<server_name>[^<]*</server_name>`), so the grammar writes the class
                # itself (on one line); elsewhere word characters
                if any(kind is not _sre.LITERAL or chr(value).isalnum() or chr(value) == "_" for kind, value in av[1:]):
                    return None
                out += _negated_class([(_sre.IN, av)]) if (_sre.LITERAL, ord("<")) in av[1:] else "[A-Za-z0-9_]"
                sample += "a"
                continue
            parts, first = [], ""
            for kind, value in av:
                if kind is _sre.LITERAL:
                    parts.append(_re.escape(chr(value)))
                    first = first or chr(value)
                elif kind is _sre.RANGE:
                    parts.append(f"{_re.escape(chr(value[0]))}-{_re.escape(chr(value[1]))}")
                    first = first or chr(value[0])
                elif kind is _sre.CATEGORY and value in _CLASSES:
                    parts.append(_CLASSES[value])
                    first = first or _CLASSES[value][0]
                else:
                    return None
            out += "[" + "".join(parts) + "]"
            sample += first
        elif op is _sre.SUBPATTERN:
            inner = None if names.get(av[0]) is not None else _as_regex(av[3], names)
            if inner is None:
                return None
            out += f"({inner[0]})"
            sample += inner[1]
        elif op is _sre.BRANCH:
            alternatives = [_as_regex(alternative, names) for alternative in av[1]]
            if any(alternative is None for alternative in alternatives):
                return None
            out += "(" + "|".join(alternative[0] for alternative in alternatives) + ")"  # type: ignore[index]
            sample += alternatives[0][1]  # type: ignore[index]
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
            low, high, body = av
            inner = None if _is_anything(body) else _as_regex(body, names)
            if inner is None:
                return None
            # a model writes an index or a name, not an essay
            most = (_SLOT_MAX if _stops_at_tags(body) else _WS_MAX * 4) if high is _sre.MAXREPEAT else high
            out += f"({inner[0]}){{{low},{max(low, most)}}}"
            sample += inner[1] * max(low, 1)
        else:
            return None
    return out, sample


def _merge(pieces: list) -> list:
    merged: list = []
    for piece in pieces:
        if merged and piece.kind == merged[-1].kind == "lit":
            merged[-1] = _Piece("lit", merged[-1].text + piece.text)
        elif merged and piece.kind == merged[-1].kind == "ws" and piece.text == merged[-1].text:
            most = -1 if -1 in (piece.most, merged[-1].most) else piece.most + merged[-1].most
            merged[-1] = _Piece("ws", piece.text, size=merged[-1].size + piece.size, most=most)
        else:
            merged.append(piece)
    return merged


def _skeleton(delimiter: Any, what: str, fill: dict | None = None) -> list:
    """The canonical writing of a field's open or close delimiter (its spec: a literal, a list or a pattern)."""
    return _skeletons(delimiter, what, fill)[0]


def _skeletons(delimiter: Any, what: str, fill: dict | None = None, spread: bool = False) -> list:
    """Every top-level alternative of a delimiter that can be written, in the template's order. With `spread`, an
    alternation inside the top-level sequence counts too (gpt-oss's `(?:<\\|start\\|>assistant)?(?:A|B|...)<...`)."""
    if delimiter is None:
        raise _Dead(f"{what}: none")
    if isinstance(delimiter, list):
        return [[_Piece("lit", text)] for text in delimiter]
    if isinstance(delimiter, str) and not delimiter.startswith("\0pattern:"):
        return [[_Piece("lit", delimiter)]]
    pattern = delimiter[len("\0pattern:"):]
    alternatives, names = _alternatives(pattern, spread)
    reasons, found = [], []
    for alternative in alternatives:
        out, reason = _walked(alternative, names, fill)
        if out is None:
            reasons.append(reason)
            continue
        if any(piece.kind == "lit" for piece in out):
            found.append(_merge(out))
        else:
            reasons.append("spells no literal text")
    if found:
        return found
    raise _Dead(f"{what} {pattern!r}: no alternative can be written ({'; '.join(reasons)})")


def _writes_nothing(delimiter: Any) -> bool:
    """Whether a top-level alternative of a delimiter pattern matches without writing text (a lookahead, optional
    whitespace): a closer that lets a call end where the next call opens or where the turn ends."""
    if not (isinstance(delimiter, str) and delimiter.startswith("\0pattern:")):
        return False
    # (the alternatives of an alternation inside the top-level sequence count too: Gemma 3's `(?:```|(?=\\Z|...))`)
    alternatives, names = _alternatives(delimiter[len("\0pattern:"):], spread=True)
    return any(out is not None and all(piece.kind in ("ws", "opt") for piece in out)
               for out, _ in (_walked(alternative, names) for alternative in alternatives))


def _alternatives(pattern: str, spread: bool) -> tuple:
    """(the top-level alternatives of a pattern, each a sequence of items; with `spread`, those of an alternation
    inside its top-level sequence too; the names of its groups)."""
    parsed, names = _parse_pattern(pattern)
    items = list(parsed)
    if len(items) == 1 and items[0][0] is _sre.BRANCH:
        return items[0][1][1], names
    return (_spread(items) if spread else [items]), names


def _spread(items: list) -> list:
    """The sequences `items` spells with each of its top-level alternations replaced by one of its alternatives,
    in the template's order (a few at most)."""
    sequences: list = [[]]
    for op, av in items:
        if op is _sre.BRANCH and len(sequences) * len(av[1]) <= _RUN_VARIANTS:
            sequences = [sequence + list(alternative) for sequence in sequences for alternative in av[1]]
        else:
            sequences = [sequence + [(op, av)] for sequence in sequences]
    return sequences


def _delimiter_spec(spec: dict, literal_key: str, pattern_key: str) -> Any:
    if spec.get(pattern_key) is not None:
        return "\0pattern:" + spec[pattern_key]
    return spec.get(literal_key)


def _answer_starts(pattern: str) -> list | None:
    """For an opener that matches at the answer's start only and spells no text of its own (Gemma 3's
    `^\\s*(?:```tool_code\\n)?(?=\\[name(...)`): the literal texts one of which a call's text starts with, after
    whitespace (its optional parts' and its lookahead's first literal runs: "```tool_code", "["); None where the
    pattern is not such a run of whitespace, optional literal parts and a lookahead."""
    try:
        parsed, _ = _parse_pattern(pattern)
    except _Dead:
        return None

    def run(items: Any) -> str:
        items = list(items)
        while len(items) == 1 and items[0][0] is _sre.SUBPATTERN:
            items = list(items[0][1][-1])
        text = ""
        for op, av in items:
            if op is not _sre.LITERAL:
                break
            text += chr(av)
        return text

    starts = []
    for op, av in parsed:
        if op is _sre.AT:
            continue
        if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT) and _space_chars(av[2]):
            continue
        if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT) and av[0] == 0 and run(av[2]):
            starts.append(run(av[2]))
            continue
        if op is _sre.ASSERT and av[0] == 1 and run(av[1]):
            return [*starts, run(av[1])]
        return None
    return None


def _held_runs(pattern: str) -> list:
    """The runs of literal text that every text the pattern matches holds, or that stands where a lookaround of the
    pattern looks (Llama's opener `\\{\\s*(?:"type"...)?"name"\\s*:...`: `{`, `"name"`, `:`...; Llama 4's pythonic
    `(?=\\[\\s*NAME\\s*\\()`: `[`, `(`). Only what no alternative, optional part or whitespace can leave out: text
    that holds none of them cannot hold a match."""
    try:
        parsed, _ = _parse_pattern(pattern)
    except _Dead:
        return []
    if parsed.state.flags & _re.IGNORECASE:  # (a literal then matches other letters too)
        return []
    runs: list = []

    def visit(items: Any) -> None:
        run = ""
        for op, av in items:
            if op is _sre.LITERAL:
                run += chr(av)
                continue
            if op is _sre.AT:
                continue
            runs.append(run)
            run = ""
            if op is _sre.SUBPATTERN and not av[1] & _re.IGNORECASE:
                visit(av[3])
            elif op is _sre.ASSERT:  # (a lookahead or lookbehind: that text stands next to the match)
                visit(av[1])
            elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT) and av[0] >= 1:
                visit(av[2])
        runs.append(run)

    visit(list(parsed))
    return [run for run in runs if run]


def _literal_runs(pattern: str, spellings: bool = True, mark_spaces: bool = False) -> list:
    """Every maximal run of literal text anywhere in the pattern (all alternatives). Optional whitespace and
    lookarounds do not break a run: `(?<=\\})\\s*\\]` spells `}]`, text that closes a region wherever it is.
    With `spellings`, a few literal spellings do not break one either (`s?`: both runs); the pieces between them
    are runs too (`invoke>` of `</｜DSML｜ ?invoke>` stays a marker). With `mark_spaces`, a run that goes on across
    optional whitespace is also given with _SPACES where the whitespace may stand (see _spaced_runs)."""
    try:
        parsed, _ = _parse_pattern(pattern)
    except _Dead:
        return []
    runs: list = []

    # `active`: the runs still growing; optional whitespace keeps each of them and starts a new one beside them,
    # since the parser matches the text with or without it (`}\\s*</tool_call>`: `}</tool_call>` and `</tool_call>`)
    def visit(items: Any, active: list) -> list:
        for op, av in items:
            if op is _sre.LITERAL:
                active = [run + chr(av) for run in active]
                continue
            choices = spelled_literals([(op, av)], optional=True, most=_RUN_VARIANTS) if spellings else None
            if choices is not None and len(active) * len(choices) <= _RUN_VARIANTS:
                # a few literal spellings (`s?`, `(?:functions\\.)?`, `(?:a|b)`) go on with each run: Kimi's
                # `<\\|tool_calls?_section_begin\\|>` is the marker `<|tool_calls_section_begin|>`, not two pieces
                active = [run + choice for run in active for choice in choices]
                continue
            if op is _sre.ASSERT:
                active = visit(av[1], active)
                continue
            if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT) and av[0] == 0 and _space_chars(av[2]):
                runs.extend(active)
                spaced = [run + _SPACES for run in active if run and mark_spaces and _SPACES not in run]
                active = active + spaced + [""]
                continue
            if op is _sre.AT:
                continue
            runs.extend(active)
            active = [""]
            if op is _sre.SUBPATTERN:
                runs.extend(visit(av[3], [""]))
            elif op is _sre.BRANCH:
                for alternative in av[1]:
                    runs.extend(visit(alternative, [""]))
            elif op is _sre.ASSERT_NOT:
                runs.extend(visit(av[1], [""]))
            elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)):
                runs.extend(visit(av[2], [""]))
            elif op is _sre.GROUPREF_EXISTS:
                runs.extend(visit(av[1], [""]))
                if av[2]:
                    runs.extend(visit(av[2], [""]))
        return active

    runs.extend(visit(list(parsed), [""]))
    found = [run for run in runs if run]
    return found + [run for run in _literal_runs(pattern, False) if run not in found] if spellings else found


# Where a marker's literal run goes on across optional whitespace (_literal_runs with mark_spaces).
_SPACES = "\x00"
_WHITESPACE = (" ", "\t", "\n", "\r")


def _spaced_runs(pattern: str) -> list:
    """The runs of literal text the pattern spells across optional whitespace, as (before, after) pairs: Llama's
    closer `(?<=\\})\\s*\\}` is `}}` but also `} }`, `}\\n\\n}`..."""
    pairs = []
    for run in _literal_runs(pattern, False, mark_spaces=True):
        before, _, after = run.partition(_SPACES)
        if before.strip() and after.strip() and (before, after) not in pairs:
            pairs.append((before, after))
    return pairs


def _spaced_spellings(before: str, after: str) -> list:
    """Texts that any text holding `before`, whitespace and `after` holds: `before` and a whitespace character
    where `before` is the longer piece (`functools` of Phi-4-mini's `functools\\s*\\[`); else one whitespace
    character between them, or any two before `after` (more hold two: Llama's `}` `}`)."""
    if len(before.strip()) > len(after.strip()):
        return [before + space for space in _WHITESPACE]
    return ([before + space + after for space in _WHITESPACE]
            + [first + second + after for first in _WHITESPACE for second in _WHITESPACE])


def _markers(source: dict) -> list:
    """The template's marker texts (`<tool_call>`, `<|im_end|>`, `</think>`...): kept out of free text and
    argument strings so that they can neither open, close nor end anything the grammar did not mean."""
    texts: list = []
    anchor = source.get("start_anchor_pattern")
    if anchor:
        texts += _literal_runs(anchor)
    elif source.get("start_anchor"):
        texts.append(source["start_anchor"])
    for spec in source.get("fields", {}).values():
        for key in ("open", "close"):
            value = spec.get(key)
            texts += value if isinstance(value, list) else ([value] if value else [])
        for key in ("open_pattern", "close_pattern"):
            if spec.get(key):
                texts += _literal_runs(spec[key])
        tag_pattern = (spec.get("content_args") or {}).get("tag_pattern")
        if tag_pattern:
            texts += _literal_runs(tag_pattern)
        for pair in (spec.get("content_args") or {}).get("string_delims") or []:
            texts += list(pair)
    markers = []
    for text in texts:
        text = text.strip()
        if len(text) >= 2 and any(char in _MARKER_CHARS or ord(char) > 127 for char in text) and text not in markers:
            markers.append(text)
    return markers

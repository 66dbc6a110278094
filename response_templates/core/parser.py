"""`ResponseParser`, the streaming parser (the one-shot `parse_response` is in `parse_whole`).

The parser walks the text once. In each state it watches a set of delimiters: in the implicit region (or outside
every region) the opens of all fields and the implicit field's close; inside an explicit field, that field's close.
The earliest delimiter wins, then the longest, then opens before closes. Text between delimiters is routed to the
current region.

Streaming differs from one-shot parsing only in *when* decisions are taken: a delimiter is committed only once no
later input can change which delimiter wins, and text that could still be the start of a delimiter is held back.
So the message never depends on how the output was split into chunks, and streaming equals one-shot.

Only the unconsumed tail of the stream (plus a little context for lookbehinds) is kept, so the cost of `feed` does
not grow with what was fed before.

The parts: `delimiters` finds the delimiter to commit next, `message` turns closed regions into values, and
`ResponseParser` keeps the stream's state (documented in `__init__`) and routes text between them.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

from .delimiters import CONTEXT_KEPT, find_delimiter
from .errors import (
    regex_budget,
)
from .message import (
    PREFIX_REQUIRED,
    check_malformed,
    check_truncated,
    cut_safe,
    discard_event,
    finish_message,
    prompt_tail,
    settle_checked,
    trigger_hit,
)
from .regex_syntax import work
from .template import CompiledTemplate, WatchItem, load_template
from .token_ids import TokenIdDecoder, strip_markers
from .tools import tool_parameters, type_tool_calls

# Drop consumed text once this much has piled up (amortises the copy).
_TRIM_AT = 4096
# Chunks up to this long (ASCII) are checked for trigger characters with a set, longer ones with a regex search.
_SET_CHECK = 64
# Every ASCII character (see `_heat`).
_ASCII_CHARS = frozenset(map(chr, range(128)))


class HotPath(NamedTuple):
    """What `feed`'s hot path reads in the current state (see `ResponseParser._heat`). A tuple, so that `feed`
    unpacks it in one step."""

    chars: frozenset  # the watch's trigger characters: a chunk holding none of them cannot hold a delimiter
    plain_last: frozenset  # ASCII characters outside the lead class: a chunk ending with one holds nothing back
    back: int  # characters before the held text that a lookbehind trigger may need
    proto: dict  # the region_chunk event of the current region, copied for each chunk
    body: list  # the current region's text pieces
    limit: int  # the buffer length past which consumed text is trimmed
    fast: Any  # the watch's `FastPath`


class LeadRuns(NamedTuple):
    """Where the runs of each lead class that end the buffer start, when they filled the last chunk (see
    `ResponseParser._lead_hold`)."""

    end: int  # stream position of the buffer's end when they were found
    starts: list  # stream position where each lead class's run starts


class ResponseParser:
    """Streaming parser for one generated message.

        parser = ResponseParser(template, prefix=prompt)
        parser.initial_events          # events from the part of the message the prompt already wrote
        events = parser.feed(chunk)    # for each chunk of generated text (or token ids, with tokenizer=)
        message, events = parser.finalize()

    `template` is a template dict, a compiled template, or the name of a library template ("qwen3").
    With `tools=` (JSON schemas or Python functions), tool-call arguments are typed by the tool's schema. With a
    fast `tokenizer=`, `feed` takes token ids (and `prefix` may be ids) and control tokens act as delimiters only
    when the model generated them as their own ids. `malformed=` says what to do with a region whose text does not
    parse (a tool call with broken JSON): "raise" (the default, as transformers), "content" or "drop"; see
    `parse_response`.
    """

    def __init__(
        self,
        template: dict | CompiledTemplate,
        prefix: Any = None,
        *,
        tools: list | None = None,
        tokenizer: Any = None,
        malformed: str = "raise",
        _events: bool = True,
    ):
        self.template = compiled = load_template(template)
        if prefix is None:
            raise ValueError(PREFIX_REQUIRED)
        self.malformed = self._malformed = check_malformed(malformed)
        self._fields = compiled.fields
        self._dirty = {name: not field.text_like for name, field in compiled.fields.items()}
        self._implicit = compiled.implicit
        self._tool_params = tool_parameters(tools) if tools else {}
        self._decoder = TokenIdDecoder(tokenizer) if tokenizer is not None else None
        self._record = _events
        self._buffer = ""
        self._pos = 0
        self._base = 0  # stream position of self._buffer[0] (consumed text is dropped from the front)
        self._memo: dict = {}  # per delimiter: how far its scan got (stream positions), see find_delimiter
        self._clean = False  # the held text holds no trigger of the current watch (see feed's fast path)
        self._checked = -1  # position in the buffer up to which the gated fast path found no trigger (see feed)
        self._output: dict = compiled.fresh_defaults()
        self._finalized = False
        self._plain = self._decoder is None  # feed takes text and the parser is not finalized (feed's fast path)
        self._trims = not compiled.keeps_history
        self._runs: LeadRuns | None = None  # the lead runs that ended the buffer at the last chunk (see _lead_hold)
        self._hot: HotPath | None = None  # what feed's hot path needs in the current state, or None (see _heat)
        self._counted = 0  # stream position up to which fed text was counted as work (see _account)
        self._reset()
        self.initial_events: list[dict] = []
        if self._decoder is not None:
            if isinstance(prefix, str):
                prefix = tokenizer.encode(prefix, add_special_tokens=False)
            prefix = self._decoder.feed(prefix) + self._decoder.flush()
        elif not isinstance(prefix, str):
            raise TypeError(
                f"prefix must be text (or token ids together with tokenizer=), got {type(prefix).__name__}"
            )
        if prefix:
            with regex_budget(len(prefix)):
                self._buffer = prompt_tail(compiled, prefix, once_per_template=False)
                if self._buffer:
                    self._run(self.initial_events if _events else None, eos=False)
        self._counted = self._base + len(self._buffer)
        self._heat()

    # -- public API ---------------------------------------------------------------------------------------------

    def feed(self, chunk: Any) -> list[dict]:
        """Add generated text (or token ids, with tokenizer=) and return the events it settles."""
        hot = self._hot
        if hot is None or chunk.__class__ is not str or not chunk:
            return self._feed_cold(chunk)
        # Appending to a string nothing else references lets CPython grow it in place instead of copying it.
        buffer, self._buffer = self._buffer, ""
        old_end = len(buffer)
        pos = self._pos
        buffer += chunk
        self._buffer = buffer
        # The common case, in a region that has begun, of a gated watch (see `_heat`): the chunk, with what is held
        # (and `back` characters before, for lookbehind triggers), holds none of the watch's trigger characters, or
        # only some that begin no trigger. Then the chunk goes to the region, except a run of whitespace that ends it
        # (held: a delimiter may start there). The same decisions as the gated path of `_feed_text`, in fewer steps.
        chars, plain_last, back, proto, body, limit, fast = hot
        if pos == old_end and (not back or self._checked == old_end):
            start, region = pos, chunk
        elif old_end - pos <= _SET_CHECK:
            start = pos - back if pos >= back else 0
            region = buffer[start:]
        else:
            return self._feed_text(chunk, buffer, old_end, pos)
        end = len(buffer)
        if not chars.isdisjoint(region):
            if not fast.split:
                return self._feed_text(chunk, buffer, old_end, pos)
            # a whole trigger makes a full scan; the beginning of one at the end is held, with the run of whitespace
            # before it; else the chunk is taken as when there is no trigger character
            if fast.trigger.search(buffer, start) is not None:
                return self._scan()
            if fast.cuts is not None and chunk[-1] in fast.cut_chars:
                found = fast.cuts.search(buffer, max(start, end - fast.cut_reach))
                if found is not None:
                    hold = found.start()
                    if hold < pos:
                        return self._scan()
                    if fast.single is not None:
                        found = fast.single.search(buffer, pos, hold)
                        hold = found.end() if found is not None else pos
                    self._checked = -1
                    if hold <= pos:
                        return []
                    self._pos = hold
                    text = buffer[pos:hold]
                    body.append(text)
                    if hold > limit:
                        self._trim()
                    event = proto.copy()
                    event["text"] = text
                    return [event]
        last = chunk[-1]
        if last in plain_last:  # an ASCII character outside the lead class (whitespace)
            hold = end
        elif last in fast.lead_chars:
            # a run of whitespace ends the chunk: held, from its first character (the general path when the run
            # fills the chunk after held text, or may begin with whitespace outside ASCII)
            kept = len(chunk.rstrip(fast.lead_string))
            if not kept:
                if pos < old_end:
                    return self._feed_text(chunk, buffer, old_end, pos)
                # whitespace only, after nothing held: all of it is held (where its run begins, before the chunk,
                # only the general path needs to know)
                if back:
                    self._checked = end
                return []
            if chunk[kept - 1].isspace():  # whitespace outside ASCII may continue the run
                return self._feed_text(chunk, buffer, old_end, pos)
            hold = old_end + kept
        elif fast.any_lead is None or not last.isspace() or fast.any_lead.match(last) is None:
            hold = end  # (the lead class, `\s`, holds no character outside those `str.isspace` accepts)
        else:
            return self._feed_text(chunk, buffer, old_end, pos)
        if back:
            self._checked = end
        self._pos = hold
        text = chunk if hold == end and pos == old_end else buffer[pos:hold]
        body.append(text)
        if hold > limit:
            self._trim()
        event = proto.copy()  # a region_chunk event: copying its other keys is cheaper than building it
        event["text"] = text
        return [event]

    def _feed_cold(self, chunk: Any) -> list[dict]:
        """`feed` outside the common case of the hot path."""
        if not (self._plain and chunk.__class__ is str):
            return self._feed_other(chunk)
        if not chunk:
            return []
        buffer, self._buffer = self._buffer, ""
        old_end = len(buffer)
        pos = self._pos
        buffer += chunk
        self._buffer = buffer
        return self._feed_text(chunk, buffer, old_end, pos)

    def _feed_text(self, chunk: str, buffer: str, old_end: int, pos: int) -> list[dict]:
        """`feed` of text, once appended to the buffer (`buffer`; it ended at `old_end`, the scan was at `pos`)."""
        watch = self._watch
        if watch.simple:
            if pos == old_end:
                lone = watch.lone_starter
                if not (lone in chunk if lone is not None else watch.may_start_in(chunk)):
                    # The common case: no delimiter can start in this chunk, so all of it goes to the current region.
                    self._pos = len(buffer)
                    return self._take(chunk)
        elif watch.fast is not None and watch.fast.gated:
            fast = watch.fast
            if old_end - pos <= _SET_CHECK and (pos or self._base or not fast.begin):
                # Every delimiter of the watch starts in a run of whitespace before one of the triggers (the literal it
                # must contain), or where a lookbehind trigger says (see scan.gate_of): when the held text and the
                # chunk hold none (from `back` characters before the held text), only the run of whitespace that
                # ends the text, or a trigger's beginning cut by the end, may still start one.
                back = fast.back
                if pos < old_end or (back and self._checked != old_end):
                    start = pos - back if pos >= back else 0
                    region = buffer[start:]
                else:
                    # nothing held, and the text before the chunk was checked up to its end (from `back` before the
                    # position then) with no trigger, whole or cut: none can begin before the chunk
                    start, region = pos, chunk
                cut = None
                end = len(buffer)
                if fast.trigger is None or (
                    len(region) <= _SET_CHECK and (fast.exact or region.isascii()) and fast.chars.isdisjoint(region)
                ):
                    pass
                elif fast.split:
                    # literal triggers: a whole one (`regex` would prefer it to a partial match anywhere), else the
                    # beginning of one at the end, found without a partial search (which costs several times more)
                    found = fast.trigger.search(buffer, start)
                    if found is not None:
                        return self._scan()
                    if fast.cuts is not None and buffer[-1] in fast.cut_chars:
                        found = fast.cuts.search(buffer, max(start, end - fast.cut_reach))
                        if found is not None:
                            if found.start() < pos:
                                return self._scan()
                            cut = found.start()  # a trigger's beginning: a delimiter may start there or just before
                else:
                    found = fast.trigger.search(buffer, start, partial=True)
                    if found is not None and found.end() > found.start():
                        if not found.partial or found.start() < pos:
                            return self._scan()
                        cut = found.start()  # a trigger's beginning: a delimiter may start there or just before
                self._checked = end if cut is None else -1
                last = chunk[-1]
                if cut is not None:
                    hold = cut
                    if fast.single is not None:
                        found = fast.single.search(buffer, pos, cut)
                        hold = found.end() if found is not None else pos
                elif fast.single is not None and (
                    last in fast.lead_chars if last < "\x80" else fast.any_lead.match(last) is not None
                ):
                    if chunk.isascii():
                        kept = len(chunk.rstrip(fast.lead_string))
                        hold = old_end + kept if kept else self._lead_hold(fast, buffer, pos, old_end)
                    else:
                        found = fast.single.search(buffer, old_end, end)
                        hold = found.end() if found is not None else self._lead_hold(fast, buffer, pos, old_end)
                else:
                    hold = end
                if hold <= pos:
                    return []
                self._pos = hold
                text = chunk if pos == old_end and hold == end else buffer[pos:hold]
                name = self._current
                if name is not None and self._opened and self._decoder is None and self._record and (
                    hold <= _TRIM_AT or not self._trims
                ):
                    # `_take`, inlined for the common case
                    self._body.append(text)
                    return [{"type": "region_chunk", "field": name, "text": text, "dirty": self._dirty[name]}]
                return self._take(text)
        else:
            fast = watch.fast
            if fast is not None and (
                self._clean
                or (pos == old_end and (fast.after is None or old_end == 0 or not fast.after.match(buffer, old_end - 1)))
            ):
                # A watch with regex delimiters: when the chunk holds none of their trigger characters (and the held
                # text, if any, was held only as a run of a lead class such as whitespace), the only place a
                # delimiter may still start is a run of a lead class at the end.
                if not (fast.begin and self._base + pos == 0):
                    trigger = fast.trigger
                    if trigger is None:
                        hit = False
                    else:
                        region = chunk if not fast.reach else buffer[max(0, old_end - fast.reach):]
                        hit = (
                            not (len(region) <= _SET_CHECK and region.isascii() and fast.chars.isdisjoint(region))
                            and trigger_hit(trigger.search(region, partial=True))
                        )
                    if not hit:
                        end = len(buffer)
                        hold = end
                        last = chunk[-1]
                        if fast.any_lead is not None and (
                            last in fast.lead_chars if last < "\x80" else fast.any_lead.match(last) is not None
                        ):
                            single = fast.single
                            if single is None:
                                hold = self._lead_hold(fast, buffer, pos, old_end)
                            elif chunk.isascii():
                                kept = len(chunk.rstrip(fast.lead_string))
                                hold = old_end + kept if kept else self._lead_hold(fast, buffer, pos, old_end)
                            else:
                                found = single.search(buffer, old_end, end)
                                hold = found.end() if found is not None else self._lead_hold(fast, buffer, pos, old_end)
                        self._clean = True
                        if hold <= pos:
                            return []
                        self._pos = hold
                        text = buffer[pos:hold] if pos or hold < end else buffer
                        name = self._current
                        if name is not None and self._opened and self._decoder is None and self._record and (
                            hold <= _TRIM_AT or not self._trims
                        ):
                            # `_take`, inlined for the common case
                            self._body.append(text)
                            return [{"type": "region_chunk", "field": name, "text": text, "dirty": self._dirty[name]}]
                        return self._take(text)
        return self._scan()

    def _scan(self) -> list[dict]:
        """The full scan of what is held and fed (when no fast path applies); returns the events it settles."""
        self._checked = -1
        self._account()
        events: list[dict] = []
        with regex_budget(len(self._buffer) - self._pos):
            self._run(events if self._record else None, eos=False)
        self._trim()
        fast = self._watch.fast
        self._clean = fast is not None and not fast.gated and self._held_clean()
        self._heat()
        return events

    def _account(self) -> None:
        """Count the text fed since the last count as work (`scan.work`): the fast paths check each character of a
        chunk (about) once; counted here rather than per chunk."""
        fed = self._base + len(self._buffer)
        work[0] += fed - self._counted
        self._counted = fed

    def _heat(self) -> None:
        """Prepare `feed`'s hot path for the current state (None: the state does not take it): a gated watch (see
        scan.gate_of), away from the start of the text when a delimiter may match there, inside a region that has
        begun, text fed and events recorded."""
        fast = self._watch.fast
        name = self._current
        if (
            fast is not None
            and fast.gated
            and fast.exact
            and self._plain
            and self._decoder is None
            and self._record
            and name is not None
            and self._opened
            and not (fast.begin and self._base + self._pos == 0)
        ):
            self._hot = HotPath(
                fast.chars,
                _ASCII_CHARS - fast.lead_chars,
                fast.back,
                {"type": "region_chunk", "field": name, "text": "", "dirty": self._dirty[name]},
                self._body,
                _TRIM_AT if self._trims else sys.maxsize,
                fast,
            )
        else:
            self._hot = None

    def _lead_hold(self, fast: Any, buffer: str, pos: int, old_end: int) -> int:
        """Where the run of a lead class that ends the buffer starts (the earliest over the lead classes), looking
        back over the new chunk only: a run that fills the chunk continues the one found at the previous chunk
        (remembered in `_runs` when it filled that chunk too, else it starts in that chunk), so a long run of spaces
        costs each chunk its own length."""
        end = len(buffer)
        base = self._base
        runs = self._runs
        known = runs is not None and runs.end == base + old_end
        hold = end
        starts = []
        whole = False
        for index, back in enumerate(fast.leads):
            found = back.search(buffer, old_end, end)
            if found is not None:
                at = found.end()
            else:
                whole = True
                if known:
                    at = max(runs.starts[index] - base, pos)  # type: ignore[union-attr]  # `known`: runs is not None
                else:
                    found = back.search(buffer, pos, old_end)
                    at = found.end() if found is not None else pos
            starts.append(at + base)
            if at < hold:
                hold = at
        if whole:
            self._runs = LeadRuns(base + end, starts)
        return hold

    def _held_clean(self) -> bool:
        """After a full scan: whether the held text is only a short run of lead-class characters with no trigger
        character, not just after a character that starts a delimiter (`after`): the state the fast path leaves,
        so the next chunk may take it."""
        fast = self._watch.fast
        if fast is None:
            return False
        buffer, pos = self._buffer, self._pos
        if not 0 < len(buffer) - pos <= _SET_CHECK:
            return False  # (checked before copying the held text, which may be long)
        held = buffer[pos:]
        return (
            held.isascii()
            and fast.lead_chars.issuperset(held)
            and fast.chars.isdisjoint(held)
            and (fast.after is None or pos == 0 or fast.after.match(buffer, pos - 1) is None)
        )

    def _feed_other(self, chunk: Any) -> list[dict]:
        """`feed` after finalize, with token ids, or with something that is not plain text."""
        if self._finalized:
            raise RuntimeError("this ResponseParser is finalized; create a new one for the next message")
        if self._decoder is not None:
            if isinstance(chunk, str):
                raise TypeError("this parser was created with tokenizer=, so feed() takes token ids, not text")
            text = self._decoder.feed(chunk)
            self._plain = True  # the decoded text takes the same path as text fed directly
            try:
                return ResponseParser.feed(self, text)
            finally:
                self._plain = False
        if not isinstance(chunk, str):
            raise TypeError(
                f"feed() takes text, got {type(chunk).__name__}; to feed token ids, create the parser with tokenizer="
            )
        return ResponseParser.feed(self, str.__str__(chunk))  # a str subclass

    def _take(self, text: str) -> list[dict]:
        """Route text no delimiter can touch (the fast paths); returns its events."""
        name = self._current
        events: list[dict] = []
        if name is not None and self._opened and self._decoder is None:
            self._body.append(text)
            if self._record:
                events.append({"type": "region_chunk", "field": name, "text": text, "dirty": self._dirty[name]})
        else:
            self._route(events if self._record else None, text)
            self._heat()
        if self._pos > _TRIM_AT and self._trims:
            self._trim()
        return events

    def _trim(self) -> None:
        if self._pos > _TRIM_AT and not self.template.keeps_history:
            cut = self._pos - CONTEXT_KEPT
            self._buffer = self._buffer[cut:]
            self._pos -= cut
            self._base += cut
            if self._checked >= 0:
                self._checked -= cut

    def finalize(self, truncated: bool = False) -> tuple[dict, list[dict]]:
        """End the stream: settle held-back text, close the open region, return `(message, events)`.

        `truncated=True` says the generation was cut off (e.g. by max_tokens): a structured field (a tool call)
        still open is dropped instead of parsed, so no call the model did not finish is returned. It ends with a
        `region_discard` event (`reason: "truncated"`, `raw`: its text), never a `region_close`. A close delimiter
        that only matched because the text ends there (`\\Z`, a lookahead) does not close a structured region."""
        check_truncated(truncated)
        if self._finalized:
            raise RuntimeError("this ResponseParser is already finalized")
        if self._decoder is not None:
            self._buffer += self._decoder.flush()
        self._hot = None
        self._account()
        events: list[dict] = []
        with regex_budget(len(self._buffer) - self._pos):
            self._run(events if self._record else None, eos=True, truncated=truncated)
        self._output = finish_message(self.template, self._output)
        self._finalized = True
        self._plain = False
        return self._output, events

    def _coerce_tool_calls(self, value: Any, *, typed: bool = False) -> Any:
        """Type the arguments of the tool calls in `value` with this parser's `tools` (same name and behaviour as
        the private helper of transformers' parser, which its tests call)."""
        return type_tool_calls(value, self._tool_params, typed) if self._tool_params else value

    # -- the scan loop ------------------------------------------------------------------------------------------

    def _reset(self) -> None:
        """Back to the implicit region (or nowhere, when the template has no implicit field)."""
        self._current = self._implicit
        self._opened = False
        self._body: list[str] = []
        self._captures: dict = {}
        self._watch = self.template.idle_watch
        self._open_text = ""  # the open delimiter as written, for the raw text of a discarded region

    def _run(self, events: list | None, eos: bool, truncated: bool = False) -> None:
        while True:
            found, hold = find_delimiter(self._watch, self._buffer, self._pos, eos, self._memo, self._base)
            if truncated and found is not None and not self._cut_safe(found):
                found = None  # a close that only the cut made: the structured region is unfinished
            if found is not None:
                item, start, end, groups = found
                if start > self._pos:
                    self._route(events, self._buffer[self._pos:start])
                self._pos = end
                if item.kind == "open":
                    self._close(events)
                    self._open(events, item, groups, self._buffer[start:end])
                    continue
                had_text = self._opened
                if groups:
                    self._captures.update({k: v for k, v in groups.items() if v is not None})
                self._close(events, close_text=self._buffer[start:end])
                if not had_text and start == end:
                    # An empty close that matches nothing would fire forever; stop here (as transformers does).
                    return
                continue
            if eos:
                if self._pos < len(self._buffer):
                    self._route(events, self._buffer[self._pos:])
                    self._pos = len(self._buffer)
                self._close(events, truncated)
                return
            if hold > self._pos:
                self._route(events, self._buffer[self._pos:hold])
                self._pos = hold
            return

    # -- regions ------------------------------------------------------------------------------------------------

    def _route(self, events: list | None, text: str) -> None:
        name = self._current
        if not text or name is None:
            return
        if not self._opened:
            self._opened = True
            if events is not None:
                events.append({"type": "region_open", "field": name})
        self._body.append(text)
        if events is not None:
            if self._decoder is not None:
                text = strip_markers(text)
            events.append({"type": "region_chunk", "field": name, "text": text, "dirty": self._dirty[name]})

    def _cut_safe(self, found: tuple) -> bool:
        name = self._current
        if name is None or name == self._implicit or self._fields[name].text_like:
            return True
        return cut_safe(found, self._buffer, self._pos)

    def _open(self, events: list | None, item: WatchItem, groups: dict | None, text: str = "") -> None:
        field = item.field
        self._current = field.name
        self._opened = True
        self._open_text = text
        self._body = []
        self._captures = {k: v for k, v in groups.items() if v is not None} if groups else {}
        self._watch = self.template.field_watch[field.name]
        if events is not None:
            events.append({"type": "region_open", "field": field.name})

    def _close(self, events: list | None, truncated: bool = False, close_text: str = "") -> None:
        name = self._current
        if name is None or not self._opened:
            self._reset()
            return
        field = self._fields[name]
        strip = self._decoder is not None
        body = "".join(self._body)
        if truncated and name != self._implicit and not field.text_like:
            # cut off inside a structured region: the call (or object) is unfinished, so it is not returned
            if events is not None:
                raw = self._open_text + body
                events.append(discard_event(name, "truncated", strip_markers(raw) if strip else raw))
            self._reset()
            return
        value, discarded = settle_checked(
            self.template, field, body, self._open_text, close_text, self._captures, self._output,
            self._tool_params, strip, self._malformed,
        )
        if events is not None:
            if discarded is None:
                events.append({"type": "region_close", "field": name, "value": value})
            else:
                events.extend(discarded)
        self._reset()

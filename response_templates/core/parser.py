"""The streaming response parser and the one-shot `parse_response`.

The parser walks the text once. In each state it watches a set of delimiters: in the implicit region (or outside
every region) the opens of all fields and the implicit field's close; inside an explicit field, that field's close.
The earliest delimiter wins, then the longest, then opens before closes. Text between delimiters is routed to the
current region.

Streaming differs from one-shot parsing only in *when* decisions are taken: a delimiter is committed only once no
later input can change which delimiter wins, and text that could still be the start of a delimiter is held back.
So the message never depends on how the output was split into chunks, and streaming equals one-shot.

Only the unconsumed tail of the stream (plus a little context for lookbehinds) is kept, so the cost of `feed` does
not grow with what was fed before.
"""

from __future__ import annotations

import logging
import pickle
import sys
from time import perf_counter
from typing import Any

from .content import TYPED_SYNTAX
from .errors import (
    RegexTimeoutError,
    close_budget,
    excerpt,
    grow_regex_budget,
    open_budget,
    regex_budget,
    regex_time_left,
    retry_after_timeout,
    timeout_message,
)
from .oneshot import FAR, build_short_plan, find_near, find_short, note_far
from .scan import first_candidate, quiet, scan_pattern, track_guards, work
from .scan import NOT_SPACE  # a non-whitespace character, as `regex` reads `\s`
from .template import CompiledTemplate, Watch, WatchItem, literal_runs, load_template
from .token_ids import TokenIdDecoder, strip_markers
from .tools import call_problem, tool_parameters, type_tool_calls

# Consumed text kept before the scan position, for \b and the like in delimiter patterns (templates whose
# patterns have lookbehinds keep everything).
_CONTEXT = 256
# A partial match held back over more text than this is tried again only once the held text doubles, unless the text
# added may settle it (see _scan_item).
_LONG_HOLD = 256
# Drop consumed text once this much has piled up (amortises the copy).
_TRIM_AT = 4096
# Chunks up to this long (ASCII) are checked for trigger characters with a set, longer ones with a regex search.
_SET_CHECK = 64
# Every ASCII character (see `_heat`).
_ASCII_CHARS = frozenset(map(chr, range(128)))
# At the end of a text at most this long, a regex delimiter is found with one plain search (lookbehinds included,
# its cost is bounded by the square of this length).
_SHORT_SEARCH = 512
# In a longer text, one-shot parsing looks for this many delimiters at the first candidates of the state's
# one-shot plan (`oneshot.find_near`), then with the streaming search only: linear either way.
_NEAR_CALLS = 16
# ... on texts up to this long: a short message past _SHORT_SEARCH gains; on long generations the tries that fail cost
# more than they save (a one-shot parse of a 32K olmo3 or nemotron_nano_v2 generation took 2-10 times longer).
_NEAR_TEXT = 4096

logger = logging.getLogger("response_templates")

# What to do with a structured region whose text does not parse (see `malformed=`).
MALFORMED_POLICIES = ("raise", "content", "drop")
# Characters of a parse error quoted in a region_discard event.
_ERROR_CHARS = 500

PREFIX_REQUIRED = (
    "prefix= is required: pass the prompt the model continued from (chat templates often write the start of the "
    "assistant message, such as an opening <think>, and the parser must see it). If the output already holds the "
    'whole message, pass prefix="" to opt out.'
)


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
        self._runs: tuple | None = None  # (stream position of the buffer's end, where each lead run ending there starts)
        self._hot: tuple | None = None  # what feed's hot path needs in the current state, or None (see _heat)
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
                self._buffer = compiled.truncate_prefix(prefix)
                if self._buffer:
                    self._run(self.initial_events if _events else None, eos=False)
        self._counted = self._base + len(self._buffer)
        self._heat()

    # -- pickling -----------------------------------------------------------------------------------------------

    def __getstate__(self) -> dict:
        """What was fed and decided, without what is derived from the compiled template (its watches and the
        caches of the scan, keyed by object ids): the template pickles as its dict, the rest is rebuilt on load."""
        state = self.__dict__.copy()
        if self._decoder is not None:
            try:
                pickle.dumps(self._decoder)
            except Exception as error:
                raise TypeError(
                    f"this ResponseParser decodes token ids with a tokenizer that cannot be pickled ({error}); pickle "
                    "a parser made without tokenizer= (feeding text), or pickle the tokenizer's fast backend"
                ) from error
        for key in ("_fields", "_watch", "_hot"):
            del state[key]
        state["_memo"] = {}  # (how far each delimiter's scan got: a fresh scan from the position finds the same)
        state["_clean"] = False
        state["_checked"] = -1
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        compiled = self.template
        self._fields = compiled.fields
        name = self._current
        self._watch = compiled.idle_watch if name is None or name == compiled.implicit else compiled.field_watch[name]
        self._hot = None
        if not self._finalized:
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
                            and _hit(trigger.search(region, partial=True))
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
            self._hot = (
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
        known = runs is not None and runs[0] == base + old_end
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
                    at = max(runs[1][index] - base, pos)
                else:
                    found = back.search(buffer, pos, old_end)
                    at = found.end() if found is not None else pos
            starts.append(at + base)
            if at < hold:
                hold = at
        if whole:
            self._runs = (base + end, starts)
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
            cut = self._pos - _CONTEXT
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
        if self._finalized:
            raise RuntimeError("this ResponseParser is already finalized")
        if self._decoder is not None:
            self._buffer += self._decoder.flush()
        self._hot = None
        self._account()
        events: list[dict] = []
        with regex_budget(len(self._buffer) - self._pos):
            self._run(events if self._record else None, eos=True, truncated=bool(truncated))
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


def _hit(found: Any) -> bool:
    """A trigger search found something (`regex` reports an empty partial match at the end: not a hit)."""
    return found is not None and found.end() > found.start()


def field_value(field: Any, body: str, captures: dict) -> Any:
    """Parse a region's text with its field's content parser, then apply the field's transform."""
    grow_regex_budget(len(body))  # the content parser reads the whole region, however small the last chunk was
    try:
        value = field.parse(body, field.content_args)
    except RegexTimeoutError as error:
        raise RegexTimeoutError(f"field {field.name!r}: content_args.{error}") from None
    if field.build is None:
        return value
    if not field.transform_each:
        return field.build({**captures, "content": value})
    if not isinstance(value, list):
        raise ValueError(f"field {field.name!r}: transform_each needs the parsed content to be a list, got {type(value).__name__}")
    shaped = []
    for item in value:
        if not isinstance(item, dict):
            raise ValueError(f"field {field.name!r}: transform_each needs every list item to be a dict, got {type(item).__name__}")
        shaped.append(field.build({**captures, **item}))
    return shaped


def check_malformed(policy: Any) -> str:
    """Validate a `malformed=` policy."""
    if not isinstance(policy, str) or policy not in MALFORMED_POLICIES:
        raise ValueError(f"malformed= must be one of {', '.join(map(repr, MALFORMED_POLICIES))}; got {policy!r}")
    return policy


def discard_event(name: str, reason: str, raw: str, **extra: Any) -> dict:
    """The event that ends a region whose value is not returned (instead of its region_close)."""
    return {"type": "region_discard", "field": name, "reason": reason, "raw": raw, **extra}


def settle_checked(
    compiled: CompiledTemplate,
    field: Any,
    body: str,
    open_text: str,
    close_text: str,
    captures: dict,
    output: dict,
    tool_params: dict,
    strip: bool,
    malformed: str,
) -> tuple[Any, list | None]:
    """`settle` a closed region under the `malformed=` policy. Returns `(value, None)`, or `(None, events)` when the
    region's text does not parse and the policy is "content" or "drop": a `region_discard` event, followed with
    "content" by the events of the content region that received the region's raw text (delimiters included)."""
    try:
        # (under "content" and "drop", a call without a name or with arguments that are not an object is malformed
        # too: a client cannot run it; under "raise", as transformers, it is kept as parsed)
        return settle(field, body, captures, output, tool_params, strip, malformed != "raise"), None
    except RegexTimeoutError:
        raise  # a hostile template, not a damaged output
    except (ValueError, RecursionError) as error:
        if malformed == "raise":
            raise
        problem = str(error) or type(error).__name__
    raw = open_text + body + close_text
    shown = strip_markers(raw) if strip else raw
    if len(problem) > _ERROR_CHARS:
        problem = problem[:_ERROR_CHARS] + "…"
    logger.debug("malformed %r region %s (malformed=%r): %s", field.name, "kept as content" if malformed == "content" else "dropped", malformed, problem)
    events = [discard_event(field.name, "malformed", shown, error=problem, policy=malformed)]
    if malformed == "content":
        target, value = keep_as_content(compiled, raw, output, strip)
        events += [
            {"type": "region_open", "field": target},
            {"type": "region_chunk", "field": target, "text": shown, "dirty": False},
            {"type": "region_close", "field": target, "value": value},
        ]
    return None, events


def keep_as_content(compiled: CompiledTemplate, raw: str, output: dict, strip: bool) -> tuple[str, Any]:
    """Store a malformed region's raw text as a region of the `content` field (or of the implicit field when that is
    the text field), in order with the rest of it. Returns (the field's name, the region's value)."""
    target = compiled.fields.get("content")
    if target is None or target.content != "text":
        implicit = compiled.fields.get(compiled.implicit) if compiled.implicit is not None else None
        target = implicit if implicit is not None and implicit.content == "text" else None
    if target is not None:
        return target.name, settle(target, raw, {}, output, {}, strip)
    # No text field to hold it: a plain "content" string, regions joined by a blank line.
    value = (strip_markers(raw) if strip else raw).strip()
    earlier = output.get("content")
    output["content"] = earlier + "\n\n" + value if isinstance(earlier, str) and earlier else value
    return "content", value


def cut_safe(found: tuple, text: str, pos: int) -> bool:
    """Whether a close delimiter found in a truncated output is a close whatever text would have followed: no
    continuation may drop it or change its named groups (its end may still grow). Only closes that end within
    `_CONTEXT` characters of the cut are examined, from their start (a match that could begin earlier is not
    looked for)."""
    item, start, end, groups = found
    if item.kind != "close":
        return True
    delimiter = item.delimiter
    length = len(text)
    if delimiter.literals is not None:
        # a longer literal that starts before this one and runs to the end could still win
        longest = max(map(len, delimiter.literals))
        for at in range(max(pos, length - longest + 1), start):
            tail = text[at:]
            if any(len(literal) > len(tail) and literal.startswith(tail) for literal in delimiter.literals):
                return False
        return True
    if length - end > _CONTEXT:
        return True  # far from the cut: library patterns look ahead a few characters at most
    match, hold = _pattern_scan(item, text, start, False)
    if match is not None and match.start() == start and hold > start:
        return True  # final as it stands (what streaming commits before the end)
    # Undecided: fine if only its end may still grow. Every continuation the pattern spells must leave a match at
    # the same place with the same named groups.
    pattern = delimiter.regex
    offset = max(0, start - _CONTEXT)
    window = text[offset:]
    for probe in delimiter.probes or ("\x00",):
        extended = _timed(item, pattern.match, window + probe, start - offset)
        if extended is None or (groups is not None and extended.groupdict() != groups):
            return False
    return True


def settle(
    field: Any, body: str, captures: dict, output: dict, tool_params: dict, strip: bool, check_calls: bool = False
) -> Any:
    """Compute a closed region's value and store it in the message (set, appended, or joined). Returns the value.
    With `check_calls`, a `tool_calls` value that holds something other than runnable calls raises ValueError."""
    value = field_value(field, body, captures)
    if strip:
        value = strip_markers(value)
    if tool_params and "value_parser_by" not in field.content_args:
        value = type_tool_calls(value, tool_params, field.content in TYPED_SYNTAX)
    name = field.name
    if check_calls and name == "tool_calls":
        problem = call_problem(value, shaped_only=True)
        if problem is not None:
            raise ValueError(problem)
    if field.join is not None:
        if not isinstance(value, str):
            raise ValueError(f"field {name!r}: 'join' needs each match to parse to a string, got {type(value).__name__}")
        earlier = output.get(name)
        output[name] = value if earlier is None else earlier + field.join + value
    elif field.repeats:
        output.setdefault(name, []).append(value)
    else:
        output[name] = value
    return value


def finish_message(compiled: CompiledTemplate, output: dict) -> dict:
    """Enforce `optional: false` fields, then drop empty values (defaults are always kept)."""
    if compiled.required:
        missing = [name for name in compiled.required if name not in output]
        if missing:
            raise ValueError(f"required field(s) {missing} (optional: false) did not appear in the output")
    for value in output.values():
        if not value:
            break
    else:
        return output  # nothing empty to drop (the common case)
    defaults = compiled.defaults
    return {
        key: value
        for key, value in output.items()
        if key in defaults or not (value is None or (not value and isinstance(value, (str, list, dict))))
    }


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
                match, pending = _pattern_scan(item, buffer, pos, eos)
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
    """`_pattern_scan` for a regex delimiter whose starts the template analysis bounded (scan.PatternScan): only
    candidate starts are tried, and only from where the last scan of this delimiter stopped."""
    key = id(item)
    start = pos
    end = len(buffer)
    scan = item.delimiter.scan
    if eos and end <= _SHORT_SEARCH:
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
        if not eos and first_candidate(scan, buffer, start) >= end:
            # no trigger in the text since the last scan and no lead run at its end: nothing can start there
            memo[key] = end + base
            return None, end
    guards = None
    if scan.guards is not None:
        # where the literals of the pattern's unbounded lookbehinds occur (buffer positions), see scan._try
        if memo is None:
            memo, base = {}, 0
        state = memo.setdefault((key, "guards"), [0, []])
        guards = track_guards(scan, buffer, state[1], state, base)
    kind, match, at, dead = scan_pattern(
        item.delimiter.regex, scan, buffer, pos, start, eos, limit, _quick(item) if scan.safe else _timer(item), guards
    )
    if memo is not None:
        memo[key] = dead + base
        if kind == "hold" and end - at > _LONG_HOLD:
            memo[(key, "held")] = (at + base, end + base, end + base)
    if kind is None:
        return None, end
    if kind == "match":
        if not eos and end - match.end() <= _CONTEXT:
            # no way through the pattern reaches the end, but `$`, `\b` or a lookahead may still lean on it
            return _settle_probe(item, buffer, match, end, ("\x00",))
        return match, end
    if kind == "hold":
        return None, at
    return _settle_probe(item, buffer, match, end)


def _still_held(scan: Any, buffer: str, checked: int) -> bool:
    """Whether the text from `checked` (added since the hold was last checked) may leave a held partial match as it
    is, so that trying it again can wait: whitespace only (it goes on with a run of whitespace, which a match held
    that long as good as always takes or waits for), or text without a character a match can end with
    (`PatternScan.completion`). Either way a wrong guess only delays events: the message is the same."""
    if NOT_SPACE.search(buffer, checked) is None:
        return True
    return scan.completion is not None and scan.completion.search(buffer, checked) is None


def _gated_start(watch: Watch, text: str, pos: int) -> int:
    """Where the first delimiter of a gated watch (`scan.FastPath`) can start, at or after `pos` in a complete text:
    in the run of whitespace before the first trigger or after it (or in the run that ends the text). The text before
    is what the streaming parser's fast path hands to the region without a scan; one-shot parsing skips it too, or
    it tried every candidate there (a call of 10^5 parameters took 4 times as long as streamed)."""
    fast = watch.fast
    if fast is None or not fast.gated or fast.trigger is None or (fast.begin and pos == 0):
        return pos
    hit = fast.trigger.search(text, pos - fast.back if pos > fast.back else 0)
    start = len(text) if hit is None else hit.start()
    if start <= pos:
        return pos
    if fast.single is not None:  # a start may be followed by whitespace: the run before the trigger
        last = fast.single.search(text, pos, start)  # (a reverse search: the last character that is not whitespace)
        start = pos if last is None else last.end()
    return start


def _find_short(watch: Watch, text: str, pos: int, found: dict) -> tuple | None:
    """`find_delimiter` at the end of a short text (`_SHORT_SEARCH`), for one-shot parsing: one search per delimiter,
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
                match = _pattern_scan(item, text, pos, True)[0]
            elif scan.safe or quiet(scan, text, found):  # one-shot: the text is complete and short
                try:
                    regex_time_left()
                except TimeoutError:
                    raise RegexTimeoutError(
                        timeout_message(f"field {item.field.name!r}: {item.kind}_pattern {excerpt(delimiter.regex.pattern)}")
                    ) from None
                match = delimiter.regex.search(text, first_candidate(scan, text, pos))
            else:  # nested or adjacent repeats: the search keeps the time limit
                match = _timed(item, delimiter.regex.search, text, first_candidate(scan, text, pos))
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
    """At the end of a short text: one `search` (its cost is bounded by the square of `_SHORT_SEARCH` for a pattern
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
        match = _timed(item, pattern.search, buffer, first_candidate(item.delimiter.scan, buffer, pos))
    work[0] += len(buffer) - pos
    if memo is not None:
        memo[(key, "found")] = (buffer, match, pos)
        memo[key] = (match.start() if match is not None else len(buffer)) + base
    return match


# -- scanning helpers --------------------------------------------------------------------------------------------


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
    return lambda *args, **kwargs: _timed(item, *args, **kwargs)


def _quick(item: WatchItem):
    """Anchored tries of a pattern without nested or adjacent repeats (scan.PatternScan.safe): each is cheap, so they
    run without `regex`'s per-call timeout, which costs tens of microseconds a call; the budget of the call is still
    checked before each try."""

    def run(operation, *args, **kwargs):
        try:
            regex_time_left()
        except TimeoutError:
            raise RegexTimeoutError(
                timeout_message(f"field {item.field.name!r}: {item.kind}_pattern {excerpt(item.delimiter.regex.pattern)}")
            ) from None
        return operation(*args, **kwargs)

    return run


def _timed(item: WatchItem, operation, *args, **kwargs):
    while True:
        try:
            return operation(*args, timeout=regex_time_left(), **kwargs)
        except TimeoutError:
            if not retry_after_timeout():  # (other threads advanced regex's clock: run it again)
                break
    # the timeout stands
    key = f"{item.kind}_pattern"
    raise RegexTimeoutError(timeout_message(f"field {item.field.name!r}: {key} {excerpt(item.delimiter.regex.pattern)}"))


def _pattern_scan(item: WatchItem, buffer: str, pos: int, eos: bool) -> tuple[Any, int]:
    """Search a regex delimiter. Returns (the leftmost complete match or None, where a still-undecided match could
    start). A complete match is undecided while more text could make the pattern match elsewhere at or before it
    (an alternative or a greedy repeat still open at the end of the buffer), or while it leans on the end of the
    buffer (`$`, lookaheads). (For patterns the template analysis could not bound; see `_scan_item`.)"""
    pattern = item.delimiter.regex
    end = len(buffer)
    if eos:
        return _timed(item, pattern.search, buffer, pos), end
    first = _timed(item, pattern.search, buffer, pos, partial=True)
    if first is None:
        return None, end
    if first.partial:
        return None, first.start()
    # `regex` prefers a complete match anywhere to a partial one, so look for partial matches before it.
    match = first
    for start in range(pos, match.start()):
        if _timed(item, pattern.fullmatch, buffer, start, partial=True) is not None:
            return match, start
    if match.end() == end:
        return match, match.start()  # at the edge: a repeat or an alternative may still grow it
    if _timed(item, pattern.fullmatch, buffer, match.start(), partial=True) is None:
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
    offset = max(0, start - _CONTEXT)
    window = buffer[offset:]
    span = (start - offset, match.end() - offset)
    scan = item.delimiter.scan
    # anchored tries of a pattern without nested or adjacent repeats skip regex's per-call timeout (see _quick)
    run = _quick(item) if scan is not None and scan.safe else _timer(item)
    for probe in item.delimiter.probes if probes is None else probes:
        extended = run(pattern.match, window + probe, span[0])
        if extended is None or extended.span() != span or extended.groupdict() != match.groupdict():
            return match, start
    if probes is None:
        # The fixed probes are the shortest continuations only: a long literal cut by the end of the buffer
        # (`<|START_R`) is completed with its own rest, which may give a preferred, longer match at the same start.
        for probe in _completions(pattern.pattern, window, span[1]):
            extended = run(pattern.match, window + probe, span[0])
            if extended is None or extended.span() != span or extended.groupdict() != match.groupdict():
                return match, start
    return match, end


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


# -- one-shot ----------------------------------------------------------------------------------------------------


def parse_response(
    text: Any,
    template: dict | CompiledTemplate,
    *,
    prefix: Any = None,
    tools: list | None = None,
    tokenizer: Any = None,
    truncated: bool = False,
    malformed: str = "raise",
) -> dict:
    """Parse one complete generation into a message dict.

    `template` is a template dict, a compiled template, or the name of a library template ("qwen3").
    `prefix` is the prompt the model continued from (required; `""` opts out). `tools` types tool-call arguments
    by their schemas. With a fast `tokenizer`, `text` (and `prefix`) may be token ids. `truncated=True` says the
    output was cut off, so an unfinished tool call is dropped rather than parsed.

    `malformed=` says what to do with a region whose text does not parse with its field's content parser or
    transform (a tool call with broken JSON): "raise" (the default, as transformers: `ValueError`), "content" (its
    raw text, delimiters included, becomes a region of `content` where the model wrote it) or "drop" (it is left
    out). Other regions are parsed as usual either way."""
    compiled = load_template(template)
    if prefix is None:
        raise ValueError(PREFIX_REQUIRED)
    check_malformed(malformed)
    if tokenizer is None and not isinstance(text, str):
        raise TypeError(
            f"parse_response takes text, got {type(text).__name__}; to parse token ids, pass tokenizer= (a fast tokenizer)"
        )
    tool_params = tool_parameters(tools) if tools else {}
    if tokenizer is not None:
        if isinstance(text, str):
            raise TypeError("parse_response was given tokenizer=, so it takes token ids, not text")
        decoder = TokenIdDecoder(tokenizer)
        if isinstance(prefix, str):
            prefix = tokenizer.encode(prefix, add_special_tokens=False)
        prefix = decoder.feed(prefix) + decoder.flush()
        text = decoder.feed(text) + decoder.flush()
    elif not isinstance(prefix, str):
        raise TypeError(f"prefix must be text (or token ids together with tokenizer=), got {type(prefix).__name__}")
    # The streaming parser only commits decisions that later text cannot change, so one pass over prompt tail and
    # output, as at the end of a stream, gives exactly the streamed message.
    opened = open_budget(len(text) + len(prefix))  # (`regex_budget`, a little cheaper per short message)
    try:
        if prefix:
            text = compiled.truncate_prefix(prefix) + text
        return _parse_whole(compiled, text, tool_params, tokenizer is not None, truncated, malformed)
    finally:
        if opened:
            close_budget()


def _parse_whole(
    compiled: CompiledTemplate, text: str, tool_params: dict, strip: bool, truncated: bool, malformed: str = "raise"
) -> dict:
    """One pass over a complete text, without events: the same states and decisions as `ResponseParser`."""
    fields, implicit = compiled.fields, compiled.implicit
    output = compiled.fresh_defaults()
    current, opened, body_start, captures = implicit, False, 0, None
    region_start = 0  # where the current region's open delimiter starts (its body, for the implicit region)
    watch = compiled.idle_watch
    pos = 0
    memo: dict = {}

    def close(field: Any, body_end: int, close_end: int) -> None:
        if malformed == "raise":  # (what settle_checked does under this policy: the error goes to the caller)
            settle(field, text[body_start:body_end], captures or {}, output, tool_params, strip)
            return
        settle_checked(
            compiled, field, text[body_start:body_end], text[region_start:body_start], text[body_end:close_end],
            captures or {}, output, tool_params, strip, malformed,
        )

    short = len(text) <= _SHORT_SEARCH
    near = _NEAR_CALLS if len(text) <= _NEAR_TEXT else 0
    while True:
        if watch.literal_only:  # the common case, inlined
            match = watch.combined.search(text, pos)
            found = None if match is None else (watch.owner[match.group()], match.start(), match.end(), None)
        elif short:
            plan = watch.short_plan
            if plan is None:
                plan = watch.short_plan = build_short_plan(watch) or False
            found = find_short(plan, text, pos) if plan else None
            if found is FAR:
                timing = perf_counter()
                found = _find_short(watch, text, pos, memo)
                note_far(plan, perf_counter() - timing, len(text) - pos)
            elif not plan:
                found = find_delimiter(watch, text, pos, True, memo)[0]
        else:
            plan = watch.short_plan
            if plan is None:
                plan = watch.short_plan = build_short_plan(watch) or False
            # a longer text: the first few candidates with the one-shot plan, a bounded number of times (linear)
            found = FAR
            if plan and near:
                near -= 1
                found = find_near(plan, text, pos)
            if found is FAR:
                found, _ = find_delimiter(watch, text, _gated_start(watch, text, pos), True, memo)
        if truncated and found is not None and current is not None and current != implicit:
            if not fields[current].text_like and not cut_safe(found, text, pos):
                found = None  # a close that only the cut made: the structured region is unfinished
        if found is None:
            if current is not None and (opened or pos < len(text)):
                if not opened:
                    body_start = region_start = pos
                field = fields[current]
                if truncated and current != implicit and not field.text_like:
                    break  # cut off inside a structured region (an unfinished call): dropped
                close(field, len(text), len(text))
            break
        item, start, end, groups = found
        if start > pos and current is not None and not opened:
            opened, body_start, region_start = True, pos, pos
        pos = end
        if item.kind == "open":
            if current is not None and opened:
                close(fields[current], start, start)
            field = item.field
            current, opened, body_start, region_start = field.name, True, end, start
            captures = {k: v for k, v in groups.items() if v is not None} if groups else None
            watch = compiled.field_watch[field.name]
            continue
        had_text = opened
        if opened:
            if groups:
                captures = {**(captures or {}), **{k: v for k, v in groups.items() if v is not None}}
            close(fields[current], start, end)
        current, opened, captures, watch = implicit, False, None, compiled.idle_watch
        if not had_text and start == end:
            return finish_message(compiled, output)  # an empty close that matches nothing: stop (as transformers)
    return finish_message(compiled, output)

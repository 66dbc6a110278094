"""`parse_response`: one complete output parsed in one pass, with the decisions the streaming parser takes at the
end of a stream (so one-shot equals streamed), without building events. Short texts take the combined search of
`oneshot` (one search per parser state).
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

from .delimiters import SHORT_SEARCH, find_delimiter, find_short_delimiter
from .errors import (
    close_budget,
    open_budget,
)
from .message import (
    PREFIX_REQUIRED,
    check_malformed,
    check_truncated,
    cut_safe,
    finish_message,
    prompt_tail,
    settle,
    settle_checked,
)
from .oneshot import FAR, build_short_plan, find_near, find_short, note_far
from .template import CompiledTemplate, load_template
from .token_ids import TokenIdDecoder
from .tools import tool_parameters

# In a longer text, one-shot parsing looks for this many delimiters at the first candidates of the state's
# one-shot plan (`oneshot.find_near`), then with the streaming search only: linear either way.
_NEAR_CALLS = 16
# ... on texts up to this long: a short message past SHORT_SEARCH gains; on long generations the tries that fail cost
# more than they save (a one-shot parse of a 32K olmo3 or nemotron_nano_v2 generation took 2-10 times longer).
_NEAR_TEXT = 4096


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
    check_truncated(truncated)
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
            text = prompt_tail(compiled, prefix, once_per_template=True) + text
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

    short = len(text) <= SHORT_SEARCH
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
                found = find_short_delimiter(watch, text, pos, memo)
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
                found, _ = find_delimiter(watch, text, pos, True, memo)
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

"""Assembling the pieces into a version-1 response template that follows the library's rules (whitespace that
belongs to markup sits inside the delimiters, a call closes only after a complete value, text around calls is
kept).
"""

from __future__ import annotations

import re
from typing import Any

from .calls import opener_regex
from .markup import citation_spans, stray_call_tokens
from .probes import CALL_A, CALL_IDS, TOKEN, Renderer, alternation, call_message, esc, user_message
from .turns import Calls, Reasoning, Turn, closing_of


def build(turn: Turn, reasoning: Reasoning | None, calls: Calls | None) -> dict:
    template: dict = {"version": 1, "defaults": {"role": "assistant"}}
    anchors = [a for a in dict.fromkeys(turn.anchors) if a.strip()]
    # A complete reasoning block the prompt itself writes after the assistant header (a thinking budget's note,
    # an empty block that turns thinking off) is the prompt's, not the model's: the turn starts after it.
    prompt_block = ""
    if reasoning is not None and not reasoning.always and not reasoning.conventional:
        prompt_block = (r"(?:\s*" + re.escape(reasoning.open) + "(?:(?!" + re.escape(reasoning.close) + r")[\s\S])*"
                        + re.escape(reasoning.close) + r"\s*)?")
    if len(anchors) == 1 and not turn.anchor_suffix and not prompt_block:
        template["start_anchor"] = anchors[0]
    else:
        pattern = alternation(anchors)[3:-1]
        if turn.anchor_suffix:
            pattern = "(?:" + pattern + ")(?:" + re.escape(turn.anchor_suffix) + ")?"
        if prompt_block:
            pattern = "(?:" + pattern + ")" + prompt_block
        template["start_anchor_pattern"] = pattern
    fields: dict = {}
    ends = list(dict.fromkeys(e for e in [turn.end, *turn.extra_ends] if e))
    end_pattern = "|".join(re.escape(e) for e in ends)
    opener = ((calls.literal.get("block_open") or "").strip() or (calls.literal.get("call_open") or "").strip()
              if calls is not None else "")
    for end in ends:
        if opener.startswith(end) and opener != end:
            # The call opener starts with the end-of-turn marker (GigaChat opens a call with a new message):
            # that marker ends the turn only when no call follows.
            end_pattern = end_pattern.replace(re.escape(end), re.escape(end) + "(?!" + esc(opener[len(end):]) + ")")
    first = TOKEN.search(opener) if opener else None
    if reasoning is not None:
        # Whitespace around the reasoning belongs to its markers, and the text is kept as written (strip off), so
        # streamed chunks add up to the final value.
        opens = "(?:" + "|".join(opener_regex(o) for o in [reasoning.open] + [a for a, _ in reasoning.also]) + ")"
        closes_ = alternation([reasoning.close] + [b for _, b in reasoning.also])
        close = r"\s*" + closes_ + r"\s*|\s*\Z"
        if ends:
            # The end of the turn ends a reasoning block the model never closed.
            close += r"|\s*(?=" + end_pattern + ")"
        # (the ignores: `first` is only found in the calls' opener, so calls is not None)
        if first and calls.kind in ("name_json", "xml"):  # type: ignore[union-attr]
            # A model that starts its calls without closing the reasoning has ended it: the call opener closes
            # the reasoning. Only for calls that name the function in their header markup; a JSON object in tags
            # written inside the reasoning is the model thinking about a call, and stays reasoning.
            # The calls may also start without their block's opener: the per-call opener closes it too.
            call_first = TOKEN.search((calls.literal.get("call_open") or "").strip())  # type: ignore[union-attr]
            openers = [first.group(0)] + ([call_first.group(0)] if call_first else [])
            close += r"|\s*(?=" + alternation(openers) + ")"
        fields["reasoning_content"] = {
            # (an opener written again right after it, over the one the prompt prefilled, is markup too)
            "open_pattern": r"\s*(?:" + opens + r"\s*)+",
            "close_pattern": close,
            "content_args": {"strip": False},
            # A model that reasons again later in the message (a second block, another analysis segment) adds to
            # its reasoning: the blocks are joined as written, none replaces another.
            "repeats": True,
            "join": "",
        }
        if reasoning.always:
            # The prompt always opens the reasoning: a generation parsed without its prompt starts inside it.
            fields["reasoning_content"]["open_pattern"] = r"\A(?:\s*" + opens + r")*\s*"
    if calls is not None:
        close = calls.close
        if first:
            # Calls written first in the message (or right after the reasoning) are followed by markup whitespace;
            # after text, the whitespace belongs to the text that follows (it separates the two pieces).
            starts = r"(?<![\s\S])" + ("|" + alternation([reasoning.close] + [b for _, b in reasoning.also]) if reasoning is not None else "")
            close = ("(?:" + close + r")(?:(?<=(?:" + starts + r")\s*" + re.escape(first.group(0))
                     + r"[\s\S]{0,200})\s*)?")
        open_ = calls.open
        if first and open_.startswith(r"\s*") and calls.kind == "xml":
            # Whitespace before the calls is markup when it holds a line break or follows other markup; spaces
            # right after text are the text's own (kept in the content, as the model wrote them). The library
            # does so for XML-style calls (GLM, DeepSeek V3.2, MiniMax M2); for JSON calls it drops the space.
            open_ = r"(?:(?<=[>\]])\s*|[ \t]*\n\s*)?" + open_[len(r"\s*"):]
        field_: dict[str, Any] = {"open_pattern": open_, "close_pattern": close}
        if ends:
            # A call the model did not close before ending its turn still ends there.
            field_["close_pattern"] = (close + "|" + calls.end_guard + r"\s*(?:```\s*)?(?:" + end_pattern
                                       + ").*")
        if "```" in calls.literal.get("call_close", ""):
            # The model stopped right after the arguments' closing fence, before the call's closing marker.
            field_["close_pattern"] += "|" + calls.end_guard + r"\s*```\s*\Z"
        if calls.repeats:
            field_["repeats"] = True
        field_["content"] = calls.content
        if calls.content_args:
            field_["content_args"] = calls.content_args
        if calls.transform_each:
            field_["transform_each"] = True
        field_["transform"] = calls.transform
        fields["tool_calls"] = field_
    content: dict = {}
    closes = []
    paired = bool(turn.content_open) and closing_of(turn.content_open, turn.content_open + turn.content_close) == (
        turn.content_close)
    if paired:
        # Content in a pair of its own tags (<response> ... </response>): markup dropped from the text, which stays
        # the implicit field, so an answer the model writes without them is content too.
        closes.append(r"\s*" + esc(turn.content_open) + r"\s*")
        closes.append(r"\s*" + esc(turn.content_close))
    elif turn.content_open:
        # Content opened by a section marker that other sections share the end of (<|channel|>final<|message|>
        # ... <|return|>): an explicit field.
        content["open_pattern"] = r"\s*" + esc(turn.content_open) + r"\s*"
        if turn.content_close:
            closes.append(r"\s*" + esc(turn.content_close) + r"\s*")
    if ends:
        closes.append(r"\s*(?:" + end_pattern + ").*")
    if calls is not None and calls.partial_open:
        # An opener cut off by the end of the generation is markup, not content.
        closes.append(r"\s*" + calls.partial_open + r"\Z")
    closes += turn.dropped  # markup that is no content where it stands: dropped, the text around it kept
    closes += stray_call_tokens(calls, turn, reasoning)
    if reasoning is not None and (paired or not turn.content_open):
        # A reasoning close written again after the reasoning ended is markup: dropped from the content (the text
        # after it, with its whitespace, continues the content).
        closes.append(r"\s*" + alternation([reasoning.close] + [b for _, b in reasoning.also]))
    citation_spans(turn, content, closes)
    if closes:
        content["close_pattern"] = "|".join(closes)
    # Text is kept as written (no strip): whitespace before markup belongs to the markup's pattern, trailing
    # whitespace at the end is dropped by the last alternative; pieces around calls join as they were written.
    content["close_pattern"] = "|".join([r"(?<![\s\S])\s+"] + closes + [r"\s*\Z"])  # leading whitespace: markup
    content.update({"content": "text", "content_args": {"strip": False}, "repeats": True, "join": ""})
    fields["content"] = content
    template["fields"] = fields
    return template


def calls_end_bare_reasoning(r: Renderer, template: dict, reasoning: Reasoning | None, calls: Calls | None,
                              reasons: list[str]) -> None:
    """The call block's opener ends a reasoning that the generation prompt opens with plain text.

    When the reasoning has no markup of its own (see _reasoning_after_text_prefill) and the chat template renders
    a turn without reasoning with its call block right after the header, where the prompt leaves the reasoning
    open, a call block at the start of the generation is a call, not reasoning. The block opener (followed by
    the start of its JSON) then closes the reasoning wherever it comes: also after reasoning text whose closing
    marker the model left out. That second half is a generalisation the renderings do not show (they always
    write the marker after reasoning); it is reported.
    """
    if reasoning is None or not reasoning.bare or calls is None or calls.kind not in ("json_array", "json_object"):
        return
    opener = (calls.literal.get("block_open") or "").strip()
    if not opener or not TOKEN.fullmatch(opener):
        return
    message = {"role": "assistant", "content": "", "tool_calls": [call_message(*CALL_A, CALL_IDS[0])]}
    try:
        _, generation = r.turn([user_message()], message, tools=True)
    except Exception:
        return
    if not generation.lstrip().startswith(opener):
        return
    field_ = template["fields"]["reasoning_content"]
    field_["close_pattern"] += r"|\s*(?=" + esc(opener) + r"\s*[\[{])"
    reasons.append(f"reasoning: a turn without reasoning starts with {opener!r} where the prompt leaves the reasoning "
                   f"open, so {opener!r} ends the reasoning, also after reasoning text without "
                   f"{reasoning.close!r} (a generalisation, not verified)")

"""Finding the pieces of an assistant turn in renderings: the header the prompt ends with (the start anchor), what
follows the content (end of turn), what surrounds the reasoning (and where a chat template prefills it), and the
markup a template adds around tool results or built-in tools.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...core.errors import InferenceError
from .probes import (
    CALL_A,
    CALL_B,
    CALL_IDS,
    COMMON_EOS,
    CONTENT,
    REASONING,
    TOKEN,
    USER,
    Renderer,
    call_message,
    common_prefix_len,
    esc,
    first_token,
    tool_history,
    user_message,
)


@dataclass
class Turn:
    anchor: str = ""  # literal start anchor
    anchors: list = field(default_factory=list)  # all anchors seen (after a user turn, after a tool turn)
    prefill: str = ""  # what the generation prompt writes after the anchor (e.g. "<think>\n")
    before_content: str = ""  # what the turn writes before plain content (e.g. an empty think block)
    content_open: str = ""  # markup right before content, when content has its own markers
    content_close: str = ""
    reasoning_close: str = ""
    extra_ends: list = field(default_factory=list)  # the tokenizer's EOS and common EOS tokens
    anchor_suffix: str = ""  # a reasoning close the generation prompt may write right after the anchor
    empty_reasoning: tuple = ()  # (open, close) of the reasoning markers, to drop empty blocks from call probes
    end: str = ""  # end-of-turn marker
    citation: tuple = ()  # (span open tag, close tag head) of the grounding markup the prompt describes
    unprefilled: list = field(default_factory=list)  # anchors whose generation prompt does not open the reasoning
    dropped: list = field(default_factory=list)  # markup dropped from the content where it stands (kept whitespace)
    segment: str = ""  # a marker opening each segment of the turn, the first one written by the generation prompt


@dataclass
class Reasoning:
    open: str = ""
    close: str = ""
    prefilled: bool = False  # the generation prompt opens the reasoning block
    always: bool = False  # ... in every turn (no thinking switch)
    conventional: bool = False  # not from the chat template: the common <think> convention
    also: list = field(default_factory=list)  # conventional (open, close) pairs accepted besides the template's
    bare: bool = False  # opened by text the generation prompt writes; the rendered turn starts with the reasoning


@dataclass
class Calls:
    kind: str = ""  # json_object | json_array | name_json | xml | python
    open: str = ""  # regex opening one call (may capture the name)
    close: str = ""  # regex closing one call
    partial_open: str = ""  # regex for a call opener cut off at the end of the generation
    content_args: dict | None = None
    transform: dict | None = None
    transform_each: bool = False
    content: str = "json"
    repeats: bool = True
    literal: dict = field(default_factory=dict)  # the literal markers found, for the report
    end_guard: str = ""  # lookbehind a call's text must satisfy before the end of the turn closes it


def _assistant(content: str, reasoning: bool, **extra) -> dict:
    message = {"role": "assistant", "content": content, **extra}
    if reasoning:
        message["reasoning_content"] = REASONING
    return message


# Message keys chat templates read reasoning from besides reasoning_content.
_REASONING_KEYS = ("reasoning", "thinking")


def _reasoning_key(r: Renderer, reasons: list[str]) -> None:
    """Use another message key for reasoning when the chat template ignores reasoning_content but reads that one."""
    def shows(key):
        r.reasoning_key = key
        try:
            text = r.render([user_message(), _assistant(CONTENT, True)], False, False)
        except Exception:
            return False
        return REASONING in text[text.rfind(USER):]

    if shows(None):
        return
    for key in _REASONING_KEYS:
        if shows(key):
            reasons.append(f"reasoning: the chat template reads it from message[{key!r}], not reasoning_content")
            return
    r.reasoning_key = None


def find_reasoning(r: Renderer, reasons: list[str]) -> Reasoning | None:
    """Reasoning markers, from a turn rendered with reasoning and content."""
    _reasoning_key(r, reasons)
    try:
        prompt, generation = r.turn([user_message()], _assistant(CONTENT, True))
    except InferenceError:
        # The chat template rewrites the last turn: a reasoning opener the generation prompt writes and the
        # rendered turn drops. Rebuild the generation as the model writes it, if the closing marker is known.
        prompt = r.render([user_message()], False, True)
        opener = _tail_token(prompt)
        closer = closing_of(opener, r.source)
        if not closer:
            bare = _reasoning_after_text_prefill(r, prompt, reasons)
            if bare is not None:
                return bare
            reasons.append("reasoning: the chat template rewrites the last turn and no reasoning markers could be found")
            return None
        prefill = prompt[prompt.rindex(opener):]
        full = r.render([user_message(), _assistant(CONTENT, True)], False, False)
        rest = full[len(prompt) - len(prefill):] if full.startswith(prompt[: len(prompt) - len(prefill)]) else ""
        # The rendered turn may already start with the closing marker (DeepSeek V3.1 writes </think> + content).
        r.synthesis = {"prefill": prefill, "close": "" if rest.lstrip().startswith(closer) else "\n" + closer + "\n\n"}
        reasons.append(f"reasoning: the chat template drops reasoning from the turn it renders; the closing marker "
                       f"{closer!r} is inferred from the opener {opener!r} and its presence in the chat template source "
                       "(a weaker check)")
        try:
            prompt, generation = r.turn([user_message()], _assistant(CONTENT, True))
        except InferenceError as error:
            reasons.append(f"reasoning: not decided, {error}")
            r.synthesis = None
            return None
    if REASONING not in generation or CONTENT not in generation:
        return None
    at, content_at = generation.index(REASONING), generation.index(CONTENT)
    if content_at < at:
        reasons.append("reasoning: the chat template writes reasoning after the content; not supported")
        return None
    opener = generation[:at]
    prefilled = not opener.strip()
    if prefilled:
        opener = _tail_token(prompt)  # opened by the generation prompt
    elif TOKEN.search(opener):
        # Keep only the opener itself: what precedes it belongs to the turn's lead-in.
        opener = opener[list(TOKEN.finditer(opener))[-1].start():] if not TOKEN.fullmatch(opener.strip()) else opener
        opener = _with_header(generation[:at], opener)
    closer = generation[at + len(REASONING):content_at]
    if not opener.strip() or not closer.strip():
        reasons.append(f"reasoning: no markers around it (open {opener!r}, close {closer!r})")
        return None
    # The close is the first marker after the reasoning; what follows it belongs to the content's lead-in.
    return Reasoning(open=opener.strip(), close=first_token(closer), prefilled=prefilled)


def _reasoning_after_text_prefill(r: Renderer, prompt: str, reasons: list[str]) -> Reasoning | None:
    """A generation prompt that ends with plain text the rendered turn drops, before a turn that writes the
    reasoning bare right after its header.

    Some chat templates end the generation prompt with a sentence that opens the reasoning ('Here are my
    reasoning steps:' and a line break, Apriel 1.6) while the last turn they render writes the reasoning itself
    right after the header, then a marker, then the content: prompt = history + header + T, rendered turn =
    history + header + reasoning + X + content. T is the prompt's own text (the model never writes it: the
    rendered turn does not keep it), the model writes its reasoning after it and ends it with X. So the
    reasoning is open from the start of every generation, with T as its (optional) opener and X as its close,
    and verify reads the rendered turn after the header as the generation (reasoning_synthesis with prefill T:
    a rendered turn that starts with the reasoning is taken as it is).
    """
    try:
        full = r.render([user_message(), _assistant(CONTENT, True)], False, False)
    except Exception:
        return None
    at = full.rfind(REASONING)
    content_at = full.find(CONTENT, at + 1) if at >= 0 else -1
    if content_at < 0 or not prompt.startswith(full[:at]):
        return None
    head, prefill, closer = full[:at], prompt[at:], full[at + len(REASONING):content_at]
    if not (head.endswith("\n") or _tail_token(head)):
        return None  # the reasoning does not start a line or follow markup: not a turn that starts with it
    if not prefill.strip() or TOKEN.search(prefill) or prefill.strip() in full[at:] or not closer.strip():
        return None
    r.synthesis = {"prefill": prefill, "close": ""}
    reasons.append(f"reasoning: the generation prompt ends with {prefill!r}, which the rendered turn drops; the turn "
                   f"writes the reasoning right after its header and closes it with {first_token(closer)!r}: the "
                   "reasoning is open from the start of the generation (verified on the rendered turn after the header)")
    return Reasoning(open=prefill.strip(), close=first_token(closer), prefilled=True, bare=True)


# Reasoning delimiters of well-known formats, used only when the chat template writes them in its source but never
# renders reasoning_content (so they cannot be read from a rendering).
KNOWN_REASONING = (("<think>", "</think>"), ("[THINK]", "[/THINK]"), ("<seed:think>", "</seed:think>"),
                    ("<|START_THINKING|>", "<|END_THINKING|>"), ("<|channel>thought", "<channel|>"))


def conventional_reasoning(turn: Turn, reasoning: Reasoning | None, reasons: list[str]) -> None:
    """Conventional think blocks read as reasoning besides the chat template's own markers.

    Models of one lineage keep writing the common block whatever a given chat template shows: <think> ...
    </think>, and in chat templates whose special tokens are written [LIKE_THIS], [THINK] ... [/THINK]. Only that
    exact markup is affected; it is not verified (the chat template does not write it)."""
    if reasoning is None:
        return
    pairs = [("<think>", "</think>")]
    if any(re.search(r"\[/?[A-Z_]+\]", text) for text in (*turn.anchors, turn.end)):
        pairs.append(("[THINK]", "[/THINK]"))
    for pair in pairs:
        if pair[0] != reasoning.open and pair[1] != reasoning.close:
            reasoning.also.append(pair)
    if reasoning.also:
        shown = ", ".join(f"{a} ... {b}" for a, b in reasoning.also)
        reasons.append(f"reasoning: {shown} also read as reasoning by convention (not verified)")


def reasoning_from_source(source: str) -> Reasoning | None:
    for opener, closer in KNOWN_REASONING:
        if opener in source and closer in source:
            return Reasoning(open=opener, close=closer)
    for opener, closer in KNOWN_REASONING:
        # Only the closing marker: the chat template cuts reasoning out of earlier turns at it
        # (content.split('</think>')), so the model writes that block.
        if closer in source:
            return Reasoning(open=opener, close=closer)
    return None


def closing_of(opener: str, source: str) -> str:
    """The closing marker that goes with an opening one, when the chat template source writes it."""
    candidates = []
    match = re.fullmatch(r"<([A-Za-z_][\w:-]*)>", opener)
    if match:
        candidates.append(f"</{match.group(1)}>")
    for a, b in (("START", "END"), ("start", "end"), ("BEGIN", "END"), ("begin", "end"), ("open", "close")):
        if a in opener:
            candidates.append(opener.replace(a, b))
    return next((c for c in candidates if c != opener and c in source), "")


def find_turn(r: Renderer, reasoning: Reasoning | None, reasons: list[str]) -> Turn:
    turn = Turn(reasoning_close=reasoning.close if reasoning else "")
    try:
        _, generation = r.turn([user_message()], _assistant(CONTENT, False))
    except InferenceError:
        if reasoning is None:
            raise
        # The chat template renders a consistent last turn only when it carries reasoning: probe with it.
        r.with_reasoning = True
        _, generation = r.turn([user_message()], _assistant(CONTENT, True))
        reasons.append("every probe carries reasoning: without it the chat template rewrites the last turn")
    if CONTENT not in generation:
        raise InferenceError("the chat template does not write the assistant's content into the rendered turn")
    at = generation.index(CONTENT)
    lead = generation[:at]
    if reasoning is not None and reasoning.close in lead:
        lead = lead[lead.index(reasoning.close) + len(reasoning.close):]
    turn.before_content = generation[:at]
    turn.content_open = _with_header(lead, _content_wrapper(lead, reasoning))
    turn.end = first_token(generation[at + len(CONTENT):])
    if not turn.end:
        # Nothing follows the turn itself (GLM): the model stops with the next turn's header.
        turn.end = _next_header(r)
    after_end = generation[at + len(CONTENT):]
    if turn.content_open and turn.end:
        # Content has its own markers: the turn ends at the next marker after the content's closing one.
        rest = after_end[after_end.index(turn.end) + len(turn.end):]
        turn.content_close, turn.end = turn.end, first_token(rest)
    anchors = []
    for history in ([user_message()], tool_history()):
        try:
            gp = r.generation_prompt(history, tools=True)
            prompt = r.render(history, True, True)
        except Exception:
            continue
        if not gp.strip():
            # No generation prompt: the assistant simply follows the last turn's closing markup.
            last = USER if history[-1]["role"] == "user" else "TOOL_RESULT_PROBE"
            if last not in prompt:
                continue
            gp = prompt[prompt.rindex(last) + len(last):]
            gp = gp[TOKEN.search(gp).start():] if TOKEN.search(gp) else gp  # type: ignore[union-attr]  # found: checked
        elif reasoning is not None and gp.strip() == reasoning.open:
            # The generation prompt only opens the reasoning (no assistant header after a tool turn): the turn
            # starts after the last marker before it.
            head = prompt[: len(prompt) - len(gp)]
            tokens = list(TOKEN.finditer(head))
            if tokens and not head[tokens[-1].end():].strip():
                gp = head[tokens[-1].start():] + gp
        anchors.append(gp)
    if not anchors:
        raise InferenceError("could not find where the assistant turn starts (no generation prompt, no turn markup)")
    turn.anchor = anchors[0]
    turn.anchors = anchors
    eos = r.kwargs.get("eos_token") or ""
    turn.extra_ends = [e for e in (eos, *COMMON_EOS) if e and (e == eos or e not in r.source)]
    return turn


def tool_turn_header(r: Renderer, calls: Calls) -> str:
    """The first marker the chat template writes after a turn with calls when a tool result follows."""
    last = (calls.literal.get("block_close") or "").strip() or (calls.literal.get("call_close") or "").strip()
    try:
        text = r.render(tool_history(), True, False)
    except Exception:
        return ""
    end = text.find("TOOL_RESULT_PROBE")
    at = text.rfind(last, 0, end) if last else -1
    if at < 0:
        return ""
    token = TOKEN.match(text[at + len(last):end].lstrip())
    return token.group(0) if token else ""


def inline_tool_results(r: Renderer, turn: Turn, calls: Calls, reasons: list[str]) -> None:
    """Tool results the chat template writes inside the assistant turn, right after its calls.

    Some chat templates read the results of a turn's calls from the assistant message itself (a message key
    such as tool_responses, each item a name and a response) and write them after the calls, in the same turn
    (Gemma 4: <tool_call|><|tool_response>response:...<tool_response|>). The model stops where that markup
    starts (the runtime writes the results), and the next generation starts right after the results: the
    first marker after the calls is an end of the turn, and the prompt after the results is another anchor.
    Probed only for keys the chat template reads from the message; nothing is assumed when it renders none.
    """
    # Attribute or item names the chat template reads (m.tool_responses, message['tool_results']).
    keys = re.findall(r"(?:\.|\[['\"])(\w*tool\w*)\b", r.source)
    keys = [k for k in dict.fromkeys(keys) if re.search(r"respon|result", k)]
    last = (calls.literal.get("call_close") or "").strip() or (calls.literal.get("block_close") or "").strip()
    for key in keys:
        message = _assistant("", r.with_reasoning, tool_calls=[call_message(*CALL_A, CALL_IDS[0])],
                             **{key: [{"name": CALL_A[0], "response": "TOOL_RESULT_PROBE"}]})
        history = [user_message(), message]
        try:
            text = r.render(history, True, False)
            prompt = r.render(history, True, True)
        except Exception:
            continue
        end = text.rfind("TOOL_RESULT_PROBE")
        at = text.rfind(last, 0, end) if last else -1
        if end < 0 or at < 0:
            continue
        marker = TOKEN.match(text[at + len(last):end].lstrip())
        if not marker:
            continue
        if marker.group(0) not in (turn.end, *turn.extra_ends):
            turn.extra_ends.append(marker.group(0))
        # The next turn starts after the results: the closing markup of the results, plus any generation prompt.
        after = prompt[prompt.rindex("TOOL_RESULT_PROBE") + len("TOOL_RESULT_PROBE"):]
        first = TOKEN.search(after)
        anchor = after[first.start():] if first else ""
        if anchor.strip() and anchor not in turn.anchors:
            turn.anchors.append(anchor)
        reasons.append(f"tool results: the chat template writes them in the assistant turn (message[{key!r}]) after "
                       f"{marker.group(0)!r}: the model stops there, and the next turn starts after {anchor!r}")
        return


def builtin_tool_markup(r: Renderer, turn: Turn, calls: Calls, reasons: list[str]) -> None:
    """What the chat template writes for a call in its built-in tools mode (the `builtin_tools` variable).

    Rendered with builtin_tools set, a chat template may end a turn with calls with another end marker (Llama 3.1:
    <|eom_id|>, the runtime answers), and write a call to one of the built-in tools behind a special token in
    another syntax (<|python_tag|>brave_search.call(query="...")). Read from those renderings:
    - the other end marker ends the turn too;
    - the special token is tool-call markup: accepted right before a call in the format the chat template writes
      for function calls, and dropped from the content elsewhere (a built-in tool's call is run by the runtime, not
      returned as a function call: its text stays content, as written);
    - a generation cut right after it, or inside the head of a call object after it, leaves nothing behind.
    Keyed on the variable name `builtin_tools` (Meta's Llama 3.1 convention): a chat template that names that mode
    otherwise is not probed.
    """
    if not re.search(r"\bbuiltin_tools\b", r.source) or calls.kind != "json_object":
        return
    if (calls.literal.get("block_open") or "").strip() or (calls.literal.get("call_open") or "").strip():
        return  # calls with markup of their own: nothing to learn for the opener
    name, arguments = "get_weather", {"city": "Paris"}  # string values: built-in calls concatenate them

    def generation(builtin):
        other = Renderer(r.source, dict(r.kwargs) if builtin is None else dict(r.kwargs, builtin_tools=builtin))
        other.tools_always, other.arguments = r.tools_always, r.arguments
        other.with_reasoning, other.reasoning_key = r.with_reasoning, r.reasoning_key
        message = {"role": "assistant", "content": "", "tool_calls": [call_message(name, arguments, CALL_IDS[0])]}
        try:
            return other.turn([user_message()], message, tools=True)[1]
        except Exception:
            return None

    plain, mode, builtin = generation(None), generation(["web_search_probe"]), generation([name])
    if plain is None or mode is None:
        return
    found = []
    end, usual = _tail_token(mode.strip()), _tail_token(plain.strip())  # the last marker of each turn
    if end and usual and end != usual and end not in plain and end != turn.end and end not in turn.extra_ends:
        turn.extra_ends.append(end)
        found.append(f"ends the turn with {end!r}")
    if builtin is not None and name in builtin and "Paris" in builtin:
        head = builtin[common_prefix_len(plain, builtin):]
        marker = TOKEN.match(head)
        if marker and marker.group(0) not in plain and head[marker.end():].lstrip().startswith(name):
            token = re.escape(marker.group(0))
            calls.open = r"(?:\s*" + token + r")?(?:" + calls.open + ")"
            cut = token + r"\s*(?:\{[^{}]*)?"
            calls.partial_open = "(?:" + calls.partial_open + "|" + cut + ")" if calls.partial_open else cut
            turn.dropped.append(token)
            calls.literal["builtin_call_marker"] = marker.group(0)
            found.append(f"writes {marker.group(0)!r} before a built-in tool's call (read as call markup)")
    if found:
        reasons.append("built-in tools mode (builtin_tools): the chat template " + "; ".join(found))


def prefilled_segment_marker(r: Renderer, turn: Turn, reasons: list[str]) -> None:
    """A generation prompt that ends with the marker opening every segment of the turn.

    Some chat templates split the assistant turn into segments, each opened by the same marker followed by a
    recipient: the content as `>>>all\ntext`, each call as `>>>name\n{arguments}` (Functionary v3); the generation
    prompt writes the first marker. Read from the renderings: the text after the prompt's last special token is
    written again before each call of the parallel-calls probe, and the content probe writes a label before the
    content. Then the marker is the calls' opener (the first one sits in the prompt: the parser reads it from
    there), the marker and the label open the content, and the marker ends a segment.
    """
    tokens = list(TOKEN.finditer(turn.anchor))
    tail = turn.anchor[tokens[-1].end():] if tokens else turn.anchor
    marker = tail.split()[-1] if tail.split() and tail == tail.rstrip() else ""  # after a line break or markup
    if not marker or re.search(r"[\w<\[]", marker):
        return
    message = {"role": "assistant", "content": "",
               "tool_calls": [call_message(n, a, i) for (n, a), i in zip([CALL_A, CALL_B], CALL_IDS)]}
    try:
        _, two = r.turn([user_message()], message, tools=True)
        _, text = r.turn([user_message()], _assistant(CONTENT, r.with_reasoning))
    except Exception:
        return
    if not two.startswith(CALL_A[0]) or (marker + CALL_B[0]) not in two or CONTENT not in text:
        return
    label = text[: text.index(CONTENT)]
    if not label.strip() or TOKEN.search(label) or marker in label:
        return
    if any(not a.endswith(marker) for a in turn.anchors):
        return
    turn.anchors = [a[: len(a) - len(marker)] for a in turn.anchors]
    turn.anchor = turn.anchors[0]
    turn.segment = marker
    # The content segment's opener is markup: dropped, the text after it is content.
    turn.dropped.append(r"\s*" + esc(marker + label.strip()) + (r"[ \t]*\n?" if label.endswith("\n") else ""))
    reasons.append(f"segments: the generation prompt writes {marker!r}, which opens each segment of the turn (calls: "
                   f"{marker!r} + name; content: {marker + label.strip()!r})")


def _next_header(r: Renderer) -> str:
    """The first marker the chat template writes after an assistant turn, when a user turn follows it."""
    try:
        text = r.render([user_message(), _assistant(CONTENT, r.with_reasoning), user_message("SECOND_USER_PROBE")], False, False)
    except Exception:
        return ""
    if CONTENT not in text:
        return ""
    return first_token(text[text.index(CONTENT) + len(CONTENT):])


def _with_header(lead: str, marker: str) -> str:
    """A marker with the header words written right before it on the same line, with no other markup (the turn's
    anchor `<|start|>assistant` continues with ` to=self<|message|>`): those words address the section (reasoning
    to=self, the answer to=user) and are part of its opening marker."""
    if not marker or not lead.endswith(marker) or not TOKEN.fullmatch(marker):
        return marker
    head = lead[: len(lead) - len(marker)]
    if head.strip() and re.fullmatch(r"[ \t]*[\w.:-]+=[\w.:-]+", head):
        return head.strip() + marker
    return marker


def _content_wrapper(lead: str, reasoning: Reasoning | None) -> str:
    """Markup the turn writes right before plain content (e.g. <|START_RESPONSE|>), not an empty reasoning block."""
    if reasoning is not None:
        lead = re.sub(re.escape(reasoning.open) + r"\s*" + re.escape(reasoning.close), "", lead)
    elif re.search(r"<think>\s*</think>", lead):
        lead = re.sub(r"<think>\s*</think>", "", lead)
    tokens = list(TOKEN.finditer(lead))
    if not tokens:
        return ""
    return lead[tokens[0].start():].strip()


def split_prefill(turn: Turn, reasoning: Reasoning | None) -> None:
    """Move a reasoning opener (or an empty reasoning block) at the end of the anchors out of the anchor.

    The anchor marks where the assistant turn starts; a prefilled `<think>` after it must stay in the
    prefix the parser reads, so that the parser knows reasoning is open.
    """
    if reasoning is None:
        return
    cut = []
    for anchor in turn.anchors:
        position = anchor.rfind(reasoning.open)
        if position > 0 and anchor[:position].strip():
            cut.append((anchor[:position], anchor[position:]))
        else:
            cut.append((anchor, ""))
    turn.anchors = [a for a, _ in cut]
    turn.anchor = cut[0][0]
    turn.prefill = cut[0][1]
    turn.unprefilled = [a for a, p in cut if not p.strip()]


def optional_anchor_suffix(r: Renderer, turn: Turn, reasoning: Reasoning | None, kwargs: dict | None) -> None:
    """With thinking off, some generation prompts close the reasoning right after the anchor
    (<｜Assistant｜></think>): accept that closing marker after the anchor (always, when the template has
    reasoning: a prompt that closed the reasoning says no reasoning follows)."""
    if reasoning is None:
        return
    turn.anchor_suffix = reasoning.close
    if kwargs is None:
        return
    other = Renderer(r.source, dict(r.kwargs, **kwargs))
    other.tools_always = r.tools_always
    try:
        gp = other.generation_prompt([user_message()])
    except Exception:
        return
    if gp.startswith(turn.anchor) and gp[len(turn.anchor):].strip() == reasoning.close:
        turn.anchor_suffix = gp[len(turn.anchor):]


def dropped_prefill(r: Renderer, kwargs: dict, reasons: list[str]) -> None:
    """With thinking off, some generation prompts write an empty reasoning block that the rendered turn drops
    (<|channel>thought\n<channel|>): verify then reads the turn after that prefill."""
    other = Renderer(r.source, dict(r.kwargs, **kwargs))
    other.tools_always = r.tools_always
    try:
        prompt = other.render([user_message()], False, True)
        full = other.render([user_message(), _assistant(CONTENT, False)], False, False)
    except Exception:
        return
    if full.startswith(prompt):
        return
    at = common_prefix_len(prompt, full)
    for token in TOKEN.finditer(prompt):
        if token.start() < at < token.end():
            at = token.start()  # back to the start of a marker the two renderings share only in part
    prefill = prompt[at:]
    if prefill.strip() and TOKEN.match(prefill.strip()) and CONTENT in full[at:]:
        r.synthesis = {"prefill": prefill, "close": ""}
        reasons.append(f"with thinking off the generation prompt writes {prefill!r}, which the rendered turn drops: "
                       "the turn is verified as written after it")


def prefilled_everywhere(turn: Turn, reasons: list[str]) -> bool:
    """Whether every generation prompt the chat template writes opens the reasoning (then a generation parsed
    without its prompt starts inside it). When some do not (no reasoning opener after a tool result), only the
    prompt passed as prefix says whether the reasoning is open: a bare turn start is read as content."""
    if not turn.unprefilled:
        return True
    reasons.append("reasoning: the generation prompt opens it after " + repr(turn.anchor) + " but not after "
                   + ", ".join(repr(a) for a in turn.unprefilled) + ": the prompt (prefix) says when it is open")
    return False


def dropped_opener_before_calls(r: Renderer, thinking: Reasoning | None, reasons: list[str]) -> None:
    """The generation prompt ends by opening the reasoning (<think>) and the chat template renders a last turn with
    calls without that opener: the model writes its reasoning, closes it, then the calls. Verify then reads the turn
    as written after the prefilled opener (with the reasoning and its closing marker synthesised)."""
    if r.synthesis is not None or thinking is None:
        return
    message = {"role": "assistant", "content": "", "tool_calls": [call_message(*CALL_A, CALL_IDS[0])]}
    for mode in ("dict", "json_string"):
        r.arguments = mode
        try:
            prompt = r.render([user_message()], True, True)
            full = r.render([user_message(), message], True, False)
        except Exception:
            continue
        at = prompt.rfind(thinking.open)
        if full.startswith(prompt) or at < 0 or prompt[at + len(thinking.open):].strip():
            continue
        if full.startswith(prompt[:at]) and CALL_A[0] in full[at:]:
            r.synthesis = {"prefill": prompt[at:], "close": "\n" + thinking.close + "\n\n"}
            reasons.append(f"the generation prompt opens the reasoning ({prompt[at:]!r}) and the chat template renders "
                           "a turn with calls without that opener: the turn is verified as written after it, with the "
                           f"reasoning closed by {thinking.close!r} (synthesised)")
            break
    r.arguments = "dict"


def _tail_token(text: str) -> str:
    tokens = list(TOKEN.finditer(text))
    if tokens and not text[tokens[-1].end():].strip():
        return tokens[-1].group(0)
    return ""


def call_generation(r: Renderer, turn: Turn, calls: list[tuple], content: str = "") -> str:
    """The rendered calls alone: the generation without the turn's lead-in and end-of-turn markup."""
    message = {"role": "assistant", "content": content,
               "tool_calls": [call_message(n, a, i) for (n, a), i in zip(calls, CALL_IDS)]}
    _, generation = r.turn([user_message()], message, tools=True)
    if r.with_reasoning and turn.reasoning_close in generation:
        generation = generation[generation.index(turn.reasoning_close) + len(turn.reasoning_close):]
    elif turn.before_content and generation.startswith(turn.before_content):
        generation = generation[len(turn.before_content):]
    if turn.end and turn.end in generation:
        generation = generation[: generation.rindex(turn.end)]
    if turn.prefill.strip() and turn.empty_reasoning and generation.lstrip().startswith(turn.empty_reasoning[1]):
        # The prompt opened the reasoning and the turn closes it before the calls.
        generation = generation.lstrip()[len(turn.empty_reasoning[1]):]
    if turn.empty_reasoning:
        # An empty reasoning block the template writes before calls (Cohere's <|START_THINKING|><|END_THINKING|>)
        # belongs to the reasoning field, not to the calls' markup.
        opener, closer = turn.empty_reasoning
        generation = re.sub(re.escape(opener) + r"\s*" + re.escape(closer) + r"\s*", "", generation, count=1)
    return turn.segment + generation  # the segment marker the prompt wrote belongs to the first call


def renders_calls_somehow(r: Renderer, turn: Turn) -> str:
    """Whether a message with a call renders differently from the same message without it, or cannot be
    rendered at all (then the calls it would write are unknown: no template is safer than one without calls)."""
    failures = []
    for mode in ("dict", "json_string"):
        r.arguments = mode
        try:
            with_call = r.turn([user_message()], _assistant(CONTENT, False, tool_calls=[call_message(*CALL_A, CALL_IDS[0])]), True)
            without = r.turn([user_message()], _assistant(CONTENT, False), True)
        except Exception as error:
            failures.append(f"{type(error).__name__}: {error}")
            continue
        if with_call[1] != without[1]:
            return "the chat template writes something for tool calls, but not their name and arguments as given"
    r.arguments = "dict"
    if len(failures) == 2:
        return f"the chat template fails when it renders a tool call ({failures[0][:160]})"
    return ""


def choose_arguments_mode(r: Renderer) -> None:
    """Give arguments as dicts unless the chat template only renders JSON strings well."""
    html_escaped = False
    for mode in ("dict", "json_string"):
        r.arguments = mode
        try:
            message = {"role": "assistant", "content": "", "tool_calls": [call_message(*CALL_A, CALL_IDS[0])]}
            _, generation = r.turn([user_message()], message, tools=True)
        except Exception:
            continue
        # A Python repr of the dict ({'city': ...}) or a JSON string written character by character is
        # not what the model writes; try the other mode.
        if "'city'" in generation or '"{' in generation.replace(" ", "") or '"c", "i"' in generation:
            continue
        if "&#34;" in generation:
            html_escaped = True
            continue
        if "Paris" in generation and CALL_A[0] in generation:
            return
    if html_escaped:
        raise InferenceError("the chat template HTML-escapes the quotes of tool calls (&#34;), which is not what the "
                             "model writes: tool calls cannot be read from its renderings")
    raise InferenceError("the chat template does not render a tool call (with dict or JSON-string arguments)")

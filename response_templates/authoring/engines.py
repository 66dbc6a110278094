"""Which serving engines can use a library template, measured by running each engine's own parsing code.

    response-templates check qwen3 hermes                 # every installed engine
    response-templates check --engine vllm --all-templates
    response-templates check --engine sglang

For each template and engine the check loads the template the way the engine does and parses every case of the
template's corpus (``<name>.json`` of the corpora installed with the package, see library/corpora.py) through the
engine's own code, then compares the result with this package's ``parse_response`` on the same input:

- ``transformers``: ``transformers.utils.chat_parsing.parse_response`` (transformers 5.20 and later), compared
  message for message.
- ``transformers-serve``: ``transformers.cli.serving.utils.parse_assistant_message``, the function ``transformers
  serve`` builds its chat completion from; it reads ``tokenizer.response_template`` and parses token ids. Compared
  on what a client receives: reasoning, content, and tool call names and arguments.
- ``vllm``: the parser vLLM composes for ``--reasoning-parser hf --tool-call-parser hf --enable-auto-tool-choice``
  (``vllm.parser.parser_manager.ParserManager``), which reads the tokenizer's ``response_template``; compared like
  ``transformers-serve``.
- ``sglang``: SGLang's ``--reasoning-parser response_template --tool-call-parser response_template`` (its
  ``ReasoningParser`` then, on the rest, its ``FunctionCallParser``, given the prompt as its chat server gives it),
  which read the tokenizer's ``response_template``; run the way SGLang's chat server runs them without streaming
  and compared like ``transformers-serve``.

The token ids come from a byte-level tokenizer built on the spot (no network): every character is spelled out in
bytes, so decoding gives the text back exactly and the engines see what the corpus holds. While the transformers
engines run, this package's patches of transformers' tokenizer classes are taken off, so what runs is
transformers' code.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ..integrations._serving import REASONING_FIELDS
from ..library import corpora

__all__ = [
    "ENGINES",
    "EngineCaseResult",
    "EngineReport",
    "check",
    "check_template",
    "corpora_dir",
    "engine_unavailable",
    "matrix_markdown",
    "thinking_form",
]

ENGINES = ("transformers", "transformers-serve", "vllm", "sglang")

SAME = "same"
DIFFERS = "differs"
REJECTED = "rejected"
UNAVAILABLE = "not installed"


@dataclass
class EngineCaseResult:
    name: str
    same: bool
    why: str = ""


@dataclass
class EngineReport:
    template: str
    engine: str
    available: bool = True
    loads: bool = False
    error: str = ""  # why the engine is missing, or why it refused the template
    cases: list[EngineCaseResult] = field(default_factory=list)

    @property
    def status(self) -> str:
        if not self.available:
            return UNAVAILABLE
        if not self.loads:
            return REJECTED
        return SAME if all(case.same for case in self.cases) else DIFFERS

    @property
    def same_count(self) -> int:
        return sum(case.same for case in self.cases)

    def cell(self) -> str:
        """The matrix cell: `same (23/23)`, `differs (20/23)`, `rejected`, `not installed`."""
        if self.status in (SAME, DIFFERS):
            return f"{self.status} ({self.same_count}/{len(self.cases)})"
        return self.status

    def why(self) -> str:
        """Why the engine does not give our message, in one line ("" when it does)."""
        if self.status in (UNAVAILABLE, REJECTED):
            return self.error
        first = next((case for case in self.cases if not case.same), None)
        return "" if first is None else f"{first.name}: {first.why}"

    def as_dict(self) -> dict:
        return {
            "template": self.template,
            "engine": self.engine,
            "status": self.status,
            "loads": self.loads,
            "same": self.same_count,
            "cases": len(self.cases),
            "why": self.why(),
            "differing_cases": [{"name": c.name, "why": c.why} for c in self.cases if not c.same],
        }


# --- published form ------------------------------------------------------------------------------------------


def thinking_form(template: dict) -> dict:
    """A copy of ``template`` with its ``reasoning_content`` field renamed ``thinking`` (the name vLLM routes)."""
    result = copy.deepcopy(template)
    fields = result.get("fields")
    if isinstance(fields, dict) and "reasoning_content" in fields and "thinking" not in fields:
        result["fields"] = {("thinking" if k == "reasoning_content" else k): v for k, v in fields.items()}
    return result


# --- corpora -------------------------------------------------------------------------------------------------


def corpora_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The folder of template corpora: ``explicit``, else $RESPONSE_TEMPLATES_CORPORA, else the corpora installed with
    the package (a wheel ships them; a checkout has them in tests/data/corpora). Raises FileNotFoundError naming the
    places looked in."""
    candidates = []
    if explicit:
        candidates.append(Path(explicit))
    elif os.environ.get("RESPONSE_TEMPLATES_CORPORA"):
        candidates.append(Path(os.environ["RESPONSE_TEMPLATES_CORPORA"]))
    else:
        candidates += [corpora.PACKAGED, corpora.CHECKOUT]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        "no template corpora found (looked in " + ", ".join(str(c) for c in candidates) + "); an installed wheel "
        "ships them in response_templates/library/corpora: reinstall it, or give --corpora DIR (or set "
        "RESPONSE_TEMPLATES_CORPORA) to a folder of <template>.json corpora such as tests/data/corpora of a checkout"
    )


def load_corpus(name: str, folder: str | os.PathLike | None = None) -> list[dict]:
    path = corpora_dir(folder) / f"{name}.json"
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as error:
        raise FileNotFoundError(f"no corpus for template {name!r}: cannot read {path} ({error.strerror})") from None
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list):
        raise ValueError(f"{path}: expected an object with a 'cases' list")
    return cases


# --- engines -------------------------------------------------------------------------------------------------


def engine_unavailable(engine: str) -> str:
    """Why ``engine`` cannot run here ("" when it can)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r} (known: {', '.join(ENGINES)})")
    try:
        if engine == "transformers":
            import transformers.utils.chat_parsing  # noqa: F401
        elif engine == "transformers-serve":
            from transformers.cli.serving.utils import parse_assistant_message  # noqa: F401
        elif engine == "sglang":
            try:
                import sglang.srt.parser.response_template  # noqa: F401
            except ModuleNotFoundError as error:
                if error.name != "sglang.srt.parser.response_template":
                    raise
                return (f"sglang {_version('sglang')} has no built-in response-template parser "
                        "(sglang.srt.parser.response_template, in SGLang 0.5.23 and later), and this package's SGLang "
                        "plugin, which builds on it, needs that release too")
            from sglang.srt.function_call.function_call_parser import FunctionCallParser  # noqa: F401
            from sglang.srt.parser.reasoning_parser import ReasoningParser  # noqa: F401
        else:
            import vllm.parser.parser_manager  # noqa: F401

            try:
                import vllm.parser.response_template  # noqa: F401
            except ModuleNotFoundError as error:
                if error.name != "vllm.parser.response_template":
                    raise
                return (f"vllm {_version('vllm')} has no built-in response-template parser "
                        "(vllm.parser.response_template, in vLLM 0.32 and later); this package's vLLM plugin "
                        "serves templates on it (see response_templates.integrations.vllm_plugin)")
    except Exception as error:  # ImportError, or a broken install
        package = engine if engine in ("vllm", "sglang") else "transformers"
        version = _version(package)
        where = f" ({package} {version})" if version else ""
        return f"{engine} cannot be imported{where}: {type(error).__name__}: {error}"
    return ""


def _version(package: str) -> str:
    from importlib import metadata

    for name in (package, f"{package}-cpu"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return ""


@contextlib.contextmanager
def _native_transformers():
    """Take this package's patches off transformers' tokenizer classes for the duration (put back afterwards)."""
    from ..integrations import transformers_patch as integration

    patched = integration.is_patched()
    if patched:
        integration.unpatch()
    try:
        yield
    finally:
        if patched:
            integration.patch()


@functools.lru_cache(maxsize=None)
def _byte_backend():
    """A `tokenizers.Tokenizer` with one token per byte and no merges: encoding then decoding gives the text back."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    model = models.BPE(vocab={symbol: index for index, symbol in enumerate(alphabet)}, merges=[])
    backend = Tokenizer(model)
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    return backend


def _tokenizer(template: dict | None):
    """A transformers fast tokenizer over `_byte_backend()`, with `response_template` set as the hub config would."""
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_object=_byte_backend().__class__.from_str(_byte_backend().to_str()))
    if template is not None:
        tokenizer.response_template = copy.deepcopy(template)
        tokenizer.init_kwargs["response_template"] = copy.deepcopy(template)
    return tokenizer


def _encode(tokenizer, text: str) -> list[int]:
    ids = tokenizer.encode(text, add_special_tokens=False)
    if tokenizer.decode(ids) != text:  # the byte tokenizer must be lossless, or the comparison means nothing
        raise RuntimeError("internal error: the byte-level tokenizer does not give the text back")
    return ids


def _served(message: dict) -> dict:
    """What an OpenAI-style server sends for a message: reasoning, content ("" and missing alike), and the calls
    as (name, arguments) with arguments parsed from JSON text when they are text."""
    reasoning = next((message.get(k) for k in REASONING_FIELDS if message.get(k) is not None), None)
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function", call) if isinstance(call, dict) else {}
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                pass
        calls.append({"name": function.get("name") if isinstance(function, dict) else None, "arguments": arguments})
    return {"reasoning": reasoning or None, "content": message.get("content") or None, "tool_calls": calls}


def _difference(ours: Any, theirs: Any) -> str:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(set(ours) | set(theirs), key=str):
            if ours.get(key, "<missing>") != theirs.get(key, "<missing>"):
                return f"{key}: ours {_short(ours.get(key, '<missing>'))}, engine {_short(theirs.get(key, '<missing>'))}"
    return f"ours {_short(ours)}, engine {_short(theirs)}"


def _short(value: Any, limit: int = 80) -> str:
    text = value if value == "<missing>" else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _transformers_engine(template: dict, tokenizer_template: dict | None) -> Callable[[dict], Any]:
    from transformers.utils.chat_parsing import parse_response
    from transformers.utils.chat_parsing.response_templates import load_response_template

    load_response_template(copy.deepcopy(template))  # refuses a template it cannot load

    def run(case: dict) -> dict:
        return parse_response(case["output"], copy.deepcopy(template), prefix=case["prefix"], tools=case.get("tools"))

    return run


def _serve_engine(template: dict, tokenizer_template: dict | None) -> Callable[[dict], Any]:
    from transformers.cli.serving.utils import get_response_template, parse_assistant_message

    tokenizer = _tokenizer(template)

    class _Config:  # parse_assistant_message reads model_type only when the tokenizer has no template
        model_type = "response-templates-check"

    # (the ignores: `_Config` stands in for a PreTrainedConfig, of which only model_type is read)
    if get_response_template(tokenizer, _Config()) is None:  # type: ignore[arg-type]
        raise ValueError("transformers serve does not see the tokenizer's response_template")

    def run(case: dict) -> dict:
        content, reasoning, calls = parse_assistant_message(
            tokenizer,
            _Config(),  # type: ignore[arg-type]
            _encode(tokenizer, case["output"]),
            [_encode(tokenizer, case["prefix"])],  # serve passes the prompt as a [1, N] batch
            tools=case.get("tools"),
        )
        message: dict[str, Any] = {"content": content, "reasoning_content": reasoning}
        message["tool_calls"] = [{"function": {"name": c.name, "arguments": c.arguments}} for c in calls or ()]
        return _served(message)

    return run


def _vllm_engine(template: dict, tokenizer_template: dict | None) -> Callable[[dict], Any]:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser.parser_manager import ParserManager

    tokenizer = _tokenizer(template)
    fields = template.get("fields") or {}
    # Ask only for what the template has: vLLM refuses --reasoning-parser hf without a thinking field (and the
    # tool parser without tool_calls); for a template that has neither, ask for both and let vLLM say why not.
    reasoning = "thinking" in fields or not ({"tool_calls"} & set(fields))
    tools = "tool_calls" in fields or not reasoning
    try:
        parser_cls = ParserManager.get_parser(
            tool_parser_name="hf" if tools else None,
            reasoning_parser_name="hf" if reasoning else None,
            enable_auto_tools=True,
            model_name="response-templates-check",
            tokenizer=tokenizer,
        )
    except TypeError as error:  # vLLM's startup validation
        raise ValueError(str(error)) from None

    def run(case: dict) -> dict:
        request_tools = case.get("tools") or None
        request = ChatCompletionRequest(
            model="response-templates-check",
            messages=[{"role": "user", "content": "hi"}],
            tools=request_tools,
        )
        parser = parser_cls(tokenizer, request.tools)
        parser.set_prompt_token_ids(_encode(tokenizer, case["prefix"]))
        request = parser.adjust_request(request)
        reasoning_text, content, calls = parser.parse(
            case["output"], request, enable_auto_tools=True, model_output_token_ids=_encode(tokenizer, case["output"])
        )
        message = {"reasoning_content": reasoning_text, "content": content}
        message["tool_calls"] = [{"function": {"name": c.name, "arguments": c.arguments}} for c in calls or ()]
        return _served(message)

    return run


def _sglang_engine(template: dict, tokenizer_template: dict | None) -> Callable[[dict], Any]:
    from sglang.srt.entrypoints.openai.protocol import Tool
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    tokenizer = _tokenizer(template)
    fields = template.get("fields") or {}
    # As the server is started for this model: the reasoning parser for a template with a reasoning field, the
    # tool-call parser for one with tool calls (for a template with neither, both, and SGLang says why not).
    reasoning = bool(set(REASONING_FIELDS) & set(fields)) or "tool_calls" not in fields
    tools_wanted = "tool_calls" in fields or not reasoning
    name = "response_template"
    # SGLang's detectors validate the template when they are made: make each once to learn whether it loads.
    if reasoning:
        ReasoningParser(name, tokenizer=tokenizer)
    if tools_wanted:
        FunctionCallParser([], name, tokenizer=tokenizer)

    def run(case: dict) -> dict:
        prefix = case["prefix"]
        tools = [Tool.model_validate(tool) for tool in case.get("tools") or ()]
        text, reasoning_text = case["output"], None
        if reasoning:  # serving_chat: the reasoning first, without streaming
            parser = ReasoningParser(name, stream_reasoning=False, tokenizer=tokenizer,
                                     tool_call_parser_active=bool(tools and tools_wanted), prefix=prefix)
            reasoning_text, text = parser.parse_non_stream(text)
        calls = []
        if tools and tools_wanted:  # then the calls in the rest (_process_tool_calls)
            tool_parser = FunctionCallParser(tools, name, tokenizer=tokenizer, prefix=prefix)
            if tool_parser.has_tool_call(text):
                text, items = tool_parser.parse_non_stream(text)
                calls = [{"function": {"name": item.name, "arguments": item.parameters}} for item in items]
        return _served({"reasoning_content": reasoning_text, "content": text, "tool_calls": calls})

    return run


_BUILDERS = {"transformers": _transformers_engine, "transformers-serve": _serve_engine, "vllm": _vllm_engine,
             "sglang": _sglang_engine}


def check_template(
    name: str,
    engine: str,
    *,
    template: dict | None = None,
    cases: Sequence[dict] | None = None,
    corpora: str | os.PathLike | None = None,
) -> EngineReport:
    """Run ``engine`` on the corpus of library template ``name`` (or on ``template`` / ``cases`` when given)."""
    from ..core import parse_response
    from ..library import get_template

    report = EngineReport(template=name, engine=engine)
    reason = engine_unavailable(engine)
    if reason:
        report.available = False
        report.error = reason
        return report
    template = copy.deepcopy(template) if template is not None else get_template(name)
    cases = list(cases) if cases is not None else load_corpus(name, corpora)
    with _native_transformers() if engine.startswith("transformers") else contextlib.nullcontext():
        try:
            run = _BUILDERS[engine](template, template)
        except Exception as error:
            report.error = " ".join(f"{type(error).__name__}: {error}".split())
            return report
        report.loads = True
        ours: dict | Exception  # the message, or what parsing raised
        for index, case in enumerate(cases):
            if "transformers_differs" in case:
                # a deliberate difference from transformers' parser (docs/differences.md), which every engine's own
                # parser follows: not a difference of the engine
                continue
            case_name = case.get("name") or f"case {index}"
            try:
                ours = parse_response(case["output"], template, prefix=case["prefix"], tools=case.get("tools"))
            except Exception as error:
                ours = error
            try:
                theirs = run(case)
            except Exception as error:
                theirs = error
            if engine != "transformers" and not isinstance(ours, Exception):
                ours = _served(ours)
            if isinstance(ours, Exception) or isinstance(theirs, Exception):
                same = isinstance(ours, Exception) and isinstance(theirs, Exception)
                why = "" if same else (
                    f"engine raised {type(theirs).__name__}: {theirs}" if isinstance(theirs, Exception)
                    else f"ours raised {type(ours).__name__}: {ours}"
                )
                report.cases.append(EngineCaseResult(case_name, same, " ".join(why.split())[:300]))
                continue
            same = ours == theirs
            report.cases.append(EngineCaseResult(case_name, same, "" if same else _difference(ours, theirs)))
    return report


def check(
    names: Iterable[str],
    engines: Iterable[str] = ENGINES,
    *,
    corpora: str | os.PathLike | None = None,
    transform: Callable[[dict], dict] | None = None,
) -> list[EngineReport]:
    """`check_template` for every name and engine; ``transform`` rewrites each template first (e.g. thinking_form)."""
    from ..library import get_template

    reports = []
    for name in names:
        template = get_template(name)
        if transform is not None:
            template = transform(template)
        cases = load_corpus(name, corpora)
        for engine in engines:
            reports.append(check_template(name, engine, template=template, cases=cases))
    return reports


def matrix_markdown(reports: Sequence[EngineReport], *, why: bool = True) -> str:
    """A Markdown table: one row per template, one column per engine, then (``why``) the reasons, one per line."""
    engines = list(dict.fromkeys(r.engine for r in reports))
    templates = list(dict.fromkeys(r.template for r in reports))
    cells = {(r.template, r.engine): r for r in reports}
    lines = ["| template | " + " | ".join(engines) + " |", "| --- |" + " --- |" * len(engines)]
    for name in templates:
        row = [cells[(name, e)].cell() if (name, e) in cells else "" for e in engines]
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    if why:
        reasons: dict[tuple[str, str], list[str]] = {}  # (engine, why) -> templates
        for r in reports:
            if r.why() and r.status != UNAVAILABLE:
                reasons.setdefault((r.engine, r.why()), []).append(r.template)
        missing = {r.engine: r.error for r in reports if r.status == UNAVAILABLE}
        if reasons or missing:
            lines.append("")
        for (engine, text), names in reasons.items():
            lines.append(f"- {engine} ({', '.join(names)}): {text}")
        for engine, text in missing.items():
            lines.append(f"- {engine}: {text}")
    return "\n".join(lines)

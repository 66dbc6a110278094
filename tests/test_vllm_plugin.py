"""The vLLM plugin (response_templates.vllm_plugin), driven through vLLM's own parser manager and protocol classes.

For every case of every library template: the message vLLM's serving layer gets from `parse` is ours
(`to_openai_message(parse_response(...))`), and the deltas of `parse_delta`, fed a few tokens at a time and
assembled the way clients do, give the same message. Skipped, with the reason, when vLLM is absent; failing on CI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from response_templates import engines, parse_response
from response_templates.library import get_template, list_templates
from response_templates.openai_adapter import to_openai_message

CORPORA = Path(__file__).resolve().parent / "data" / "corpora"

_missing = engines.engine_unavailable("vllm")
if _missing and os.environ.get("CI", "").lower() == "true":
    raise RuntimeError(f"vLLM must be installed for these tests on CI: {_missing}")
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"vLLM is not installed here: {_missing}")


def _parser_cls(tokenizer, *, reasoning=True, tools=True):
    from vllm.parser.parser_manager import ParserManager

    from response_templates import vllm_plugin

    vllm_plugin.register()
    vllm_plugin.register()  # safe twice
    return ParserManager.get_parser(
        tool_parser_name="response_templates" if tools else None,
        reasoning_parser_name="response_templates" if reasoning else None,
        enable_auto_tools=True, model_name="test", tokenizer=tokenizer,
    )


def _request(tools):
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    return ChatCompletionRequest(model="test", messages=[{"role": "user", "content": "hi"}], tools=tools or None)


def _assemble(deltas):
    message = {"reasoning": "", "content": "", "calls": {}}
    for delta in deltas:
        if delta is None:
            continue
        message["reasoning"] += delta.reasoning or ""
        message["content"] += delta.content or ""
        for call in delta.tool_calls or ():
            slot = message["calls"].setdefault(call.index, {"id": None, "name": None, "arguments": ""})
            slot["id"] = slot["id"] or call.id
            if call.function is not None:
                slot["name"] = slot["name"] or call.function.name
                slot["arguments"] += call.function.arguments or ""
    calls = [{"name": c["name"], "arguments": c["arguments"]} for _, c in sorted(message["calls"].items())]
    return {"reasoning": message["reasoning"] or None, "content": message["content"] or None, "calls": calls}


def _expected(openai):
    calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
             for c in openai.get("tool_calls") or ()]
    return {"reasoning": openai.get("reasoning_content"), "content": openai.get("content"), "calls": calls}


@pytest.mark.parametrize("name", list_templates())
def test_every_corpus_case_one_shot_and_streamed(name):
    template = get_template(name)
    cases = json.loads((CORPORA / f"{name}.json").read_text(encoding="utf-8"))["cases"]
    tokenizer = engines._tokenizer(template)
    parser_cls = _parser_cls(tokenizer)
    for case in cases:
        prompt_ids = tokenizer.encode(case["prefix"], add_special_tokens=False)
        output_ids = tokenizer.encode(case["output"], add_special_tokens=False)
        try:
            ours = to_openai_message(parse_response(case["output"], template, prefix=case["prefix"],
                                                    tools=case.get("tools")))
        except ValueError:  # damaged output: the server answers with the text as it is, it does not fail
            request = _request(case.get("tools"))
            parser = parser_cls(tokenizer, request.tools)
            parser.set_prompt_token_ids(prompt_ids)
            assert parser.parse(case["output"], request, True, output_ids) == (None, case["output"], None)
            continue
        expected = _expected(ours)
        if not case.get("tools"):
            expected["calls"] = []  # no tools in the request: tool_choice is "none", vLLM parses no calls

        request = _request(case.get("tools"))
        parser = parser_cls(tokenizer, request.tools)
        request = parser.adjust_request(request)
        parser.set_prompt_token_ids(prompt_ids)
        reasoning, content, calls = parser.parse(case["output"], request, enable_auto_tools=True,
                                                 model_output_token_ids=output_ids)
        one_shot = {"reasoning": reasoning or None, "content": content or None,
                    "calls": [{"name": c.name, "arguments": c.arguments} for c in calls or ()]}
        assert one_shot == expected, (name, case["name"])

        parser = parser_cls(tokenizer, request.tools)
        deltas, step = [], 3
        for start in range(0, len(output_ids), step):
            ids = output_ids[start:start + step]
            deltas.append(parser.parse_delta(tokenizer.decode(ids), ids, request, prompt_ids,
                                             finished=start + step >= len(output_ids)))
        if not output_ids:
            deltas.append(parser.parse_delta("", [], request, prompt_ids, finished=True))
        assert _assemble(deltas) == expected, (name, case["name"])


def test_template_from_the_library_when_the_tokenizer_has_none():
    from response_templates import vllm_plugin

    tokenizer = engines._tokenizer(None)
    tokenizer.name_or_path = "Qwen/Qwen3-8B"
    assert vllm_plugin.resolve_template(tokenizer) == get_template("qwen3")
    parser_cls = _parser_cls(tokenizer)
    request = _request(None)
    parser = parser_cls(tokenizer, None)
    parser.set_prompt_token_ids(tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False))
    assert parser.parse("<think>Hm.</think>Hi!<|im_end|>", request, enable_auto_tools=True)[:2] == ("Hm.", "Hi!")


def test_no_template_fails_at_startup_with_a_clear_error():
    tokenizer = engines._tokenizer(None)
    with pytest.raises(TypeError, match="no response_template"):
        _parser_cls(tokenizer)


def test_vllm_loads_the_plugin_from_the_installed_entry_point():
    from importlib.metadata import entry_points

    ours = [ep for ep in entry_points(group="vllm.general_plugins") if ep.value.startswith("response_templates.")]
    if not ours:
        if os.environ.get("RESPONSE_TEMPLATES_TEST_INSTALLED"):
            pytest.fail("the installed package has no vllm.general_plugins entry point")
        pytest.skip("response-templates is not installed here (source tree): no entry point to load")
    from vllm.plugins import load_general_plugins
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    load_general_plugins()
    assert ToolParserManager.get_tool_parser("response_templates").__name__ == "ResponseTemplatesToolParser"
    assert ReasoningParserManager.get_reasoning_parser("response_templates").__name__ == (
        "ResponseTemplatesReasoningParser")

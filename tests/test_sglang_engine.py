"""`response-templates check --engine sglang`: templates run through SGLang's own `response_template` parsers
(`--reasoning-parser response_template --tool-call-parser response_template`: sglang.srt.parser.response_template).

CI runs this file in the SGLang environment (see .ci/run). Elsewhere it is skipped, with the reason printed, when
SGLang cannot be imported; on CI (CI=true) a missing SGLang fails instead."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from engine_cases import SERVABLE, engine_mark, servable_cases

from response_templates.authoring import engines
from response_templates.cli import main
from response_templates.library import get_template, list_templates

CORPORA = Path(__file__).resolve().parent / "data" / "corpora"

pytestmark = engine_mark("sglang", "SGLang")
CASES = servable_cases(days='3')


def test_a_template_sglang_can_serve_is_run_through_its_parsers():
    report = engines.check_template("servable", "sglang", template=SERVABLE, cases=CASES)
    assert report.loads, report.error
    assert report.status == engines.SAME, report.as_dict()
    assert report.same_count == len(CASES)


def test_the_engine_really_runs_sglangs_code_not_ours():
    """SGLang's tool parser leaves out a call to a function the request did not declare; ours keeps it. The check
    reports that difference, so what runs is SGLang's code."""
    undeclared = [{**CASES[3], "name": "undeclared", "tools": [
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]}]
    report = engines.check_template("servable", "sglang", template=SERVABLE, cases=undeclared)
    assert report.loads and report.status == engines.DIFFERS, report.as_dict()
    assert "tool_calls" in report.cases[0].why


def test_published_templates_are_refused_with_the_reason():
    report = engines.check_template("qwen3", "sglang", template=get_template("qwen3"), cases=CASES)
    assert report.status == engines.REJECTED
    assert "reasoning_content" in report.error
    renamed = engines.check_template("qwen3", "sglang", template=engines.thinking_form(get_template("qwen3")),
                                     cases=CASES)
    assert renamed.status == engines.REJECTED and "'content'" in renamed.error  # content's join/transform


def test_no_library_template_loads_in_sglang_0_5_23_as_published():
    """What the serving docs state for SGLang 0.5.23, measured: every library template is refused as published
    (reasoning_content, join/transform on content, python-call-list), which is why the plugin exists."""
    import sglang

    if sglang.__version__ != "0.5.23":
        pytest.skip(f"measured on SGLang 0.5.23; this is {sglang.__version__}")
    reports = engines.check(list_templates(), ["sglang"], corpora=CORPORA)
    assert {r.status for r in reports} == {engines.REJECTED}, [r.template for r in reports if r.loads]


def test_the_command_line_runs_the_engine(capsys):
    assert main(["check", "--engine", "sglang", "--corpora", str(CORPORA), "qwen3"]) == 0
    out = capsys.readouterr().out
    assert "| qwen3 | rejected |" in out and "sglang (qwen3)" in out
    template = copy.deepcopy(SERVABLE)
    assert engines.check_template("servable", "sglang", template=template, cases=CASES[:1]).status == engines.SAME

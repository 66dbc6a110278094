"""`response-templates check`: library templates run through transformers' own parser and transformers serve's own
message builder (response_templates.authoring.engines). The vLLM engine is tested in tests/test_vllm_engine.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from response_templates.authoring import engines
from response_templates.cli import main
from response_templates.library import get_template, list_templates

CORPORA = Path(__file__).resolve().parent / "data" / "corpora"
HF_ENGINES = ["transformers", "transformers-serve"]


def _need(engine):
    reason = engines.engine_unavailable(engine)
    if reason:
        pytest.skip(f"{engine} is not available: {reason}")


@pytest.mark.parametrize("engine", HF_ENGINES)
def test_every_library_template_gives_our_message_in_the_engine(engine):
    _need(engine)
    reports = engines.check(list_templates(), [engine], corpora=CORPORA)
    assert len(reports) == len(list_templates())
    for report in reports:
        assert report.loads, (report.template, report.error)
        assert report.cases, report.template
        assert report.status == engines.SAME, (report.template, report.why())


def test_the_engine_really_runs_transformers_code_not_ours():
    # transformers accepts "repeats": "yes" (a truthy string); we refuse such a template when it is loaded. So the
    # check reports a difference exactly when the engine is transformers' own code.
    _need("transformers")
    template = get_template("qwen3")
    template["fields"]["tool_calls"]["repeats"] = "yes"
    cases = json.loads((CORPORA / "qwen3.json").read_text(encoding="utf-8"))["cases"][:3]
    for engine in HF_ENGINES:
        report = engines.check_template("qwen3", engine, template=template, cases=cases)
        assert report.loads and report.status == engines.DIFFERS, (engine, report.as_dict())
        assert "ours raised TemplateError" in report.why() and "repeats" in report.why()


def test_rejected_template_names_the_reason():
    _need("transformers")
    broken = {"fields": {"content": {"close": "</s>", "content": "no-such-parser"}}}
    report = engines.check_template("qwen3", "transformers", template=broken, cases=[])
    assert report.status == engines.REJECTED
    assert "no-such-parser" in report.error


def test_thinking_form_renames_only_the_reasoning_field():
    template = get_template("qwen3")
    renamed = engines.thinking_form(template)
    assert "thinking" in renamed["fields"] and "reasoning_content" not in renamed["fields"]
    assert renamed["fields"]["thinking"] == template["fields"]["reasoning_content"]
    assert list(renamed["fields"])[1:] == list(template["fields"])[1:]
    assert "reasoning_content" in template["fields"]  # the original is untouched


def test_matrix_lists_every_engine_and_the_reasons():
    unavailable = engines.EngineReport("qwen3", "vllm", available=False, error="vllm cannot be imported: x")
    rejected = engines.EngineReport("hermes", "vllm", loads=False, error="ValueError: field 'content' uses join")
    ok = engines.EngineReport("qwen3", "transformers", loads=True, cases=[engines.EngineCaseResult("a", True)])
    text = engines.matrix_markdown([ok, unavailable, rejected])
    assert "| template | transformers | vllm |" in text
    assert "| qwen3 | same (1/1) | not installed |" in text
    assert "| hermes |  | rejected |" in text
    assert "- vllm (hermes): ValueError: field 'content' uses join" in text
    assert "- vllm: vllm cannot be imported: x" in text


def test_cli_check(capsys):
    _need("transformers")
    code = main(["check", "--engine", "transformers", "--corpora", str(CORPORA), "qwen3", "hermes"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "| template | transformers |" in out
    cases = len(json.loads((CORPORA / "qwen3.json").read_text(encoding="utf-8"))["cases"])
    assert f"| qwen3 | same ({cases}/{cases}) |" in out

    assert main(["check", "--engine", "transformers", "--json", "--corpora", str(CORPORA), "qwen3"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["status"] == "same" and row["cases"] == cases and row["differing_cases"] == []


def test_cli_check_errors(capsys, tmp_path):
    assert main(["check", "no-such-template"]) == 2
    assert "no-such-template" in capsys.readouterr().err
    assert main(["check", "--engine", "nope", "qwen3"]) == 2
    capsys.readouterr()
    assert main(["check", "--corpora", str(tmp_path / "missing"), "qwen3"]) == 2
    assert "no template corpora found" in capsys.readouterr().err
    if engines.engine_unavailable("vllm"):
        assert main(["check", "--engine", "vllm", "qwen3"]) == 2
        assert engines.engine_unavailable("vllm") in capsys.readouterr().err

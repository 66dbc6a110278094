"""verify() inputs: a str path, an invalid template, a chat template that does not compile (issue 14.6);
and the oracle gate of the differential tests (issue 14.4)."""

from __future__ import annotations

from pathlib import Path

import pytest

import response_templates as rt
from tokenizer_factory import CHAT_TEMPLATE, RESPONSE_TEMPLATE


def test_a_str_path_is_read(tmp_path, monkeypatch):
    path = tmp_path / "chatml.jinja"
    path.write_text(CHAT_TEMPLATE, encoding="utf-8")
    from_source = rt.verify(RESPONSE_TEMPLATE, CHAT_TEMPLATE)
    for given in (str(path), Path(path)):
        report = rt.verify(RESPONSE_TEMPLATE, given)
        assert [str(case) for case in report.cases] == [str(case) for case in from_source.cases]
        assert sum(case.ok for case in report.cases) > 0  # rendered and parsed back, not taken as Jinja text
    monkeypatch.chdir(tmp_path)
    assert rt.verify(RESPONSE_TEMPLATE, "chatml.jinja").summary() == from_source.summary()


def test_a_missing_path_says_how_a_str_is_read(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no such file.*str without '\{' is taken as a file path"):
        rt.verify(RESPONSE_TEMPLATE, str(tmp_path / "nope.jinja"))


def test_an_invalid_template_raises_once_before_any_case():
    with pytest.raises(rt.TemplateError, match="nope"):
        rt.verify({"fields": {"content": {"content": "nope"}}}, CHAT_TEMPLATE)


def test_a_chat_template_that_does_not_compile_raises_once():
    with pytest.raises(ValueError, match=r"does not compile \(line 1\)"):
        rt.verify(RESPONSE_TEMPLATE, "{% for m in messages %}{{ m }}")


def test_the_oracle_gate_skips_before_the_reference_release(monkeypatch):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("transformers.utils.chat_parsing")
    import oracle

    monkeypatch.setattr(transformers, "__version__", "5.24.0")
    with pytest.raises(pytest.skip.Exception, match=r"5\.24\.0's response parser differs from 5\.25's"):
        oracle.reference_module()
    monkeypatch.setattr(transformers, "__version__", "5.25.0")
    assert oracle.reference_module().parse_response is not None

"""Outputs shaped like what real models write, for every library template: the library gives the expected message.

The cases in tests/data/real_outputs/<template>.json are written for this project (values are our own) in the shapes
that the public test suites of serving engines' parsers record from real models (vLLM's tests/tool_parsers/ and
tests/reasoning/; llama.cpp's tests/test-chat.cpp and test-chat-parser.cpp; SGLang's function-call parser tests): whitespace and newlines around markers, a missing or doubled marker, text before, between and after
calls, parallel calls, empty arguments, nested JSON, strings holding quotes, newlines, unicode escapes or marker text,
calls without reasoning, reasoning cut off or ended by the end-of-turn token, a prompt that already opened the
reasoning block. Each case names the shape it stands for in `shape` and, for the later cases, where that shape was
learned in `source`.

Every case is parsed one-shot and streamed one character at a time, and must give `expected`; cases that
transformers' parser also handles (all but `truncated` ones) must give the same message there. A case the format
cannot express carries `xfail` with the reason and is expected to fail (strictly, so a fix is noticed). A case that
shows a deliberate difference from transformers names it in `transformers_differs` and records transformers' answer
(`transformers_expected`, or `transformers_raises`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from oracle import check_against_transformers, reference_module

from response_templates import ResponseParser, library, parse_response

REAL = Path(__file__).parent / "data" / "real_outputs"
FILES = sorted(REAL.glob("*.json"))


def _cases(*, for_oracle: bool = False):
    for path in FILES:
        data = json.loads(path.read_text(encoding="utf-8"))
        for case in data["cases"]:
            marks = []
            if case.get("xfail"):
                marks.append(pytest.mark.xfail(reason=case["xfail"], strict=True))
            if for_oracle and case.get("truncated"):
                continue
            yield pytest.param(data["template"], case, id=f"{path.stem}/{case['name']}", marks=marks)


def test_every_library_template_has_real_outputs():
    names = {json.loads(path.read_text(encoding="utf-8"))["template"] for path in FILES}
    assert names == set(library.list_templates())


def test_real_output_files_are_well_formed():
    for path in FILES:
        data = json.loads(path.read_text(encoding="utf-8"))
        assert path.stem == data["template"] and data["template"] in library.list_templates()
        cases = data["cases"]
        assert len(cases) >= 5, f"{path.name}: fewer than 5 cases"
        case_names = [case["name"] for case in cases]
        assert len(case_names) == len(set(case_names)), f"{path.name}: duplicate case names"
        for case in cases:
            assert case.get("shape"), f"{path.name}/{case['name']}: no shape given"
            if "source" in case:
                assert isinstance(case["source"], str) and case["source"], f"{path.name}/{case['name']}: empty source"
            assert case["expected"]["role"] == "assistant"


@pytest.mark.parametrize("template_name, case", list(_cases()))
def test_real_output_one_shot(template_name, case):
    message = parse_response(
        case["output"],
        library.get_template(template_name),
        prefix=case["prefix"],
        tools=case.get("tools"),
        truncated=case.get("truncated", False),
    )
    assert message == case["expected"]


@pytest.mark.parametrize("template_name, case", list(_cases()))
def test_real_output_streamed_char_by_char(template_name, case):
    parser = ResponseParser(library.get_template(template_name), case["prefix"], tools=case.get("tools"))
    for char in case["output"]:
        parser.feed(char)
    message, _ = parser.finalize(truncated=case.get("truncated", False))
    assert message == case["expected"]


@pytest.mark.parametrize("template_name, case", list(_cases(for_oracle=True)))
def test_real_output_matches_transformers(template_name, case):
    hf_parse_response = reference_module().parse_response
    template = library.get_template(template_name)
    check_against_transformers(hf_parse_response, {**case, "template_dict": template}, f"{template_name}/{case['name']}")

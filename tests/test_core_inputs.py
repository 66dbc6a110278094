"""Inputs of the parsing API that users get wrong or expect to work (issue 14.7)."""

import pytest

import response_templates as rt

OUTPUT = '<think>why</think>Sure.<tool_call>{"name": "f", "arguments": {"n": "3"}}</tool_call>'
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}]


def test_a_library_name_is_a_template():
    by_name = rt.parse_response(OUTPUT, "qwen3", prefix="", tools=TOOLS)
    assert by_name == rt.parse_response(OUTPUT, rt.get_template("qwen3"), prefix="", tools=TOOLS)
    assert by_name["tool_calls"][0]["function"]["arguments"] == {"n": 3}
    parser = rt.ResponseParser("qwen3", prefix="")
    parser.feed(OUTPUT)
    assert parser.finalize()[0] == rt.parse_response(OUTPUT, "qwen3", prefix="")
    assert rt.load_template("qwen3") is rt.load_template(rt.get_template("qwen3"))


def test_an_unknown_name_or_json_text_is_a_template_error():
    with pytest.raises(rt.TemplateError, match=r"library template name.*'qwen-nope'.*qwen3"):
        rt.parse_response(OUTPUT, "qwen-nope", prefix="")
    with pytest.raises(rt.TemplateError, match=r"json\.loads"):
        rt.ResponseParser('{"fields": {}}', prefix="")


@pytest.mark.parametrize(
    "tools, where",
    [([1], r"tools\[0\] is int 1"), ([TOOLS[0], "f"], r"tools\[1\] is str 'f'"), (TOOLS[0], r"tools must be a list.*dict")],
)
def test_tools_that_are_not_tools_are_rejected(tools, where):
    with pytest.raises(TypeError, match=where):
        rt.parse_response(OUTPUT, "qwen3", prefix="", tools=tools)
    with pytest.raises(TypeError, match=where):
        rt.ResponseParser("qwen3", prefix="", tools=tools)

"""structural_tag without xgrammar: what it returns for each tool_choice, and the errors a user gets. (The grammar
itself is checked against our parser with xgrammar in test_grammar.py.)"""

import copy
import json

import pytest

import response_templates as rt
from response_templates import GrammarError, TemplateError

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]
QWEN3_PROMPT = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"


def kinds(node, found=None):
    found = [] if found is None else found
    if isinstance(node, dict):
        if "type" in node:
            found.append(node["type"])
        for value in node.values():
            kinds(value, found)
    elif isinstance(node, list):
        for item in node:
            kinds(item, found)
    return found


def constants(node):
    if isinstance(node, dict):
        own = [node["value"]] if node.get("type") == "const_string" else []
        return own + [text for value in node.values() for text in constants(value)]
    if isinstance(node, list):
        return [text for item in node for text in constants(item)]
    return []


def test_auto_is_free_text_with_a_trigger_on_the_call_opener():
    tag = rt.structural_tag("qwen3", TOOLS, prefix=QWEN3_PROMPT)
    assert tag["type"] == "structural_tag"
    triggered = [node for node in tag["format"]["elements"] if node["type"] == "triggered_tags"]
    assert triggered and triggered[0]["triggers"] == ["<tool_call>"]
    assert triggered[0]["at_least_one"] is False and triggered[0]["stop_after_first"] is False
    json.dumps(tag)  # plain JSON, what vLLM and SGLang take


def test_required_named_and_single_call_modes():
    required = rt.structural_tag("glm", TOOLS, tool_choice="required", parallel_tool_calls=False)
    calls = next(node for node in required["format"]["elements"] if node["type"] == "tags_with_separator")
    assert calls["at_least_one"] is True and calls["stop_after_first"] is True
    assert [tag["begin"] for tag in calls["tags"]] == ["<tool_call>"]  # GLM allows whitespace before the name
    assert {"get_time", "get_weather"} <= set(constants(calls))
    named = rt.structural_tag("glm", TOOLS, tool_choice={"type": "function", "function": {"name": "get_time"}})
    calls = next(node for node in named["format"]["elements"] if node["type"] == "tags_with_separator")
    assert "get_time" in constants(calls) and "get_weather" not in constants(calls)


def test_none_admits_no_call_opener():
    tag = rt.structural_tag("qwen3", TOOLS, tool_choice="none")
    assert "triggered_tags" not in kinds(tag) and "tags_with_separator" not in kinds(tag)
    free = tag["format"]["elements"][-1]
    assert free["type"] == "any_text" and "<tool_call>" in free["excludes"]


def test_a_prompt_that_opens_the_reasoning_starts_the_grammar_inside_it():
    tag = rt.structural_tag("qwen3", TOOLS, prefix=QWEN3_PROMPT + "<think>\n", tool_choice="required")
    first = tag["format"]["elements"][0]
    assert first["type"] == "tag" and first["begin"] == "" and first["end"] == "</think>"


def test_a_template_it_cannot_express_is_refused_with_the_reason():
    # delimited strings with quoted keys: a JSON dialect no template writes, and no grammar is guessed for it
    quoted_keys = copy.deepcopy(rt.get_template("functiongemma"))
    quoted_keys["fields"]["tool_calls"]["content_args"]["unquoted_keys"] = False
    with pytest.raises(GrammarError, match="delimited strings but quoted keys") as caught:
        rt.structural_tag(quoted_keys, TOOLS)
    assert isinstance(caught.value, TemplateError) and isinstance(caught.value, ValueError)
    # FunctionGemma's bare-key JSON is an EBNF grammar of literals, which cannot bound a number
    bounded = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 1}}}}}]
    with pytest.raises(GrammarError, match="'minimum' is not compiled"):
        rt.structural_tag("functiongemma", bounded)
    with pytest.raises(GrammarError, match="no tool_calls field"):
        rt.structural_tag({"start_anchor": "<|assistant|>", "fields": {"content": {}}}, TOOLS)
    # MiniMax M3's arguments are nested elements, written per schema: a value of one of several types is not
    either = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "v": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}}}]
    with pytest.raises(GrammarError, match="combines types"):
        rt.structural_tag("minimax_m3", either)


def test_bad_tool_choices_are_named():
    with pytest.raises(GrammarError, match="'search', which is not among"):
        rt.structural_tag("qwen3", TOOLS, tool_choice={"type": "function", "function": {"name": "search"}})
    with pytest.raises(GrammarError, match="tool_choice must be"):
        rt.structural_tag("qwen3", TOOLS, tool_choice="any")
    with pytest.raises(GrammarError, match="needs at least one tool"):
        rt.structural_tag("qwen3", [], tool_choice="required")


@pytest.mark.parametrize("name", ["qwen3", "deepseek_v4", "gpt-oss", "gemma-3"])
def test_a_returned_tag_is_the_callers_to_change(name):
    # engines add to what they are given (vLLM's structured-output params keep the dict): changing one tag must not
    # change the next one built from what the compiler keeps
    first = rt.structural_tag(name, TOOLS, tool_choice="required")
    expected = json.dumps(first)

    def change(node):
        if isinstance(node, dict):
            for value in list(node.values()):
                change(value)
            node["changed"] = True
        elif isinstance(node, list):
            for item in node:
                change(item)
            node.append("changed")

    change(first)
    assert json.dumps(rt.structural_tag(name, TOOLS, tool_choice="required")) == expected

"""Inferring a response template from a chat template (response_templates.authoring.inference).

The unit tests use small chat templates written here for the purpose (one per call syntax); the coverage
tests read the real chat templates of RESPONSE_TEMPLATES_CHAT_TEMPLATES and skip without it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

import response_templates as rt
from response_templates import ResponseParser, load_template, parse_response
from response_templates.cli import main as cli_main
from response_templates.authoring.inference import InferenceError, infer_for_tokenizer, infer_template, load_chat_template

ROOT = Path(__file__).resolve().parent.parent
FOLDER = os.environ.get("RESPONSE_TEMPLATES_CHAT_TEMPLATES")
needs_folder = pytest.mark.skipif(
    not FOLDER or not os.path.isdir(FOLDER),
    reason="set RESPONSE_TEMPLATES_CHAT_TEMPLATES to the shared chat templates folder to measure inference on them",
)

# --- small chat templates, one per call syntax ------------------------------------------------------------

_HEAD = """{%- for m in messages %}
{%- if m.role == 'assistant' %}<|turn|>assistant
{% if m.reasoning_content %}<think>
{{ m.reasoning_content }}
</think>

{% endif %}{{ m.content or '' }}"""
_TAIL = """<|end|>
{% elif m.role == 'tool' %}<|turn|>tool
{{ m.content }}<|end|>
{% else %}<|turn|>{{ m.role }}
{{ m.content }}<|end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|turn|>assistant
{% endif %}"""

JSON_TAGS = _HEAD + """{% for c in m.tool_calls or [] %}{% if loop.first and m.content %}
{% endif %}<call>
{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}
</call>{% if not loop.last %}
{% endif %}{% endfor %}""" + _TAIL

NAME_HEADER = _HEAD + """{% if m.tool_calls %}[CALLS]{% for c in m.tool_calls %}[FN]{{ c.function.name }}[ARGS]\
{{ c.function.arguments | tojson }}[/FN]{% endfor %}[/CALLS]{% endif %}""" + _TAIL

XML_PARAMS = _HEAD + """{% for c in m.tool_calls or [] %}
<invoke name="{{ c.function.name }}">
{% for k, v in c.function.arguments.items() %}<arg name="{{ k }}">{{ v if v is string else v | tojson }}</arg>
{% endfor %}</invoke>{% endfor %}""" + _TAIL

UNKNOWN_SYNTAX = _HEAD + """{% for c in m.tool_calls or [] %}CALL {{ c.function.name | upper }} WITH \
{{ c.function.arguments | length }} ARGUMENTS{% endfor %}""" + _TAIL

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}
PROMPT = "<|turn|>user\nWeather in Paris?<|end|>\n<|turn|>assistant\n"


def _call(name, arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.fixture(scope="module")
def json_tags():
    return infer_template(JSON_TAGS)


def test_json_calls_in_tags_are_inferred_and_verified(json_tags):
    assert json_tags.ok, json_tags.reasons
    assert json_tags.confidence == 1.0
    assert json_tags.markers["start_anchor"] == "<|turn|>assistant\n"
    assert json_tags.markers["end_of_turn"] == "<|end|>"
    assert (json_tags.markers["reasoning_open"], json_tags.markers["reasoning_close"]) == ("<think>", "</think>")
    assert json_tags.markers["tool_calls.call_open"].strip() == "<call>"
    assert "ok" in json_tags.verified and json_tags.supports == {
        "reasoning": True, "tool_calls": True, "parallel_tool_calls": True}


def test_inferred_template_parses_what_a_model_writes(json_tags):
    output = ('<think>\nCheck the weather.\n</think>\n\nLet me look.\n<call>\n{"name": "get_weather", "arguments": '
              '{"city": "Paris", "days": 2}}\n</call>\n<call>\n{"name": "get_weather", "arguments": {"city": "Lyon"}}'
              "\n</call><|end|>")
    assert parse_response(output, json_tags.template, prefix=PROMPT, tools=[WEATHER]) == {
        "role": "assistant", "reasoning_content": "Check the weather.", "content": "Let me look.",
        "tool_calls": [_call("get_weather", {"city": "Paris", "days": 2}), _call("get_weather", {"city": "Lyon"})]}


def test_closing_markup_inside_an_argument_does_not_end_the_call(json_tags):
    output = '<call>\n{"name": "save", "arguments": {"text": "a </call> b}"}}\n</call><|end|>'
    message = parse_response(output, json_tags.template, prefix=PROMPT)
    assert message["tool_calls"] == [_call("save", {"text": "a </call> b}"})]


def test_text_after_calls_is_kept_and_whitespace_stays_in_the_markers(json_tags):
    output = 'Sure.\n\n<call>\n{"name": "get_time", "arguments": {}}\n</call>\nDone.<|end|>'
    parser = ResponseParser(json_tags.template, prefix=PROMPT)
    events = []
    for ch in output:  # streamed one character at a time: text chunks must add up to the final value
        events += parser.feed(ch)
    message, final = parser.finalize()
    events += final
    assert message["content"] == "Sure.\nDone."  # text around calls kept as written (the library's convention)
    streamed, pairs = None, []
    for event in events:
        if event.get("field") != "content":
            continue
        if event["type"] == "region_open":
            streamed = ""
        elif event["type"] == "region_chunk":
            streamed += event["text"]
        else:
            pairs.append((streamed, event["value"]))
    assert pairs == [("Sure.", "Sure."), ("\nDone.", "\nDone.")]


def test_cut_off_output_leaves_no_markup_in_content(json_tags):
    message = parse_response("Checking.\n<call>\n", json_tags.template, prefix=PROMPT, truncated=True)
    assert message == {"role": "assistant", "content": "Checking."}
    message = parse_response('<call>\n{"name": "get_weather", "arguments": {"ci', json_tags.template, prefix=PROMPT,
                             truncated=True)
    assert "tool_calls" not in message and "content" not in message


def test_name_in_the_call_header_with_json_arguments():
    result = infer_template(NAME_HEADER)
    assert result.ok, result.reasons
    assert result.markers["tool_calls.block_open"] == "[CALLS]"
    assert result.markers["tool_calls.call_open"] == "[FN]"
    assert result.markers["tool_calls.call_close"] == "[/FN]"
    output = '[CALLS][FN]get_weather[ARGS]{"city": "[/FN] here"}[/FN][FN]get_time[ARGS]{}[/FN][/CALLS]<|end|>'
    assert parse_response(output, result.template, prefix=PROMPT)["tool_calls"] == [
        _call("get_weather", {"city": "[/FN] here"}), _call("get_time", {})]


def test_xml_style_parameters():
    result = infer_template(XML_PARAMS)
    assert result.ok, result.reasons
    assert result.template["fields"]["tool_calls"]["content"] == "xml-inline"
    output = ('<invoke name="get_weather">\n<arg name="city">Paris</arg>\n<arg name="days">3</arg>\n</invoke><|end|>')
    message = parse_response(output, result.template, prefix=PROMPT, tools=[WEATHER])
    assert message["tool_calls"] == [_call("get_weather", {"city": "Paris", "days": 3})]


def test_unknown_call_syntax_is_a_clear_cannot_infer():
    result = infer_template(UNKNOWN_SYNTAX)
    assert result.template is None and not result.ok
    assert result.confidence == 0.0
    assert any("cannot infer" in r and "tool calls" in r for r in result.reasons), result.reasons
    assert "cannot infer" in result.report()


def test_a_chat_template_that_fails_to_render_is_reported():
    result = infer_template("{{ raise_exception('no') }}")
    assert result.template is None
    assert "failed to render" in result.reasons[-1] and "no" in result.reasons[-1]


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="chat_template"):
        infer_template("")


def test_inferred_templates_load_in_transformers(json_tags):
    module = pytest.importorskip("transformers.utils.chat_parsing.response_templates", reason="no transformers parser")
    load_template(json_tags.template)
    module.load_response_template(json_tags.template)
    module.load_response_template(infer_template(XML_PARAMS).template)


def test_exported_from_the_package():
    assert rt.infer_template is infer_template


def test_tokenizer_tokens_reach_the_chat_template():
    template = ("{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{{ eos_token }}{% endfor %}"
                "{% if add_generation_prompt %}<|assistant|>{% endif %}")

    class Tok:
        bos_token, eos_token, chat_template = "<s>", "</s>", template

    result = infer_template(template, tokenizer=Tok())
    assert result.ok, result.reasons
    assert result.options["eos_token"] == "</s>"
    assert result.markers["end_of_turn"] == "</s>"  # only the tokenizer's eos_token ends the turn here
    assert parse_response("Hi there.</s>", result.template, prefix="<s><|user|>Hi</s><|assistant|>") == {
        "role": "assistant", "content": "Hi there."}


def test_infer_for_tokenizer_marks_the_template_as_inferred():
    class Tok:
        bos_token, eos_token, chat_template = "", "", JSON_TAGS

    template = infer_for_tokenizer(Tok())
    assert template.inferred is True and template.result.ok
    assert template == infer_template(JSON_TAGS).template
    assert json.loads(json.dumps(template)) == template  # a plain dict for every consumer
    output = '<call>\n{"name": "get_time", "arguments": {}}\n</call><|end|>'
    assert parse_response(output, template, prefix=PROMPT)["tool_calls"] == [_call("get_time", {})]
    Tok.chat_template = UNKNOWN_SYNTAX
    assert infer_for_tokenizer(Tok()) is None  # gave up: no template rather than a wrong one
    Tok.chat_template = None
    assert infer_for_tokenizer(Tok()) is None


# --- rules the inferred templates follow (each shown on a small chat template) --------------------------------

# Bracket-token markers around a name and its JSON arguments ([FN]name[ARGS]{...}), reasoning in <think>.
BRACKET_HEADER = _HEAD + """{% for c in m.tool_calls or [] %}[FN]{{ c.function.name }}[ARGS]\
{{ c.function.arguments | tojson }}[/FN]{% endfor %}""" + _TAIL

# XML parameters whose markup says which values are strings; the key sits in the value's tag.
XML_TYPED = _HEAD + """{% if m.tool_calls %}{% if m.content %}

{% endif %}<calls>{% for c in m.tool_calls %}
<invoke name="{{ c.function.name }}">
{% for k, v in c.function.arguments.items() %}<arg name="{{ k }}" string="{{ 'true' if v is string else 'false' }}">\
{{ v if v is string else v | tojson }}</arg>
{% endfor %}</invoke>{% endfor %}
</calls>{% endif %}""" + _TAIL

# Key and value in elements of their own: whitespace in a value is data.
XML_KEY_VALUE = _HEAD + """{% for c in m.tool_calls or [] %}
<call>{{ c.function.name }}{% for k, v in c.function.arguments.items() %}<key>{{ k }}</key><value>\
{{ v if v is string else v | tojson }}</value>{% endfor %}</call>{% endfor %}""" + _TAIL

# JSON objects listed in a block, no markup of their own.
JSON_BLOCK = _HEAD + """{% if m.tool_calls %}
<calls>{% for c in m.tool_calls %}{{ '\\n' }}\
{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}{% endfor %}{{ '\\n' }}</calls>{% endif %}""" + _TAIL

# A JSON list of calls between block markers.
JSON_LIST_BLOCK = _HEAD + """{% if m.tool_calls %}<calls>[{% for c in m.tool_calls %}\
{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}{% if not loop.last %}, {% endif %}\
{% endfor %}]</calls>{% endif %}""" + _TAIL

# A Python call list with keyword arguments, and bare JSON objects (no markup at all).
PYTHON_LIST = _HEAD + """{% if m.tool_calls %}[{% for c in m.tool_calls %}{{ c.function.name }}(\
{% for k, v in c.function.arguments.items() %}{{ k }}={{ v | tojson }}{% if not loop.last %}, {% endif %}{% endfor %})\
{% if not loop.last %}, {% endif %}{% endfor %}]{% endif %}""" + _TAIL
BARE_JSON = _HEAD + """{% for c in m.tool_calls or [] %}\
{{ {'name': c.function.name, 'parameters': c.function.arguments} | tojson }}{% if not loop.last %}{{ '\\n' }}{% endif %}\
{% endfor %}""" + _TAIL

# Python calls one per line in a block, string values in single quotes.
PYTHON_LINES = _HEAD + """{% if m.tool_calls %}<function_calls>{% for c in m.tool_calls %}{{ '\\n' }}\
{{ c.function.name }}({% for k, v in c.function.arguments.items() %}{{ k }}=\
{% if v is string %}'{{ v }}'{% else %}{{ v | tojson }}{% endif %}{% if not loop.last %}, {% endif %}{% endfor %})\
{% endfor %}{{ '\\n' }}</function_calls>{% endif %}""" + _TAIL

# A special token and a word before the name (<|call|>call:name{...}<|/call|>).
TOKEN_WORD = _HEAD + """{% for c in m.tool_calls or [] %}<|call|>call:{{ c.function.name }}\
{{ c.function.arguments | tojson }}<|/call|>{% endfor %}""" + _TAIL

# A thinking switch whose "off" prompt writes an empty reasoning block.
THINKING_SWITCH = JSON_TAGS.replace("{%- if add_generation_prompt %}<|turn|>assistant\n{% endif %}",
                                    "{%- if add_generation_prompt %}<|turn|>assistant\n{% if enable_thinking is defined "
                                    "and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}")


def test_markers_around_a_name_may_be_missing_or_preceded_by_others_of_their_kind():
    result = infer_template(BRACKET_HEADER)
    assert result.ok, result.reasons
    for output in ('[FN]get_weather[ARGS]{"city": "Paris"}<|end|>',  # as the chat template writes it
                   '[FN]get_weather{"city": "Paris"}<|end|>',  # [ARGS] left out
                   '[FN]get_weather[ID]a1b2c3[ARGS]{"city": "Paris"}<|end|>'):  # a call id it does not write
        assert parse_response(output, result.template, prefix=PROMPT)["tool_calls"] == [
            _call("get_weather", {"city": "Paris"})], output


def test_a_call_named_in_its_header_ends_unclosed_reasoning_and_keeps_damaged_arguments():
    result = infer_template(BRACKET_HEADER)
    output = "<think>\nI need the weather.\n[FN]get_weather[ARGS]{'city': 'Paris'}[/FN]<|end|>"
    assert parse_response(output, result.template, prefix=PROMPT) == {
        "role": "assistant", "reasoning_content": "I need the weather.",
        "tool_calls": [_call("get_weather", "{'city': 'Paris'}")]}  # not JSON: kept as written
    blocks = infer_template(NAME_HEADER)  # calls in a [CALLS] block: a call written without the block ends it too
    assert parse_response("<think>\nPlan.\n[FN]get_time[ARGS]{}[/FN]<|end|>", blocks.template, prefix=PROMPT) == {
        "role": "assistant", "reasoning_content": "Plan.", "tool_calls": [_call("get_time", {})]}


def test_json_calls_written_inside_reasoning_stay_reasoning(json_tags):
    output = '<think>\nMaybe <call>{"name": "get_time", "arguments": {}}</call>? No.\n</think>\n\nNo call.<|end|>'
    assert parse_response(output, json_tags.template, prefix=PROMPT) == {
        "role": "assistant", "reasoning_content": 'Maybe <call>{"name": "get_time", "arguments": {}}</call>? No.',
        "content": "No call."}


def test_reasoning_markup_out_of_place(json_tags):
    # The end of the turn ends reasoning the model never closed; a repeated close is markup, not content.
    assert parse_response("<think>\nOnly thinking.<|end|>", json_tags.template, prefix=PROMPT) == {
        "role": "assistant", "reasoning_content": "Only thinking."}
    assert parse_response("<think>\nEasy.\n</think>\n\nParis is mild</think> in May.<|end|>", json_tags.template,
                          prefix=PROMPT) == {"role": "assistant", "reasoning_content": "Easy.",
                                             "content": "Paris is mild in May."}


def test_typed_xml_values_and_text_before_the_calls():
    result = infer_template(XML_TYPED)
    assert result.ok, result.reasons
    args = result.template["fields"]["tool_calls"]["content_args"]
    assert set(args["value_parser_by"]["parsers"]) == {"true", "false"}
    output = ('Checking. <calls>\n<invoke name="get_weather">\n<arg name="zip" string="true">02139</arg>\n'
              '<arg name="days" string="false">3</arg>\n</invoke>\n</calls><|end|>')
    assert parse_response(output, result.template, prefix=PROMPT) == {  # no tools given: the markup types values
        "role": "assistant", "content": "Checking. ", "tool_calls": [_call("get_weather", {"zip": "02139", "days": 3})]}
    cut = parse_response('Checking.\n\n<calls>\n<invoke na', result.template, prefix=PROMPT, truncated=True)
    assert cut == {"role": "assistant", "content": "Checking."}  # a cut inside the header leaves no markup


def test_xml_value_whitespace_is_data_when_key_and_value_are_separate_elements():
    result = infer_template(XML_KEY_VALUE)
    assert result.ok, result.reasons
    output = "<call>save<key>title</key>\n<value>  two  spaces\n</value></call><|end|>"  # a line break between markers
    assert parse_response(output, result.template, prefix=PROMPT)["tool_calls"] == [_call("save", {"title": "  two  spaces\n"})]
    assert parse_response("<call>get_time</call>Done.<|end|>", result.template, prefix=PROMPT) == {
        "role": "assistant", "tool_calls": [_call("get_time", {})], "content": "Done."}
    # With the key in the value's tag, models put values on lines of their own: those line breaks are markup.
    xml = infer_template(XML_PARAMS)
    output = '<invoke name="save">\n<arg name="title">\nHello\n</arg>\n</invoke><|end|>'
    assert parse_response(output, xml.template, prefix=PROMPT)["tool_calls"] == [_call("save", {"title": "Hello"})]


def test_json_objects_in_a_block_are_calls_only_inside_it():
    result = infer_template(JSON_BLOCK)
    assert result.ok, result.reasons
    output = ('Checking.\n<calls>\n{"name": "get_time", "arguments": {}}\n{"name": "get_weather", "arguments": '
              '{"city": "Rome"}}\n</calls><|end|>')
    assert parse_response(output, result.template, prefix=PROMPT) == {"role": "assistant", "content": "Checking.",
        "tool_calls": [_call("get_time", {}), _call("get_weather", {"city": "Rome"})]}
    text = 'Format:\n{"a": 1}\n{"name": "x", "arguments": {}}\nDone.<|end|>'
    assert parse_response(text, result.template, prefix=PROMPT) == {
        "role": "assistant", "content": 'Format:\n{"a": 1}\n{"name": "x", "arguments": {}}\nDone.'}


def test_a_json_list_of_calls_in_a_block_is_read_one_call_per_object():
    result = infer_template(JSON_LIST_BLOCK)
    assert result.ok, result.reasons
    time, rome = '{"name": "get_time", "arguments": {}}', '{"name": "get_weather", "arguments": {"city": "Rome"}}'
    both = [_call("get_time", {}), _call("get_weather", {"city": "Rome"})]
    for output in (f"<calls>[{time}, {rome}]</calls><|end|>", f"<calls>[{time}]</calls>\n<calls>{rome}</calls><|end|>"):
        assert parse_response(output, result.template, prefix=PROMPT)["tool_calls"] == both, output
    cut = parse_response(f'<calls>[{time}, {{"name": "get_weather", "arguments": {{"ci', result.template, prefix=PROMPT,
                         truncated=True)
    assert cut["tool_calls"] == [_call("get_time", {})]  # the call completed before the cut is kept
    nested = '<calls>[{"name": "invite", "arguments": {"people": [{"name": "Zoë"}, {"name": "Ann"}]}}]</calls><|end|>'
    assert parse_response(nested, result.template, prefix=PROMPT)["tool_calls"] == [
        _call("invite", {"people": [{"name": "Zoë"}, {"name": "Ann"}]})]


def test_calls_without_markup_open_only_as_the_chat_template_writes_them():
    python = infer_template(PYTHON_LIST)
    assert python.ok, python.reasons
    assert parse_response('[get_weather(city="Paris", days=3)]<|end|>', python.template, prefix=PROMPT)[
        "tool_calls"] == [_call("get_weather", {"city": "Paris", "days": 3})]
    prose = "Arrays such as [1, 2] or calls like [f(x)] are just text here.<|end|>"
    assert parse_response(prose, python.template, prefix=PROMPT) == {"role": "assistant", "content": prose[:-7]}
    bare = infer_template(BARE_JSON)
    assert bare.ok, bare.reasons
    assert parse_response('{"name": "get_time", "parameters": {}}<|end|>', bare.template, prefix=PROMPT)[
        "tool_calls"] == [_call("get_time", {})]
    answer = '{"name": "Alice", "age": 30}<|end|>'
    assert parse_response(answer, bare.template, prefix=PROMPT) == {"role": "assistant", "content": answer[:-7]}


def test_python_calls_rendered_without_commas_are_a_chat_template_bug_not_the_syntax():
    # vLLM's gemma3 pythonic example template loses the commas between keyword arguments (`f(a="x"b=2)`): those
    # renderings are no Python; they are skipped with the reason, and the calls are read as Python writes them.
    glued = PYTHON_LIST.replace("{% if not loop.last %}, {% endif %}{% endfor %})", "{% endfor %})", 1)
    assert glued != PYTHON_LIST
    result = infer_template(glued)
    assert result.ok, result.reasons
    assert any("without the commas" in reason and "single_call" in reason for reason in result.reasons)
    assert parse_response('[get_weather(city="Paris", days=3)]<|end|>', result.template, prefix=PROMPT)[
        "tool_calls"] == [_call("get_weather", {"city": "Paris", "days": 3})]
    # With the commas written, nothing is skipped for that reason.
    assert not any("without the commas" in reason for reason in infer_template(PYTHON_LIST).reasons)



def test_python_call_list_close_written_inside_a_string_value_does_not_end_the_list():
    # The chat template writes string values quoted, so a value may hold the list's own ')]': read inside the
    # string, it does not end the list; the real ')]' still does, with or without text after it.
    result = infer_template(PYTHON_LIST)
    assert result.ok, result.reasons
    output = '[search_web(query="f(x)] and [g(y)]", max_results=2), get_time(note=\'a)]\')]<|end|>'
    assert parse_response(output, result.template, prefix=PROMPT)["tool_calls"] == [
        _call("search_web", {"query": "f(x)] and [g(y)]", "max_results": 2}), _call("get_time", {"note": "a)]"})]
    escaped = '[save(text="say \\"x)]\\" twice")]<|end|>'
    assert parse_response(escaped, result.template, prefix=PROMPT)["tool_calls"] == [
        _call("save", {"text": 'say "x)]" twice'})]
    after = '[get_time()]Done, "quoted" words follow.<|end|>'
    assert parse_response(after, result.template, prefix=PROMPT) == {
        "role": "assistant", "tool_calls": [_call("get_time", {})], "content": 'Done, "quoted" words follow.'}
    for text in (output, escaped, after):  # streamed one character at a time: the same messages
        parser = ResponseParser(result.template, prefix=PROMPT)
        for ch in text:
            parser.feed(ch)
        assert parser.finalize()[0] == parse_response(text, result.template, prefix=PROMPT)


@needs_folder
def test_gemma3_pythonic_reads_a_close_inside_a_string_value(coverage_rows):
    row = _row(coverage_rows, "vllm-example--tool_chat_template_gemma3_pythonic.jinja")
    assert row.inferred, row.result.reasons
    assert "strings_with_brackets_quotes_unicode" not in [name for name, _, _ in row.corpus_diff], row.corpus_diff

def test_python_calls_one_per_line_in_a_block():
    result = infer_template(PYTHON_LINES)
    assert result.ok, result.reasons
    assert result.markers["tool_calls.arguments"] == "Python calls, one per line"
    output = ("<function_calls>\nget_weather(city='Paris', days=3, hourly=True)\nsave(text='it's fine', tags=[\"a\"])\n"
              "</function_calls><|end|>")
    assert parse_response(output, result.template, prefix=PROMPT)["tool_calls"] == [
        _call("get_weather", {"city": "Paris", "days": 3, "hourly": True}), _call("save", {"text": "it's fine", "tags": ["a"]})]
    assert parse_response("<function_calls>get_time()</function_calls><|end|>", result.template, prefix=PROMPT) == {
        "role": "assistant", "tool_calls": [_call("get_time", {})]}
    assert parse_response("Try f(x=1) here.<|end|>", result.template, prefix=PROMPT) == {
        "role": "assistant", "content": "Try f(x=1) here."}  # outside a block it is text


def test_a_header_word_without_its_token():
    result = infer_template(TOKEN_WORD)
    assert result.ok, result.reasons
    for output in ('<|call|>call:get_time{}<|/call|><|end|>', '<|call|>:call:get_time{}<|/call|><|end|>',
                   "Sure.\ncall:get_time{}<|end|>"):
        assert parse_response(output, result.template, prefix=PROMPT)["tool_calls"] == [_call("get_time", {})], output
    assert parse_response("I recall:this{x}<|end|>", result.template, prefix=PROMPT) == {
        "role": "assistant", "content": "I recall:this{x}"}  # mid-line prose is not a call


def test_content_in_its_own_tags_is_also_read_without_them():
    result = infer_template(JSON_TAGS.replace("{{ m.content or '' }}", "<response>\n{{ m.content or '' }}\n</response>"))
    assert result.ok, result.reasons
    assert result.markers["content_open"] == "<response>"
    for output in ("<think>\nEasy.\n</think>\n\n<response>\nParis is mild.\n</response><|end|>",
                   "<think>\nEasy.\n</think>\n\nParis is mild.<|end|>"):
        assert parse_response(output, result.template, prefix=PROMPT) == {
            "role": "assistant", "reasoning_content": "Easy.", "content": "Paris is mild."}, output


def test_reasoning_read_under_another_message_key():
    result = infer_template(JSON_TAGS.replace("m.reasoning_content", "m.thinking"))
    assert result.ok, result.reasons
    assert result.options["reasoning_key"] == "thinking" and result.supports["reasoning"] is True
    assert (result.markers["reasoning_open"], result.markers["reasoning_close"]) == ("<think>", "</think>")
    assert any("message['thinking']" in r for r in result.reasons)


def test_a_reasoning_block_written_by_the_prompt_belongs_to_it():
    result = infer_template(THINKING_SWITCH)
    assert result.ok, result.reasons
    assert [s["name"] for s in result.options["scenarios"]] == ["thinking", "no_thinking"]
    for block in ("<think>\n\n</think>\n\n", "<think>\nThe thinking budget is 0.\n</think>\n"):
        assert parse_response("Paris is mild.<|end|>", result.template, prefix=PROMPT + block) == {
            "role": "assistant", "content": "Paris is mild."}
    assert parse_response("<think>\nMild.\n</think>\n\nParis is mild.<|end|>", result.template, prefix=PROMPT) == {
        "role": "assistant", "reasoning_content": "Mild.", "content": "Paris is mild."}


# --- reading files, CLI ----------------------------------------------------------------------------------


def test_load_chat_template_from_file_config_and_directory(tmp_path):
    (tmp_path / "a.jinja").write_text(JSON_TAGS, encoding="utf-8")
    assert load_chat_template(tmp_path / "a.jinja") == (JSON_TAGS, {})
    config = {"chat_template": JSON_TAGS, "eos_token": {"content": "<|end|>"}, "bos_token": "<s>"}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    assert load_chat_template(tmp_path) == (JSON_TAGS, {"bos_token": "<s>", "eos_token": "<|end|>"})
    (tmp_path / "chat_template.jinja").write_text(NAME_HEADER, encoding="utf-8")
    assert load_chat_template(tmp_path)[0] == NAME_HEADER  # chat_template.jinja wins, tokens from the config
    with pytest.raises(InferenceError, match="no such file"):
        load_chat_template(tmp_path / "missing.jinja")
    (tmp_path / "bad.json").write_text("{}", encoding="utf-8")
    with pytest.raises(InferenceError, match="no 'chat_template'"):
        load_chat_template(tmp_path / "bad.json")


def test_cli_infer_prints_the_template_and_the_report(tmp_path, capsys):
    (tmp_path / "chat_template.jinja").write_text(JSON_TAGS, encoding="utf-8")
    assert cli_main(["infer", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    template = json.loads(out)
    load_template(template)
    assert template == infer_template(JSON_TAGS).template
    assert "inferred (confidence 1.00)" in err and "verify:" in err


def test_cli_infer_json_and_failure(tmp_path, capsys):
    (tmp_path / "t.jinja").write_text(UNKNOWN_SYNTAX, encoding="utf-8")
    assert cli_main(["infer", "--json", str(tmp_path / "t.jinja")]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["template"] is None and any("cannot infer" in r for r in result["reasons"])


def test_cli_infer_usage_errors(capsys, monkeypatch):
    monkeypatch.delenv("RESPONSE_TEMPLATES_CHAT_TEMPLATES", raising=False)
    assert cli_main(["infer"]) == 2
    assert "give either FILE_OR_MODEL_DIR or --diff NAME" in capsys.readouterr().err
    assert cli_main(["infer", "--diff", "qwen3"]) == 2
    assert "--chat-templates-dir" in capsys.readouterr().err
    assert cli_main(["infer", "--diff", "no-such-entry", "--chat-templates-dir", "."]) == 2
    assert "no-such-entry" in capsys.readouterr().err


@needs_folder
def test_cli_infer_diff_shows_the_library_template_beside(capsys):
    assert cli_main(["infer", "--diff", "qwen3", "--chat-templates-dir", FOLDER]) == 0
    out = capsys.readouterr().out
    assert "== Qwen--Qwen3-8B.jinja" in out and "--- library: qwen3" in out and "+++ inferred" in out


# --- coverage over the real chat templates ---------------------------------------------------------------


def _coverage_module():
    spec = importlib.util.spec_from_file_location("infer_coverage", ROOT / "scripts" / "infer_coverage.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def coverage_rows():
    if not FOLDER or not os.path.isdir(FOLDER):
        pytest.skip("set RESPONSE_TEMPLATES_CHAT_TEMPLATES to the shared chat templates folder")
    module = _coverage_module()
    return module, module.measure(FOLDER)


@needs_folder
def test_every_chat_template_gets_a_verified_template_or_a_reason(coverage_rows):
    _, rows = coverage_rows
    assert len(rows) > 50
    for row in rows:
        if row.result.template is None:
            assert row.result.reasons and row.result.reasons[-1].strip(), f"{row.file}: gave up without a reason"
        else:
            assert row.result.confidence > 0, row.file
            assert "FAILED" not in row.result.verified, f"{row.file}: returned a template that fails verify"


@needs_folder
def test_every_inferred_template_loads_in_transformers(coverage_rows):
    module = pytest.importorskip("transformers.utils.chat_parsing.response_templates", reason="no transformers parser")
    for row in coverage_rows[1]:
        if row.result.template is not None:
            module.load_response_template(row.result.template)


@needs_folder
def test_coverage_does_not_regress(coverage_rows):
    module, rows = coverage_rows
    passed, total = module.summary(rows)
    assert total > 50
    # Measured 2026-12 on the shared folder; raise it as inference improves (the README table shows the figure).
    assert passed / total >= 0.40, module.render(rows)


# Measured on the shared folder: 76 of 116 chat templates (docs/inference.md). It was 83 until the library entries
# listed TRL's copies of their chat templates: a row a library entry lists must also parse that entry's corpus as the
# library does, so those rows were held to more than `verify` from then on. The floor counts templates, not a share:
# a new library entry whose chat template inference cannot read yet adds a row without taking a pass away. Raise it
# as inference improves. It was 76 until the lfm2 corpus gained a call rendered by LFM2.5's chat template, which pastes
# string values between quotes unescaped: inference sets raw_strings where a chat template writes them so, as the
# library entry does, but TRL's fixed copies lfm2_v2.jinja and lfm2_2_5_vl.jinja escape them, so the templates
# inferred from those two read that call as damaged.
COVERAGE_FLOOR = 74


@needs_folder
def test_coverage_does_not_fall_below_the_measured_floor(coverage_rows):
    module, rows = coverage_rows
    passed, total = module.summary(rows)
    assert total >= 100, f"only {total} chat templates that render tool calls were measured"
    assert passed >= COVERAGE_FLOOR, f"{passed}/{total} inferred templates verify and match the library"


def test_template_for_falls_back_to_inference_when_asked():
    import inspect

    if "infer" not in inspect.signature(rt.template_for).parameters:
        pytest.skip("library.template_for has no infer= flag yet (the lead adds the one-line hook at merge)")

    class Tok:
        name_or_path, bos_token, eos_token, chat_template = "someone/unknown-model", "", "", JSON_TAGS

    assert rt.template_for(Tok()) is None  # no library entry, and inference is opt-in
    template = rt.template_for(Tok(), infer=True)
    assert template.inferred is True and template == infer_template(JSON_TAGS).template
    assert rt.template_for("someone/unknown-model", infer=True) is None  # an id alone: nothing to infer from


# --- rules added for token- and XML-style families (issue 13) ------------------------------------------------


def _row(coverage_rows, file):
    return next(r for r in coverage_rows[1] if r.file == file)


PREFILL_NOT_AFTER_TOOLS = """{%- for m in messages %}
{%- if m.role == 'assistant' %}<|assistant|><think>
{{ m.reasoning_content or '' }}
</think>

{{ m.content or '' }}{% for c in m.tool_calls or [] %}<call>{{ {'name': c.function.name, 'arguments': \
c.function.arguments} | tojson }}</call>{% endfor %}<|end|>
{%- elif m.role == 'tool' %}<|tool|>{{ m.content }}<|end|>
{%- else %}<|{{ m.role }}|>{{ m.content }}<|end|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|assistant|>{% if messages[-1].role != 'tool' %}<think>
{% endif %}{% endif %}"""


def test_reasoning_is_open_at_the_start_only_when_every_generation_prompt_opens_it():
    result = infer_template(PREFILL_NOT_AFTER_TOOLS)
    assert result.ok, result.reasons
    assert any("but not after" in r for r in result.reasons), result.reasons
    prompt = "<|user|>Hi<|end|><|assistant|><think>\n"
    assert parse_response("Plan.\n</think>\n\nHello.<|end|>", result.template, prefix=prompt) == {
        "role": "assistant", "reasoning_content": "Plan.", "content": "Hello."}
    # After a tool result the prompt opens no reasoning: a bare answer is content, not reasoning.
    after_tool = '<|user|>Hi<|end|><|assistant|><call>{"name": "f", "arguments": {}}</call><|end|><|tool|>1<|end|><|assistant|>'
    assert parse_response("It is 1.<|end|>", result.template, prefix=after_tool) == {
        "role": "assistant", "content": "It is 1."}


# Corpus cases the library templates read with what inference does not write: repairs of damaged calls and the
# option that unescapes attribute values (docs/differences.md). Every other case must agree.
LIBRARY_ONLY = {
    "v3_missing_closing_brace_and_fence_then_text",
    "v3_missing_fence_then_second_call",
    "reply_skips_think_and_response_straight_to_tools",
    "escaped_attribute_values_in_keys_and_tool_name",
    "json_block_arguments_beside_tagged_arguments",  # json_body: inference reads argument tags only
}


def _agree_but_library_only(row) -> bool:
    return all(name in LIBRARY_ONLY for name, _, _ in row.corpus_diff)


@needs_folder
def test_deepseek_r1_answers_after_tool_results_are_content(coverage_rows):
    row = _row(coverage_rows, "deepseek-ai--DeepSeek-R1.jinja")
    assert row.inferred and _agree_but_library_only(row), row.corpus_diff


SECTIONED = """{%- macro type(v) %}{% if v is string %}string{% elif v is boolean %}boolean{% elif v is number %}number\
{% else %}object{% endif %}{% endmacro -%}
{%- for m in messages %}
{%- if m.role == 'assistant' %}<|open|>assistant<|sep|>{% if m.reasoning_content %}<|open|>think<|sep|>\
{{ m.reasoning_content }}<|close|>think<|sep|>{% endif %}<|open|>answer<|sep|>{{ m.content or '' }}<|close|>answer<|sep|>\
{% if m.tool_calls %}<|open|>calls<|sep|>{% for c in m.tool_calls %}<|open|>call name="{{ c.function.name }}" \
n="{{ loop.index }}"<|sep|>{% for k, v in c.function.arguments.items() %}<|open|>arg key="{{ k }}" type="{{ type(v) }}"\
<|sep|>{{ v if v is string else v | tojson }}<|close|>arg<|sep|>{% endfor %}<|close|>call<|sep|>{% endfor %}\
<|close|>calls<|sep|>{% endif %}<|close|>msg<|sep|><|eom|>
{%- else %}<|open|>{{ m.role }}<|sep|>{{ m.content }}<|close|>msg<|sep|><|eom|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|open|>assistant<|sep|>{% endif %}"""


def test_markers_made_of_two_special_tokens_and_a_word():
    """<|open|>think<|sep|> is one marker: the word between two special tokens names the section. Call headers
    number their calls (n="1", n="2"), and the type word of a parameter may be any type (boolean, object)."""
    result = infer_template(SECTIONED)
    assert result.ok, result.reasons
    markers = result.markers
    assert (markers["reasoning_open"], markers["reasoning_close"]) == ("<|open|>think<|sep|>", "<|close|>think<|sep|>")
    assert (markers["content_open"], markers["content_close"]) == ("<|open|>answer<|sep|>", "<|close|>answer<|sep|>")
    assert markers["tool_calls.parameter_open"] == '<|open|>arg key="'  # the <|sep|> before it closes the value
    output = ('<|open|>think<|sep|>Two.<|close|>think<|sep|><|open|>answer<|sep|>Sure.<|close|>answer<|sep|>'
              '<|open|>calls<|sep|><|open|>call name="get_weather" n="1"<|sep|><|open|>arg key="city" type="string"<|sep|>'
              '07<|close|>arg<|sep|><|open|>arg key="hourly" type="boolean"<|sep|>true<|close|>arg<|sep|>'
              '<|open|>arg key="opts" type="object"<|sep|>{"a": [1]}<|close|>arg<|sep|><|close|>call<|sep|>'
              '<|open|>call name="get_time" n="2"<|sep|><|close|>call<|sep|><|close|>calls<|sep|><|close|>msg<|sep|><|eom|>')
    assert parse_response(output, result.template, prefix="<|open|>user<|sep|>Hi<|close|>msg<|sep|><|eom|><|open|>assistant<|sep|>") == {
        "role": "assistant", "reasoning_content": "Two.", "content": "Sure.",
        "tool_calls": [_call("get_weather", {"city": "07", "hourly": True, "opts": {"a": [1]}}), _call("get_time", {})]}


@needs_folder
def test_kimi_k3_sections_are_inferred(coverage_rows):
    row = _row(coverage_rows, "llamacpp--Kimi-K3.jinja")
    assert row.inferred, row.result.reasons
    assert row.corpus_total == 13 and _agree_but_library_only(row), row.corpus_diff


OPENER_DROPPED_BEFORE_CALLS = """{%- for m in messages %}
{%- if m.role == 'assistant' %}<|assistant|>{% if m.tool_calls %}<calls>{{ m.tool_calls | map(attribute='function') \
| list | tojson }}</calls>{% else %}<think>
{{ m.content.split('</think>')[-1] }}{% endif %}<|end|>
{%- else %}<|{{ m.role }}|>{{ m.content }}<|end|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|assistant|><think>
{% endif %}"""


def test_a_reasoning_opener_the_rendered_call_turn_drops_is_synthesised():
    result = infer_template(OPENER_DROPPED_BEFORE_CALLS)
    assert result.ok, result.reasons
    assert any("synthesised" in r for r in result.reasons), result.reasons
    assert result.options["reasoning_synthesis"]["prefill"] == "<think>\n"
    output = 'Need weather.\n</think>\n\n<calls>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]</calls><|end|>'
    assert parse_response(output, result.template, prefix="<|user|>Hi<|end|><|assistant|><think>\n") == {
        "role": "assistant", "reasoning_content": "Need weather.",
        "tool_calls": [_call("get_weather", {"city": "Oslo"})]}


@needs_folder
def test_nemotron_nano_v2_calls_after_a_prefilled_think_are_inferred(coverage_rows):
    row = _row(coverage_rows, "nvidia--NVIDIA-Nemotron-Nano-9B-v2.jinja")
    assert row.inferred, row.result.reasons
    assert row.corpus_same == row.corpus_total == 11, row.corpus_diff


# The generation prompt ends with a sentence (no markup) that the rendered turn drops; the last turn rendered
# writes the reasoning bare right after its header, then a marker, then the content (the shape of Apriel 1.6).
TEXT_PREFILL = """{%- for m in messages %}
{%- if m.role == 'assistant' %}<|assistant|>
{% if m.reasoning_content and loop.last %}{{ m.reasoning_content }}
[ANSWER]
{% endif %}{{ m.content or '' }}
{%- if m.tool_calls %}
<calls>[{% for c in m.tool_calls %}{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}\
{{ ', ' if not loop.last else '' }}{% endfor %}]</calls>{% endif %}<|end|>
{% else %}<|{{ m.role }}|>
{{ m.content }}<|end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|assistant|>
Thinking it through:
{% endif %}"""
TEXT_PREFILL_PROMPT = "<|user|>\nWeather in Oslo?<|end|>\n<|assistant|>\nThinking it through:\n"


def test_a_text_prefill_the_rendered_turn_drops_opens_bare_reasoning():
    result = infer_template(TEXT_PREFILL)
    assert result.ok, result.reasons
    assert result.markers["reasoning_open"] == "Thinking it through:"
    assert result.markers["reasoning_close"] == "[ANSWER]"
    assert result.options["reasoning_synthesis"] == {"prefill": "Thinking it through:\n", "close": ""}
    assert "0 skipped" in result.verified and "FAILED" not in result.verified

    def parse(output, prefix=TEXT_PREFILL_PROMPT):
        return parse_response(output, result.template, prefix=prefix)

    assert parse("Weighing it.\n[ANSWER]\nSunny.<|end|>") == {
        "role": "assistant", "reasoning_content": "Weighing it.", "content": "Sunny."}
    calls = '<calls>[{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "get_time", "arguments": {}}]</calls>'
    assert parse("Two tools.\n[ANSWER]\nChecking.\n" + calls + "<|end|>") == {
        "role": "assistant", "reasoning_content": "Two tools.", "content": "Checking.",
        "tool_calls": [_call("get_weather", {"city": "Oslo"}), _call("get_time", {})]}
    # The call block ends the reasoning also when the model leaves the marker out (the reported generalisation).
    assert any("generalisation" in r for r in result.reasons), result.reasons
    assert parse("Need a tool.\n" + calls + "<|end|>") == {
        "role": "assistant", "reasoning_content": "Need a tool.",
        "tool_calls": [_call("get_weather", {"city": "Oslo"}), _call("get_time", {})]}
    # Cut before the marker: still reasoning; without the prompt too (the reasoning is open from the start).
    assert parse("Still weighing") == {"role": "assistant", "reasoning_content": "Still weighing"}
    assert parse("Thinking it through:\nHmm.\n[ANSWER]\nSunny.<|end|>", prefix="") == {
        "role": "assistant", "reasoning_content": "Hmm.", "content": "Sunny."}
    # After a tool result the prompt ends the same way: the earlier turn and the result are history.
    history = TEXT_PREFILL_PROMPT[: -len("Thinking it through:\n")] + "Checking.\n" + calls + "<|end|>\n<|tool|>\n4<|end|>\n"
    assert parse("It says 4.\n[ANSWER]\nIt is 4 degrees.<|end|>", prefix=history + "<|assistant|>\nThinking it through:\n") == {
        "role": "assistant", "reasoning_content": "It says 4.", "content": "It is 4 degrees."}


def test_a_dropped_text_prefill_without_rendered_reasoning_is_still_a_clear_cannot_infer():
    # The same prompt, but the chat template never writes reasoning: nothing says what the sentence opens.
    source = TEXT_PREFILL.replace("{% if m.reasoning_content and loop.last %}", "{% if false %}")
    result = infer_template(source)
    assert not result.ok
    assert "not a prefix of the rendered assistant turn" in result.reasons[-1], result.reasons


@needs_folder
def test_apriel_16_thinker_is_inferred_and_parses_its_own_corpus_cases(coverage_rows):
    row = _row(coverage_rows, "llamacpp--Apriel-1.6-15b-Thinker-fixed.jinja")
    assert row.inferred, row.result.reasons
    assert row.result.markers["reasoning_close"] == "[BEGIN FINAL RESPONSE]"
    assert row.result.markers["prompt_prefill"] == "Here are my reasoning steps:\n"
    # Every case written after an Apriel 1.6 prompt parses as with the library; the two Apriel 1.5 cases (prompt
    # ending '<|assistant|>', answer closed by '[END FINAL RESPONSE]') are a format this chat template never renders.
    assert sorted(name for name, _, _ in row.corpus_diff) == [
        "v15_end_marker_then_calls", "v15_final_response_with_end_marker"], row.corpus_diff
    assert row.corpus_same == row.corpus_total - 2


ADDRESSED = """{%- for m in messages %}
{%- if m.role == 'assistant' %}
{%- if m.reasoning_content %}<|start|>assistant to=self<|message|>{{ m.reasoning_content }}<|eom|>{% endif %}
{%- if m.tool_calls %}{% for c in m.tool_calls %}<|start|>assistant to={{ c.function.name }}<|message|><invoke \
name="{{ c.function.name }}">
{% for k, v in c.function.arguments.items() %}<param name="{{ k }}">{{ v if v is string else v | tojson }}</param>
{% endfor %}</invoke>{{ '<|eot|>' if loop.last else '<|eom|>' }}{% endfor %}
{%- else %}<|start|>assistant to=user<|message|>{{ m.content }}<|eot|>{% endif %}
{%- else %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|eot|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|start|>assistant{% endif %}"""


def test_messages_addressed_in_their_header():
    """Each section of the turn is a message whose header says who it is for (to=self: reasoning, to=user: the
    answer, to=NAME: a call, which writes the name again inside). Between two calls the chat template ends one
    message and starts the next (<|eom|><|start|>assistant)."""
    result = infer_template(ADDRESSED)
    assert result.ok, result.reasons
    assert result.markers["reasoning_open"] == "to=self<|message|>"
    assert result.markers["content_open"] == "to=user<|message|>"
    prompt = "<|start|>user<|message|>Hi<|eot|><|start|>assistant"
    output = (' to=self<|message|>Two calls.<|eom|><|start|>assistant to=get_weather<|message|><invoke name="get_weather">\n'
              '<param name="city">Paris</param>\n</invoke><|eom|><|start|>assistant to=get_time<|message|>'
              '<invoke name="get_time">\n</invoke><|eot|>')
    assert parse_response(output, result.template, prefix=prompt) == {
        "role": "assistant", "reasoning_content": "Two calls.",
        "tool_calls": [_call("get_weather", {"city": "Paris"}), _call("get_time", {})]}
    # The name written again must be the same name: a header that disagrees with itself is not a call.
    assert "tool_calls" not in parse_response(' to=get_weather<|message|><invoke name="other">\n</invoke><|eot|>',
                                              result.template, prefix=prompt)


@needs_folder
def test_muse_glimmer_addressed_messages_are_inferred(coverage_rows):
    row = _row(coverage_rows, "trl/muse_glimmer.jinja")
    assert row.inferred and row.renders_calls, row.result.reasons


GROUNDED = """{%- if documents %}<|system|>Documents: {{ documents | tojson }}
{%- if enable_citations %} Cite them: write "<cite>span</cite: 0:[1]>" around a span supported by result 1 of \
document 0.{% endif %}<|end|>{% endif %}""" + JSON_TAGS


def test_cited_span_markup_the_prompt_describes_is_dropped_from_content():
    result = infer_template(GROUNDED)
    assert result.ok, result.reasons
    assert any("cited spans" in r for r in result.reasons), result.reasons
    output = "The sky is <cite>blue</cite: 0:[0]> and <cite>grass</cite: 1:[2,3]> is green.<|end|>"
    assert parse_response(output, result.template, prefix=PROMPT) == {
        "role": "assistant", "content": "The sky is blue and grass is green."}
    # Without a grounding switch in the chat template, such markup is text like any other.
    plain = infer_template(JSON_TAGS)
    assert parse_response(output, plain.template, prefix=PROMPT)["content"] == output[: -len("<|end|>")]


@needs_folder
def test_cohere_grounded_answers_lose_their_citation_markers(coverage_rows):
    for file in ("CohereLabs--c4ai-command-a-03-2025--rag.jinja", "CohereForAI--c4ai-command-r7b-12-2024--tool_use.jinja"):
        row = _row(coverage_rows, file)
        assert row.inferred, row.result.reasons
        differing = {name for name, _, _ in row.corpus_diff}
        assert not differing & {"grounded_answer_with_citations", "answer_opening_with_citation"}, row.corpus_diff


# --- rules added for issue 13 (inferA) ---------------------------------------------------------------------

# Tool results written inside the assistant turn when the message carries them (message.tool_responses), and as a
# turn of their own otherwise: the probe turn shows no marker after the calls, the results' rendering does. As in
# Gemma 4, no generation prompt follows results written in the turn: the model continues right after them.
INLINE_RESULTS = _HEAD + """{% for c in m.tool_calls or [] %}<|call|>{{ c.function.name }}\
{{ c.function.arguments | tojson }}<|/call|>{% endfor %}{% if m.tool_responses %}{% for t in m.tool_responses %}\
<|result|>{{ t.name }}:{{ t.response }}<|/result|>{% endfor %}{% else %}""" + _TAIL.replace(
    "{% elif m.role == 'tool' %}", "{% endif %}{% elif m.role == 'tool' %}").replace(
    "{%- if add_generation_prompt %}", "{%- if add_generation_prompt and not messages[-1].tool_responses %}")


def test_tool_results_written_in_the_assistant_turn_end_it():
    result = infer_template(INLINE_RESULTS)
    assert result.ok, result.reasons
    assert any("message['tool_responses']" in r for r in result.reasons)
    # The model stops where the results' markup starts; the next generation starts after the results.
    assert parse_response('<|call|>get_time{}<|/call|><|result|>', result.template, prefix=PROMPT) == {
        "role": "assistant", "tool_calls": [_call("get_time", {})]}
    prefix = PROMPT + '<|call|>get_time{}<|/call|><|result|>get_time:12:00<|/result|>'
    assert parse_response("It is noon.<|end|>", result.template, prefix=prefix) == {
        "role": "assistant", "content": "It is noon."}
    # Without the rule the same output leaves the marker in the content: the template that does not read the key.
    plain = infer_template(INLINE_RESULTS.replace("m.tool_responses", "m.get('none')"))
    assert plain.ok, plain.reasons
    assert parse_response('<|call|>get_time{}<|/call|><|result|>', plain.template, prefix=PROMPT).get("content")


@needs_folder
@pytest.mark.parametrize("file", ["llamacpp--gemma-4-31B-it-interleaved.jinja", "trl/gemma4_v2.jinja"])
def test_gemma4_templates_with_a_tool_turn_still_end_at_the_tool_response(file):
    source = (Path(FOLDER) / file).read_text(encoding="utf-8")
    result = infer_template(source, render_kwargs={"bos_token": "<bos>", "eos_token": "<eos>"})
    assert result.ok, result.reasons
    output = '<|tool_call>call:get_time{}<tool_call|><|tool_response>'
    assert parse_response(output, result.template, prefix="<|turn>model\n") == {
        "role": "assistant", "tool_calls": [_call("get_time", {})]}


# Values holding markup wrapped in a CDATA section, as the chat template writes them.
XML_CDATA = XML_PARAMS.replace("{{ v if v is string else v | tojson }}",
                               "{% if v is string and '<' in v %}<![CDATA[{{ v }}]]>{% elif v is string %}{{ v }}"
                               "{% else %}{{ v | tojson }}{% endif %}")


def test_closing_markup_inside_a_cdata_value_does_not_end_the_call():
    result = infer_template(XML_CDATA)
    assert result.ok, result.reasons
    output = '<invoke name="save">\n<arg name="text"><![CDATA[a </arg></invoke> b]]></arg>\n</invoke><|end|>'
    assert parse_response(output, result.template, prefix=PROMPT) == {
        "role": "assistant", "tool_calls": [_call("save", {"text": "a </arg></invoke> b"})]}
    two = output[:-len("<|end|>")] + '\n<invoke name="get_time">\n</invoke><|end|>'
    assert [c["function"]["name"] for c in parse_response(two, result.template, prefix=PROMPT)["tool_calls"]] == [
        "save", "get_time"]


@needs_folder
def test_minicpm5_cdata_value_with_markup():
    source = (Path(FOLDER) / "openbmb--MiniCPM5-1B.jinja").read_text(encoding="utf-8")
    result = infer_template(source)
    assert result.ok, result.reasons
    output = ('<function name="save"><param name="text"><![CDATA[x </param></function> y]]></param></function>'
              "<|im_end|>")
    assert parse_response(output, result.template, prefix="<|im_start|>assistant\n<think>\n\n</think>\n\n")[
        "tool_calls"] == [_call("save", {"text": "x </param></function> y"})]


# Bare JSON calls; with builtin_tools set, calls to a built-in tool are written behind <|tag|> in another syntax and
# a turn with calls ends with <|eom|> (the built-in tools mode of Llama 3.1 chat templates).
BUILTIN_TOOLS = _HEAD + """{% for c in m.tool_calls or [] %}{% if builtin_tools is defined and c.function.name in \
builtin_tools %}<|tag|>{{ c.function.name }}.call({% for k, v in c.function.arguments.items() %}{{ k }}="{{ v }}"\
{% endfor %}){% else %}{{ {'name': c.function.name, 'parameters': c.function.arguments} | tojson }}{% endif %}\
{% if not loop.last %}{{ '\\n' }}{% endif %}{% endfor %}{% if m.tool_calls and builtin_tools is defined %}<|eom|>{{ '\\n' }}{% else %}""" + _TAIL.replace(
    "{% elif m.role == 'tool' %}", "{% endif %}{% elif m.role == 'tool' %}")


def test_built_in_tools_mode_gives_a_call_marker_and_another_end():
    result = infer_template(BUILTIN_TOOLS)
    assert result.ok, result.reasons
    assert result.markers["tool_calls.builtin_call_marker"] == "<|tag|>"
    assert any("builtin_tools" in r for r in result.reasons)
    call = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    weather = [_call("get_weather", {"city": "Paris"})]
    for output in (call + "<|end|>", "<|tag|>" + call + "<|eom|>", "<|tag|>" + call):
        assert parse_response(output, result.template, prefix=PROMPT) == {"role": "assistant", "tool_calls": weather}
    # A built-in tool's call is no function call: its text stays content, without the marker.
    assert parse_response('Searching.\n<|tag|>web.call(query="x")<|eom|>', result.template, prefix=PROMPT) == {
        "role": "assistant", "content": 'Searching.\nweb.call(query="x")'}
    # Cut right after the marker or inside the call's head: nothing of it is left.
    for cut in ("One moment.\n<|tag|>", 'One moment.\n<|tag|>{"name": "get_wea'):
        assert parse_response(cut, result.template, prefix=PROMPT, truncated=True) == {
            "role": "assistant", "content": "One moment."}, cut
    # The same chat template without that mode: no marker is learnt.
    plain = infer_template(BUILTIN_TOOLS.replace("builtin_tools is defined", "false"))
    assert plain.ok and "tool_calls.builtin_call_marker" not in plain.markers


@needs_folder
@pytest.mark.parametrize("file", ["meta-llama--Llama-3.1-8B-Instruct.jinja", "meta-llama--Llama-3.3-70B-Instruct.jinja"])
def test_llama31_python_tag_and_eom_come_from_the_built_in_tools_mode(file):
    source = (Path(FOLDER) / file).read_text(encoding="utf-8")
    result = infer_template(source, render_kwargs={"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"})
    assert result.ok, result.reasons
    prefix = "<|start_header_id|>assistant<|end_header_id|>\n\n"
    output = '<|python_tag|>{"name": "get_time", "parameters": {}}<|eom_id|>'
    assert parse_response(output, result.template, prefix=prefix) == {
        "role": "assistant", "tool_calls": [_call("get_time", {})]}


# Bare JSON calls written back to back, the turn's content between two markers before them (Llama 4's
# <|python_start|> ... <|python_end|>).
WRAPPED_CONTENT = _HEAD.replace("{{ m.content or '' }}", "{% if not m.tool_calls %}{{ m.content or '' }}{% endif %}") + \
    """{% if m.tool_calls %}<|py|>{{ m.content or '' }}<|/py|>{% for c in m.tool_calls %}\
{{ {'name': c.function.name, 'parameters': c.function.arguments} | tojson }}{% endfor %}{% endif %}""" + _TAIL


def test_bare_call_objects_back_to_back_and_content_wrapped_before_them():
    result = infer_template(WRAPPED_CONTENT)
    assert result.ok, result.reasons
    assert result.markers["tool_calls.content_wrapper"] == ("<|py|>", "<|/py|>")
    weather, time = _call("get_weather", {"city": "Paris"}), _call("get_time", {})
    calls = '{"name": "get_weather", "parameters": {"city": "Paris"}}{"name": "get_time", "parameters": {}}'
    assert parse_response("<|py|><|/py|>" + calls + "<|end|>", result.template, prefix=PROMPT) == {
        "role": "assistant", "tool_calls": [weather, time]}
    assert parse_response("<|py|>Checking.<|/py|>" + calls + "<|end|>", result.template, prefix=PROMPT) == {
        "role": "assistant", "content": "Checking.", "tool_calls": [weather, time]}
    # The call inside the wrapper, or with no wrapper at all.
    for output in ('<|py|>{"name": "get_time", "parameters": {}}<|/py|><|end|>', '{"name": "get_time", "parameters": {}}'):
        assert parse_response(output, result.template, prefix=PROMPT) == {"role": "assistant", "tool_calls": [time]}


def test_bare_call_objects_read_by_their_head_with_the_robustness_policy():
    result = infer_template(BARE_JSON)
    assert result.ok, result.reasons
    weather, time = _call("get_weather", {"city": "Paris"}), _call("get_time", {})
    call = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    for output, expected in [
        ('{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}<|end|>', {"tool_calls": [weather]}),
        ('{"name": "get_weather", "arguments": {"city": "Paris"}}<|end|>', {"tool_calls": [weather]}),
        (call + '; {"name": "get_time", "parameters": {}}<|end|>', {"tool_calls": [weather, time]}),
        (call + ' I asked for the forecast.<|end|>', {"tool_calls": [weather], "content": "I asked for the forecast."}),
        (call + "\n\nDone.<|end|>", {"tool_calls": [weather], "content": "Done."}),
        ('Sure: ' + call + ' Anything else?<|end|>', {"content": "Sure: Anything else?", "tool_calls": [weather]}),
        ('{"name": "run", "parameters": {"code": "d = {\\"a\\": {}} and more"}}<|end|>',
         {"tool_calls": [_call("run", {"code": 'd = {"a": {}} and more'})]}),
        ('{"name": "Alice", "age": 30}<|end|>', {"content": '{"name": "Alice", "age": 30}'}),
    ]:
        assert parse_response(output, result.template, prefix=PROMPT) == {"role": "assistant", **expected}, output
    assert parse_response('One moment.\n{"name": "get_wea', result.template, prefix=PROMPT, truncated=True) == {
        "role": "assistant", "content": "One moment."}
    assert any("by policy" in r for r in result.reasons)


@needs_folder
def test_llama4_scout_is_inferred():
    source = (Path(FOLDER) / "meta-llama--Llama-4-Scout-17B-16E-Instruct.jinja").read_text(encoding="utf-8")
    result = infer_template(source, render_kwargs={"bos_token": "<|begin_of_text|>", "eos_token": "<|eot|>"})
    assert result.ok, result.reasons
    output = ('<|python_start|>Checking.<|python_end|>{"name": "get_weather", "parameters": {"city": "Paris"}}'
              '{"name": "get_time", "parameters": {}}<|eot|>')
    assert parse_response(output, result.template, prefix="<|header_start|>assistant<|header_end|>\n\n") == {
        "role": "assistant", "content": "Checking.",
        "tool_calls": [_call("get_weather", {"city": "Paris"}), _call("get_time", {})]}


# Segments each opened by '>>>' and a recipient ('all' for the content, the function's name for a call); the
# generation prompt writes the first '>>>' (Functionary v3).
SEGMENTS = """{%- for m in messages %}<|turn|>{{ m.role }}
{% if m.role == 'assistant' %}{% if m.content %}>>>all
{{ m.content }}{% endif %}{% for c in m.tool_calls or [] %}>>>{{ c.function.name }}
{{ c.function.arguments | tojson }}{% endfor %}{% else %}{{ m.content }}{% endif %}<|end|>
{% endfor %}{% if add_generation_prompt %}<|turn|>assistant
>>>{% endif %}"""


def test_a_generation_prompt_that_opens_the_first_segment():
    result = infer_template(SEGMENTS)
    assert result.ok, result.reasons
    assert result.markers["tool_calls.call_open"] == ">>>"
    prefix = "<|turn|>user\nWeather?<|end|>\n<|turn|>assistant\n>>>"
    time = _call("get_time", {})
    for output, expected in [
        ("all\nHello.<|end|>", {"content": "Hello."}),
        ("get_time\n{}<|end|>", {"tool_calls": [time]}),
        ('all\nChecking.>>>get_weather\n{"city": "Paris"}>>>get_time\n{}<|end|>',
         {"content": "Checking.", "tool_calls": [_call("get_weather", {"city": "Paris"}), time]}),
        ("all\nA >>> B holds.<|end|>", {"content": "A >>> B holds."}),
    ]:
        assert parse_response(output, result.template, prefix=prefix) == {"role": "assistant", **expected}, output
    assert parse_response("all\nOne moment.>>>get_ti", result.template, prefix=prefix, truncated=True) == {
        "role": "assistant", "content": "One moment."}
    # Without the prompt's '>>>' the name would follow no marker at all: inference gives up, as before.
    assert not infer_template(SEGMENTS.replace("<|turn|>assistant\n>>>{% endif %}", "<|turn|>assistant\n{% endif %}")).ok


# The prompt and the full turn are rendered at two moments; a chat template that writes the time (Hunyuan A13B
# writes it to the second) must not make the two disagree. '%f' changes between any two renders.
CLOCK = JSON_TAGS.replace("{%- for m in messages %}", "Now: {{ strftime_now('%H:%M:%S.%f') }}\n{%- for m in messages %}", 1)


def test_a_chat_template_that_writes_the_time_is_inferred(json_tags):
    result = infer_template(CLOCK)
    assert result.ok, result.reasons
    assert result.template == json_tags.template
    output = 'Checking.\n<call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</call><|end|>'
    assert parse_response(output, result.template, prefix=PROMPT) == {
        "role": "assistant", "content": "Checking.", "tool_calls": [_call("get_weather", {"city": "Paris"})]}
    # Outside inference the clock runs as usual.
    from response_templates.authoring.rendering import render_chat_template

    assert render_chat_template(CLOCK, [{"role": "user", "content": "hi"}]) != render_chat_template(
        CLOCK, [{"role": "user", "content": "hi"}])


@needs_folder
def test_hunyuan_a13b_which_writes_the_time_to_the_second_is_inferred():
    source = (Path(FOLDER) / "vllm-example--tool_chat_template_hunyuan_a13b.jinja").read_text(encoding="utf-8")
    result = infer_template(source)
    assert result.ok, result.reasons
    assert result.markers["tool_calls.block_open"] == "<tool_calls>"


# Calls named in their header and closed by a special token (Kimi K2's '<|tool_call_end|>').
PIPE_CALLS = _HEAD + """{% if m.tool_calls %}<|calls_begin|>{% for c in m.tool_calls %}<|call_begin|>{{ c.function.name }}\
<|call_args|>{{ c.function.arguments | tojson }}<|call_end|>{% endfor %}<|calls_end|>{% endif %}""" + _TAIL


def test_a_special_token_close_ends_broken_json_arguments():
    result = infer_template(PIPE_CALLS)
    assert result.ok, result.reasons
    assert result.markers["tool_calls.call_close"] == "<|call_end|>"
    output = ('Both.<|calls_begin|><|call_begin|>get_weather<|call_args|>{"city": "Oslo"<|call_end|>'
              '<|call_begin|>get_weather<|call_args|>{"city": "Bergen"}<|call_end|><|calls_end|><|end|>')
    assert parse_response(output, result.template, prefix=PROMPT) == {
        "role": "assistant", "content": "Both.",
        "tool_calls": [_call("get_weather", '{"city": "Oslo"'), _call("get_weather", {"city": "Bergen"})]}
    # Closing markup that is no special token, written inside a string value, stays in the arguments.
    output = '<|calls_begin|><|call_begin|>save<|call_args|>{"text": "a </call> b"}<|call_end|><|calls_end|><|end|>'
    assert parse_response(output, result.template, prefix=PROMPT) == {
        "role": "assistant", "tool_calls": [_call("save", {"text": "a </call> b"})]}


@needs_folder
def test_kimi_k2_broken_json_arguments_end_at_the_call_end_token():
    source = (Path(FOLDER) / "moonshotai--Kimi-K2-Instruct__2025-07.jinja").read_text(encoding="utf-8")
    result = infer_template(source)
    corpus = json.loads((ROOT / "tests" / "data" / "corpora" / "kimi-k2.json").read_text(encoding="utf-8"))
    case = next(c for c in corpus["cases"] if c["name"] == "call_with_broken_json_then_good_call")
    parsed = parse_response(case["output"], result.template, prefix=case.get("prefix", ""))
    assert parsed == parse_response(case["output"], rt.get_template("kimi-k2"), prefix=case.get("prefix", ""))
    assert [c["function"]["arguments"] for c in parsed["tool_calls"]] == ['{"city": "Oslo"', {"city": "Bergen"}]


def test_stray_call_tokens_in_the_content_are_dropped():
    result = infer_template(PIPE_CALLS)
    assert result.ok, result.reasons
    for output, expected in [
        ("Sunny<|call_args|> and mild.<|call_end|><|end|>", {"content": "Sunny and mild."}),
        ("Done. <|calls_end|>\nBye.<|end|>", {"content": "Done.\nBye."}),
        # Closing markup spelled out as text is no special token: kept.
        ("Write </call> here.<|end|>", {"content": "Write </call> here."}),
    ]:
        assert parse_response(output, result.template, prefix=PROMPT) == {"role": "assistant", **expected}, output
    # The opening token still opens a call.
    assert parse_response('Hi.<|call_begin|>get_time<|call_args|>{}<|call_end|><|end|>', result.template,
                          prefix=PROMPT) == {"role": "assistant", "content": "Hi.", "tool_calls": [_call("get_time", {})]}


@needs_folder
def test_kimi_k2_stray_call_tokens_are_dropped_like_the_library_does():
    source = (Path(FOLDER) / "moonshotai--Kimi-K2-Instruct__2025-07.jinja").read_text(encoding="utf-8")
    result = infer_template(source)
    output = "Sunny<|tool_call_argument_begin|> and 24 degrees.<|tool_call_end|><|im_end|>"
    prefix = "<|im_user|>user<|im_middle|>Weather?<|im_end|><|im_assistant|>assistant<|im_middle|>"
    assert parse_response(output, result.template, prefix=prefix) == parse_response(
        output, rt.get_template("kimi-k2"), prefix=prefix) == {
        "role": "assistant", "content": "Sunny and 24 degrees."}


def test_verify_renders_a_chat_template_that_writes_the_time_at_one_moment(json_tags):
    from response_templates import verify

    report = verify(json_tags.template, CLOCK, options=json_tags.options, supports=json_tags.supports)
    assert report.ok, report.summary()


def test_an_xml_call_without_parameters_may_be_an_empty_element():
    result = infer_template(XML_PARAMS)
    assert result.ok, result.reasons
    assert result.markers["tool_calls.empty_call"] == '<invoke name="NAME"/>'
    weather = _call("get_weather", {"city": "Paris"})
    for output, expected in [
        ('<invoke name="get_time"/><|end|>', {"tool_calls": [_call("get_time", {})]}),
        ('Now.\n<invoke name="get_time" />\n<invoke name="get_weather">\n<arg name="city">Paris</arg>\n</invoke><|end|>',
         {"content": "Now.", "tool_calls": [_call("get_time", {}), weather]}),
        # '/>' inside a value is data: the call goes on to its end tag.
        ('<invoke name="save">\n<arg name="html">a <br/> b</arg>\n</invoke><|end|>',
         {"tool_calls": [_call("save", {"html": "a <br/> b"})]}),
    ]:
        assert parse_response(output, result.template, prefix=PROMPT) == {"role": "assistant", **expected}, output


@needs_folder
def test_deepseek_v4_empty_invoke_elements_parse_like_the_library():
    source = (Path(FOLDER) / "llamacpp--DeepSeek-V4.jinja").read_text(encoding="utf-8")
    result = infer_template(source, render_kwargs={"bos_token": "<｜begin▁of▁sentence｜>"})
    corpus = json.loads((ROOT / "tests" / "data" / "corpora" / "deepseek_v4.json").read_text(encoding="utf-8"))
    for name in ("v4_self_closing_invoke", "v4_self_closing_then_regular_invoke"):
        case = next(c for c in corpus["cases"] if c["name"] == name)
        prefix = case.get("prefix", "")
        assert parse_response(case["output"], result.template, prefix=prefix) == parse_response(
            case["output"], rt.get_template("deepseek_v4"), prefix=prefix), name


def test_reasoning_written_in_two_blocks_is_joined(json_tags):
    output = '<think>\nFirst.\n</think>\n\nChecking.<think>Then second.</think>\nDone.<|end|>'
    assert parse_response(output, json_tags.template, prefix=PROMPT) == {
        "role": "assistant", "reasoning_content": "First.Then second.", "content": "Checking.Done."}


@needs_folder
def test_gpt_oss_analysis_segments_are_joined_like_the_library():
    source = (Path(FOLDER) / "openai--gpt-oss-120b.jinja").read_text(encoding="utf-8")
    result = infer_template(source)
    corpus = json.loads((ROOT / "tests" / "data" / "corpora" / "gpt-oss.json").read_text(encoding="utf-8"))
    case = next(c for c in corpus["cases"] if c["name"] == "multiple_analysis_blocks")
    prefix = case.get("prefix", "")
    assert parse_response(case["output"], result.template, prefix=prefix) == parse_response(
        case["output"], rt.get_template("gpt-oss"), prefix=prefix)

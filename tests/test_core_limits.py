"""Hostile and extreme templates and outputs (issue 15, items 3, 4 and 7): documented size limits on templates that
every shipped template is far below, no RecursionError on deeply nested JSON (templates, tool calls, tool schemas),
and error messages that quote a bounded excerpt of the input.

Nothing here measures wall-clock time: templates past a limit are refused before any work, and the one memory
bound is measured with tracemalloc, far from the measured bad case (a 4,000-character literal run in a regex cost
114 MB; it now costs about 1 MB)."""

from __future__ import annotations

import itertools
import json
import os
import tracemalloc

import pytest

from response_templates import ResponseParser, TemplateError, load_template, parse_response
from response_templates.core import limits
from response_templates.core.tools import schema_types, type_tool_calls
from response_templates.library import get_template, list_templates

_unique = itertools.count()


def fresh(template: dict) -> dict:
    """A template no earlier test has compiled (the compile cache is keyed by content)."""
    template = dict(template)
    template["start_anchor"] = f"<|start {next(_unique)} {os.getpid()}|>"
    return template


def with_field(**spec) -> dict:
    return fresh({"fields": {"x": {"open": "<x>", "close": "</x>", **spec}, "content": {}}})


def nested(levels: int, leaf="v") -> dict:
    value = leaf
    for _ in range(levels):
        value = {"k": value}
    return value


def rejects(template: dict, *phrases: str) -> str:
    with pytest.raises(TemplateError) as caught:
        load_template(template)
    message = str(caught.value)
    for phrase in phrases:
        assert phrase in message, message
    assert len(message) < 500, message
    return message


# ---------------------------------------------------------------------------------------------------------------
# The shipped templates are far below every limit


def _measure(template: dict) -> dict:
    sizes = {"fields": len(template["fields"]), "literals": 0, "literal": 0, "pattern": 0}
    specs = [template, *template["fields"].values()]
    for spec in specs:
        for key in ("open", "close", "start_anchor"):
            raw = spec.get(key)
            if raw is not None:
                raw = [raw] if isinstance(raw, str) else raw
                sizes["literals"] = max(sizes["literals"], len(raw))
                sizes["literal"] = max(sizes["literal"], *map(len, raw))
    patterns = []

    def walk(value, depth):
        if isinstance(value, dict):
            for key, item in value.items():
                if key.endswith("pattern") and isinstance(item, str):
                    patterns.append(item)
            return max([depth] + [walk(item, depth + 1) for item in value.values()])
        if isinstance(value, list):
            return max([depth] + [walk(item, depth + 1) for item in value])
        return depth - 1

    sizes["nesting"] = walk(template, 1)
    sizes["pattern"] = max(map(len, patterns), default=0)
    sizes["chars"] = len(json.dumps(template, ensure_ascii=False))
    return sizes


@pytest.mark.parametrize("name", list_templates())
def test_every_library_template_is_far_below_the_limits(name):
    sizes = _measure(get_template(name))
    assert sizes["fields"] * 8 <= limits.MAX_FIELDS
    assert sizes["literals"] * 8 <= limits.MAX_LITERALS
    assert sizes["literal"] * 4 <= limits.MAX_DELIMITER_LENGTH
    assert sizes["pattern"] * 8 <= limits.MAX_PATTERN_LENGTH
    assert sizes["nesting"] * 2 <= limits.MAX_NESTING
    assert sizes["chars"] * 8 <= limits.MAX_TEMPLATE_CHARS
    load_template(get_template(name))


# ---------------------------------------------------------------------------------------------------------------
# Each limit: a template at it loads and parses, one step past it is refused naming the field and key


def test_fields_limit():
    spec = {f"f{i}": {"open": f"<f{i}>", "close": f"</f{i}>"} for i in range(limits.MAX_FIELDS - 1)}
    template = fresh({"fields": {**spec, "content": {}}})
    message = parse_response("<f7>seven</f7> b", template, prefix="")
    assert message == {"f7": "seven", "content": "b"}
    template["fields"]["one_more"] = {"open": "<m>"}
    rejects(template, "response_template.fields has", str(limits.MAX_FIELDS + 1), str(limits.MAX_FIELDS))


@pytest.mark.parametrize("key", ["open", "close"])
def test_literal_list_limit(key):
    literals = [f"<{key}{i}>" for i in range(limits.MAX_LITERALS)]
    template = with_field(**{key: literals})
    text = f"<x>in{literals[-1]}out" if key == "close" else f"out{literals[-1]}in</x>"
    message = parse_response(text, template, prefix="")
    assert message == {"x": "in", "content": "out"}
    template["fields"]["x"][key] = literals + ["<one more>"]
    rejects(template, f"response_template.fields['x'].{key} lists {limits.MAX_LITERALS + 1} literals")


def test_start_anchor_list_limit():
    template = fresh({"fields": {"content": {}}})
    template["start_anchor"] = [f"<a{i}>" for i in range(limits.MAX_LITERALS + 1)]
    rejects(template, "response_template.start_anchor lists")


def test_delimiter_length_limit_and_long_literals_that_extend_each_other():
    longest = limits.MAX_DELIMITER_LENGTH
    # every literal is a prefix of the next: the longest one that is present wins
    literals = ["<" + "=" * size for size in range(longest - limits.MAX_LITERALS, longest)]
    template = with_field(open=literals)
    assert len(max(literals, key=len)) == longest
    message = parse_response("out" + literals[-1] + "in</x>", template, prefix="")
    assert message == {"x": "in", "content": "out"}
    streamed = ResponseParser(template, "")
    for char in "out" + literals[-1] + "in</x>":
        streamed.feed(char)
    assert streamed.finalize()[0] == message
    template["fields"]["x"]["close"] = "]" * (longest + 1)
    rejects(template, "response_template.fields['x'].close is", f"{longest + 1} characters", "…")
    anchored = fresh({"fields": {"content": {}}})
    anchored["start_anchor"] = ["<s>", "s" * (longest + 1)]
    rejects(anchored, "response_template.start_anchor[1] is")


@pytest.mark.parametrize("key", ["open_pattern", "close_pattern", "start_anchor_pattern", "tag_pattern", "nested_tag_pattern"])
def test_pattern_length_limit(key):
    size = limits.MAX_PATTERN_LENGTH
    at_limit = "<(?P<key>\\w+)>(?P<value>[^<]*)</(?P=key)>" if "tag" in key else "<(?:\\w+)>"
    at_limit = at_limit + "(?:" + "y" * (size - len(at_limit) - 5) + ")?"
    assert len(at_limit) == size
    past = at_limit + "z"

    def build(pattern):
        if key in ("open_pattern", "close_pattern"):
            field = {"open": "<x>", "close": "</x>"}
            field.pop(key.split("_")[0])
            field[key] = pattern
            return fresh({"fields": {"x": field, "content": {}}}), f"response_template.fields['x'].{key}"
        if key == "start_anchor_pattern":
            template = fresh({"fields": {"content": {}}})
            del template["start_anchor"]
            template["start_anchor_pattern"] = pattern
            return template, "response_template.start_anchor_pattern"
        args = {"tag_pattern": pattern}
        where = "response_template.fields['x'].content_args.tag_pattern"
        if key == "nested_tag_pattern":
            args = {"tag_pattern": "<(?P<key>\\w+)>(?P<value>.*?)</(?P=key)>", "value_parser": {"name": "xml-inline", "args": args}}
            where = "response_template.fields['x'].content_args.value_parser.args.tag_pattern"
        return with_field(content="xml-inline", content_args=args), where

    template, _ = build(at_limit)
    load_template(template)
    template, where = build(past)
    rejects(template, where, f"{size + 1} characters long")


def test_string_delims_limits():
    pairs = [[f"<s{i}>", f"</s{i}>"] for i in range(limits.MAX_LITERALS)]
    template = with_field(content="json", content_args={"string_delims": pairs})
    assert parse_response('<x>{"a": <s3>q"uote</s3>}</x>', template, prefix="") == {"x": {"a": 'q"uote'}}
    template["fields"]["x"]["content_args"]["string_delims"] = pairs + [["<", ">"]]
    rejects(template, "response_template.fields['x'].content_args.string_delims lists")
    template["fields"]["x"]["content_args"]["string_delims"] = [["<", ">" * (limits.MAX_DELIMITER_LENGTH + 1)]]
    rejects(template, "string_delims[0] holds a delimiter of")


def test_nesting_limit_in_defaults_and_transform():
    # the template is level 1, defaults level 2: defaults may hold MAX_NESTING - 2 more levels of dicts
    template = fresh({"defaults": {"deep": nested(limits.MAX_NESTING - 2)}, "fields": {"content": {}}})
    assert parse_response("hi", template, prefix="")["deep"] == nested(limits.MAX_NESTING - 2)
    template["defaults"]["deep"] = nested(limits.MAX_NESTING - 1)
    rejects(template, "response_template.defaults['deep']", f"more than {limits.MAX_NESTING} levels")
    # the cases of the issue: 600 levels (RecursionError before)
    rejects(fresh({"defaults": nested(600), "fields": {"content": {}}}), "response_template.defaults['k']")
    rejects(with_field(transform=nested(600, "{content}")), "response_template.fields['x'].transform")
    rejects(with_field(content="json", content_args={"string_delims": [nested(600)]}), "response_template.fields['x'].content_args")


def test_a_template_that_contains_itself_is_refused():
    template = fresh({"fields": {"content": {}}, "defaults": {}})
    template["defaults"]["me"] = template
    rejects(template, "contains itself")


def test_values_and_characters_limits():
    many = fresh({"fields": {"content": {}}, "defaults": {"list": list(range(limits.MAX_VALUES))}})
    rejects(many, f"more than {limits.MAX_VALUES} values")
    wordy = fresh({"fields": {"content": {}}, "defaults": {f"k{i}": "v" * 1000 for i in range(40)}})
    rejects(wordy, f"more than {limits.MAX_TEMPLATE_CHARS} characters")


def test_the_hostile_templates_of_the_issue_are_refused_before_any_work():
    rejects(fresh({"fields": {f"f{i}": {"open": f"<{i}>"} for i in range(100_000)}}), "has 100000 fields")
    rejects(with_field(open=[f"<{i}>" for i in range(12_000)]), "lists 12000 literals")
    rejects(with_field(open="a" * 65_536), "65536 characters long")
    rejects(with_field(open_pattern=None, open="<y>", close_pattern="b" * 100_000), "100000 characters long")


def test_a_long_literal_run_in_a_regex_costs_memory_linear_in_its_length():
    # was 114 MB for a run of 4,000 characters (every tail of the run, times a dozen prefixes, was listed)
    template = fresh({"fields": {"x": {"open_pattern": "<x " + "b" * 4000 + ">", "close": "</x>"}, "content": {}}})
    tracemalloc.start()
    try:
        load_template(template)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16_000_000
    assert parse_response("a<x " + "b" * 4000 + ">y</x>", template, prefix="") == {"x": "y", "content": "a"}


# ---------------------------------------------------------------------------------------------------------------
# Deeply nested JSON in model output: parsed up to MAX_JSON_DEPTH, a clear ValueError past it, never a RecursionError

TOOLS_TEMPLATE = {
    "start_anchor": "<s>",
    "fields": {
        "tool_calls": {
            "open": "<call>",
            "close": "</call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {},
    },
}


def deep_call(levels: int) -> str:
    return '<call>{"name": "f", "arguments": {"x": ' + "[" * levels + "]" * levels + "}}</call>"


def parse_both_ways(template, text, chunk=1):
    one_shot = parse_response(text, template, prefix="")
    parser = ResponseParser(template, "")
    for at in range(0, len(text), chunk):
        parser.feed(text[at:at + chunk])
    assert parser.finalize()[0] == one_shot
    return one_shot


def test_json_nested_to_the_limit_parses_one_shot_and_streaming():
    levels = limits.MAX_JSON_DEPTH - 2  # the call object and its arguments are two levels
    message = parse_both_ways(TOOLS_TEMPLATE, deep_call(levels))
    assert message["tool_calls"][0]["function"]["arguments"]["x"] == json.loads("[" * levels + "]" * levels)


@pytest.mark.parametrize("levels", [limits.MAX_JSON_DEPTH - 1, 2_000, 100_000])
def test_json_nested_past_the_limit_is_a_clear_value_error(levels):
    text = deep_call(levels)
    with pytest.raises(ValueError, match=f"nested more than {limits.MAX_JSON_DEPTH} levels deep") as caught:
        parse_response(text, TOOLS_TEMPLATE, prefix="")
    assert len(str(caught.value)) < 1000
    parser = ResponseParser(TOOLS_TEMPLATE, "")
    with pytest.raises(ValueError, match=f"nested more than {limits.MAX_JSON_DEPTH} levels deep"):
        for at in range(0, len(text), 97):
            parser.feed(text[at:at + 97])
        parser.finalize()


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = '<call>{"name": "f", "arguments": {"x": "' + "[" * 3000 + '\\"{{{"}}</call>'
    message = parse_both_ways(TOOLS_TEMPLATE, text, chunk=500)
    assert message["tool_calls"][0]["function"]["arguments"]["x"] == "[" * 3000 + '"{{{'


def test_json_past_the_limit_with_allow_non_json_is_kept_as_text():
    template = with_field(content="json", content_args={"allow_non_json": True})
    deep = "[" * 2000 + "]" * 2000
    assert parse_both_ways(template, f"<x> {deep} </x>", chunk=300)["x"] == deep


XML_TOOLS_TEMPLATE = {
    "start_anchor": "<s>",
    "fields": {
        "tool_calls": {
            "open": "<call>",
            "close": "</call>",
            "repeats": True,
            "content": "xml-inline",
            "content_args": {"tag_pattern": "<(?P<key>\\w+)>(?P<value>.*?)</(?P=key)>"},
            "transform": {"type": "function", "function": {"name": "f", "arguments": "{content}"}},
        },
        "content": {},
    },
}
ARRAY_TOOL = [{"type": "function", "function": {"name": "f", "parameters": {"properties": {"x": {"type": "array"}}}}}]


@pytest.mark.parametrize("levels", [3, 500, 2_000])
def test_schema_typed_json_argument_of_any_depth(levels):
    deep = "[" * levels + "]" * levels
    text = f"<call><x>{deep}</x></call>"
    message = parse_response(text, XML_TOOLS_TEMPLATE, prefix="", tools=ARRAY_TOOL)
    argument = message["tool_calls"][0]["function"]["arguments"]["x"]
    # typed while within the limit; past it, the argument keeps the text the model wrote (as for invalid JSON)
    assert argument == (json.loads(deep) if levels <= limits.MAX_JSON_DEPTH else deep)
    parser = ResponseParser(XML_TOOLS_TEMPLATE, "", tools=ARRAY_TOOL)
    parser.feed(text)
    assert parser.finalize()[0] == message


def test_tool_schemas_with_deeply_nested_unions():
    schema = {"type": "integer"}
    for _ in range(5_000):
        schema = {"anyOf": [schema], "nullable": True}
    assert schema_types(schema) == ("integer", "null")
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"properties": {"x": schema}}}}]
    message = parse_response("<call><x>42</x></call>", XML_TOOLS_TEMPLATE, prefix="", tools=tools)
    assert message["tool_calls"][0]["function"]["arguments"] == {"x": 42}


def test_deeply_nested_lists_of_calls_are_typed_without_recursion():
    call = {"function": {"name": "f", "arguments": {"days": "3"}}}
    value = call
    for _ in range(5_000):
        value = [value]
    params = {"f": {"days": {"type": "integer"}}}
    type_tool_calls(value, params, typed_syntax=False)
    assert call["function"]["arguments"] == {"days": 3}


def test_python_call_list_nesting_is_bounded():
    template = with_field(content="python-call-list")
    inside = "[" * 99 + "]" * 99
    assert parse_response(f"<x>[f(a={inside})]</x>", template, prefix="")["x"][0]["arguments"]["a"] == json.loads(inside)
    for levels in (101, 5_000):
        deep = "[" * levels + "]" * levels
        with pytest.raises(ValueError, match="nested more than 100 levels deep"):
            parse_response(f"<x>[f(a={deep})]</x>", template, prefix="")


# ---------------------------------------------------------------------------------------------------------------
# Error messages quote a bounded excerpt of the input, with where it lies


def test_an_invalid_megabyte_call_gives_a_short_message_with_the_position():
    text = '<call>{"name": "f", "arguments": {"x": "' + "a" * 1_000_000 + '" oops}}</call>'
    with pytest.raises(ValueError) as caught:
        parse_response(text, TOOLS_TEMPLATE, prefix="")
    message = str(caught.value)
    assert len(message) < 1000, len(message)
    assert "…" in message and "of 1000042)" in message and "oops" in message


def test_other_region_errors_are_short():
    huge = "b" * 1_000_000
    cases = [
        (with_field(content="python-call-list"), f"<x>[f(a='{huge}' oops)]</x>", "position 1000008"),
        (with_field(content="int"), f"<x>{huge}</x>", "int"),
        (with_field(content="float"), f"<x>{huge}</x>", "float"),
        (with_field(content="int"), f"<x>{'9' * 100_000}</x>", "int"),
        (with_field(content="json", content_args={"unquoted_keys": True}), f"<x>{{a: {huge}}}</x>", "After the dialect rewrites"),
    ]
    for template, text, phrase in cases:
        with pytest.raises(ValueError) as caught:
            parse_response(text, template, prefix="")
        message = str(caught.value)
        assert len(message) < 1000 and phrase in message, message[:2000]


def test_transform_errors_list_a_bounded_number_of_keys():
    template = with_field(content="json", transform={"value": "{content.missing}"})
    text = "<x>" + json.dumps({f"key{i}": i for i in range(100_000)}) + "</x>"
    with pytest.raises(ValueError) as caught:
        parse_response(text, template, prefix="")
    message = str(caught.value)
    assert "'missing'" in message and "and 99980 more" in message and len(message) < 1000


def test_template_errors_quote_a_bounded_excerpt():
    template = with_field(content="json", content_args={"strip": "x" * 20_000})
    message = rejects(template, "content_args.strip must be a bool")
    assert "…" in message


# -- what compiling a template's regexes may cost (issue 31, item 3) ---------------------------------------------


@pytest.mark.parametrize(
    "pattern",
    [r"(?:a|b|ab|ba){99999}x", r"((a{100}){100}){100}", r"[ab]{30000}", r"(?:<tag>){5000}"],
)
def test_a_pattern_that_unrolls_past_the_limit_is_refused_before_compiling(pattern):
    template = fresh({"fields": {"content": {}, "call": {"open_pattern": pattern, "close": "</c>"}}})
    tracemalloc.start()
    try:
        with pytest.raises(TemplateError, match=r"fields\['call'\]\.open_pattern unrolls to \d+ units.*MAX_PATTERN_SIZE"):
            load_template(template)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000  # (compiling the first one took 280 MB)


def test_many_patterns_within_the_limit_each_are_refused_together():
    # 16 such fields of 1.7 KB took 55 s and 5.2 GB to load
    fields = {f"f{index}": {"open_pattern": f"(?:a|b|ab|ba){{1800}}<{index}>", "close": "."} for index in range(16)}
    with pytest.raises(TemplateError, match="MAX_TEMPLATE_PATTERN_SIZE"):
        load_template(fresh({"fields": {"content": {}, **fields}}))


def test_a_tag_pattern_is_bounded_too():
    args = {"tag_pattern": r"<(?P<key>\w+)>(?P<value>(?:.|\n){40000})</(?P=key)>"}
    template = fresh({"fields": {"content": {}, "call": {"open": "<c>", "close": "</c>", "content": "xml-inline", "content_args": args}}})
    with pytest.raises(TemplateError, match=r"content_args\.tag_pattern unrolls"):
        load_template(template)


def test_counted_repeats_within_the_limit_still_load():
    template = fresh({"fields": {"content": {}, "call": {"open_pattern": r"<c id=[0-9a-f]{0,200}>", "close": "</c>"}}})
    assert parse_response("hi<c id=0af>x</c>", template, prefix="") == {"content": "hi", "call": "x"}


@pytest.mark.parametrize(
    ("pattern", "size"),
    [("abc", 3), ("a{10}", 10), ("((a{10}){10}){10}", 1000), ("[ab]{5}", 5), (r"\{3}", 3), (r"\p{L}{4}", 4),
     ("x{,7}", 7), ("a{2,}", 2), ("a{b}", 4)],
)
def test_pattern_size_counts_unrolled_repeats(pattern, size):
    assert limits.pattern_size(pattern) == size


def test_every_shipped_template_is_far_below_the_pattern_size_limits():
    for name in list_templates():
        limits.check_limits(get_template(name))  # raises past a limit

"""Unit tests of the core: template validation (every key, every TemplateError), the compile cache, and the regex
time limit. What is asserted is what a user sees: exception types, and messages that name the field and the key."""

from __future__ import annotations

import copy
import itertools
import os
import subprocess
import sys
import time

import pytest

import response_templates
import response_templates.core.template as template_module
from response_templates import (
    CompiledTemplate,
    RegexTimeoutError,
    ResponseParser,
    TemplateError,
    get_regex_timeout,
    load_template,
    parse_response,
    set_regex_timeout,
)

_unique = itertools.count()


def fresh(template: dict) -> dict:
    """A copy of `template` that no earlier test has compiled (the compile cache is keyed by content)."""
    template = copy.deepcopy(template)
    template["start_anchor"] = f"<|start {next(_unique)} {os.getpid()}|>"
    return template


def field_template(**spec) -> dict:
    """A template with one explicit field 'x' (<x>...</x>) built from `spec`, plus an implicit 'content'."""
    return {
        "version": 1,
        "start_anchor": "<|assistant|>",
        "fields": {"x": {"open": "<x>", "close": "</x>", **spec}, "content": {}},
    }


# The ChatML / Qwen-style template the offline test tokenizer is built for.
from tokenizer_factory import RESPONSE_TEMPLATE as QWEN_LIKE  # noqa: E402


# ---------------------------------------------------------------------------------------------------------------
# Every template key is accepted and does what it says


def test_every_top_level_key_is_accepted():
    template = {
        "version": 1,
        "defaults": {"role": "assistant", "tool_calls": []},
        "start_anchor_pattern": r"<\|assistant\|>\n?",
        "fields": {"content": {}},
    }
    compiled = load_template(template)
    assert isinstance(compiled, CompiledTemplate)
    assert parse_response("hi", template, prefix="<|assistant|>\n") == {
        "role": "assistant",
        "tool_calls": [],
        "content": "hi",
    }


def test_version_may_be_omitted():
    template = {"start_anchor": "A:", "fields": {"content": {}}}
    assert parse_response("hi", template, prefix="A:") == {"content": "hi"}


def test_every_field_key_is_accepted():
    template = {
        "start_anchor": "<|assistant|>",
        "fields": {
            "notes": {
                "open_pattern": r"<note (?P<tag>\w+)>",
                "close_pattern": r"</note>",
                "content": "text",
                "content_args": {"strip": False},
                "repeats": True,
                "optional": True,
                "transform": {"tag": "{tag}", "text": "{content}"},
            },
            "calls": {
                "open": ["<calls>", "<CALLS>"],
                "close": ["</calls>", "</CALLS>"],
                "content": "json",
                "transform": {"type": "function", "function": "{content}"},
                "transform_each": False,
            },
            "summary": {"open": "<s>", "close": "</s>", "repeats": True, "join": " | "},
            "content": {},
        },
    }
    text = '<note a> one </note><note b>two</note><CALLS>{"name": "f", "arguments": {}}</calls>' "<s>x</s>rest<s>y</s>"
    assert parse_response(text, template, prefix="") == {
        "notes": [{"tag": "a", "text": " one "}, {"tag": "b", "text": "two"}],
        "calls": {"type": "function", "function": {"name": "f", "arguments": {}}},
        "summary": "x | y",
        "content": "rest",
    }


def test_template_error_is_a_value_error():
    assert issubclass(TemplateError, ValueError)
    with pytest.raises(ValueError):
        load_template({"start_anchor": "A", "fields": {}})


def test_public_names():
    for name in ("load_template", "parse_response", "ResponseParser", "TemplateError", "RegexTimeoutError"):
        assert hasattr(response_templates, name), name


def test_load_template_returns_a_compiled_template_unchanged():
    compiled = load_template(QWEN_LIKE)
    assert load_template(compiled) is compiled
    assert compiled.to_dict() == QWEN_LIKE
    copied = compiled.to_dict()
    copied["fields"]["content"]["close"] = "changed"
    assert compiled.to_dict() == QWEN_LIKE  # to_dict is a deep copy
    assert parse_response("<think>a</think>b", compiled, prefix="") == parse_response(
        "<think>a</think>b", QWEN_LIKE, prefix=""
    )


def test_the_compiled_template_does_not_follow_later_changes_of_the_dict():
    template = fresh(field_template())
    compiled = load_template(template)
    template["fields"]["x"]["close"] = "</y>"
    assert parse_response("<x>a</x>b", compiled, prefix="") == {"x": "a", "content": "b"}


# ---------------------------------------------------------------------------------------------------------------
# Every TemplateError, with a message that names the field and the key

INVALID = {
    # top level
    "not a dict": ([("fields", {})], ["response_template", "dict", "list"]),
    "unknown top-level key": (
        {"start_anchor": "A", "fields": {"c": {}}, "extra_key": 1},
        ["response_template", "extra_key"],
    ),
    "misspelled top-level key": (
        {"start_anchor": "A", "field": {"c": {}}},
        ["response_template", "'field'"],
    ),
    "bad version": ({"version": 2, "start_anchor": "A", "fields": {"c": {}}}, ["version", "2"]),
    "version as a string": ({"version": "1", "start_anchor": "A", "fields": {"c": {}}}, ["version", "'1'"]),
    "version as a bool": ({"version": True, "start_anchor": "A", "fields": {"c": {}}}, ["version", "True"]),
    "defaults not a dict": ({"start_anchor": "A", "defaults": ["role"], "fields": {"c": {}}}, ["defaults", "dict"]),
    "empty fields": ({"start_anchor": "A", "fields": {}}, ["fields", "non-empty"]),
    "missing fields": ({"start_anchor": "A"}, ["fields"]),
    "fields not a dict": ({"start_anchor": "A", "fields": [{"c": {}}]}, ["fields"]),
    "empty field name": ({"start_anchor": "A", "fields": {"": {}}}, ["fields", "field names"]),
    "field spec not a dict": ({"start_anchor": "A", "fields": {"c": "text"}}, ["fields['c']", "dict"]),
    "missing start anchor": ({"fields": {"c": {}}}, ["start_anchor", "start_anchor_pattern"]),
    "both start anchors": (
        {"start_anchor": "A", "start_anchor_pattern": "A", "fields": {"c": {}}},
        ["start_anchor", "start_anchor_pattern", "both"],
    ),
    "invalid start anchor regex": (
        {"start_anchor_pattern": "[", "fields": {"c": {}}},
        ["start_anchor_pattern", "regex"],
    ),
    "start anchor pattern not a string": ({"start_anchor_pattern": 1, "fields": {"c": {}}}, ["start_anchor_pattern"]),
    "empty start anchor": ({"start_anchor": "", "fields": {"c": {}}}, ["start_anchor", "empty"]),
    "start anchor empty list": ({"start_anchor": [], "fields": {"c": {}}}, ["start_anchor", "empty list"]),
    "two implicit fields": ({"start_anchor": "A", "fields": {"a": {}, "b": {}}}, ["'a'", "'b'", "open"]),
    # fields
    "unknown field key": (field_template(closing="</x>"), ["fields['x']", "closing"]),
    "unknown content parser": (field_template(content="yaml"), ["fields['x'].content", "yaml"]),
    "content not a string": (field_template(content=["json"]), ["fields['x'].content"]),
    "both open forms": (
        {"start_anchor": "A", "fields": {"x": {"open": "<x>", "open_pattern": "<x>"}}},
        ["fields['x'].open", "open_pattern", "both"],
    ),
    "both close forms": (field_template(close_pattern="</x>"), ["fields['x'].close", "close_pattern", "both"]),
    "invalid open regex": (
        {"start_anchor": "A", "fields": {"x": {"open_pattern": "(unclosed", "close": "</x>"}}},
        ["fields['x'].open_pattern", "regex"],
    ),
    "invalid close regex": (
        {"start_anchor": "A", "fields": {"x": {"open": "<x>", "close_pattern": "a{2,1}"}}},
        ["fields['x'].close_pattern", "regex"],
    ),
    "close pattern not a string": (
        {"start_anchor": "A", "fields": {"x": {"open": "<x>", "close_pattern": ["</x>"]}}},
        ["fields['x'].close_pattern", "list"],
    ),
    "empty literal": (field_template(close=""), ["fields['x'].close", "empty"]),
    "empty literal in a list": (field_template(close=["</x>", ""]), ["fields['x'].close", "empty"]),
    "empty list": (field_template(close=[]), ["fields['x'].close", "empty list"]),
    "literal of the wrong type": (field_template(close=7), ["fields['x'].close", "int"]),
    "list holding a non-string": (field_template(close=["</x>", 7]), ["fields['x'].close", "int"]),
    "named groups without a transform": (
        {"start_anchor": "A", "fields": {"x": {"open_pattern": r"<x (?P<name>\w+)>", "close": "</x>"}}},
        ["fields['x'].open_pattern", "'name'", "transform"],
    ),
    "named groups in close without a transform": (
        {"start_anchor": "A", "fields": {"x": {"open": "<x>", "close_pattern": r"</x (?P<tail>\w+)>"}}},
        ["fields['x'].close_pattern", "'tail'", "transform"],
    ),
    "join without repeats": (field_template(join=", "), ["fields['x'].join", "repeats"]),
    "join not a string": (field_template(join=1, repeats=True), ["fields['x'].join", "str"]),
    "repeats not a bool": (field_template(repeats="yes"), ["fields['x'].repeats", "bool"]),
    "repeats as an int": (field_template(repeats=1), ["fields['x'].repeats", "bool"]),
    "optional not a bool": (field_template(optional="false"), ["fields['x'].optional", "bool"]),
    "transform_each not a bool": (
        field_template(transform="{content}", transform_each=1),
        ["fields['x'].transform_each", "bool"],
    ),
    "transform_each without a transform": (
        field_template(transform_each=True),
        ["fields['x'].transform_each", "transform"],
    ),
    "mixed placeholder string": (
        field_template(transform={"name": "tool {content}"}),
        ["fields['x'].transform", "tool {content}"],
    ),
    "mixed placeholder in a nested list": (
        field_template(transform={"a": [{"b": "{content}!"}]}),
        ["fields['x'].transform", "{content}!"],
    ),
    "two placeholders in one string": (
        field_template(transform="{content}{content}"),
        ["fields['x'].transform", "{content}{content}"],
    ),
    # content_args
    "content_args not a dict": (field_template(content_args=["strip"]), ["fields['x'].content_args", "dict"]),
    "unknown content_args key": (
        field_template(content_args={"trim": True}),
        ["fields['x'].content_args", "trim", "strip"],
    ),
    "content_args key of another parser": (
        field_template(content="int", content_args={"unquoted_keys": True}),
        ["fields['x'].content_args", "unquoted_keys"],
    ),
    "strip not a bool": (field_template(content_args={"strip": "yes"}), ["fields['x'].content_args.strip", "bool"]),
    "unquoted_keys not a bool": (
        field_template(content="json", content_args={"unquoted_keys": 1}),
        ["fields['x'].content_args.unquoted_keys", "bool"],
    ),
    "allow_non_json not a bool": (
        field_template(content="json", content_args={"allow_non_json": "no"}),
        ["fields['x'].content_args.allow_non_json", "bool"],
    ),
    "string_delims not a list": (
        field_template(content="json", content_args={"string_delims": "<<>>"}),
        ["fields['x'].content_args.string_delims", "list"],
    ),
    "string_delims entry not a pair": (
        field_template(content="json", content_args={"string_delims": [["<<"]]}),
        ["fields['x'].content_args.string_delims[0]"],
    ),
    "string_delims entry with an empty string": (
        field_template(content="json", content_args={"string_delims": [["<<", ">>"], ["", "'"]]}),
        ["fields['x'].content_args.string_delims[1]"],
    ),
    "xml-inline without tag_pattern": (
        field_template(content="xml-inline", content_args={}),
        ["fields['x'].content_args.tag_pattern", "required"],
    ),
    "xml-inline tag_pattern not a string": (
        field_template(content="xml-inline", content_args={"tag_pattern": 3}),
        ["fields['x'].content_args.tag_pattern", "str"],
    ),
    "xml-inline invalid tag_pattern": (
        field_template(content="xml-inline", content_args={"tag_pattern": "<(?P<key>"}),
        ["fields['x'].content_args.tag_pattern", "regex"],
    ),
    "xml-inline tag_pattern without a key group": (
        field_template(content="xml-inline", content_args={"tag_pattern": "<(?P<value>.*?)>"}),
        ["fields['x'].content_args.tag_pattern", "key"],
    ),
    "xml-inline unknown value parser": (
        field_template(
            content="xml-inline", content_args={"tag_pattern": "<(?P<key>a)>", "value_parser": {"name": "yaml"}}
        ),
        ["fields['x'].content_args.value_parser", "yaml"],
    ),
    "xml-inline value parser with an unknown key": (
        field_template(
            content="xml-inline",
            content_args={"tag_pattern": "<(?P<key>a)>", "value_parser": {"name": "json", "options": {}}},
        ),
        ["fields['x'].content_args.value_parser", "options"],
    ),
    "xml-inline value parser with bad args": (
        field_template(
            content="xml-inline",
            content_args={"tag_pattern": "<(?P<key>a)>", "value_parser": {"name": "json", "args": {"strict": True}}},
        ),
        ["fields['x'].content_args.value_parser.args", "strict"],
    ),
    "xml-inline value parser not a dict": (
        field_template(content="xml-inline", content_args={"tag_pattern": "<(?P<key>a)>", "value_parser": "json"}),
        ["fields['x'].content_args.value_parser", "dict"],
    ),
    "xml-inline value_parser_by without parsers": (
        field_template(
            content="xml-inline", content_args={"tag_pattern": "<(?P<key>a)>", "value_parser_by": {"group": "key"}}
        ),
        ["fields['x'].content_args.value_parser_by", "parsers"],
    ),
    "xml-inline value_parser_by on an unknown group": (
        field_template(
            content="xml-inline",
            content_args={"tag_pattern": "<(?P<key>a)>", "value_parser_by": {"group": "type", "parsers": {}}},
        ),
        ["fields['x'].content_args.value_parser_by.group", "'type'"],
    ),
    "xml-inline value_parser_by with a bad parser": (
        field_template(
            content="xml-inline",
            content_args={
                "tag_pattern": "<(?P<key>a) (?P<type>b)>",
                "value_parser_by": {"group": "type", "parsers": {"int": {"name": "integer"}}},
            },
        ),
        ["fields['x'].content_args.value_parser_by.parsers['int']", "integer"],
    ),
    "xml-inline merge_duplicates not a bool": (
        field_template(content="xml-inline", content_args={"tag_pattern": "<(?P<key>a)>", "merge_duplicates": "y"}),
        ["fields['x'].content_args.merge_duplicates", "bool"],
    ),
    "kv-lines empty kv_sep": (
        field_template(content="kv-lines", content_args={"kv_sep": ""}),
        ["fields['x'].content_args.kv_sep", "empty"],
    ),
    "kv-lines empty line_sep": (
        field_template(content="kv-lines", content_args={"line_sep": ""}),
        ["fields['x'].content_args.line_sep", "empty"],
    ),
    "kv-lines kv_sep not a string": (
        field_template(content="kv-lines", content_args={"kv_sep": 1}),
        ["fields['x'].content_args.kv_sep", "str"],
    ),
    "kv-lines bad value parser": (
        field_template(content="kv-lines", content_args={"value_parser": {"name": "nope"}}),
        ["fields['x'].content_args.value_parser", "nope"],
    ),
    "python-call-list reads no strip": (
        field_template(content="python-call-list", content_args={"strip": True}),
        ["fields['x'].content_args", "strip", "json_calls"],
    ),
    "python-call-list json_calls not a bool": (
        field_template(content="python-call-list", content_args={"json_calls": "yes"}),
        ["fields['x'].content_args.json_calls", "bool"],
    ),
    "not JSON data": (
        {"start_anchor": "A", "fields": {"c": {"transform": {"k": object()}}}},
        ["response_template", "JSON"],
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_template_raises_template_error_naming_field_and_key(case):
    template, expected = INVALID[case]
    with pytest.raises(TemplateError) as info:
        load_template(template)
    message = str(info.value)
    for piece in expected:
        assert piece in message, f"{piece!r} is missing from the error: {message}"


@pytest.mark.parametrize("case", ["unknown field key", "invalid close regex", "join without repeats", "empty fields"])
def test_parse_response_and_response_parser_raise_the_same_template_error(case):
    template, expected = INVALID[case]
    for call in (
        lambda: parse_response("text", template, prefix=""),
        lambda: ResponseParser(template, prefix=""),
    ):
        with pytest.raises(TemplateError) as info:
            call()
        assert expected[0] in str(info.value)


def test_duplicate_literals_in_a_list_are_fine():
    template = field_template(close=["</x>", "</x>", "</X>"])
    assert parse_response("<x>a</X>b", template, prefix="") == {"x": "a", "content": "b"}


def test_named_groups_with_a_transform_are_fine():
    template = {
        "start_anchor": "A",
        "fields": {
            "x": {
                "open_pattern": r"<x (?P<name>\w+)>",
                "close_pattern": r"</x(?: (?P<status>\w+))?>",
                "transform": {"name": "{name}", "status": "{status}", "body": "{content}"},
            }
        },
    }
    assert parse_response("<x f>a</x ok>", template, prefix="") == {"x": {"name": "f", "status": "ok", "body": "a"}}


@pytest.mark.parametrize("name", [["json"], {"json": 1}])
def test_unhashable_value_parser_name_raises_template_error(name):
    template = field_template(content="kv-lines", content_args={"value_parser": {"name": name}})
    with pytest.raises(TemplateError, match="value_parser"):
        load_template(template)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="caps the child's memory with RLIMIT_AS (Linux)")
def test_a_huge_delimiter_regex_is_refused_without_exhausting_memory(tmp_path):
    # run in a child capped at 512 MB so that the unfixed behaviour ends quickly in a MemoryError
    script = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 29, 1 << 29))\n"
        "from response_templates import load_template, TemplateError\n"
        "spec = {'start_anchor': 'A', 'fields': {'x': {'open_pattern': '(?:(?:a{1000}){1000}){1000}', 'close': '</x>'}}}\n"
        "try:\n"
        "    load_template(spec)\n"
        "    print('accepted')\n"
        "except TemplateError as error:\n"
        "    print('TemplateError', error)\n"
        "except BaseException as error:\n"
        "    print(type(error).__name__)\n"
    )
    env = dict(os.environ, RESPONSE_TEMPLATES_DISABLE="1")
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert out.stdout.startswith("TemplateError"), out.stdout + out.stderr
    assert "open_pattern" in out.stdout


# ---------------------------------------------------------------------------------------------------------------
# The compile cache


@pytest.fixture
def compile_spy(monkeypatch):
    calls = []
    real = template_module._compile

    def spy(spec):
        calls.append(spec)
        return real(spec)

    monkeypatch.setattr(template_module, "_compile", spy)
    return calls


def test_the_same_dict_parsed_1000_times_compiles_once(compile_spy):
    template = fresh(QWEN_LIKE)
    for _ in range(1000):
        message = parse_response("<think>r</think>hi", template, prefix="")
    assert message == {"role": "assistant", "reasoning_content": "r", "content": "hi"}
    assert len(compile_spy) == 1


def test_streaming_parsers_share_the_compiled_template(compile_spy):
    template = fresh(QWEN_LIKE)
    for _ in range(50):
        parser = ResponseParser(template, prefix="")
        parser.feed("hello")
        parser.finalize()
    assert len(compile_spy) == 1


def test_an_equal_dict_in_another_object_hits_the_cache(compile_spy):
    template = fresh(QWEN_LIKE)
    first = load_template(template)
    twin = copy.deepcopy(template)
    assert twin is not template
    assert load_template(twin) is first
    assert parse_response("<think>r</think>hi", twin, prefix="")["content"] == "hi"
    assert len(compile_spy) == 1


def test_a_mutated_dict_is_recompiled(compile_spy):
    template = fresh(QWEN_LIKE)
    assert parse_response("<think>r</think>hi", template, prefix="")["reasoning_content"] == "r"
    template["fields"]["reasoning_content"]["open"] = "<reasoning>"
    template["fields"]["reasoning_content"]["close"] = "</reasoning>"
    message = parse_response("<reasoning>r</reasoning>hi", template, prefix="")
    assert message == {"role": "assistant", "reasoning_content": "r", "content": "hi"}
    assert len(compile_spy) == 2
    # and a mutation that makes it invalid is reported, not served from the cache
    template["fields"]["reasoning_content"]["bogus"] = True
    with pytest.raises(TemplateError, match="bogus"):
        parse_response("x", template, prefix="")


def test_an_invalid_template_is_reported_every_time(compile_spy):
    template = fresh(field_template(join=","))
    for _ in range(3):
        with pytest.raises(TemplateError, match="join"):
            parse_response("x", template, prefix="")


@pytest.mark.xfail(
    strict=True,
    reason="known limitation (README): the per-dict cache check uses ==, which cannot tell true from 1; "
    "checking types on every call would cost more than the parse itself",
)
def test_a_dict_mutated_to_an_equal_but_invalid_value_is_revalidated():
    template = fresh(field_template(repeats=True))
    load_template(template)
    template["fields"]["x"]["repeats"] = 1
    with pytest.raises(TemplateError, match="repeats"):
        load_template(template)


def test_an_invalid_template_with_the_same_json_as_a_cached_one_is_still_rejected():
    valid = fresh({"start_anchor": "A", "fields": {"1": {"open": "<x>", "close": "</x>"}}})
    load_template(valid)
    invalid = copy.deepcopy(valid)
    invalid["fields"] = {1: invalid["fields"]["1"]}
    with pytest.raises(TemplateError, match="field names"):
        load_template(invalid)


def test_message_key_order_follows_the_defaults_of_the_template_given():
    first = fresh({"start_anchor": "A", "defaults": {"role": "assistant", "name": "bot"}, "fields": {"content": {}}})
    second = copy.deepcopy(first)
    second["defaults"] = {"name": "bot", "role": "assistant"}
    assert list(parse_response("hi", first, prefix="")) == ["role", "name", "content"]
    assert list(parse_response("hi", second, prefix="")) == ["name", "role", "content"]


# ---------------------------------------------------------------------------------------------------------------
# The regex time limit

CATASTROPHIC = "(a|aa)+$"  # exponential backtracking on a long run of "a" that does not end the text


@pytest.fixture
def short_regex_timeout():
    before = get_regex_timeout()
    set_regex_timeout(0.2)
    yield 0.2
    set_regex_timeout(before)


def test_set_regex_timeout_validates_and_get_reads_it_back():
    before = get_regex_timeout()
    try:
        set_regex_timeout(2)
        assert get_regex_timeout() == 2.0
        for bad in (0, -1, True, "1", None, float("nan")):
            with pytest.raises(ValueError):
                set_regex_timeout(bad)
        assert get_regex_timeout() == 2.0
    finally:
        set_regex_timeout(before)


def test_regex_timeout_error_is_a_value_error():
    assert issubclass(RegexTimeoutError, ValueError)


@pytest.mark.parametrize(("raw", "expected"), [("0.5", 0.5), ("", 1.0), (" 2 ", 2.0), ("1e6", 1e6)])
def test_the_default_regex_timeout_comes_from_the_environment(raw, expected, tmp_path):
    env = dict(os.environ, RESPONSE_TEMPLATES_REGEX_TIMEOUT=raw, RESPONSE_TEMPLATES_DISABLE="1")
    out = subprocess.run(
        [sys.executable, "-c", "import response_templates as r; print(r.get_regex_timeout())"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,  # not the checkout: import the package the tests run against
    )
    assert out.returncode == 0, out.stderr
    assert float(out.stdout.strip()) == expected


def _catastrophic_close_template() -> dict:
    return {"start_anchor": "<|assistant|>", "fields": {"code": {"open": "<code>", "close_pattern": CATASTROPHIC}}}


def test_catastrophic_close_pattern_times_out_in_parse_response(short_regex_timeout):
    started = time.monotonic()
    with pytest.raises(RegexTimeoutError) as info:
        parse_response("<code>" + "a" * 80 + "b", _catastrophic_close_template(), prefix="")
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert "'code'" in message and "close_pattern" in message and CATASTROPHIC in message


def test_catastrophic_close_pattern_times_out_while_streaming(short_regex_timeout):
    parser = ResponseParser(_catastrophic_close_template(), prefix="")
    parser.feed("<code>")
    started = time.monotonic()
    with pytest.raises(RegexTimeoutError) as info:
        for _ in range(8):
            parser.feed("a" * 10)
        parser.feed("b")
        parser.finalize()
    assert time.monotonic() - started < 5
    assert "'code'" in str(info.value) and "close_pattern" in str(info.value)


def test_catastrophic_open_pattern_times_out(short_regex_timeout):
    template = {
        "start_anchor": "<|assistant|>",
        "fields": {"code": {"open_pattern": CATASTROPHIC, "close": "</code>"}, "content": {}},
    }
    started = time.monotonic()
    with pytest.raises(RegexTimeoutError) as info:
        parse_response("a" * 80 + "b", template, prefix="")
    assert time.monotonic() - started < 5
    assert "'code'" in str(info.value) and "open_pattern" in str(info.value)


def _catastrophic_xml_template() -> dict:
    return {
        "start_anchor": "<|assistant|>",
        "fields": {
            "args": {
                "open": "<args>",
                "close": "</args>",
                "content": "xml-inline",
                "content_args": {"tag_pattern": "(?P<key>(a|aa)+)$"},
            }
        },
    }


def test_catastrophic_xml_inline_tag_pattern_times_out(short_regex_timeout):
    started = time.monotonic()
    with pytest.raises(RegexTimeoutError) as info:
        parse_response("<args>" + "a" * 80 + "b</args>", _catastrophic_xml_template(), prefix="")
    assert time.monotonic() - started < 5
    assert "tag_pattern" in str(info.value)


def test_xml_inline_timeout_names_the_field(short_regex_timeout):
    with pytest.raises(RegexTimeoutError) as info:
        parse_response("<args>" + "a" * 80 + "b</args>", _catastrophic_xml_template(), prefix="")
    assert "'args'" in str(info.value)


def test_catastrophic_start_anchor_pattern_times_out():
    before = get_regex_timeout()
    set_regex_timeout(0.05)
    try:
        template = {"start_anchor_pattern": CATASTROPHIC, "fields": {"content": {}}}
        started = time.monotonic()
        with pytest.raises(RegexTimeoutError):
            # ~0.5 s of backtracking without a limit here: 10x the limit, far from a hang
            parse_response("hi", template, prefix="a" * 30 + "b")
        assert time.monotonic() - started < 5
    finally:
        set_regex_timeout(before)


def test_the_timeout_is_restored_and_normal_patterns_work_after_a_timeout(short_regex_timeout):
    with pytest.raises(RegexTimeoutError):
        parse_response("<code>" + "a" * 80 + "b", _catastrophic_close_template(), prefix="")
    # the same template on a benign output still parses
    assert parse_response("<code>x", _catastrophic_close_template(), prefix="") == {"code": "x"}

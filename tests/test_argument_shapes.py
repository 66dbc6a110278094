"""Argument values as real chat templates write them (issue 25): what we read where transformers 5.25 keeps text or
raises (docs/differences.md), and that everything transformers reads stays the same."""

from __future__ import annotations

import pytest
from oracle import reference_module

from response_templates import load_template, parse_response
from response_templates.core.content import parse_content, read_python_literal, unescape_attribute
from response_templates.core.errors import TemplateError
from response_templates.core.tools import convert_text

GEMMA_ARGS = {"unquoted_keys": True, "string_delims": [['<|"|>', '<|"|>']]}


@pytest.mark.parametrize(
    "raw, types, expected",
    [
        ("{'metadata': False, 'owner': None}", ("object",), {"metadata": False, "owner": None}),
        ("[1, 'two', {'k': True}]", ("array",), [1, "two", {"k": True}]),
        ('{"already": "json"}', ("object",), {"already": "json"}),
        ("  {'padded': 1}\n", ("object",), {"padded": 1}),
        # of the wrong type, or not a literal: the text stays
        ("[1, 2]", ("object",), "[1, 2]"),
        ("{'a': set()}", ("object",), "{'a': set()}"),
        ("{'a': 1} trailing", ("object",), "{'a': 1} trailing"),
        ("True", ("object",), "True"),
        # as for JSON text, a union tries each of its types (string is no conversion): the object is read
        ("{'a': 1}", ("string", "object"), {"a": 1}),
        ("{'a': 1}", ("null", "object"), {"a": 1}),
    ],
)
def test_object_and_array_parameters_read_python_literals(raw, types, expected):
    assert convert_text(raw, types) == expected


def test_python_literal_reader_is_strict():
    assert read_python_literal("{'a': [1, -2.5, \"x\\n\"], 'b': None}") == {"a": [1, -2.5, "x\n"], "b": None}
    for bad in ("{'a': 1,}", "{a: 1}", "(1, 2)", "{'a': 1} {}", "", "{'a': 01}"):
        with pytest.raises(ValueError):
            read_python_literal(bad)


def test_python_literal_reader_reads_what_repr_writes():
    # repr() escapes unprintable characters as \xNN, \uNNNN or \UNNNNNNNN, and Python integers have no size limit
    # (python-call-list, transformers' grammar, refuses both: see test_core_content)
    value = {"nbsp": "no\xa0break", "zero width": "a\u200bb", "bell": "\x07", "astral": "\U0001f600", "big": [-(10**20), 2**64]}
    assert read_python_literal(repr(value)) == value
    for bad in ("'\\x4'", "'\\U0011ffff'", "'\\ud800'", "1" * 4301):
        with pytest.raises(ValueError):
            read_python_literal(bad)


def test_json_parameters_are_typed_as_transformers_types_them():
    """Where the text is JSON, the value is transformers' (its _coerce), so only its failures differ."""
    module = reference_module("transformers.utils.chat_parsing.response_parser")
    for raw, types in [('{"a": [1, 2.5]}', ("object",)), ("[true, null]", ("array",)), ('"x"', ("array",)),
                       ("{'a': 1}", ("object",)), ("3", ("integer",)), ("yes", ("boolean",))]:
        theirs = module._coerce(raw, types)
        ours = convert_text(raw, types)
        if raw.startswith("{'"):
            assert theirs == raw and ours == {"a": 1}
        else:
            assert ours == theirs, raw


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{a:None,b:True,c:False}', {"a": None, "b": True, "c": False}),
        ('{q:<|"|>None of these are True<|"|>,n:None}', {"q": "None of these are True", "n": None}),
        ('{Basic LLM Chain:{model:<|"|>x<|"|>},HTTP Request:{}}', {"Basic LLM Chain": {"model": "x"}, "HTTP Request": {}}),
        ('{city-name:<|"|>Oslo<|"|>}', {"city-name": "Oslo"}),
        ('{a:[None, True],"b":"True"}', {"a": [None, True], "b": "True"}),
        ('{Nonesuch:1,TrueValue:2}', {"Nonesuch": 1, "TrueValue": 2}),
        # the empty key, which the chat templates write as nothing
        ('{:1,a:{:<|"|>x<|"|>},b:[{ :[]}]}', {"": 1, "a": {"": "x"}, "b": [{"": []}]}),
    ],
)
def test_unquoted_key_dialect_reads_python_constants_and_spaced_keys(text, expected):
    assert parse_content(text, "json", GEMMA_ARGS) == expected


def test_unquoted_key_dialect_agrees_with_transformers_where_it_reads():
    module = reference_module("transformers.utils.chat_parsing.content_parsers")
    for text in ('{a:1,b:<|"|>x: None<|"|>}', '{a:{b:[1,2]},c:null}', '{"a":true}'):
        assert parse_content(text, "json", GEMMA_ARGS) == module.parse_content(text, "json", GEMMA_ARGS)


def test_python_constants_need_the_unquoted_key_dialect():
    # plain JSON regions are transformers' JSON: a Python constant there is still an error, or text when allowed
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_content('{"a": None}', "json", {})
    assert parse_content('{"a": None}', "json", {"allow_non_json": True}) == '{"a": None}'
    # and a dialect text that still does not read keeps the usual fallback
    assert parse_content("{a:None,", "json", {**GEMMA_ARGS, "allow_non_json": True}) == "{a:None,"


def test_python_call_list_reads_raw_line_breaks_and_keeps_escapes():
    assert parse_content("[save(body='one\ntwo\\nthree')]", "python-call-list", {}) == [
        {"name": "save", "arguments": {"body": "one\ntwo\nthree"}}
    ]


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("a&amp;b", "a&b"),
        ("&quot;q&quot;", '"q"'),
        ("&amp;quot;", "&quot;"),  # one pass: the text '&quot;' escaped once comes back as written
        ("&lt;&gt;&apos;", "<>'"),
        ("&nbsp; &#38;", "&nbsp; &#38;"),  # not escapes a chat template writes: left alone
        ("plain", "plain"),
    ],
)
def test_unescape_attribute(raw, expected):
    assert unescape_attribute(raw) == expected


def _attribute_template(unescape):
    args = {"tag_pattern": r'<arg key="(?P<key>[^"]*)">(?P<value>.*?)</arg>'}
    if unescape is not None:
        args["unescape_attributes"] = unescape
    return {
        "start_anchor": "<s>",
        "fields": {
            "tool_calls": {
                "open_pattern": r'<call name="(?P<name>[^"]*)">',
                "close": "</call>",
                "repeats": True,
                "content": "xml-inline",
                "content_args": args,
                "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
            },
            "content": {},
        },
    }


def test_unescape_attributes_decodes_keys_and_captures_but_not_values():
    text = '<call name="a&amp;b"><arg key="x &quot;y&quot;">1 &amp; 2</arg></call>'
    call = parse_response(text, _attribute_template(True), prefix="")["tool_calls"][0]["function"]
    assert call == {"name": "a&b", "arguments": {'x "y"': "1 &amp; 2"}}
    plain = parse_response(text, _attribute_template(None), prefix="")["tool_calls"][0]["function"]
    assert plain == {"name": "a&amp;b", "arguments": {"x &quot;y&quot;": "1 &amp; 2"}}


def test_unescape_attributes_must_be_a_bool_and_transformers_still_loads_the_template():
    with pytest.raises(TemplateError, match="unescape_attributes"):
        load_template(_attribute_template("yes"))
    module = reference_module()
    text = '<call name="a&amp;b"><arg key="k">v</arg></call>'
    # transformers ignores the argument it does not know: the entities stay (docs/differences.md)
    theirs = module.parse_response(text, _attribute_template(True), prefix="")
    assert theirs["tool_calls"][0]["function"]["name"] == "a&amp;b"

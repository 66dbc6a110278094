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


# --- nested elements (MiniMax M3): our `nested_elements` content argument -------------------------------------

NS = "]<]minimax[>["


def _el(key: str, inner: str) -> str:
    return f"{NS}<{key}>{inner}{NS}</{key}>"


def _nested_template(nested=True):
    args: dict = {"tag_pattern": r"\]<\]minimax\[>\[<(?P<key>[^<>/\s][^<>]*)>(?P<value>.*?)\]<\]minimax\[>\[</(?P=key)>(?=\s*(?:\]<\]minimax\[>\[<[^/]|$))"}
    if nested is True:
        args["nested_elements"] = {"prefix": NS, "item_tag": "item"}
    elif nested is not None:
        args["nested_elements"] = nested
    return {
        "start_anchor": "<s>",
        "fields": {
            "tool_calls": {
                "open_pattern": NS.replace("]", r"\]").replace("[", r"\[") + r'<invoke name="(?P<name>[^"]+)">',
                "close": NS + "</invoke>",
                "repeats": True,
                "content": "xml-inline",
                "content_args": args,
                "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
            },
            "content": {},
        },
    }


def _arguments(body: str, template=None, tools=None) -> dict:
    text = f'{NS}<invoke name="f">{body}{NS}</invoke>'
    message = parse_response(text, template or _nested_template(), prefix="", tools=tools)
    return message["tool_calls"][0]["function"]["arguments"]


def test_nested_elements_read_objects_lists_and_keys_as_written():
    body = (
        _el("city", "Lyon")
        + _el("filters", _el("price", "120") + _el("tags", _el("item", "quiet") + _el("item", "wifi")))
        + _el("rooms", _el("item", _el("adults", "2")))
        + _el("", " padded text ")  # the empty key, and a leaf kept as written
        + _el("key with space", "")
    )
    assert _arguments(body) == {
        "city": "Lyon",
        "filters": {"price": "120", "tags": ["quiet", "wifi"]},
        "rooms": [{"adults": "2"}],
        "": " padded text ",
        "key with space": "",
    }


def test_nested_elements_treat_whitespace_between_elements_as_layout():
    body = "\n" + _el("a", "\n  " + _el("b", "1") + "\n  " + _el("b2", "x\ny") + "\n") + "\n"
    assert _arguments(body) == {"a": {"b": "1", "b2": "x\ny"}}


def test_a_key_nested_inside_itself_is_matched_to_its_own_closing_tag():
    # the shallow tag_pattern would end the outer 'a' at the inner closing tag
    body = _el("a", _el("a", "1") + _el("b", "2"))
    assert _arguments(body) == {"a": {"a": "1", "b": "2"}}


@pytest.mark.parametrize(
    "body",
    [
        _el("a", "1") + "stray text" + _el("b", "2"),  # text between elements
        f"{NS}<a>1{NS}</b>",  # a closing tag of another element
        _el("a", f"1{NS}<b>2"),  # the namespace token inside a leaf
        _el("a", _el("b", "1")) + f"{NS}<c>",  # cut
    ],
)
def test_a_body_that_is_not_well_formed_elements_is_read_as_transformers_reads_it(body):
    assert _arguments(body) == _arguments(body, _nested_template(None))


def test_nested_leaves_are_typed_by_nested_schemas():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "filters": {"type": "object", "properties": {"price": {"type": "number"}, "pets": {"type": "boolean"}},
                    "additionalProperties": {"type": "integer"}},
        "rooms": {"type": "array", "items": {"type": "object", "properties": {"adults": {"type": "integer"}}}},
        "none": {"type": "array", "items": {"type": "string"}},
        "empty": {"type": "object"},
        "wrapper": {"type": "object", "properties": {"item": {"type": "integer"}}},
        "label": {"type": "string"},
        "free": {"type": "object"},
    }}}}]
    body = (
        _el("filters", _el("price", "120.5") + _el("pets", "false") + _el("floor", "3"))
        + _el("rooms", _el("item", _el("adults", "2")) + _el("item", ""))
        + _el("none", "")
        + _el("empty", "")
        + _el("wrapper", _el("item", "7"))  # {"item": 7} is written like the list [7]
        + _el("label", "42")
        + _el("free", _el("n", "1"))
    )
    assert _arguments(body, tools=tools) == {
        "filters": {"price": 120.5, "pets": False, "floor": 3},
        "rooms": [{"adults": 2}, {}],
        "none": [],
        "empty": {},
        "wrapper": {"item": 7},
        "label": "42",  # a string parameter keeps its text
        "free": {"n": "1"},  # no schema for the leaf: text
    }


@pytest.mark.parametrize(
    "nested, message",
    [
        ({"item_tag": "item"}, "prefix is required"),
        ({"prefix": ""}, "non-empty string"),
        ({"prefix": NS, "item_tag": 3}, "non-empty string"),
        ({"prefix": NS, "list": "item"}, "unknown keys"),
        ("yes", "must be a dict"),
    ],
)
def test_nested_elements_arguments_are_checked(nested, message):
    with pytest.raises(TemplateError, match=message):
        load_template(_nested_template(nested))


def test_transformers_loads_nested_elements_and_returns_the_element_text():
    module = reference_module()
    body = _el("city", "Lyon") + _el("tags", _el("item", "a"))
    text = f'{NS}<invoke name="f">{body}{NS}</invoke>'
    theirs = module.parse_response(text, _nested_template(), prefix="")["tool_calls"][0]["function"]["arguments"]
    assert theirs == {"city": "Lyon", "tags": _el("item", "a")}


def test_nesting_deeper_than_the_limit_is_read_as_transformers_reads_it():
    def deep(levels: int) -> str:
        return f"{NS}<a>" * levels + "x" + f"{NS}</a>" * levels

    value = _arguments(deep(100))["a"]
    for _ in range(99):
        value = value["a"]
    assert value == "x"
    assert _arguments(deep(101)) == _arguments(deep(101), _nested_template(None))

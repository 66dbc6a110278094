"""Content parsers (text, int, float, bool, json, xml-inline, kv-lines, python-call-list) and transforms, seen through
the public API: a one-field template parses a region, and we look at the message or at the error raised."""

from __future__ import annotations

import re

import pytest
from oracle import reference_module

from response_templates import ResponseParser, TemplateError, TransformError, load_template, parse_response

MISSING = object()


def template_for(content: str, args: dict | None = None, **spec) -> dict:
    field = {"open": "<v>", "close": "</v>", "content": content, **spec}
    if args is not None:
        field["content_args"] = args
    return {"version": 1, "start_anchor": "<|assistant|>", "fields": {"v": field}}


def value(body: str, content: str, args: dict | None = None, **spec):
    """The value the field gets from `<v>body</v>` (MISSING when the field is dropped from the message)."""
    return parse_response(f"<v>{body}</v>", template_for(content, args, **spec), prefix="").get("v", MISSING)


def error(body: str, content: str, args: dict | None = None, **spec) -> Exception:
    with pytest.raises(Exception) as info:
        value(body, content, args, **spec)
    return info.value


# ---------------------------------------------------------------------------------------------------------------
# text, int, float, bool


def test_text_strips_by_default():
    assert value("  hello world \n", "text") == "hello world"


def test_text_strip_false_keeps_whitespace():
    assert value("  hello \n", "text", {"strip": False}) == "  hello \n"


def test_text_that_is_only_whitespace_is_dropped():
    assert value("   \n ", "text") is MISSING


def test_text_keeps_unicode_untouched():
    text = "héllo 東京 🙂 e\u0301 👩\u200d💻"
    assert value(text, "text") == text


@pytest.mark.parametrize(("body", "expected"), [(" 42 ", 42), ("-7", -7), ("0", 0), ("+3", 3), ("1_000", 1000)])
def test_int(body, expected):
    result = value(body, "int")
    assert result == expected and type(result) is int


def test_int_zero_is_kept_in_the_message():
    assert parse_response("<v>0</v>", template_for("int"), prefix="") == {"v": 0}


def test_int_rejects_non_integers():
    for body in ("3.5", "three", ""):
        assert isinstance(error(body, "int"), ValueError)


@pytest.mark.parametrize(("body", "expected"), [(" 2.5 ", 2.5), ("-1e3", -1000.0), ("7", 7.0), ("inf", float("inf"))])
def test_float(body, expected):
    result = value(body, "float")
    assert result == expected and type(result) is float


def test_float_rejects_text():
    assert isinstance(error("two", "float"), ValueError)


@pytest.mark.parametrize(
    ("body", "expected"),
    [("true", True), (" TRUE ", True), ("True", True), ("1", True), ("false", False), ("0", False), ("yes", False)],
)
def test_bool(body, expected):
    assert value(body, "bool") is expected


def test_bool_false_is_kept_in_the_message():
    assert parse_response("<v>false</v>", template_for("bool"), prefix="") == {"v": False}


def test_int_strip_false_fails_on_padding_only_when_int_does():
    # int() itself tolerates surrounding whitespace, so strip=False changes nothing there
    assert value(" 5 ", "int", {"strip": False}) == 5


# ---------------------------------------------------------------------------------------------------------------
# json


def test_json_object():
    assert value('{"name": "f", "arguments": {"x": [1, 2.5, null, true]}}', "json") == {
        "name": "f",
        "arguments": {"x": [1, 2.5, None, True]},
    }


def test_json_scalars_and_lists():
    assert value("[1, 2]", "json") == [1, 2]
    assert value('"s"', "json") == "s"
    assert value("3", "json") == 3


def test_invalid_json_raises_a_value_error_quoting_the_text():
    err = error('{"name": "f",', "json")
    assert isinstance(err, ValueError)
    assert "json" in str(err) and '{"name": "f",' in str(err)


def test_json_unquoted_keys():
    assert value('{name: "f", arguments: {city: "Paris", n_days: 3}}', "json", {"unquoted_keys": True}) == {
        "name": "f",
        "arguments": {"city": "Paris", "n_days": 3},
    }


def test_json_unquoted_keys_never_rewrite_text_inside_string_values():
    body = '{note: "a, b: c", other: "{x: 1}", esc: "say \\"k: v\\", ok", "quoted": "y, z: 2"}'
    assert value(body, "json", {"unquoted_keys": True}) == {
        "note": "a, b: c",
        "other": "{x: 1}",
        "esc": 'say "k: v", ok',
        "quoted": "y, z: 2",
    }


def test_json_without_unquoted_keys_rejects_bare_keys():
    assert isinstance(error("{name: 1}", "json"), ValueError)


def test_json_string_delims():
    body = '{"name": "run", "arguments": {"code": <|"|>print("hi")\nx = \'a\'<|"|>, "n": 1}}'
    assert value(body, "json", {"string_delims": [['<|"|>', '<|"|>']]}) == {
        "name": "run",
        "arguments": {"code": "print(\"hi\")\nx = 'a'", "n": 1},
    }


def test_json_string_delims_inside_json_strings_are_text():
    # a deliberate difference (docs/differences.md): text that is JSON as written is read so, its delimiters are text
    args = {"string_delims": [["'", "'"]], "allow_non_json": True}
    assert value('{"text": "it\'s Ann\'s", "tags": ["a\'b"]}', "json", args) == {"text": "it's Ann's", "tags": ["a'b"]}
    assert value("{'text': 'plain', \"n\": 1}", "json", args) == {"text": "plain", "n": 1}


def test_json_string_delims_of_one_marker_pair_consecutive_markers():
    """With the same marker on both sides, each string ends at the next marker; a last marker without a partner stays
    in the text (so the JSON fails, or the text is kept with allow_non_json)."""
    args = {"string_delims": [["<e>", "<e>"]], "unquoted_keys": True}
    assert value("{a: <e><e>, b: <e>x, y<e>, c: [<e><e>, <e>}<e>]}", "json", args) == {"a": "", "b": "x, y", "c": ["", "}"]}
    assert value("{a: <e>b<e><e>}", "json", {**args, "allow_non_json": True}) == "{a: <e>b<e><e>}"
    assert isinstance(error("{a: <e>b<e><e>}", "json", args), ValueError)
    assert value("{a: <e><e><e><e>}", "json", {"string_delims": [["<e><e>", "<e><e>"]], "unquoted_keys": True}) == {"a": ""}


def test_json_string_delims_with_several_pairs_and_unquoted_keys():
    body = '{a: <<one>>, b: [[two, "2"]]}'
    args = {"string_delims": [["<<", ">>"], ["[[", "]]"]], "unquoted_keys": True}
    assert value(body, "json", args) == {"a": "one", "b": 'two, "2"'}


def test_json_string_delims_reject_the_reserved_characters():
    err = error('{"a": <<x>>, "b": "\x01"}', "json", {"string_delims": [["<<", ">>"]]})
    assert isinstance(err, ValueError)
    assert "\\x01" in str(err)


def test_json_allow_non_json_returns_the_stripped_text():
    assert value("  I could not call a tool.  ", "json", {"allow_non_json": True}) == "I could not call a tool."
    assert value('{"a": 1}', "json", {"allow_non_json": True}) == {"a": 1}


def test_json_allow_non_json_with_strip_false():
    assert value("  plain ", "json", {"allow_non_json": True, "strip": False}) == "  plain "


# ---------------------------------------------------------------------------------------------------------------
# xml-inline

PARAMETER = r"<parameter=(?P<key>\w+)>\n?(?P<value>.*?)\n?</parameter>"


def test_xml_inline_reads_tags_into_a_dict_of_strings():
    body = "\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
    assert value(body, "xml-inline", {"tag_pattern": PARAMETER}) == {"city": "Paris", "days": "3"}


def test_xml_inline_without_value_group_gives_empty_strings():
    assert value("<flag=a/><flag=b/>", "xml-inline", {"tag_pattern": r"<flag=(?P<key>\w+)/>"}) == {"a": "", "b": ""}


def test_xml_inline_value_parser():
    body = '<parameter=days>3</parameter><parameter=tags>["a"]</parameter>'
    args = {"tag_pattern": PARAMETER, "value_parser": {"name": "json"}}
    assert value(body, "xml-inline", args) == {"days": 3, "tags": ["a"]}


def test_xml_inline_value_parser_errors_propagate():
    args = {"tag_pattern": PARAMETER, "value_parser": {"name": "json"}}
    assert isinstance(error("<parameter=a>not json</parameter>", "xml-inline", args), ValueError)


def test_xml_inline_value_parser_with_args():
    args = {"tag_pattern": PARAMETER, "value_parser": {"name": "json", "args": {"allow_non_json": True}}}
    assert value("<parameter=a>12</parameter><parameter=b>hello</parameter>", "xml-inline", args) == {
        "a": 12,
        "b": "hello",
    }


def test_xml_inline_value_parser_by_picks_the_parser_from_a_group():
    tag = r'<arg name="(?P<key>\w+)" type="(?P<type>\w+)">(?P<value>.*?)</arg>'
    args = {
        "tag_pattern": tag,
        "value_parser": {"name": "json"},
        "value_parser_by": {
            "group": "type",
            "parsers": {"str": {"name": "text", "args": {"strip": False}}, "int": {"name": "int"}},
        },
    }
    body = '<arg name="a" type="str"> 42 </arg><arg name="b" type="int">7</arg><arg name="c" type="list">[1]</arg>'
    # "list" has no entry: it falls back to value_parser
    assert value(body, "xml-inline", args) == {"a": " 42 ", "b": 7, "c": [1]}


def test_xml_inline_value_parser_by_without_fallback_keeps_the_raw_text():
    tag = r"<(?P<type>[a-z]+) (?P<key>\w+)>(?P<value>.*?)</(?P=type)>"
    args = {"tag_pattern": tag, "value_parser_by": {"group": "type", "parsers": {"num": {"name": "float"}}}}
    assert value("<num x>1.5</num><str y>1.5</str>", "xml-inline", args) == {"x": 1.5, "y": "1.5"}


def test_xml_inline_later_duplicates_win_by_default():
    body = "<parameter=a>1</parameter><parameter=a>2</parameter>"
    assert value(body, "xml-inline", {"tag_pattern": PARAMETER}) == {"a": "2"}


def test_xml_inline_merge_duplicates_lists_repeated_keys():
    body = "<parameter=a>1</parameter><parameter=b>x</parameter><parameter=a>2</parameter><parameter=a>3</parameter>"
    args = {"tag_pattern": PARAMETER, "merge_duplicates": True}
    assert value(body, "xml-inline", args) == {"a": ["1", "2", "3"], "b": "x"}


def test_xml_inline_merge_duplicates_with_list_values():
    body = "<parameter=a>[1]</parameter><parameter=a>[2]</parameter>"
    args = {"tag_pattern": PARAMETER, "merge_duplicates": True, "value_parser": {"name": "json"}}
    assert value(body, "xml-inline", args) == {"a": [[1], [2]]}


def test_xml_inline_with_no_tags_is_dropped_as_empty():
    assert value("nothing here", "xml-inline", {"tag_pattern": PARAMETER}) is MISSING


# ---------------------------------------------------------------------------------------------------------------
# kv-lines


def test_kv_lines_defaults():
    body = "city: Paris\nnote: a: b\n\nno separator\n  days :3  "
    assert value(body, "kv-lines") == {"city": "Paris", "note": "a: b", "days": "3"}


def test_kv_lines_custom_separators():
    assert value("a=1;b = two;;c", "kv-lines", {"line_sep": ";", "kv_sep": "="}) == {"a": "1", "b": "two"}


def test_kv_lines_multi_character_separators():
    assert value("a => 1 || b => 2", "kv-lines", {"line_sep": "||", "kv_sep": "=>"}) == {"a": "1", "b": "2"}


def test_kv_lines_strip_false():
    assert value(" a = 1 ;b= 2", "kv-lines", {"line_sep": ";", "kv_sep": "=", "strip": False}) == {
        " a ": " 1 ",
        "b": " 2",
    }


def test_kv_lines_value_parser():
    args = {"value_parser": {"name": "json"}}
    assert value('n: 3\nl: [1, 2]\ns: "x"', "kv-lines", args) == {"n": 3, "l": [1, 2], "s": "x"}


def test_kv_lines_value_parser_int():
    assert value("a: 1\nb: 2", "kv-lines", {"value_parser": {"name": "int"}}) == {"a": 1, "b": 2}


# ---------------------------------------------------------------------------------------------------------------
# python-call-list


def calls(body: str):
    return value(body, "python-call-list")


def call_error(body: str) -> ValueError:
    err = error(body, "python-call-list")
    assert isinstance(err, ValueError)
    return err


def position(err: Exception) -> int:
    found = re.search(r"position (\d+)", str(err))
    assert found, f"the error does not give a position: {err}"
    return int(found.group(1))


def test_python_call_list_keyword_calls():
    assert calls('[get_weather(city="Paris", days=3), get_time()]') == [
        {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},
        {"name": "get_time", "arguments": {}},
    ]


def test_python_call_list_whitespace_and_dotted_names():
    assert calls(" [ ns.tool-name ( a = 1 ) ,\n\tother( ) ] ") == [
        {"name": "ns.tool-name", "arguments": {"a": 1}},
        {"name": "other", "arguments": {}},
    ]


def test_python_call_list_empty_list_is_dropped():
    assert calls("[]") is MISSING


def test_python_call_list_strings_and_escapes():
    body = r"""[f(a='it\'s', b="say \"hi\"", c="tab\tnew\nline\\slash\/", d="\u00e9\u6771", e='\b\f\r')]"""
    assert calls(body) == [
        {
            "name": "f",
            "arguments": {"a": "it's", "b": 'say "hi"', "c": "tab\tnew\nline\\slash/", "d": "é東", "e": "\b\f\r"},
        }
    ]


def test_python_call_list_surrogate_pair_escapes_make_one_character():
    assert calls(r'[f(s="\ud83d\ude00", t="\uD83D\uDE00!")]') == [{"name": "f", "arguments": {"s": "😀", "t": "😀!"}}]


def test_python_call_list_raw_non_ascii_is_kept():
    assert calls('[f(s="東京 🙂 e\u0301")]') == [{"name": "f", "arguments": {"s": "東京 🙂 e\u0301"}}]


@pytest.mark.parametrize(
    "body",
    [r'[f(s="\ud83d")]', r'[f(s="\ude00")]', r'[f(s="\ud83dx")]', r'[f(s="\ud83d\ud83d")]', '[f(s="\ud83d")]'],
    ids=["lone high escape", "lone low escape", "high then text", "two highs", "raw surrogate"],
)
def test_python_call_list_rejects_lone_surrogates(body):
    err = call_error(body)
    assert "surrogate" in str(err)
    assert position(err) == 5


@pytest.mark.parametrize("body", [r'[f(s="\x4")]', r'[f(s="\u12")]', r'[f(s="\q")]', '[f(s="open)]', "[f(s='open\n)]"])
def test_python_call_list_rejects_bad_strings(body):
    assert position(call_error(body)) == 5


RAW_STRINGS = {"raw_strings": True}


@pytest.mark.parametrize("body, arguments", [
    # A deliberate difference (docs/differences.md): LFM2.5's chat template pastes string arguments between single
    # quotes unescaped, so a shell command quoting its own arguments comes out with quotes of the same kind inside.
    # With raw_strings, the string then ends at the quote the call goes on after (transformers raises)
    ("[f(command='sed -n '360,450p' /testbed/common.py')]", {"command": "sed -n '360,450p' /testbed/common.py"}),
    ("[f(a='don't', b='won't', n=2)]", {"a": "don't", "b": "won't", "n": 2}),
    ('[f(a="say "hi" now")]', {"a": 'say "hi" now'}),
    # ... and a backslash before a character that starts no Python escape stays, as Python keeps it
    (r"[f(s='latex(x, mul_symbol='\,')')]", {"s": r"latex(x, mul_symbol='\,')"}),
    (r'[f(s="\q")]', {"s": r"\q"}),
])
def test_python_call_list_reads_strings_pasted_raw(body, arguments):
    assert value(body, "python-call-list", RAW_STRINGS) == [{"name": "f", "arguments": arguments}]
    # without raw_strings such a list is refused, as transformers refuses it
    assert isinstance(error(body, "python-call-list"), ValueError)


def test_python_call_list_strings_pasted_raw_end_where_the_call_goes_on():
    # the next call of the list is read too; a list no reading accepts raises the strict reading's error
    assert value("[f(a='it's'), g(b='x')]", "python-call-list", RAW_STRINGS) == [
        {"name": "f", "arguments": {"a": "it's"}}, {"name": "g", "arguments": {"b": "x"}}]
    assert position(error("[f(a='it's' b=1)]", "python-call-list", RAW_STRINGS)) == 9  # (after 'it)
    # a list the strict reading accepts is read strictly: escapes are escapes
    assert value(r"[f(a='it\'s', b='x\ny')]", "python-call-list", RAW_STRINGS) == [
        {"name": "f", "arguments": {"a": "it's", "b": "x\ny"}}]


@pytest.mark.parametrize("quote", ["'", '"'])
def test_python_call_list_reads_raw_line_breaks_inside_strings(quote):
    # A deliberate difference (docs/differences.md): LFM2.5's chat template pastes string arguments between quotes
    # unescaped, so a line break, a tab or a carriage return is written raw; transformers rejects the call.
    body = f"[save(text={quote}line one\nline two\r\n\tend{quote}, n=1)]"
    assert calls(body) == [{"name": "save", "arguments": {"text": "line one\nline two\r\n\tend", "n": 1}}]


def test_python_call_list_reads_values_as_python_writes_them():
    # A deliberate difference (docs/differences.md): chat templates that write values with str() (LFM2.5, Llama 4's
    # pythonic template) write repr()'s \xNN and \UNNNNNNNN escapes and integers of any size; transformers refuses
    # the whole call list.
    beyond = 2**53
    body = rf"[f(a={beyond}, b=-{beyond * 1000}, c=0, d=-0, s='no\xa0break', t='\U0001f600', n={{'id': {beyond}}})]"
    assert calls(body) == [
        {"name": "f", "arguments": {"a": beyond, "b": -beyond * 1000, "c": 0, "d": 0, "s": "no\xa0break", "t": "😀",
                                    "n": {"id": beyond}}}
    ]  # fmt: skip
    assert calls("[f(a=" + "9" * 4300 + ")]") == [{"name": "f", "arguments": {"a": int("9" * 4300)}}]


@pytest.mark.parametrize("body", ["[f(a=" + "9" * 4301 + ")]", r"[f(s='\x4g')]", r"[f(s='\U00110000')]", r"[f(s='\ud800')]"])
def test_python_call_list_still_refuses_what_python_would_not_read(body):
    # Python's int() refuses more than 4,300 digits; \U escapes stop at U+10FFFF; lone surrogates are never text.
    assert position(call_error(body)) == 5


def test_python_call_list_floats():
    result = calls("[f(a=1.5, b=-2e3, c=1E-2, d=0.0, e=1e2)]")
    assert result == [{"name": "f", "arguments": {"a": 1.5, "b": -2000.0, "c": 0.01, "d": 0.0, "e": 100.0}}]
    assert all(type(v) is float for v in result[0]["arguments"].values())


def test_python_call_list_float_overflow_is_rejected():
    err = call_error("[f(a=1, b=1e400)]")
    assert "too large" in str(err)
    assert position(err) == 10


@pytest.mark.parametrize("body", ["[f(a=.5)]", "[f(a=+1)]", "[f(a=inf)]", "[f(a=NaN)]", "[f(a=x)]", "[f(a=Truex)]"])
def test_python_call_list_rejects_what_is_not_a_literal(body):
    err = call_error(body)
    assert position(err) == 5
    assert "expected a string, number" in str(err)


def test_python_call_list_keywords():
    assert calls("[f(a=True, b=False, c=None, d=true, e=false, g=null)]") == [
        {"name": "f", "arguments": {"a": True, "b": False, "c": None, "d": True, "e": False, "g": None}}
    ]


def test_python_call_list_nested_lists_and_dicts():
    assert calls('[f(a=[1, [2, {"k": [3, {"z": None}]}]], b={}, c=[], d={"x": "y", \'q\': [True]})]') == [
        {
            "name": "f",
            "arguments": {"a": [1, [2, {"k": [3, {"z": None}]}]], "b": {}, "c": [], "d": {"x": "y", "q": [True]}},
        }
    ]


def test_python_call_list_nesting_limit():
    ok = calls("[f(a=" + "[" * 100 + "]" * 100 + ")]")
    depth, inner = 0, ok[0]["arguments"]["a"]
    while inner:
        depth, inner = depth + 1, inner[0]
    assert depth == 99  # 100 lists: the outermost holds 99 more
    err = call_error("[f(a=" + "[" * 101 + "]" * 101 + ")]")
    assert "nested more than 100" in str(err)
    assert position(err) == 105
    dicts = '{"k": ' * 101 + "1" + "}" * 101
    err = call_error(f"[f(a={dicts})]")
    assert "nested more than 100" in str(err)


def test_python_call_list_rejects_repeated_names():
    err = call_error("[f(a=1, a=2)]")
    assert "repeated name 'a'" in str(err) and position(err) == 12
    err = call_error('[f(a={"k": 1, "k": 2})]')
    assert "repeated name 'k'" in str(err)


def test_python_call_list_rejects_positional_arguments():
    for body, at in (("[f(1)]", 3), ('[f("x")]', 3), ("[f(a)]", 4), ("[f(a=1, 2)]", 8)):
        err = call_error(body)
        assert "positional" in str(err)
        assert position(err) == at, body


@pytest.mark.parametrize(
    ("body", "at"),
    [
        ("f(a=1)", 0),  # not a list
        ("[f(a=1)] trailing", 9),
        ("[f(a=1),]", 8),  # trailing comma after a call
        ("[f(a=1,)]", 7),  # trailing comma after an argument
        ("[f(a=01)]", 6),
        ("[f(a=1)", 7),
        ("[(a=1)]", 1),
        ("[f(a={1: 2})]", 6),  # dict keys must be strings
    ],
)
def test_python_call_list_syntax_errors_give_the_position(body, at):
    err = call_error(body)
    assert position(err) == at
    assert "python-call-list" in str(err)
    assert repr(body) in str(err)  # the error quotes the content


# ---------------------------------------------------------------------------------------------------------------
# python-call-list with json_calls: the list may hold JSON call objects (our extension, docs/differences.md)

JSON_CALLS = {"json_calls": True}


def json_calls(body: str):
    return value(body, "python-call-list", JSON_CALLS)


def json_call_error(body: str) -> ValueError:
    err = error(body, "python-call-list", JSON_CALLS)
    assert isinstance(err, ValueError) and "python-call-list" in str(err)
    return err


def test_python_call_list_json_calls_read_a_json_list_as_the_python_form_reads_its_calls():
    # LFM2 writes this when its system prompt asks for JSON function calls
    as_json = (
        '[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "hourly": false, "tags": ["a", null]}},\n'
        ' {"name": "get_time", "arguments": {}}]'
    )
    as_python = "[get_weather(city='Paris', days=3, hourly=False, tags=['a', None]), get_time()]"
    assert json_calls(as_json) == calls(as_python) == [
        {"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "hourly": False, "tags": ["a", None]}},
        {"name": "get_time", "arguments": {}},
    ]
    # the Python form still reads with the argument set, and an empty list is still dropped
    assert json_calls(as_python) == calls(as_python)
    assert json_calls(" [ ] ") is MISSING


def test_python_call_list_json_calls_accept_what_peers_accept_around_the_arguments():
    body = (
        '[{"name": "a", "parameters": {"x": 1}}, {"name": "b", "arguments": "{\\"y\\": [2]}"}, {"name": "c"}, '
        '{"id": "call_1", "type": "function", "name": "d", "arguments": {}}]'
    )
    assert json_calls(body) == [
        {"name": "a", "arguments": {"x": 1}},  # "parameters" for "arguments" (SGLang, vLLM)
        {"name": "b", "arguments": {"y": [2]}},  # a string holding a JSON object (OpenAI's wire form)
        {"name": "c", "arguments": {}},  # no arguments
        {"name": "d", "arguments": {}},  # other members are ignored
    ]


def test_python_call_list_without_json_calls_a_json_list_is_refused_as_transformers_refuses_it():
    body = '[{"name": "f", "arguments": {}}]'
    assert position(call_error(body)) == 1
    reference = reference_module("transformers.utils.chat_parsing.content_parsers")
    with pytest.raises(ValueError, match="position 1"):
        reference.parse_content(body, "python-call-list", JSON_CALLS)  # transformers ignores the argument


@pytest.mark.parametrize(
    ("body", "at", "says"),
    [
        ('[{"name": "f", "arguments": {}}, g(a=1)]', 33, "not both"),
        ('[f(a=1), {"name": "g", "arguments": {}}]', 9, "not both"),
        ('[{"name": "f", "arguments": {"city": Paris}}]', 37, "expected a string"),
        ('[{"name": "f", "arguments": {"city": "Paris"}]', 45, "expected ','"),
        ('[{"name": "f", "arguments": {}},]', 32, "expected '{'"),
        ('[{"name": "f", "arguments": {}}] trailing', 33, "after the closing"),
        ('[{"arguments": {"a": 1}}]', 1, "needs a 'name'"),
        ('[{"name": "", "arguments": {}}]', 1, "needs a 'name'"),
        ('[{"name": 3, "arguments": {}}]', 1, "needs a 'name'"),
        ('[{"name": "f", "arguments": {}, "parameters": {}}]', 1, "both 'arguments' and 'parameters'"),
        ('[{"name": "f", "arguments": [1]}]', 1, "must be an object, got list"),
        ('[{"name": "f", "arguments": null}]', 1, "must be an object, got NoneType"),
        ('[{"name": "f", "arguments": "city=Paris"}]', 1, "string that is not JSON"),
        ('[{"name": "f", "arguments": "[1]"}]', 1, "must be an object, got list"),
        ('[{"name": "f", "name": "g"}]', 27, "repeated name 'name'"),  # (after the object, as for f(a=1, a=2))
    ],
)
def test_python_call_list_json_calls_refusals_give_the_position(body, at, says):
    err = json_call_error(body)
    assert position(err) == at and says in str(err), str(err)


MALFORMED_LISTS = {
    "python": "[get_weather(city=Paris)]",
    "json": '[{"name": "get_weather", "arguments": {"city": Paris}}]',
    "mixed": '[{"name": "get_time", "arguments": {}}, get_weather(city="Paris")]',
}


@pytest.mark.parametrize("kind", sorted(MALFORMED_LISTS))
@pytest.mark.parametrize("policy", ["content", "drop"])
def test_python_call_list_broken_json_list_meets_the_damaged_output_policy_as_a_broken_python_list_does(kind, policy):
    # Under malformed="content" the region's raw text joins the content; under "drop" it goes; one-shot and
    # streaming agree, and the region ends with a region_discard, never a region_close.
    template = {
        "version": 1,
        "start_anchor": "<|assistant|>",
        "fields": {
            "tool_calls": {"open": "<calls>", "close": "</calls>", "content": "python-call-list",
                           "content_args": JSON_CALLS, "transform_each": True,
                           "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}}},
            "content": {"close_pattern": r"\Z", "repeats": True, "join": "", "content_args": {"strip": False}},
        },
    }  # fmt: skip
    region = f"<calls>{MALFORMED_LISTS[kind]}</calls>"
    output = f"Checking.{region} Done."
    expected = {"content": f"Checking.{region} Done."} if policy == "content" else {"content": "Checking. Done."}
    assert parse_response(output, template, prefix="", malformed=policy) == expected
    with pytest.raises(ValueError, match="python-call-list"):
        parse_response(output, template, prefix="")
    parser = ResponseParser(template, prefix="", malformed=policy)
    events = [event for char in output for event in parser.feed(char)]
    message, final_events = parser.finalize()
    events += final_events
    assert message == expected
    discards = [event for event in events if event["type"] == "region_discard"]
    assert [(d["field"], d["reason"], d["raw"]) for d in discards] == [("tool_calls", "malformed", region)]
    assert not any(event["type"] == "region_close" and event["field"] == "tool_calls" for event in events)


# ---------------------------------------------------------------------------------------------------------------
# python-call-list agrees with transformers' own reader (when this transformers has it)

CALL_LIST_CORPUS = [
    '[get_weather(city="Paris", days=3), f()]',
    r'[f(s="\ud83d\ude00")]',
    r'[f(s="\ud83d")]',
    "[f(a=9007199254740991, b=-9007199254740991)]",
    "[f(a=1.5, b=-2e3, c=1E-2, d=1e400)]",
    "[f(a=1, a=2)]",
    '[f(a={"k": 1, "k": 2})]',
    "[f(1)]",
    "[f(a=1,)]",
    "[f(a=1)] extra",
    "[f(a=01)]",
    "[f(a=" + "[" * 101 + "]" * 101 + ")]",
    "[ f ( a = 1 ) , g ( ) ]",
    "[f(a=-0, b=-0.0, c=0e0)]",
    "[f(a=.5)]",
    "[f(a=1.)]",
    "[f(a=True_)]",
    "[f(a=True, b=None, c=null, d=false)]",
]


@pytest.mark.parametrize("body", CALL_LIST_CORPUS)
def test_python_call_list_matches_transformers(body):
    reference = reference_module("transformers.utils.chat_parsing.content_parsers")

    def outcome(parse):
        try:
            return "ok", parse(body)
        except ValueError as err:
            return "error", position(err)

    ours = outcome(lambda text: value(text, "python-call-list"))
    theirs = outcome(lambda text: reference.parse_content(text, "python-call-list", {}) or MISSING)
    assert ours == theirs


# ---------------------------------------------------------------------------------------------------------------
# Transforms


def test_transform_whole_string_placeholders_keep_the_value_type():
    result = value(
        '{"n": 3, "l": [1]}', "json", transform={"count": "{content.n}", "all": "{content}", "kind": "fixed"}
    )
    assert result == {"count": 3, "all": {"n": 3, "l": [1]}, "kind": "fixed"}


def test_transform_non_string_literals_and_lists():
    result = value("hi", "text", transform=["{content}", 1, None, True, {"deep": ["{content}"]}])
    assert result == ["hi", 1, None, True, {"deep": ["hi"]}]


def test_transform_dotted_paths():
    body = '{"function": {"name": "f", "arguments": {"city": {"name": "Paris"}}}}'
    result = value(
        body, "json", transform={"name": "{content.function.name}", "city": "{content.function.arguments.city.name}"}
    )
    assert result == {"name": "f", "city": "Paris"}


def test_transform_keys_are_not_placeholders():
    assert value("x", "text", transform={"{content}": "{content}"}) == {"{content}": "x"}


def test_transform_braces_that_are_not_placeholders_stay_literal():
    result = value("x", "text", transform={"a": "{not a placeholder}", "b": "{}", "c": "{1-2}"})
    assert result == {"a": "{not a placeholder}", "b": "{}", "c": "{1-2}"}


def test_transform_captures_from_open_and_close_patterns():
    template = {
        "start_anchor": "A",
        "fields": {
            "tool_calls": {
                "open_pattern": r"<call name=(?P<name>\w+) id=(?P<id>\d+)>",
                "close_pattern": r"</call(?: id=(?P<id>\d+))?>",
                "content": "json",
                "repeats": True,
                "transform": {"id": "{id}", "function": {"name": "{name}", "arguments": "{content}"}},
            }
        },
    }
    text = '<call name=f id=1>{"a": 1}</call><call name=g id=2>{}</call id=9>'
    # the close pattern's captures win over the open pattern's
    assert parse_response(text, template, prefix="") == {
        "tool_calls": [
            {"id": "1", "function": {"name": "f", "arguments": {"a": 1}}},
            {"id": "9", "function": {"name": "g", "arguments": {}}},
        ]
    }


def test_transform_unknown_root_raises_key_error_naming_it():
    with pytest.raises(KeyError) as info:
        value("x", "text", transform={"name": "{nme}"})
    assert "nme" in str(info.value)
    assert isinstance(info.value, TransformError) and isinstance(info.value, ValueError)


def test_transform_path_into_a_non_dict_raises_value_error():
    with pytest.raises(ValueError) as info:
        value("hello", "text", transform={"name": "{content.name}"})
    assert not isinstance(info.value, KeyError)
    assert "content.name" in str(info.value)


def test_transform_missing_key_raises_value_error_naming_it():
    with pytest.raises(ValueError) as info:
        value('{"name": "f"}', "json", transform={"args": "{content.arguments}"})
    assert not isinstance(info.value, KeyError)
    assert "arguments" in str(info.value) and "name" in str(info.value)


def test_transform_each_applies_to_every_item():
    body = '[{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]'
    result = value(
        body,
        "json",
        transform={"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}},
        transform_each=True,
    )
    assert result == [
        {"type": "function", "function": {"name": "f", "arguments": {"a": 1}}},
        {"type": "function", "function": {"name": "g", "arguments": {}}},
    ]


def test_transform_each_over_a_python_call_list():
    result = value(
        '[f(a=1), g(b="x")]',
        "python-call-list",
        transform={"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}},
        transform_each=True,
    )
    assert result == [
        {"type": "function", "function": {"name": "f", "arguments": {"a": 1}}},
        {"type": "function", "function": {"name": "g", "arguments": {"b": "x"}}},
    ]


def test_transform_each_sees_the_captures_too():
    template = {
        "start_anchor": "A",
        "fields": {
            "v": {
                "open_pattern": r"<v (?P<source>\w+)>",
                "close": "</v>",
                "content": "json",
                "transform": {"from": "{source}", "n": "{n}"},
                "transform_each": True,
            }
        },
    }
    assert parse_response('<v web>[{"n": 1}, {"n": 2}]</v>', template, prefix="") == {
        "v": [{"from": "web", "n": 1}, {"from": "web", "n": 2}]
    }


def test_transform_each_needs_a_list_of_dicts():
    with pytest.raises(ValueError, match="list"):
        value('{"a": 1}', "json", transform={"a": "{a}"}, transform_each=True)
    with pytest.raises(ValueError, match="dict"):
        value("[1, 2]", "json", transform={"a": "{a}"}, transform_each=True)


def test_transform_each_unknown_item_key_raises_key_error():
    with pytest.raises(KeyError, match="name"):
        value('[{"a": 1}]', "json", transform={"n": "{name}"}, transform_each=True)



# --- xml-inline json_body (our extension): a call body written as one JSON object instead of tags

PARAM_TAGS = r'<p name="(?P<key>[^"]+)">(?P<value>.*?)</p>'


def json_body_value(body: str, wrap: dict | None) -> object:
    args = {"tag_pattern": PARAM_TAGS, **({"json_body": wrap} if wrap is not None else {})}
    return parse_response("<|assistant|><v>" + body + "</v>", template_for("xml-inline", args), prefix="").get("v", {})  # ({} is left out)


@pytest.mark.parametrize(
    ("body", "wrap", "expected"),
    [
        ('\n{"city": "Paris", "days": 2}\n', {}, {"city": "Paris", "days": 2}),
        ('  <json>{"a": [1, {"b": null}]}</json> ', {"open": "<json>", "close": "</json>"}, {"a": [1, {"b": None}]}),
        ("\n  \n", {}, {}),
        ('<p name="city">Paris</p>{"ignored": 1}', {}, {"city": "Paris"}),  # tags found: the JSON text is not read
    ],
)
def test_json_body_reads_a_body_without_tags(body, wrap, expected):
    assert json_body_value(body, wrap) == expected


@pytest.mark.parametrize(
    ("body", "wrap"),
    [
        ('{"city": "Paris"', {}),  # cut short
        ('{"city": "Paris"} and more', {}),  # text after the object
        ('<json>{"city": "Paris"}', {"open": "<json>", "close": "</json>"}),  # its closing literal is missing
        ('<json> {"city": 1}}</json>', {"open": "<json>", "close": "</json>"}),
    ],
)
def test_json_body_refuses_a_body_that_starts_like_json_but_is_not_one_object(body, wrap):
    with pytest.raises(ValueError, match="no tag and is not one JSON object"):
        json_body_value(body, wrap)
    # without the extension such a body reads as no arguments, as transformers reads it
    assert json_body_value(body, None) == {}


@pytest.mark.parametrize(("body", "wrap"), [
    ("Paris", {}),  # no JSON
    ("[1, 2]", {}),  # not an object
    ('<p name="city">Par', {}),  # a tag cut short (the output was truncated)
    ('{"city": "Paris"}', {"open": "<json>", "close": "</json>"}),  # without the literal that opens it
])
def test_json_body_leaves_other_bodies_without_tags_as_no_arguments(body, wrap):
    assert json_body_value(body, wrap) == {}


@pytest.mark.parametrize(("wrap", "problem"), [({"open": 1}, r"json_body\.open must be a string"),
                                                ({"start": "<j>"}, r"json_body has unknown keys \['start'\]")])
def test_json_body_is_checked_when_the_template_loads(wrap, problem):
    with pytest.raises(TemplateError, match=problem):
        load_template(template_for("xml-inline", {"tag_pattern": PARAM_TAGS, "json_body": wrap}))


def test_damaged_json_body_follows_the_malformed_policy():
    text = '<｜DSML｜function_calls>\n<｜DSML｜invoke name="f">\n{"a": 1,\n</｜DSML｜invoke>\n</｜DSML｜function_calls>'
    with pytest.raises(ValueError, match="not one JSON object"):
        parse_response(text, "deepseek_v3.2", prefix="")
    kept = parse_response(text, "deepseek_v3.2", prefix="", malformed="content")
    assert "tool_calls" not in kept and '{"a": 1,' in kept["content"]

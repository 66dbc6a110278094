"""Issue 31, items 6 to 8: compiled templates are never mixed up, they (and parsers mid-stream) pickle, and a
template that loads does not fail later because of its `defaults`."""

from __future__ import annotations

import copy
import functools
import multiprocessing
import pickle

import pytest

import response_templates as rt
from response_templates import TemplateError, load_template, parse_response


def _template(default):
    return {"start_anchor": "<s>", "defaults": {"n": default}, "fields": {"content": {}}}


def _built(default):
    template = {}  # the outer dict made first: it takes the address freed last
    template["start_anchor"] = "<s>"
    template["defaults"] = {"n": default}
    template["fields"] = {"content": {}}
    return template


def test_a_new_dict_at_a_freed_dicts_address_gets_its_own_template():
    # the cache is keyed by id(): a dict compiled then freed, and a new one, equal under ==, made at its address
    # (before the fix, 240 of these 300 got the freed dict's template)
    wrong = 0
    for _ in range(300):
        first = _built(1)
        assert parse_response("hi", first, prefix="")["n"] == 1
        del first
        second = _built(True)
        if parse_response("hi", second, prefix="")["n"] is not True:
            wrong += 1
    assert wrong == 0


def test_a_dict_changed_in_place_is_compiled_again():
    template = _template("a")
    assert parse_response("hi", template, prefix="")["n"] == "a"
    template["defaults"]["n"] = "b"
    assert parse_response("hi", template, prefix="")["n"] == "b"


# -- defaults are checked against their fields at load (item 8) ----------------------------------------------


REPEATING = {"open": "<c>", "close": "</c>", "repeats": True}
JOINED = {"open": "<c>", "close": "</c>", "repeats": True, "join": "\n"}


@pytest.mark.parametrize(
    ("field", "default", "message"),
    [
        (REPEATING, "x", r"defaults\['calls'\] must be a list: field 'calls' repeats"),
        (REPEATING, {"a": 1}, r"defaults\['calls'\] must be a list"),
        (REPEATING, None, r"defaults\['calls'\] must be a list"),
        (JOINED, {"a": 1}, r"defaults\['calls'\] must be a string or null: field 'calls' joins"),
        (JOINED, ["a"], r"defaults\['calls'\] must be a string or null"),
        (JOINED, 3, r"defaults\['calls'\] must be a string or null"),
    ],
)
def test_a_default_of_the_wrong_type_for_its_field_is_refused_at_load(field, default, message):
    template = {"start_anchor": "<s>", "defaults": {"calls": default}, "fields": {"content": {}, "calls": field}}
    with pytest.raises(TemplateError, match=message):
        load_template(template)


@pytest.mark.parametrize(("field", "default"), [(REPEATING, []), (REPEATING, ["x"]), (JOINED, "x"), (JOINED, None)])
def test_a_default_of_the_right_type_parses(field, default):
    template = {"start_anchor": "<s>", "defaults": {"calls": default}, "fields": {"content": {}, "calls": field}}
    message = parse_response("hi<c>a</c><c>b</c>", template, prefix="")
    expected = (default or []) + ["a", "b"] if field is REPEATING else ("a\nb" if default is None else "x\na\nb")
    assert message["calls"] == expected


@pytest.mark.parametrize("template", ["nonexistent", "{}", "", [], 5, None])
def test_every_bad_template_raises_template_error(template):
    with pytest.raises(TemplateError):
        load_template(template)
    with pytest.raises(TemplateError):
        parse_response("hi", template, prefix="")


def test_a_tokenizer_holding_a_str_template_raises_template_error():
    from response_templates.integrations.transformers_patch import _resolve_template

    class Tokenizer:
        response_template = "qwen3"

    with pytest.raises(TemplateError, match="must be a dict, got str"):
        _resolve_template(Tokenizer(), None)
    assert issubclass(TemplateError, ValueError)


# -- pickling (item 7) ------------------------------------------------------------------------------------------

PICKLED_CASES = [
    ("qwen3", "<think>\nplan it</think>\n\nSure. <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}\n</tool_call>"),
    (
        "qwen3-coder",
        "Let me look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
        "</tool_call>",
    ),
    ("gpt-oss", "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>Done."),
    ("kimi-k2", "ok<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
     "{\"x\": 1}<|tool_call_end|><|tool_calls_section_end|>"),
]


def test_a_compiled_template_pickles_as_its_source():
    compiled = load_template("qwen3")
    data = pickle.dumps(compiled)
    assert b"build_dict" not in data
    assert pickle.loads(data) is compiled  # an equal template already compiled in the process is reused
    assert pickle.loads(data).to_dict() == rt.get_template("qwen3")
    assert copy.deepcopy(compiled) is compiled


@pytest.mark.parametrize(("name", "text"), PICKLED_CASES)
@pytest.mark.parametrize("size", [1, 4, 13])
def test_a_parser_pickled_mid_stream_goes_on_as_if_it_had_not_been(name, text, size):
    whole = rt.ResponseParser(name, prefix="")
    events = list(whole.initial_events)
    travelled = rt.ResponseParser(name, prefix="")
    travelled_events = list(travelled.initial_events)
    for start in range(0, len(text), size):
        events += whole.feed(text[start:start + size])
        travelled = pickle.loads(pickle.dumps(travelled))
        travelled_events += travelled.feed(text[start:start + size])
    travelled = pickle.loads(pickle.dumps(travelled))
    message, last = whole.finalize()
    travelled_message, travelled_last = travelled.finalize()
    assert travelled_message == message == parse_response(text, name, prefix="")
    assert travelled_events + travelled_last == events + last


@pytest.mark.parametrize(("name", "text"), PICKLED_CASES)
def test_an_openai_adapter_pickled_mid_stream_sends_the_same_chunks(name, text):
    from response_templates.integrations.openai_adapter import OpenAIStreamAdapter

    def adapter():
        return OpenAIStreamAdapter(name, prefix="", completion_id="chatcmpl-1", created=1,
                                   id_factory=functools.partial(str.format, "call_{}"))

    whole, travelled = adapter(), adapter()
    chunks, travelled_chunks = [], []
    for start in range(0, len(text), 5):
        chunks += whole.feed(text[start:start + 5])
        travelled = pickle.loads(pickle.dumps(travelled))
        travelled_chunks += travelled.feed(text[start:start + 5])
    chunks += whole.finish()
    travelled_chunks += pickle.loads(pickle.dumps(travelled)).finish()
    assert travelled_chunks == chunks


def test_an_adapter_that_cannot_pickle_says_why():
    from response_templates.integrations.openai_adapter import OpenAIStreamAdapter

    adapter = OpenAIStreamAdapter("qwen3", prefix="", id_factory=lambda index: f"call_{index}")
    with pytest.raises(TypeError, match="id_factory .* cannot .*module level"):
        pickle.dumps(adapter)


def test_a_parser_decoding_token_ids_pickles_with_its_tokenizer(tmp_path):
    tokenizer_factory = pytest.importorskip("tokenizer_factory")
    tokenizer = tokenizer_factory.make_tokenizer(tmp_path)
    text = "<think>\nhm\n</think>\n\nHello <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"
    ids = tokenizer.encode(text, add_special_tokens=False)
    whole = rt.ResponseParser("qwen3", prefix="", tokenizer=tokenizer)
    travelled = rt.ResponseParser("qwen3", prefix="", tokenizer=tokenizer)
    for start in range(0, len(ids), 3):
        whole.feed(ids[start:start + 3])
        travelled = pickle.loads(pickle.dumps(travelled))
        travelled.feed(ids[start:start + 3])
    assert travelled.finalize()[0] == whole.finalize()[0]


def test_templates_parsers_and_adapters_cross_a_spawn_pool():
    from response_templates.integrations.openai_adapter import OpenAIStreamAdapter

    name, text = PICKLED_CASES[1]
    compiled = load_template(name)
    parser = rt.ResponseParser(compiled, prefix="")
    parser.feed(text[:40])
    adapter = OpenAIStreamAdapter(name, prefix="", completion_id="chatcmpl-1", created=1,
                                  id_factory=functools.partial(str.format, "call_{}"))
    adapter.feed(text[:40])
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        parsed = pool.starmap(functools.partial(parse_response, prefix=""), [(text, compiled)])
        (finished,) = pool.starmap(_feed_and_finalize, [(parser, text[40:])])
        (chunks,) = pool.starmap(_feed_and_finish, [(adapter, text[40:])])
    assert parsed == [parse_response(text, compiled, prefix="")]
    assert finished == parsed[0]
    assert chunks == adapter.feed(text[40:]) + adapter.finish()


def _feed_and_finalize(parser, text):  # (run in the spawned worker, which imports this module)
    parser.feed(text)
    return parser.finalize()[0]


def _feed_and_finish(adapter, text):
    return adapter.feed(text) + adapter.finish()

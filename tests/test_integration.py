"""transformers integration: tokenizers get parse_response / get_response_parser / response_template on every release.

Runs on every transformers release CI tests (4.46 on). Tokenizers are real, trained offline by tokenizer_factory.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import sys
import types
import warnings
from pathlib import Path

import pytest

import response_templates
from response_templates.integrations import transformers_patch as integration

transformers = pytest.importorskip("transformers")
np = pytest.importorskip("numpy")

from tokenizer_factory import RESPONSE_TEMPLATE, WEATHER_TOOLS, build_tokenizer_dir, load_tokenizer  # noqa: E402
from transformers.tokenization_utils_base import PreTrainedTokenizerBase  # noqa: E402

PROMPT = "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
OUTPUT = (
    "<think>\nThe user wants the weather.\n</think>\n\nLet me check."
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call><|im_end|>'
)
EXPECTED = {
    "role": "assistant",
    "reasoning_content": "The user wants the weather.",
    "content": "Let me check.",
    "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}],
}
OUTPUT_2 = "<think>\nEasy.\n</think>\n\nHello there!<|im_end|>"
EXPECTED_2 = {"role": "assistant", "reasoning_content": "Easy.", "content": "Hello there!"}
TOOLS = WEATHER_TOOLS


def _version() -> tuple[int, int]:
    major, minor = transformers.__version__.split(".")[:2]
    return int(major), int(minor)


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return build_tokenizer_dir(tmp_path_factory.mktemp("tok") / "with_template", response_template=RESPONSE_TEMPLATE)


@pytest.fixture(scope="module")
def plain_dir(tmp_path_factory):
    return build_tokenizer_dir(tmp_path_factory.mktemp("tok") / "without_template")


@pytest.fixture
def tok(tok_dir):
    return load_tokenizer(tok_dir)


@pytest.fixture
def plain_tok(plain_dir):
    return load_tokenizer(plain_dir)


@pytest.fixture
def no_library(monkeypatch):
    """Make the library fallback find nothing, whatever templates are shipped."""
    fake = types.ModuleType("response_templates.library")
    fake.template_for = lambda model_id_or_tokenizer: None
    monkeypatch.setitem(sys.modules, "response_templates.library", fake)
    return fake


@pytest.fixture
def library_with(monkeypatch):
    """A stand-in library whose template_for returns our test template and records what it was asked."""
    fake = types.ModuleType("response_templates.library")
    fake.asked = []

    def template_for(model_id_or_tokenizer):
        fake.asked.append(model_id_or_tokenizer)
        return RESPONSE_TEMPLATE

    fake.template_for = template_for
    monkeypatch.setitem(sys.modules, "response_templates.library", fake)
    return fake


def ids_of(tok, text):
    return tok.encode(text, add_special_tokens=False)


# --- the package under test -----------------------------------------------------------------------------------


def test_installed_package_is_under_test():
    """In CI the wheel is installed and must be what the tests import (not the source tree)."""
    if os.environ.get("RESPONSE_TEMPLATES_TEST_INSTALLED") != "1":
        pytest.skip("RESPONSE_TEMPLATES_TEST_INSTALLED is not set (running against the source tree)")
    repo = Path(__file__).resolve().parent.parent
    package = Path(response_templates.__file__).resolve()
    assert repo not in package.parents, f"tests imported the source tree ({package}), not the installed wheel"


# --- attributes, loading and saving -----------------------------------------------------------------------------


def test_from_pretrained_gives_methods_and_template(tok):
    assert type(tok).parse_response is integration.parse_response
    assert type(tok).get_response_parser is integration.get_response_parser
    assert tok.response_template == RESPONSE_TEMPLATE
    assert "response_template" not in tok.init_kwargs  # never a stale copy to save later


def test_tokenizer_without_template_has_none(plain_tok):
    assert plain_tok.response_template is None


def test_save_load_round_trip(tok, tmp_path):
    tok.save_pretrained(tmp_path / "saved")
    config = json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["response_template"] == RESPONSE_TEMPLATE
    again = load_tokenizer(tmp_path / "saved")
    assert again.response_template == RESPONSE_TEMPLATE
    assert again.parse_response(OUTPUT, prefix=PROMPT) == EXPECTED


def test_set_on_loaded_tokenizer_then_save(plain_tok, tmp_path):
    plain_tok.response_template = copy.deepcopy(RESPONSE_TEMPLATE)
    plain_tok.save_pretrained(tmp_path / "saved")
    assert load_tokenizer(tmp_path / "saved").response_template == RESPONSE_TEMPLATE


def test_none_removes_template_from_saved_config(tok, tmp_path):
    tok.response_template = None
    tok.save_pretrained(tmp_path / "saved")
    config = json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert "response_template" not in config
    assert load_tokenizer(tmp_path / "saved").response_template is None


def test_changed_template_is_saved_not_the_loaded_one(tok, tmp_path):
    changed = copy.deepcopy(RESPONSE_TEMPLATE)
    changed["defaults"] = {"role": "assistant", "tag": "changed"}
    tok.response_template = changed
    tok.save_pretrained(tmp_path / "saved")
    assert load_tokenizer(tmp_path / "saved").response_template == changed


def test_compiled_template_is_saved_as_its_dict(plain_tok, tmp_path):
    plain_tok.response_template = response_templates.load_template(RESPONSE_TEMPLATE)
    plain_tok.save_pretrained(tmp_path / "saved")
    assert load_tokenizer(tmp_path / "saved").response_template == RESPONSE_TEMPLATE
    assert plain_tok.parse_response(OUTPUT, prefix=PROMPT) == EXPECTED


def test_no_warning_about_response_template(tok_dir, tmp_path):
    records = []
    handler = logging.Handler(level=logging.DEBUG)
    handler.emit = records.append
    root = logging.getLogger("transformers")
    root.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tok = load_tokenizer(tok_dir)
            tok.save_pretrained(tmp_path / "saved")
            load_tokenizer(tmp_path / "saved")
    finally:
        root.removeHandler(handler)
    messages = [r.getMessage() for r in records if r.levelno >= logging.WARNING] + [str(w.message) for w in caught]
    assert not [m for m in messages if "response_template" in m or "not recognized" in m.lower()], messages


# --- parse_response ---------------------------------------------------------------------------------------------


def test_parse_text_and_ids(tok):
    assert tok.parse_response(OUTPUT, prefix=PROMPT) == EXPECTED
    assert tok.parse_response(ids_of(tok, OUTPUT), prefix=ids_of(tok, PROMPT)) == EXPECTED
    assert tok.parse_response(ids_of(tok, OUTPUT), prefix=PROMPT) == EXPECTED  # text prefix with ids
    assert tok.parse_response(OUTPUT, prefix=ids_of(tok, PROMPT)) == EXPECTED  # ids prefix with text


def test_parse_numpy_forms(tok):
    out, prompt = np.array(ids_of(tok, OUTPUT)), np.array(ids_of(tok, PROMPT))
    assert tok.parse_response(out, prefix=prompt) == EXPECTED
    # a 2-D batch needs rows of equal length: repeat the same one
    batch = np.stack([out, out])
    assert tok.parse_response(batch, prefix=prompt) == [EXPECTED, EXPECTED]
    assert tok.parse_response(batch, prefix=np.stack([prompt, prompt])) == [EXPECTED, EXPECTED]


def test_parse_batches_and_prefix_broadcast(tok):
    assert tok.parse_response([OUTPUT, OUTPUT_2], prefix=PROMPT) == [EXPECTED, EXPECTED_2]
    assert tok.parse_response([OUTPUT, OUTPUT_2], prefix=[PROMPT, PROMPT]) == [EXPECTED, EXPECTED_2]
    id_batch = [ids_of(tok, OUTPUT), ids_of(tok, OUTPUT_2)]
    assert tok.parse_response(id_batch, prefix=ids_of(tok, PROMPT)) == [EXPECTED, EXPECTED_2]
    assert tok.parse_response(id_batch, prefix=[ids_of(tok, PROMPT)] * 2) == [EXPECTED, EXPECTED_2]
    assert tok.parse_response([np.array(row) for row in id_batch], prefix=PROMPT) == [EXPECTED, EXPECTED_2]


def test_prefix_opt_out_and_prefill(tok):
    # "" / [] opt out: the whole message is in the output
    assert tok.parse_response(OUTPUT, prefix="") == EXPECTED
    assert tok.parse_response([OUTPUT, OUTPUT_2], prefix=[]) == [EXPECTED, EXPECTED_2]
    # the prompt pre-writes <think>: the parser must see it to find the reasoning
    prefilled = PROMPT + "<think>\n"
    generated = "Thinking.\n</think>\n\nDone.<|im_end|>"
    expected = {"role": "assistant", "reasoning_content": "Thinking.", "content": "Done."}
    assert tok.parse_response(generated, prefix=prefilled) == expected
    assert tok.parse_response(ids_of(tok, generated), prefix=ids_of(tok, prefilled)) == expected


def test_schema_argument_overrides(plain_tok):
    assert plain_tok.parse_response(OUTPUT, RESPONSE_TEMPLATE, prefix=PROMPT) == EXPECTED
    assert plain_tok.parse_response(OUTPUT, schema=RESPONSE_TEMPLATE, prefix=PROMPT) == EXPECTED


def test_tools_cast_arguments(tok):
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "7", "days": "3"}}\n</tool_call><|im_end|>'
    message = tok.parse_response(text, prefix="", tools=TOOLS)
    assert message["tool_calls"][0]["function"]["arguments"] == {"city": "7", "days": 3}


def test_ids_keep_spelled_out_control_tokens_as_text(tok):
    """A control token the model spelled with ordinary tokens (e.g. quoting it) is text, not a delimiter."""
    spelled = ids_of(tok, "<tool") + ids_of(tok, "_call>")
    assert tok.convert_tokens_to_ids("<tool_call>") not in spelled
    generated = ids_of(tok, "Write ") + spelled + ids_of(tok, " to call a tool.") + ids_of(tok, "<|im_end|>")
    message = tok.parse_response(generated, prefix="")
    assert message == {"role": "assistant", "content": "Write <tool_call> to call a tool."}
    # decoded to text, the spelling can no longer be told apart from the real token: it opens a tool call,
    # whose body is not JSON
    with pytest.raises(ValueError, match="JSON"):
        tok.parse_response(tok.decode(generated), prefix="")


# --- errors ---------------------------------------------------------------------------------------------------


def test_prefix_is_required(tok):
    with pytest.raises(ValueError, match="prefix"):
        tok.parse_response(OUTPUT)
    with pytest.raises(ValueError, match="prefix"):
        tok.get_response_parser()


def test_prefix_count_mismatch(tok):
    with pytest.raises(ValueError, match=r"2 response\(s\) but 3 prefixes"):
        tok.parse_response([OUTPUT, OUTPUT_2], prefix=[PROMPT] * 3)


def test_bad_input_types(tok):
    with pytest.raises(TypeError, match="response"):
        tok.parse_response(12, prefix="")
    with pytest.raises(TypeError, match="response"):
        tok.parse_response([OUTPUT, [1, 2]], prefix="")


def test_no_template_names_the_class(plain_tok, no_library):
    with pytest.raises(AttributeError, match=type(plain_tok).__name__):
        plain_tok.parse_response(OUTPUT, prefix=PROMPT)
    with pytest.raises(AttributeError, match=type(plain_tok).__name__):
        plain_tok.get_response_parser(prefix=PROMPT)


def test_invalid_template_is_a_template_error(plain_tok):
    with pytest.raises(response_templates.TemplateError):
        plain_tok.parse_response(OUTPUT, {"version": 1, "fields": {}}, prefix="")


# --- library fallback and attach() ------------------------------------------------------------------------------


def test_library_fallback_logged_at_debug(plain_tok, library_with, caplog, tmp_path):
    with caplog.at_level(logging.DEBUG, logger="response_templates.integrations.transformers_patch"):
        assert plain_tok.parse_response(OUTPUT, prefix=PROMPT) == EXPECTED
    assert library_with.asked and library_with.asked[0] is plain_tok
    fallback = [r for r in caplog.records if r.name == "response_templates.integrations.transformers_patch"]
    assert fallback and all(r.levelno == logging.DEBUG for r in fallback)
    assert "template_for" in fallback[0].getMessage()
    # the fallback is never stored, so save_pretrained does not write a template the user did not set
    assert plain_tok.response_template is None
    plain_tok.save_pretrained(tmp_path / "saved")
    config = json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert "response_template" not in config
    parser = plain_tok.get_response_parser(prefix=PROMPT)
    parser.feed(OUTPUT)
    assert parser.finalize()[0] == EXPECTED


def test_own_template_wins_over_library(tok, library_with):
    tok.parse_response(OUTPUT, prefix=PROMPT)
    assert library_with.asked == []


def test_attach_sets_library_template(plain_tok, library_with, tmp_path):
    template = response_templates.integrations.transformers_patch.attach(plain_tok)
    assert template == RESPONSE_TEMPLATE and plain_tok.response_template == RESPONSE_TEMPLATE
    assert template is not RESPONSE_TEMPLATE  # a copy: editing it cannot change the library
    plain_tok.save_pretrained(tmp_path / "saved")
    assert load_tokenizer(tmp_path / "saved").response_template == RESPONSE_TEMPLATE


def test_attach_without_library_template(plain_tok, no_library):
    with pytest.raises(LookupError, match=type(plain_tok).__name__):
        integration.attach(plain_tok)
    assert plain_tok.response_template is None


# --- streaming ----------------------------------------------------------------------------------------------------


def test_get_response_parser_text_and_ids(tok):
    parser = tok.get_response_parser(prefix=PROMPT)
    events = list(parser.initial_events)
    for start in range(0, len(OUTPUT), 5):
        events += parser.feed(OUTPUT[start : start + 5])
    message, final_events = parser.finalize()
    assert message == EXPECTED
    assert events and {e["type"] for e in events + final_events} <= {"region_open", "region_chunk", "region_close"}

    parser = tok.get_response_parser(prefix=np.array(ids_of(tok, PROMPT)), token_ids=True, tools=TOOLS)
    for token_id in ids_of(tok, OUTPUT):
        parser.feed([token_id])
    assert parser.finalize()[0] == EXPECTED

    parser = tok.get_response_parser(prefix=ids_of(tok, PROMPT))  # id prefix, text chunks
    parser.feed(OUTPUT)
    assert parser.finalize()[0] == EXPECTED


def test_get_response_parser_rejects_batched_prefix(tok):
    with pytest.raises(ValueError, match="single sequence"):
        tok.get_response_parser(prefix=[ids_of(tok, PROMPT)] * 2)


def test_get_response_parser_explicit_template(plain_tok):
    parser = plain_tok.get_response_parser(RESPONSE_TEMPLATE, prefix="")
    parser.feed(OUTPUT)
    assert parser.finalize()[0] == EXPECTED


# --- processors, torch ------------------------------------------------------------------------------------------


def test_processor_parse_response_delegates(tok):
    from transformers.processing_utils import ProcessorMixin

    assert ProcessorMixin.parse_response is integration._processor_parse_response
    processor = types.SimpleNamespace(tokenizer=tok)
    assert ProcessorMixin.parse_response(processor, OUTPUT, prefix=PROMPT) == EXPECTED
    assert ProcessorMixin.parse_response(processor, [OUTPUT], RESPONSE_TEMPLATE, prefix="") == [EXPECTED]
    with pytest.raises(ValueError, match="no tokenizer"):
        ProcessorMixin.parse_response(types.SimpleNamespace(), OUTPUT, prefix="")


def test_torch_tensors(tok):
    torch = pytest.importorskip("torch")
    out = torch.tensor(ids_of(tok, OUTPUT))
    assert tok.parse_response(out, prefix=torch.tensor(ids_of(tok, PROMPT))) == EXPECTED
    assert tok.parse_response(torch.stack([out, out]), prefix=PROMPT) == [EXPECTED, EXPECTED]


# --- patch / unpatch ----------------------------------------------------------------------------------------------


def test_unpatch_restores_and_patch_again(tok_dir):
    integration.unpatch()
    try:
        assert not integration.is_patched()
        current = PreTrainedTokenizerBase.__dict__.get("parse_response")
        if _version() < (5, 0):
            assert current is None  # 4.x has no parser at all
        else:
            # 5.0-5.19 have an older response_schema parser, 5.20+ the built-in one: either comes back
            assert current is not None and current.__module__.startswith("transformers")
        for name in ("__init__", "save_pretrained"):
            assert PreTrainedTokenizerBase.__dict__[name].__module__.startswith("transformers")
        assert "response_template" in PreTrainedTokenizerBase.__dict__ or not hasattr(
            PreTrainedTokenizerBase, "response_template"
        )
    finally:
        integration.patch()
    assert integration.is_patched()
    assert PreTrainedTokenizerBase.parse_response is integration.parse_response
    assert load_tokenizer(tok_dir).parse_response(OUTPUT, prefix=PROMPT) == EXPECTED


def test_tokenizer_loaded_before_patching(tok_dir, tmp_path):
    """E.g. `import response_templates` in a notebook whose tokenizer was loaded earlier."""
    integration.unpatch()
    try:
        early = load_tokenizer(tok_dir)
    finally:
        integration.patch()
    assert early.response_template == RESPONSE_TEMPLATE
    assert early.parse_response(OUTPUT, prefix=PROMPT) == EXPECTED
    early.save_pretrained(tmp_path / "kept")
    assert load_tokenizer(tmp_path / "kept").response_template == RESPONSE_TEMPLATE
    early.response_template = None
    early.save_pretrained(tmp_path / "removed")
    config = json.loads((tmp_path / "removed" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert "response_template" not in config


def test_template_passed_to_from_pretrained(plain_dir):
    tok = load_tokenizer(plain_dir, response_template=RESPONSE_TEMPLATE)
    assert tok.response_template == RESPONSE_TEMPLATE
    assert tok.parse_response(OUTPUT, prefix=PROMPT) == EXPECTED


def test_patch_is_idempotent():
    before = PreTrainedTokenizerBase.__dict__["__init__"]
    integration.patch()
    integration.patch()
    assert PreTrainedTokenizerBase.__dict__["__init__"] is before


# --- the real library, slow tokenizers ------------------------------------------------------------------------------


def test_real_library_fallback_and_attach(plain_tok):
    library = pytest.importorskip("response_templates.library")
    if library.template_for("Qwen/Qwen3-8B") is None:
        pytest.skip("the library has no template for Qwen/Qwen3-8B")
    plain_tok.name_or_path = "Qwen/Qwen3-8B"  # as if loaded from the Hub
    generated = "<think>\nx\n</think>\n\nhi<|im_end|>"
    expected = {"role": "assistant", "reasoning_content": "x", "content": "hi"}
    assert plain_tok.parse_response(generated, prefix=PROMPT) == expected
    assert plain_tok.response_template is None
    assert integration.attach(plain_tok) == library.template_for("Qwen/Qwen3-8B")
    assert plain_tok.response_template is not None
    assert plain_tok.parse_response(generated, prefix=PROMPT) == expected


def test_slow_tokenizers_decode_ids_to_text(tok, monkeypatch):
    # Slow (pure Python) tokenizers have no backend to decode ids incrementally: ids are decoded, then parsed as text.
    monkeypatch.setattr(integration, "_is_fast", lambda tokenizer: False)
    assert tok.parse_response(ids_of(tok, OUTPUT), prefix=ids_of(tok, PROMPT)) == EXPECTED
    assert tok.parse_response([ids_of(tok, OUTPUT)], prefix=[]) == [EXPECTED]
    with pytest.raises(ValueError, match="fast tokenizer"):
        tok.get_response_parser(prefix="", token_ids=True)


@pytest.mark.parametrize("tokenizer_class", ["Qwen2Tokenizer", "GPT2Tokenizer"])
def test_model_specific_tokenizer_classes(tmp_path, tokenizer_class):
    path = build_tokenizer_dir(tmp_path / "tok", tokenizer_class=tokenizer_class, response_template=RESPONSE_TEMPLATE)
    tok = load_tokenizer(path)
    assert tok.response_template == RESPONSE_TEMPLATE
    assert tok.parse_response(ids_of(tok, OUTPUT), prefix=PROMPT) == EXPECTED
    tok.save_pretrained(tmp_path / "saved")
    assert load_tokenizer(tmp_path / "saved").response_template == RESPONSE_TEMPLATE


def test_truncated_generation_drops_the_unfinished_call(tok):
    # cut by max_new_tokens inside the second call: the first call is kept, the half call is not returned
    first = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    cut = OUTPUT_2.split("<|im_end|>")[0] + first + '<tool_call>\n{"name": "get_weather", "argu'
    ids = ids_of(tok, cut)
    message = tok.parse_response(ids, prefix=ids_of(tok, PROMPT), truncated=True)
    assert message["tool_calls"] == [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    ]
    assert message["content"] == "Hello there!"
    with pytest.raises(ValueError):
        tok.parse_response(ids, prefix=ids_of(tok, PROMPT))  # without the flag the half call is an error

"""The shipped template library: metadata, lookup, and every corpus case (ours and transformers' parser agree)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from pathlib import Path

import pytest
from oracle import reference_module

from response_templates import ResponseParser, load_template, parse_response
from response_templates import library
from response_templates.library import LibraryError, UnknownTemplateError, validate_entry

CORPORA = Path(__file__).parent / "data" / "corpora"
CORPUS_FILES = sorted(CORPORA.glob("*.json"))
NAMES = library.list_templates()


def _corpus_cases():
    for path in CORPUS_FILES:
        corpus = json.loads(path.read_text(encoding="utf-8"))
        for case in corpus["cases"]:
            yield pytest.param(corpus["template"], case, id=f"{path.stem}/{case['name']}")


def _hf_parse_response():
    module = reference_module()
    return module.parse_response


# --- metadata -------------------------------------------------------------------------------


def test_library_is_not_empty_and_sorted():
    assert len(NAMES) >= 11
    assert NAMES == sorted(NAMES)
    for name in ("qwen2.5", "qwen3", "qwen3-thinking-2507", "qwen3-instruct-2507", "qwen3-coder", "qwen3.5", "qwq",
                 "smollm3", "hermes", "llama3.1", "llama4"):
        assert name in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_every_entry_is_valid(name):
    entry = library.get_entry(name)
    validate_entry(entry, f"{name}.json", stem=name)  # also done on load; here for a clear per-file failure
    assert entry["name"] == name
    assert entry["chat_templates"], f"{name}: lists no chat template it was verified against"


@pytest.mark.parametrize("name", NAMES)
def test_every_template_loads_in_our_core(name):
    load_template(library.get_template(name))


@pytest.mark.parametrize("name", NAMES)
def test_every_template_loads_in_transformers(name):
    module = reference_module("transformers.utils.chat_parsing.response_templates")
    module.load_response_template(library.get_template(name))


@pytest.mark.parametrize("name", NAMES)
def test_every_template_has_a_corpus(name):
    path = CORPORA / f"{name}.json"
    assert path.is_file(), f"no corpus tests/data/corpora/{name}.json"
    corpus = json.loads(path.read_text(encoding="utf-8"))
    assert corpus["template"] == name
    assert len(corpus["cases"]) >= 5


def test_corpora_name_shipped_templates_and_have_unique_case_names():
    for path in CORPUS_FILES:
        corpus = json.loads(path.read_text(encoding="utf-8"))
        assert corpus["template"] in NAMES, f"{path.name} names an unknown template"
        names = [case["name"] for case in corpus["cases"]]
        assert len(names) == len(set(names)), f"{path.name}: duplicate case names"


def test_get_template_returns_a_copy():
    template = library.get_template("qwen3")
    template["fields"].clear()
    assert library.get_template("qwen3")["fields"]


def test_unknown_name_is_a_clear_key_error():
    with pytest.raises(UnknownTemplateError, match="no library template named 'nope'.*qwen3"):
        library.get_template("nope")
    with pytest.raises(KeyError):
        library.get_entry("nope")


def _valid_entry():
    return copy.deepcopy(library.get_entry("qwen2.5"))


@pytest.mark.parametrize(
    "change, key",
    [
        (lambda e: e.pop("supports"), "supports"),
        (lambda e: e.update(extra=1), "extra"),
        (lambda e: e.update(name="Bad Name"), "'name'"),
        (lambda e: e.update(models=["not-a-hub-id"]), "'models'"),
        (lambda e: e.update(model_patterns=["(unclosed"]), "'model_patterns'"),
        (lambda e: e["chat_templates"][0].update(sha256="abc"), "chat_templates[0].sha256"),
        (lambda e: e["chat_templates"][0].pop("file"), "chat_templates[0].file"),
        (lambda e: e["supports"].update(reasoning="yes"), "supports.reasoning"),
        (lambda e: e.update(verify={"bogus": 1}), "'verify'"),
        (lambda e: e.update(verify={"skip_cases": {"no_such_case": "why"}}), "'verify'"),
        (lambda e: e["template"]["fields"]["content"].update(content="yaml"), "'template'"),
    ],
)
def test_invalid_metadata_names_file_and_key(change, key):
    entry = _valid_entry()
    change(entry)
    with pytest.raises(LibraryError) as info:
        validate_entry(entry, "response_templates/library/templates/qwen2.5.json", stem="qwen2.5")
    message = str(info.value)
    assert "qwen2.5.json" in message and key in message, message


def test_name_must_match_file_stem():
    with pytest.raises(LibraryError, match="qwen2.5.*other"):
        validate_entry(_valid_entry(), "other.json", stem="other")


# --- lookup ---------------------------------------------------------------------------------


class FakeTokenizer:
    def __init__(self, name_or_path, chat_template=None):
        self.name_or_path = name_or_path
        self.chat_template = chat_template


@pytest.mark.parametrize(
    "model, name",
    [
        ("Qwen/Qwen3-8B", "qwen3"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5"),
        ("Qwen/Qwen3-30B-A3B-Thinking-2507", "qwen3-thinking-2507"),
        ("Qwen/Qwen3-4B-Instruct-2507", "qwen3-instruct-2507"),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3-coder"),
        ("Qwen/Qwen3.5-4B", "qwen3.5"),
        ("Qwen/Qwen3.6-35B-A3B", "qwen3.5"),
        ("Qwen/QwQ-32B", "qwq"),
        ("HuggingFaceTB/SmolLM3-3B", "smollm3"),
        ("NousResearch/Hermes-3-Llama-3.1-8B", "hermes"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama3.1"),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama4"),
        ("openai/gpt-oss-20b", "gpt-oss"),
        ("zai-org/GLM-4.5-Air", "glm"),
        ("google/gemma-3-1b-it", "gemma-3"),
        ("ibm-granite/granite-3.3-8b-instruct", "granite-3"),
        ("ibm-granite/granite-3.2-8b-instruct", "granite-3"),
        ("MiniMaxAI/MiniMax-M2.5", "minimax_m2"),
        ("zai-org/GLM-5", "glm"),
        ("deepseek-ai/DeepSeek-V3.1-Terminus", "deepseek_v3.1"),
        ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek_v3.1"),
        ("mistralai/Ministral-3-8B-Reasoning-2512", "mistral"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "deepseek_r1"),
        ("mistralai/Mixtral-8x22B-Instruct-v0.1", "mistral_v3"),
        ("mistralai/Ministral-8B-Instruct-2410", "mistral_v3"),
        ("ai-sage/GigaChat3.5-432B-A28B", "gigachat3.5"),
        ("deepseek-ai/DeepSeek-V4.1-Flash", "deepseek_v4"),
        ("ibm-granite/granite-4.1-8b", "granite-4"),
        ("ibm-granite/granite-4.1-30b", "granite-4"),
        ("google/gemma-2-9b-it", "gemma-2"),
        ("microsoft/Phi-3.5-mini-instruct", "phi-3.5"),
        ("CohereLabs/aya-expanse-8b", "aya-expanse"),
        ("Salesforce/Llama-xLAM-2-8b-fc-r", "xlam"),
        ("Salesforce/xLAM-2-32b-fc-r", "xlam"),
        ("internlm/internlm2_5-7b-chat", "internlm2"),
    ],
)
def test_exact_hub_ids(model, name):
    assert library.name_for(model) == name
    assert library.template_for(model) == library.get_template(name)


@pytest.mark.parametrize(
    "model, name",
    [
        ("Qwen/Qwen3-14B-FP8", "qwen3"),
        ("Qwen/Qwen2.5-3B-Instruct-GPTQ-Int4", "qwen2.5"),
        ("Qwen/Qwen3-4B-Thinking-2507-FP8", "qwen3-thinking-2507"),
        ("meta-llama/Meta-Llama-3.1-405B-Instruct", "llama3.1"),
        ("tencent/Hunyuan-A13B-Instruct-GGUF", "hunyuan_a13b"),
    ],
)
def test_model_patterns(model, name):
    assert library.name_for(model) == name


@pytest.mark.parametrize("model", ["someone/unknown-model", "unsloth/Qwen3-8B", "", "Qwen/Qwen3-8B/extra", "Qwen/Qwen3-8B-Base"])
def test_unknown_ids_give_none(model):
    assert library.template_for(model) is None


def _fake_entries(**entries):
    base = library._entries()["qwen2.5"]
    out = {}
    for name, changes in entries.items():
        entry = copy.deepcopy(base)
        entry.update(name=name, models=[], model_patterns=[], chat_templates=[])
        entry.update(changes)
        out[name] = entry
    return out


def test_two_matching_patterns_give_none(monkeypatch):
    fake = _fake_entries(a={"model_patterns": ["org/model-.*"]}, b={"model_patterns": [".*-7B"]})
    monkeypatch.setattr(library, "_entries", lambda: fake)
    assert library.name_for("org/model-7B") is None
    assert library.name_for("org/model-3B") == "a"
    assert library.name_for("other/x-7B") == "b"


def test_exact_id_wins_over_patterns(monkeypatch):
    fake = _fake_entries(a={"models": ["org/model-7B"]}, b={"model_patterns": ["org/.*"]})
    monkeypatch.setattr(library, "_entries", lambda: fake)
    assert library.name_for("org/model-7B") == "a"


def test_fingerprint_of_the_chat_template(monkeypatch):
    source = "{% for m in messages %}{{ m.content }}{% endfor %}"
    digest = hashlib.sha256(source.encode()).hexdigest()
    fake = _fake_entries(a={"chat_templates": [{"file": "a.jinja", "sha256": digest}]}, b={})
    monkeypatch.setattr(library, "_entries", lambda: fake)
    assert library.name_for(FakeTokenizer("/local/checkpoint", source)) == "a"
    assert library.name_for(FakeTokenizer("/local/checkpoint", source + "\n")) == "a"  # one trailing newline is tolerated
    assert library.name_for(FakeTokenizer("/local/checkpoint", {"default": "x", "tool_use": source})) == "a"
    assert library.name_for(FakeTokenizer("/local/checkpoint", [{"name": "tool_use", "template": source}])) == "a"
    assert library.name_for(FakeTokenizer("/local/checkpoint", source + " changed")) is None
    assert library.name_for(FakeTokenizer("/local/checkpoint", None)) is None
    assert library.name_for(FakeTokenizer(None, None)) is None


def test_fingerprint_shared_by_two_templates_gives_none(monkeypatch):
    source = "same template"
    item = {"file": "x.jinja", "sha256": hashlib.sha256(source.encode()).hexdigest()}
    fake = _fake_entries(a={"chat_templates": [item]}, b={"chat_templates": [item]})
    monkeypatch.setattr(library, "_entries", lambda: fake)
    assert library.name_for(FakeTokenizer("/local/dir", source)) is None


def test_tokenizer_name_is_used_when_the_chat_template_is_unknown():
    assert library.name_for(FakeTokenizer("Qwen/Qwen3-8B", "unrelated template")) == "qwen3"


def test_a_known_chat_template_decides_over_the_tokenizer_name():
    # Llama 4 writes JSON calls with Meta's chat template and pythonic calls with vLLM's: the template in use decides.
    folder = os.environ.get("RESPONSE_TEMPLATES_CHAT_TEMPLATES")
    if not folder:
        pytest.skip("RESPONSE_TEMPLATES_CHAT_TEMPLATES is not set (folder of real chat templates, e.g. ../shared/chat_templates)")
    model = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
    meta = (Path(folder) / "meta-llama--Llama-4-Scout-17B-16E-Instruct.jinja").read_bytes().decode("utf-8")
    pythonic = (Path(folder) / "vllm-example--tool_chat_template_llama4_pythonic.jinja").read_bytes().decode("utf-8")
    assert library.name_for(FakeTokenizer(model, meta)) == "llama4"
    assert library.name_for(FakeTokenizer(model, pythonic)) == "llama4_pythonic"
    assert library.name_for(model) == "llama4"  # a bare id: the chat template the model ships
    message = parse_response(
        '[get_weather(city="LA")]<|eot|>',
        library.template_for(FakeTokenizer(model, pythonic)),
        prefix="<|header_start|>assistant<|header_end|>\n\n",
    )
    assert message["tool_calls"] == [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "LA"}}}]


def test_fingerprint_of_real_chat_templates():
    folder = os.environ.get("RESPONSE_TEMPLATES_CHAT_TEMPLATES")
    if not folder:
        pytest.skip("RESPONSE_TEMPLATES_CHAT_TEMPLATES is not set (folder of real chat templates, e.g. ../shared/chat_templates)")
    checked = 0
    for name in NAMES:
        for item in library.get_entry(name)["chat_templates"]:
            path = Path(folder) / item["file"]
            if not path.is_file():
                continue
            source = path.read_bytes().decode("utf-8")  # read_text would turn \r\n into \n
            found = library.name_for(FakeTokenizer("/some/local/copy", source))
            owners = {n for n in NAMES for ct in library.get_entry(n)["chat_templates"] if ct["sha256"] == item["sha256"]}
            assert found == (name if owners == {name} else None), (name, item["file"], owners)
            checked += 1
    assert checked


# --- corpora --------------------------------------------------------------------------------


@pytest.mark.parametrize("template_name, case", list(_corpus_cases()))
def test_corpus_case_one_shot(template_name, case):
    template = library.get_template(template_name)
    message = parse_response(
        case["output"], template, prefix=case["prefix"], tools=case.get("tools"), truncated=case.get("truncated", False)
    )
    assert message == case["expected"]


@pytest.mark.parametrize("template_name, case", list(_corpus_cases()))
def test_corpus_case_streamed_char_by_char(template_name, case):
    template = library.get_template(template_name)
    parser = ResponseParser(template, case["prefix"], tools=case.get("tools"))
    events = list(parser.initial_events)
    for char in case["output"]:
        events += parser.feed(char)
    message, final_events = parser.finalize(truncated=case.get("truncated", False))
    events += final_events
    assert message == case["expected"]
    # No marker leaks into the streamed text either: every text chunk of a text field belongs to its final value.
    for event in events:
        if event["type"] == "region_chunk" and not event["dirty"]:
            assert "<|im_end|>" not in event["text"] and "<|eot_id|>" not in event["text"], event


@pytest.mark.parametrize("template_name, case", list(_corpus_cases()))
def test_corpus_case_matches_transformers(template_name, case):
    if case.get("truncated"):
        pytest.skip("truncated=True is our extension; transformers has no equivalent")
    hf_parse_response = _hf_parse_response()
    template = library.get_template(template_name)
    expected = hf_parse_response(case["output"], template, prefix=case["prefix"], tools=case.get("tools"))
    assert expected == case["expected"]


def test_listed_models_resolve_to_their_entry_and_no_other_pattern_claims_them():
    for name in NAMES:
        entry = library.get_entry(name)
        for model in entry["models"]:
            assert library.name_for(model) == name
            for other in NAMES:
                if other == name:
                    continue
                patterns = library.get_entry(other).get("model_patterns", [])
                clash = [p for p in patterns if re.fullmatch(p, model, re.IGNORECASE)]
                assert not clash, f"{model} (listed by {name}) also matches {other}'s patterns {clash}"


def test_fingerprint_matches_a_chat_template_with_crlf_line_endings(tmp_path):
    # transformers reads chat_template.jinja in text mode, so a CRLF file reaches the tokenizer with LF endings
    import hashlib
    import types

    from response_templates.library import _entries, name_for

    lf_source = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}\n"
    crlf_bytes = lf_source.replace("\n", "\r\n").encode("utf-8")
    digest = hashlib.sha256(crlf_bytes).hexdigest()
    entries = _entries()
    name = sorted(entries)[0]
    original = entries[name]["chat_templates"]
    entries[name]["chat_templates"] = original + [{"file": "crlf.jinja", "sha256": digest}]
    try:
        tokenizer = types.SimpleNamespace(name_or_path="/local/checkpoint", chat_template=lf_source)
        assert name_for(tokenizer) == name
    finally:
        entries[name]["chat_templates"] = original


@pytest.mark.parametrize("bad", ["/etc/passwd", "../outside.jinja", "trl/../../x.jinja"])
def test_chat_template_file_names_stay_inside_the_folder(bad):
    entry = copy.deepcopy(library.get_entry("qwen3"))
    entry["chat_templates"][0]["file"] = bad
    with pytest.raises(library.LibraryError, match="file"):
        library.validate_entry(entry, "qwen3.json", stem="qwen3")

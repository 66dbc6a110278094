"""save_pretrained never crashes over response_template, and keeps its key order (issue 15, item 8).

A tokenizer_config.json may hold a response_template that is not a dict (a hand-edited or foreign repo): the
tokenizer loads, and saving writes back what was loaded. A value that is not JSON data cannot be written: it is
dropped with a warning. transformers writes tokenizer_config.json with sorted keys, which would reorder the
template's `defaults` (the first keys of every message) and transforms (the keys of every tool call): the saved
template keeps its own order. Runs on every transformers release CI tests (4.46 on)."""

from __future__ import annotations

import json
import logging

import pytest

pytest.importorskip("transformers")

from tokenizer_factory import build_tokenizer_dir, load_tokenizer  # noqa: E402

PROMPT = "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
OUTPUT = '<think>\nhm\n</think>\n\nSure.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'

# Keys deliberately out of alphabetical order at every level.
UNSORTED = {
    "version": 1,
    "start_anchor": "<|im_start|>assistant\n",
    "defaults": {"role": "assistant", "content": "", "audio": None},
    "fields": {
        "tool_calls": {
            "open": "<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "id": "call_0", "function": "{content}"},
        },
        "reasoning_content": {"open": "<think>", "close": "</think>"},
        "content": {"close": "<|im_end|>"},
    },
}


def saved_config(path) -> dict:
    return json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("value", ["qwen3", ["not", "a", "dict"], 42, True])
def test_a_non_dict_template_loads_and_is_written_back(tmp_path, value):
    tok = load_tokenizer(build_tokenizer_dir(tmp_path / "tok", response_template=value))
    assert tok.response_template == value
    tok.save_pretrained(tmp_path / "saved")
    assert saved_config(tmp_path / "saved")["response_template"] == value
    again = load_tokenizer(tmp_path / "saved")
    assert again.response_template == value
    with pytest.raises(ValueError, match="response_template must be a dict"):
        again.parse_response(OUTPUT, prefix=PROMPT)


def test_a_value_that_is_not_json_is_dropped_with_a_warning(tmp_path, caplog):
    tok = load_tokenizer(build_tokenizer_dir(tmp_path / "tok"))
    tok.response_template = {1, 2, 3}
    with caplog.at_level(logging.WARNING, logger="response_templates.integrations.transformers_patch"):
        tok.save_pretrained(tmp_path / "saved")
    assert "response_template is a set, not JSON data" in caplog.text
    assert "response_template" not in saved_config(tmp_path / "saved")
    assert tok.response_template == {1, 2, 3}  # the tokenizer itself is left as it was


def test_the_round_trip_keeps_the_template_and_message_key_order(tmp_path):
    tok = load_tokenizer(build_tokenizer_dir(tmp_path / "tok"))
    tok.response_template = json.loads(json.dumps(UNSORTED))
    before = tok.parse_response(OUTPUT, prefix=PROMPT)
    assert list(before)[:3] == ["role", "content", "audio"]
    assert list(before["tool_calls"][0]) == ["type", "id", "function"]
    tok.save_pretrained(tmp_path / "saved")
    config = saved_config(tmp_path / "saved")
    assert json.dumps(config["response_template"]) == json.dumps(UNSORTED)  # same order, not only equal
    again = load_tokenizer(tmp_path / "saved")
    assert json.dumps(again.response_template) == json.dumps(UNSORTED)
    after = again.parse_response(OUTPUT, prefix=PROMPT)
    assert json.dumps(after) == json.dumps(before)
    # and once more: saving the reloaded tokenizer changes nothing
    again.save_pretrained(tmp_path / "again")
    assert (tmp_path / "again" / "tokenizer_config.json").read_text(encoding="utf-8") == (
        tmp_path / "saved" / "tokenizer_config.json"
    ).read_text(encoding="utf-8")


def test_the_rest_of_the_config_is_what_transformers_wrote(tmp_path):
    tok = load_tokenizer(build_tokenizer_dir(tmp_path / "tok"))
    tok.response_template = json.loads(json.dumps(UNSORTED))
    tok.save_pretrained(tmp_path / "ours")
    tok.response_template = None
    tok.save_pretrained(tmp_path / "plain")
    ours, plain = saved_config(tmp_path / "ours"), saved_config(tmp_path / "plain")
    assert ours.pop("response_template") == UNSORTED
    assert list(ours) == list(plain) and ours == plain

"""A prefix without the template's start anchor is logged (issue 29): the whole prompt is then parsed as if the model
had written it, which used to go by without a word (a wrong string passed as `prefix`, or prompt and output passed
together). A warning on the `response_templates` logger names the anchor: once per streaming parser, once per
template for one-shot parses (a batch does not repeat it)."""

from __future__ import annotations

import logging

import pytest

from response_templates import ResponseParser, parse_response

from tokenizer_factory import RESPONSE_TEMPLATE  # noqa: E402  (start_anchor "<|im_start|>assistant\n")

OUTPUT = "Hello there!<|im_end|>"
PROMPT = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
NO_ANCHOR = "<|im_start|>user\nHi<|im_end|>\n"  # the prompt without its generation prompt

PATTERN_ANCHOR = {
    "version": 1,
    "start_anchor_pattern": r"<\|turn\|>model\n(?:<think>\n)?",
    "fields": {"content": {"close": "<|end|>"}},
}


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "response_templates" and r.levelno == logging.WARNING]


def test_a_one_shot_parse_with_a_prefix_lacking_the_anchor_warns_and_names_it(caplog):
    template = {**RESPONSE_TEMPLATE, "defaults": {"role": "assistant", "x": "one shot"}}  # a template not yet warned for
    with caplog.at_level(logging.WARNING, logger="response_templates"):
        parse_response(OUTPUT, template, prefix=NO_ANCHOR)
    (warning,) = _warnings(caplog)
    assert "'<|im_start|>assistant\\n'" in warning and "prefix" in warning


def test_one_shot_parses_warn_once_per_template(caplog):
    template = {**RESPONSE_TEMPLATE, "defaults": {"role": "assistant", "x": "batch"}}
    with caplog.at_level(logging.WARNING, logger="response_templates"):
        for _ in range(5):
            parse_response(OUTPUT, template, prefix=NO_ANCHOR)
    assert len(_warnings(caplog)) == 1


def test_each_streaming_parser_warns_once(caplog):
    with caplog.at_level(logging.WARNING, logger="response_templates"):
        for _ in range(2):
            parser = ResponseParser(RESPONSE_TEMPLATE, prefix=NO_ANCHOR)
            parser.feed(OUTPUT)
            parser.finalize()
    assert len(_warnings(caplog)) == 2


def test_a_pattern_anchor_is_named_by_its_pattern(caplog):
    with caplog.at_level(logging.WARNING, logger="response_templates"):
        ResponseParser(PATTERN_ANCHOR, prefix="<|turn|>user\nHi")
    (warning,) = _warnings(caplog)
    assert "start_anchor_pattern" in warning and "turn" in warning


@pytest.mark.parametrize("prefix", [PROMPT, "", "<|turn|>model\n"])
def test_no_warning_when_the_anchor_is_there_or_the_prefix_is_opted_out(caplog, prefix):
    template = PATTERN_ANCHOR if prefix.startswith("<|turn|>") else RESPONSE_TEMPLATE
    with caplog.at_level(logging.WARNING, logger="response_templates"):
        parse_response(OUTPUT, template, prefix=prefix)
        ResponseParser(template, prefix=prefix).finalize()
    assert _warnings(caplog) == []

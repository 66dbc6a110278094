"""verify(): library templates against the real chat templates they name, and verify's own behaviour."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

pytest.importorskip("jinja2", reason="verify renders chat templates with jinja2")

from response_templates import library, parse_response
from response_templates.authoring.rendering import generated_part, render_chat_template
from response_templates.authoring.verification import verify, verify_entry
from response_templates.library.entries import check_options

FOLDER_VARIABLE = "RESPONSE_TEMPLATES_CHAT_TEMPLATES"


def _pairs():
    for name in library.list_templates():
        for item in library.get_entry(name)["chat_templates"]:
            yield pytest.param(name, item, id=f"{name}/{item['file']}")


def _chat_templates_folder() -> Path:
    folder = os.environ.get(FOLDER_VARIABLE)
    if not folder:
        pytest.skip(f"{FOLDER_VARIABLE} is not set: it names the folder of real chat templates (CI: ../shared/chat_templates)")
    path = Path(folder)
    if not path.is_dir():
        pytest.fail(f"{FOLDER_VARIABLE}={folder!r} is not a folder")
    return path


@pytest.mark.parametrize("name, item", list(_pairs()))
def test_library_template_verifies_against_its_chat_templates(name, item):
    folder = _chat_templates_folder()
    path = folder / item["file"]
    assert path.is_file(), f"{name}: chat template {item['file']} is missing from {folder}"
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == item["sha256"], f"{name}: {item['file']} changed since it was verified"
    entry = library.get_entry(name)
    options = {**entry.get("verify", {}), **item.get("verify", {})}
    report = verify(entry["template"], data.decode("utf-8"), options=options, supports=entry["supports"])
    assert report.ok, f"{name} against {item['file']}:\n{report.summary()}"
    # The same generations through transformers' own parser give the same messages.
    try:
        from transformers.utils.chat_parsing import parse_response as hf_parse_response
    except ImportError:
        return
    for case in report.cases:
        if case.parsed is not None:
            hf = hf_parse_response(case.generation, entry["template"], prefix=case.prompt, tools=case.tools)
            where = f"{name}/{item['file']}/{case.scenario}/{case.name}"
            if hf != case.parsed and (name, case.name) in READS_WHAT_TRANSFORMERS_KEEPS_AS_TEXT:
                # docs/differences.md: we read the Python literals these chat templates write, transformers keeps
                # them as text (or the whole argument object as one string). Everything but the arguments agrees.
                ours_calls, their_calls = case.parsed.get("tool_calls", []), hf.get("tool_calls", [])
                assert [c["function"]["name"] for c in their_calls] == [c["function"]["name"] for c in ours_calls]
                assert {k: v for k, v in hf.items() if k != "tool_calls"} == {
                    k: v for k, v in case.parsed.items() if k != "tool_calls"
                }, where
                continue
            assert hf == case.parsed, f"{where}: transformers gives {hf!r}"


# (template, canonical case) where the chat template writes argument values as Python literals (None, True, single
# quoted dicts): we return the values, transformers returns text (docs/differences.md, "Python literals").
READS_WHAT_TRANSFORMERS_KEEPS_AS_TEXT = {
    ("gemma-4", "nested_unicode_arguments"),
    ("functiongemma", "nested_unicode_arguments"),
    ("seed_oss", "nested_unicode_arguments"),
    ("minicpm5", "nested_unicode_arguments"),
}


def test_verify_entry_covers_every_listed_file():
    folder = _chat_templates_folder()
    reports = verify_entry("qwen3", folder)
    assert set(reports) == {item["file"] for item in library.get_entry("qwen3")["chat_templates"]}
    assert all(report.ok for report in reports.values())


def test_wrong_template_fails_with_a_useful_diff_on_real_chat_template():
    folder = _chat_templates_folder()
    # The Qwen2.5 template knows nothing of Llama 3.1's headers and bare JSON calls.
    source = (folder / "meta-llama--Llama-3.1-8B-Instruct.jinja").read_text(encoding="utf-8")
    report = verify(library.get_template("qwen2.5"), source, supports={"reasoning": False, "tool_calls": True, "parallel_tool_calls": False})
    assert not report.ok
    single = next(case for case in report.cases if case.name == "single_call")
    assert not single.ok
    assert any("tool_calls" in line for line in single.diff), single.diff
    assert "single_call" in report.summary() and "FAILED" in report.summary()


# --- verify's own behaviour, on a small ChatML chat template written for these tests -------------

MINI_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.reasoning_content %}<think>\n{{ m.reasoning_content }}\n</think>\n\n{% endif %}"
    "{{ m.content }}"
    "{% for c in m.tool_calls or [] %}\n<tool_call>\n"
    '{{ {"name": c.function.name, "arguments": c.function.arguments} | tojson }}\n</tool_call>{% endfor %}'
    "<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
ALL = {"reasoning": True, "tool_calls": True, "parallel_tool_calls": True}


def test_matching_template_verifies_every_case():
    report = verify(library.get_template("qwen3"), MINI_CHATML, supports=ALL)
    assert report.ok, report.summary()
    names = {case.name for case in report.cases}
    assert {"plain", "reasoning_only", "single_call", "parallel_calls", "no_arguments", "nested_unicode_arguments",
            "marker_text_arguments", "text_before_call", "multi_turn", "multi_turn_answer"} <= names
    single = next(case for case in report.cases if case.name == "single_call")
    assert single.prompt.endswith("<|im_start|>assistant\n")
    assert single.generation.startswith("<think>\n") and single.generation.endswith("</tool_call><|im_end|>\n")


def test_template_without_reasoning_field_fails_reasoning_cases():
    report = verify(library.get_template("qwen2.5"), MINI_CHATML, supports=ALL)
    assert not report.ok
    plain = next(case for case in report.cases if case.name == "plain")
    assert any(line.startswith("content:") and "<think>" in line for line in plain.diff), plain.diff
    assert any(line.startswith("reasoning_content:") for line in plain.diff), plain.diff


def test_wrong_argument_shape_is_reported():
    template = library.get_template("qwen2.5")
    template["fields"]["tool_calls"]["transform"] = {"type": "function", "function": {"name": "{content.name}", "arguments": {}}}
    report = verify(template, MINI_CHATML, supports={"reasoning": False, "tool_calls": True, "parallel_tool_calls": True})
    single = next(case for case in report.cases if case.name == "single_call")
    assert not single.ok
    assert any(line.startswith("tool_calls[0].arguments: expected {'city': 'Paris'") for line in single.diff), single.diff
    no_args = next(case for case in report.cases if case.name == "no_arguments")
    assert no_args.ok  # {} was right there


def test_argument_types_are_compared():
    from response_templates.authoring.verification import _compare

    expected = {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"days": 3, "ok": True}}}]}
    parsed = {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"days": "3", "ok": 1}}}]}
    diff = _compare(expected, parsed)
    assert diff == ["tool_calls[0].arguments: expected {'days': 3, 'ok': True}, got {'days': '3', 'ok': 1}"]
    assert _compare(expected, expected) == []


def test_skip_cases_and_case_selection():
    options = {"cases": ["plain", "single_call"], "skip_cases": {"single_call": "not rendered by this template"}}
    report = verify(library.get_template("qwen2.5"), MINI_CHATML, options=options,
                    supports={"reasoning": False, "tool_calls": True, "parallel_tool_calls": True})
    assert [(case.name, case.skipped) for case in report.cases] == [("plain", None), ("single_call", "not rendered by this template")]
    assert report.ok
    assert "1 skipped" in report.summary()


def test_everything_skipped_is_not_ok():
    options = {"cases": ["plain"], "skip_cases": {"plain": "no"}}
    report = verify(library.get_template("qwen2.5"), MINI_CHATML, options=options, supports={"reasoning": False, "tool_calls": False, "parallel_tool_calls": False})
    assert not report.ok


def test_scenarios_pass_render_kwargs():
    chat_template = MINI_CHATML.replace(
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}",
    )
    options = {"scenarios": [{"name": "on"}, {"name": "off", "render_kwargs": {"enable_thinking": False}, "reasoning": False}]}
    report = verify(library.get_template("qwen3"), chat_template, options=options, supports=ALL)
    # "off": the prompt prefills an empty think block the full rendering does not have: a clear failure.
    off = [case for case in report.cases if case.scenario == "off"]
    assert off and all(not case.ok for case in off)
    assert "not a prefix" in off[0].diff[0]
    assert all(case.ok for case in report.cases if case.scenario == "on")


def test_render_errors_are_reported_per_case():
    report = verify(library.get_template("qwen2.5"), "{{ raise_exception('no tools please') if tools else 'x' }}",
                    supports={"reasoning": False, "tool_calls": True, "parallel_tool_calls": False})
    single = next(case for case in report.cases if case.name == "single_call")
    assert not single.ok and "no tools please" in single.diff[0]


def test_library_entry_can_be_passed_whole():
    entry = library.get_entry("qwen2.5")
    report = verify(entry, MINI_CHATML)
    assert report.ok, report.summary()


def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="unknown keys"):
        check_options({"nope": 1})
    with pytest.raises(ValueError, match="unknown case names"):
        check_options({"skip_cases": {"bogus": "x"}})
    with pytest.raises(ValueError, match="scenarios\\[0\\]"):
        check_options({"scenarios": [{"render_kwargs": {}}]})
    with pytest.raises(ValueError, match="arguments"):
        verify(library.get_template("qwen2.5"), MINI_CHATML, options={"arguments": "yaml"})


def test_render_helpers_behave_like_transformers():
    source = (
        "{% generation %}{{ messages[0].content | tojson }}{% endgeneration %}|{{ {'a': 1} | tojson(indent=2) }}|"
        "{{ bos_token }}{{ eos_token }}|{{ strftime_now('%Y') | length }}|{% for i in [1, 2, 3] %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% endfor %}"
    )
    out = render_chat_template(source, [{"role": "user", "content": "é \"q\""}], bos_token="<s>", eos_token="</s>")
    assert out == '"é \\"q\\""|{\n  "a": 1\n}|<s></s>|4|1'
    with pytest.raises(Exception, match="boom"):
        render_chat_template("{{ raise_exception('boom') }}", [])


# A chat template that drops reasoning from the turns it renders and prefills "<think>\n" (like QwQ's).
DROPS_REASONING = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)


def test_reasoning_synthesis_builds_the_generation_for_templates_that_drop_reasoning():
    supports = {"reasoning": True, "tool_calls": False, "parallel_tool_calls": False}
    template = library.get_template("qwq")
    without = verify(template, DROPS_REASONING, supports=supports)
    assert not without.ok and "not a prefix" in without.cases[0].diff[0]
    options = {"reasoning_synthesis": {"prefill": "<think>\n", "close": "\n</think>\n\n"}}
    report = verify(template, DROPS_REASONING, options=options, supports=supports)
    assert report.ok, report.summary()
    assert report.cases[0].generation.startswith("The user wants a short fact.")


def test_reasoning_synthesis_when_the_answer_starts_with_the_reasoning_text():
    # The rendered turn (reasoning dropped) starts with the reasoning's text because the answer does: the reasoning
    # is still synthesised in front of it.
    synthesis = {"prefill": "<think>\n", "close": "\n</think>\n\n"}
    message = {"role": "assistant", "reasoning_content": "Paris", "content": "Paris is the capital."}
    prompt = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"
    full = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nParis is the capital.<|im_end|>\n"
    generation = generated_part(prompt, full, message, synthesis)
    assert generation == "Paris\n</think>\n\nParis is the capital.<|im_end|>\n"
    parsed = parse_response(generation, library.get_template("qwq"), prefix=prompt)
    assert parsed == {"role": "assistant", "reasoning_content": "Paris", "content": "Paris is the capital."}


# A chat template whose generation prompt ends with a sentence the rendered turn drops, and whose rendered turn
# writes the reasoning bare after its header (like Apriel 1.6's).
KEEPS_BARE_REASONING = (
    "{% for m in messages %}<|begin_{{ m.role }}|>\n{% if m.role == 'assistant' and m.reasoning_content %}"
    "{{ m.reasoning_content }}\n[BEGIN FINAL RESPONSE]\n{% endif %}{{ m.content }}\n<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|begin_assistant|>\nHere are my reasoning steps:\n{% endif %}"
)


def test_reasoning_synthesis_keeps_a_rendered_turn_that_starts_with_the_reasoning():
    supports = {"reasoning": True, "tool_calls": False, "parallel_tool_calls": False}
    template = library.get_template("apriel_thinker")
    without = verify(template, KEEPS_BARE_REASONING, supports=supports)
    assert not without.ok and "not a prefix" in without.cases[0].diff[0]
    options = {"reasoning_synthesis": {"prefill": "Here are my reasoning steps:\n", "close": "\n"}}
    report = verify(template, KEEPS_BARE_REASONING, options=options, supports=supports)
    assert report.ok, report.summary()
    # The rendered turn as written after the header: the reasoning once, not synthesised in front of it again.
    reasoning = report.cases[0].expected["reasoning_content"]
    assert report.cases[0].generation.startswith(reasoning + "\n[BEGIN FINAL RESPONSE]\n")
    assert report.cases[0].generation.count(reasoning) == 1


def test_reasoning_in_content_for_templates_that_read_reasoning_from_content():
    chat_template = DROPS_REASONING.replace("<think>\n{% endif %}", "{% endif %}")
    supports = {"reasoning": True, "tool_calls": False, "parallel_tool_calls": False}
    template = library.get_template("qwen3")
    assert not verify(template, chat_template, supports=supports).ok  # reasoning never reaches the rendering
    options = {"reasoning_in_content": {"open": "<think>\n", "close": "\n</think>\n\n"}}
    report = verify(template, chat_template, options=options, supports=supports)
    assert report.ok, report.summary()


def test_reasoning_key_for_templates_that_read_reasoning_under_another_key():
    chat_template = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.thinking %}<think>\n{{ m.thinking }}\n</think>\n\n"
        "{% endif %}{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    supports = {"reasoning": True, "tool_calls": False, "parallel_tool_calls": False}
    template = library.get_template("qwen3")
    assert not verify(template, chat_template, supports=supports).ok  # reasoning_content never reaches it
    report = verify(template, chat_template, options={"reasoning_key": "thinking"}, supports=supports)
    assert report.ok, report.summary()
    with pytest.raises(ValueError, match="reasoning_key"):
        check_options({"reasoning_key": "not a key"})


def test_json_string_arguments_option():
    # This chat template writes arguments verbatim, so it needs them as JSON text.
    chat_template = MINI_CHATML.replace(
        '{{ {"name": c.function.name, "arguments": c.function.arguments} | tojson }}',
        '{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments }}}',
    )
    supports = {"reasoning": False, "tool_calls": True, "parallel_tool_calls": True}
    template = library.get_template("qwen2.5")
    assert not verify(template, chat_template, supports=supports).ok
    report = verify(template, chat_template, options={"arguments": "json_string"}, supports=supports)
    assert report.ok, report.summary()


def test_tools_shape_option_gives_bare_function_schemas():
    # This chat template reads tool.name, as Apertus's does: it needs the schemas without the OpenAI wrapper.
    chat_template = "{% for t in tools or [] %}<|im_start|>system\n{{ 'tool ' + t.name }}<|im_end|>\n{% endfor %}" + MINI_CHATML
    supports = {"reasoning": False, "tool_calls": True, "parallel_tool_calls": True}
    template = library.get_template("qwen2.5")
    wrapped = verify(template, chat_template, options={"cases": ["single_call"]}, supports=supports)
    assert not wrapped.ok and "failed to render" in wrapped.summary()
    bare = verify(template, chat_template, options={"cases": ["single_call"], "tools_shape": "function"}, supports=supports)
    assert bare.ok, bare.summary()
    assert "tool get_weather" in bare.cases[0].prompt
    assert bare.cases[0].tools[0]["type"] == "function"  # the parse still gets the wrapped tools
    with pytest.raises(ValueError, match="tools_shape"):
        check_options({"tools_shape": "bare"})


def test_content_parts_option_gives_text_as_a_list_of_parts():
    # A vision model's chat template that reads content only as typed parts, as SmolVLM's does.
    chat_template = (
        "{% for m in messages %}{{ m.role | capitalize }}:{% for part in m.content %}{% if part.type == 'text' %}"
        " {{ part.text }}{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}"
        "{% if add_generation_prompt %}Assistant:{% endif %}"
    )
    entry = library.get_entry("smolvlm")
    as_text = verify(entry["template"], chat_template, options={}, supports=entry["supports"])
    assert not as_text.ok  # a string's characters are not parts: the answer is not rendered
    report = verify(entry["template"], chat_template, options={"content_parts": True}, supports=entry["supports"])
    assert report.ok, report.summary()
    assert report.cases[0].generation.startswith(" ") and report.cases[0].generation.endswith("<end_of_utterance>\n")
    with pytest.raises(ValueError, match="content_parts"):
        check_options({"content_parts": "yes"})


def test_source_edits_cut_out_parts_jinja2_cannot_run():
    chat = MINI_CHATML + "{%- set broken = messages[0].nope.deeper %}"
    assert not verify(library.get_template("qwen3"), chat, supports=ALL).ok  # the stray line breaks every render
    edit = {"remove": "{%- set broken = messages[0].nope.deeper %}", "why": "a llama.cpp-only line"}
    assert verify(library.get_template("qwen3"), chat, supports=ALL, options={"source_edits": [edit]}).ok


@pytest.mark.parametrize("edits, message", [
    ([{"remove": "not in the file", "why": "x"}], "occurs 0 times"),
    ([{"remove": "{{", "why": "x"}], "occurs"),
    ([{"remove": "a"}], "source_edits\\[0\\]"),
    ("nope", "must be a list"),
])
def test_source_edits_that_do_not_apply_are_errors(edits, message):
    with pytest.raises(ValueError, match=message):
        verify(library.get_template("qwen3"), MINI_CHATML, options={"source_edits": edits})

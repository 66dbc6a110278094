"""TRL's tool-calling rollouts get transformers 5.25's message on every transformers release (issue 30).

TRL's GRPO and distillation trainers parse each rollout with `trl.chat_template_utils.parse_response(tokenizer, ids,
prefix=prompt_ids, tools=tools)` after `add_response_schema(tokenizer)` has matched the chat template to one of
TRL's response templates. TRL decides by transformers' version whether the tokenizer takes `prefix=`/`tools=`; with
this package installed it does on every release, and TRL is told so (response_templates/integrations/trl.py).

For every chat template TRL knows, has a response template for, and this package's library covers, a tokenizer is
built offline with that chat template, the prompt is rendered by it (with tools), and three rollouts are parsed
through TRL's helpers: a tool call (after reasoning where the family reasons, or with the reasoning opener
pre-written by the prompt), a plain answer, and a damaged tool call. The expected messages below are the same on
every release; on transformers 5.25 each is also compared with what TRL gives with transformers' own parser (this
package unpatched), the reference the issue names.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass

import pytest

import response_templates

pytest.importorskip("transformers")
chat_utils = pytest.importorskip(
    "trl.chat_template_utils", reason="TRL is not installed (pip install trl): the TRL integration is not tested here"
)
try:  # the trainers need more than the helpers (torch, accelerate, datasets, requests)
    from trl.trainer import grpo_trainer
except (ImportError, RuntimeError) as _error:  # TRL's lazy modules raise RuntimeError
    grpo_trainer = None
    GRPO_MISSING = f"TRL's GRPO trainer cannot be imported here ({_error})"
needs_grpo = pytest.mark.skipif(grpo_trainer is None, reason=GRPO_MISSING if grpo_trainer is None else "")

from oracle import REFERENCE, transformers_version  # noqa: E402
from response_templates.integrations import trl as trl_integration  # noqa: E402
from response_templates.library import name_for  # noqa: E402
from tokenizer_factory import build_tokenizer_dir, load_tokenizer  # noqa: E402

ON_REFERENCE = (transformers_version() or (0, 0)) >= REFERENCE
# TRL 1.16 passes the tools to tokenizer.parse_response; TRL 1.8 to 1.15 take no tools (their parse_response has none).
TRL_TAKES_TOOLS = "tools" in inspect.signature(chat_utils.parse_response).parameters

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "ship",
            "description": "Ship a parcel",
            "parameters": {
                "type": "object",
                # zip is a string made of digits: only the tool's schema keeps it a string in the xml-style families
                "properties": {"weight": {"type": "integer"}, "zip": {"type": "string"}},
                "required": ["weight", "zip"],
            },
        },
    }
]
SHIP = {"type": "function", "function": {"name": "ship", "arguments": {"weight": 3, "zip": "75001"}}}
REASONING = "Weigh it first."
FALLBACK = "decoded text"  # TRL's own fallback: the rollout decoded without special tokens, as content


@dataclass(frozen=True)
class Family:
    """How one of TRL's response templates writes a turn, as the model generates it after the prompt."""

    tokens: tuple[str, ...]  # control tokens added to the test tokenizer (single ids, as in the real vocabularies)
    think: tuple[str, str] | None  # reasoning opener and closer, None when the family does not reason
    reasoning_key: str
    call: str  # a tool call to ship(weight=3, zip="75001"), up to the end of the turn
    answer: str  # a plain answer "Shipped."
    damaged: str  # a tool call cut off mid-arguments (a rollout stopped by max_completion_length)
    damaged_message: dict | str  # what TRL returns for it on transformers 5.25 (FALLBACK or a message)
    xml_values: bool = False  # argument values written as bare text: only the tool's schema tells "75001" from 75001


QWEN_XML_CALL = (
    "<tool_call>\n<function=ship>\n<parameter=weight>\n3\n</parameter>\n<parameter=zip>\n75001\n</parameter>\n"
    "</function>\n</tool_call>"
)
# The xml-style families parse a cut-off call leniently: the call with the arguments that were closed (none here).
CUT_XML_CALL = {"tool_calls": [{"type": "function", "function": {"name": "ship", "arguments": {}}}], "content": ""}

# Keyed by the name of TRL's response template in trl.chat_template_utils.
FAMILIES = {
    "qwen3_template": Family(
        tokens=(),
        think=("<think>\n", "\n</think>\n\n"),
        reasoning_key="reasoning_content",
        call='<tool_call>\n{"name": "ship", "arguments": {"weight": 3, "zip": "75001"}}\n</tool_call><|im_end|>',
        answer="Shipped.<|im_end|>",
        damaged='<tool_call>\n{"name": "ship", "arguments": {"weight": 3,',
        damaged_message=FALLBACK,  # the unfinished JSON does not parse: TRL keeps the text
    ),
    "qwen3_5_template": Family(
        xml_values=True,
        tokens=(),
        think=("<think>\n", "\n</think>\n\n"),
        reasoning_key="reasoning_content",
        call=QWEN_XML_CALL + "<|im_end|>",
        answer="Shipped.<|im_end|>",
        damaged="<tool_call>\n<function=ship>\n<parameter=weight>\n3\n",
        damaged_message=CUT_XML_CALL,
    ),
    "nemotron_3_template": Family(
        xml_values=True,
        tokens=(),
        think=("<think>\n", "\n</think>\n"),
        reasoning_key="reasoning_content",
        call=QWEN_XML_CALL + "\n<|im_end|>",
        answer="Shipped.<|im_end|>",
        damaged="<tool_call>\n<function=ship>\n<parameter=weight>\n3\n",
        damaged_message=CUT_XML_CALL,
    ),
    "glm4moe_template": Family(
        xml_values=True,
        tokens=("<|assistant|>", "<|user|>", "<|observation|>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
        think=("<think>", "</think>\n"),
        reasoning_key="reasoning_content",
        # The stop token (<|observation|>) is not part of the rollout here: TRL's template does not know it.
        call="<tool_call>ship\n<arg_key>weight</arg_key>\n<arg_value>3</arg_value>\n<arg_key>zip</arg_key>\n"
        "<arg_value>75001</arg_value>\n</tool_call>",
        answer="Shipped.<|user|>",
        damaged="<tool_call>ship\n<arg_key>weight</arg_key>\n<arg_va",
        damaged_message=CUT_XML_CALL,
    ),
    "llama3_template": Family(
        tokens=("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
        think=None,
        reasoning_key="",
        call='{"name": "ship", "parameters": {"weight": 3, "zip": "75001"}}<|eot_id|>',
        answer="Shipped.<|eot_id|>",
        damaged='{"name": "ship", "parameters": {"weight": 3, "zip"',
        damaged_message=FALLBACK,
    ),
    "gptoss_template": Family(
        tokens=("<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|call|>", "<|return|>"),
        think=("<|channel|>analysis<|message|>", "<|end|>"),
        reasoning_key="thinking",
        call='<|start|>assistant to=functions.ship<|channel|>commentary json<|message|>{"weight": 3, "zip": "75001"}'
        "<|call|>",
        answer="<|start|>assistant<|channel|>final<|message|>Shipped.<|return|>",
        damaged='<|start|>assistant to=functions.ship<|channel|>commentary json<|message|>{"weight": 3, "zi',
        damaged_message=FALLBACK,
    ),
    "lfm2_2_5_template": Family(
        tokens=("<|tool_call_start|>", "<|tool_call_end|>"),
        think=("<think>", "</think>"),
        reasoning_key="thinking",
        call="<|tool_call_start|>[ship(weight=3, zip='75001')]<|tool_call_end|><|im_end|>",
        answer="Shipped.<|im_end|>",
        damaged="<|tool_call_start|>[ship(weight=3, zip='750",
        # TRL's LFM2.5 template keeps the arguments read before the cut, the last one as the raw text it had.
        damaged_message={
            "tool_calls": [{"type": "function", "function": {"name": "ship", "arguments": {"weight": 3, "zip": "'750"}}}],
            "content": "",
        },
    ),
    "gemma4_template": Family(
        tokens=("<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>',
                "<|tool_response>", "<tool_response|>"),
        think=("<|channel>thought\n", "<channel|>"),
        reasoning_key="reasoning_content",
        call='<|tool_call>call:ship{weight:3,zip:<|"|>75001<|"|>}<tool_call|><|tool_response>',
        answer="Shipped.<turn|>",
        damaged='<|tool_call>call:ship{weight:3,zip:<|"|>750',
        damaged_message=FALLBACK,
    ),
    "deepseek_r1_distill_template": Family(  # no tool calls (TRL: the chat template cannot render them back)
        tokens=("<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"),
        think=("<think>\n", "\n</think>\n\n"),
        reasoning_key="reasoning_content",
        call="",
        answer="Shipped.<｜end▁of▁sentence｜>",
        damaged="",
        damaged_message=FALLBACK,
    ),
}


def covered_chat_templates() -> list[str]:
    """TRL's chat templates (names in trl.chat_template_utils) that TRL has a response template for and that this
    package's library serves: the ones a TRL user of ours meets."""
    names = []
    for name in sorted(vars(chat_utils)):
        text = getattr(chat_utils, name)
        if not name.endswith("_chat_template") or "training" in name or not isinstance(text, str):
            continue
        probe = _Probe(text)
        try:
            chat_utils.add_response_schema(probe)
        except ValueError:
            continue  # TRL has no response template for it
        if name_for(probe) is not None:
            names.append(name)
    return names


class _Probe:
    """Just what add_response_schema and the library lookup read from a tokenizer."""

    def __init__(self, chat_template: str):
        self.chat_template = chat_template
        self.name_or_path = ""
        self.response_template = None


CHAT_TEMPLATES = covered_chat_templates()


def family_of(tokenizer) -> str:
    for name in FAMILIES:
        if getattr(chat_utils, name, None) is tokenizer.response_template:
            return name
    raise AssertionError(f"TRL set a response template this test does not know: {tokenizer.response_template!r:.200}")


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    return build_tokenizer_dir(tmp_path_factory.mktemp("trl") / "tokenizer", chat_template=None)


def trl_tokenizer(base_dir, chat_template_name: str):
    """The test tokenizer with one of TRL's chat templates, prepared the way TRL's trainers prepare it."""
    tokenizer = load_tokenizer(base_dir)
    tokenizer.chat_template = getattr(chat_utils, chat_template_name)
    chat_utils.add_response_schema(tokenizer)
    family = FAMILIES[family_of(tokenizer)]
    if family.tokens:
        tokenizer.add_tokens(list(family.tokens), special_tokens=True)
    return tokenizer


def prompt_ids(tokenizer, **chat_template_kwargs) -> tuple[str, list[int]]:
    messages = [{"role": "user", "content": "Ship 3 kg to 75001."}]
    prompt = tokenizer.apply_chat_template(
        messages, tools=TOOLS, add_generation_prompt=True, tokenize=False, **chat_template_kwargs
    )
    return prompt, tokenizer(prompt, add_special_tokens=False)["input_ids"]


def rollout(prompt: str, family: Family, rest: str) -> tuple[str, bool]:
    """The generated text: reasoning (unless the prompt closed it), then `rest`. Also says whether it reasons."""
    if family.think is None:
        return rest, False
    opener, closer = family.think
    if prompt.rstrip().endswith(closer.strip()):
        return rest, False  # the prompt pre-wrote an empty reasoning block (thinking turned off)
    if prompt.endswith(opener):
        return REASONING + closer + rest, True  # the prompt pre-wrote the opener: the model continues the reasoning
    return opener + REASONING + closer + rest, True


def message(family: Family, reasoned: bool, **fields) -> dict:
    expected = {"role": "assistant", **fields}
    if reasoned:
        expected[family.reasoning_key] = REASONING
    return expected


def ship_call(family: Family) -> dict:
    if family.xml_values and not TRL_TAKES_TOOLS:
        # Without tools= (TRL before 1.16) TRL's xml-style templates guess each value's type with a lenient JSON
        # parse, on transformers 5.25 as well.
        return {"type": "function", "function": {"name": "ship", "arguments": {"weight": 3, "zip": 75001}}}
    return SHIP


def trl_parse(tokenizer, ids, prefix, tools=TOOLS):
    """Parse as TRL's GRPO trainer does (its own binding of trl.chat_template_utils.parse_response, when the trainer
    can be imported here)."""
    parse = (grpo_trainer or chat_utils).parse_response
    if not TRL_TAKES_TOOLS:
        return parse(tokenizer, ids, prefix=prefix)
    return parse(tokenizer, ids, prefix=prefix, tools=tools)


def reference_parse(tokenizer, ids, prefix, tools=TOOLS):
    """What TRL gives with transformers 5.25's own parser: this package unpatched for the call."""
    response_templates.unpatch()
    try:
        return trl_parse(tokenizer, ids, prefix, tools)
    finally:
        response_templates.patch()


def check(tokenizer, ids, prefix, expected):
    got = trl_parse(tokenizer, ids, prefix)
    assert got == expected
    if ON_REFERENCE:
        assert reference_parse(tokenizer, ids, prefix) == got


def test_the_library_covers_trl_chat_templates_of_every_family():
    # The parametrized tests below mean something only if TRL's templates are found (the names are TRL's).
    assert {"qwen3_chat_template", "llama3_1_chat_template", "glm4moe_chat_template"} <= set(CHAT_TEMPLATES)
    assert len(CHAT_TEMPLATES) >= 15, CHAT_TEMPLATES


def test_trl_is_told_what_the_patched_tokenizers_can_do():
    # On releases before 5.13 (5.15 for tools=) TRL would take the legacy path; our tokenizers take both arguments.
    assert chat_utils._SUPPORTS_RESPONSE_TEMPLATE is True
    assert getattr(chat_utils, "_SUPPORTS_PARSE_RESPONSE_TOOLS", True) is True


@needs_grpo
def test_the_grpo_trainer_uses_the_same_helpers_and_flags():
    assert grpo_trainer._SUPPORTS_RESPONSE_TEMPLATE is True  # the trainer's copy, read for its jmespath check
    assert grpo_trainer.parse_response is chat_utils.parse_response


@pytest.mark.parametrize("chat_template", CHAT_TEMPLATES)
def test_add_response_schema_sets_the_response_template(base_dir, chat_template, tmp_path):
    tokenizer = trl_tokenizer(base_dir, chat_template)
    assert tokenizer.response_template is getattr(chat_utils, family_of(tokenizer))
    assert getattr(tokenizer, "response_schema", None) is None  # not the legacy format, on any release
    # A checkpoint keeps it: the reloaded tokenizer parses without TRL's help.
    tokenizer.save_pretrained(tmp_path)
    reloaded = load_tokenizer(tmp_path)
    assert reloaded.response_template == tokenizer.response_template


@pytest.mark.parametrize("chat_template", CHAT_TEMPLATES)
def test_a_tool_call_rollout_is_a_tool_call(base_dir, chat_template):
    tokenizer = trl_tokenizer(base_dir, chat_template)
    family = FAMILIES[family_of(tokenizer)]
    if not family.call:
        pytest.skip(f"TRL's template for {chat_template} has no tool calls")
    prompt, prefix = prompt_ids(tokenizer)
    text, reasoned = rollout(prompt, family, family.call)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    check(tokenizer, ids, prefix, message(family, reasoned, tool_calls=[ship_call(family)], content=""))


@pytest.mark.parametrize("chat_template", CHAT_TEMPLATES)
def test_an_answer_rollout_keeps_its_reasoning(base_dir, chat_template):
    tokenizer = trl_tokenizer(base_dir, chat_template)
    family = FAMILIES[family_of(tokenizer)]
    prompt, prefix = prompt_ids(tokenizer)
    text, reasoned = rollout(prompt, family, family.answer)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    check(tokenizer, ids, prefix, message(family, reasoned, content="Shipped."))


PREFILLING = [
    # (chat template, chat template arguments): prompts that pre-write the reasoning opener or an empty reasoning block
    ("nemotron_3_nano_chat_template", {}),
    ("qwen3_5_think_chat_template", {}),
    ("deepseek_r1_distill_chat_template", {}),
    ("qwen3_chat_template", {"enable_thinking": False}),
    ("qwen3_5_nothink_chat_template", {}),
]


@pytest.mark.parametrize(("chat_template", "kwargs"), PREFILLING, ids=[name for name, _ in PREFILLING])
def test_prefilled_reasoning_is_read_from_the_prompt(base_dir, chat_template, kwargs):
    if chat_template not in CHAT_TEMPLATES:
        pytest.skip(f"{chat_template} is not among the covered TRL chat templates of this TRL release")
    tokenizer = trl_tokenizer(base_dir, chat_template)
    family = FAMILIES[family_of(tokenizer)]
    prompt, prefix = prompt_ids(tokenizer, **kwargs)
    opener, closer = family.think
    assert prompt.endswith(opener) or prompt.rstrip().endswith(closer.strip()), "the prompt pre-writes nothing"
    text, reasoned = rollout(prompt, family, family.answer)
    assert not text.startswith(opener)  # the rollout alone does not say it is reasoning
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    expected = message(family, reasoned, content="Shipped.")
    check(tokenizer, ids, prefix, expected)
    if reasoned and chat_template == "qwen3_5_think_chat_template":
        # Without the prompt the reasoning would be read as the answer: the prefix is what TRL must pass. (TRL's
        # Nemotron 3 and R1-distill templates open the reasoning wherever a `</think>` follows, prompt or not.)
        assert tokenizer.parse_response(ids, prefix="")["content"].startswith(REASONING)


@pytest.mark.parametrize("chat_template", CHAT_TEMPLATES)
def test_a_damaged_rollout_gives_what_transformers_5_25_gives(base_dir, chat_template):
    tokenizer = trl_tokenizer(base_dir, chat_template)
    family = FAMILIES[family_of(tokenizer)]
    if not family.damaged:
        pytest.skip(f"TRL's template for {chat_template} has no tool calls")
    prompt, prefix = prompt_ids(tokenizer)
    text, reasoned = rollout(prompt, family, family.damaged)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if family.damaged_message == FALLBACK:
        expected = {"role": "assistant", "content": tokenizer.decode(ids, skip_special_tokens=True)}
    else:
        expected = message(family, reasoned, **family.damaged_message)
    check(tokenizer, ids, prefix, expected)


def test_a_call_without_the_prompt_falls_back_to_text_as_on_5_25(base_dir):
    # TRL calls tokenizer.parse_response(ids) without prefix= only when its caller has no prompt. No prefix is
    # guessed: the tokenizer refuses (as transformers 5.25's does) and TRL keeps the decoded text.
    tokenizer = trl_tokenizer(base_dir, "qwen3_chat_template")
    text = "<think>\nWeigh it first.\n</think>\n\n" + FAMILIES["qwen3_template"].call
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    with pytest.raises(ValueError, match="prefix"):
        tokenizer.parse_response(ids)
    got = chat_utils.parse_response(tokenizer, ids)
    assert got == {"role": "assistant", "content": tokenizer.decode(ids, skip_special_tokens=True)}
    if ON_REFERENCE:
        response_templates.unpatch()
        try:
            assert chat_utils.parse_response(tokenizer, ids) == got
        finally:
            response_templates.patch()


def test_unpatch_gives_trl_its_own_flags_back():
    before = trl_integration.raised_flags()
    xml_parser = getattr(chat_utils, "_XML_INLINE_VALUE_PARSER", None)
    response_templates.unpatch()
    try:
        assert trl_integration.raised_flags() == []
        if "_SUPPORTS_RESPONSE_TEMPLATE" in before:  # releases before 5.13: TRL's own version gate is back
            assert chat_utils._SUPPORTS_RESPONSE_TEMPLATE is False
            if grpo_trainer is not None:
                assert grpo_trainer._SUPPORTS_RESPONSE_TEMPLATE is False
        if "_SUPPORTS_PARSE_RESPONSE_TOOLS" in before and xml_parser is not None:
            assert chat_utils._SUPPORTS_PARSE_RESPONSE_TOOLS is False
            assert xml_parser["name"] == "json"  # TRL's guess of the argument types, without tools=
    finally:
        response_templates.patch()
    assert trl_integration.raised_flags() == before
    assert chat_utils._SUPPORTS_RESPONSE_TEMPLATE is True
    if xml_parser is not None:
        assert xml_parser == {"name": "text"}  # the tool's schema types the arguments, as on 5.15 and later


def test_raised_flags_are_the_ones_this_release_lacks():
    version = transformers_version()
    flags = set(trl_integration.raised_flags())
    assert ("_SUPPORTS_RESPONSE_TEMPLATE" in flags) == (version < (5, 13))
    if hasattr(chat_utils, "_SUPPORTS_PARSE_RESPONSE_TOOLS"):
        assert ("_SUPPORTS_PARSE_RESPONSE_TOOLS" in flags) == (version < (5, 15))


def _pth_installed() -> bool:
    import site
    import sysconfig
    from pathlib import Path

    dirs = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    return any((Path(d) / "response_templates_autopatch.pth").is_file() for d in dirs)


@pytest.mark.skipif(not _pth_installed(), reason="the .pth hook is not installed here (run from the installed wheel)")
def test_trl_user_code_unchanged_gets_the_tool_call(base_dir):
    # The scenario in a fresh interpreter that never imports response_templates: the .pth hook does it all.
    text = "<think>\nWeigh it first.\n</think>\n\n" + FAMILIES["qwen3_template"].call
    script = textwrap.dedent(
        f"""
        import json
        from transformers import AutoTokenizer
        from trl.chat_template_utils import add_response_schema, parse_response, qwen3_chat_template
        tok = AutoTokenizer.from_pretrained({str(base_dir)!r}, local_files_only=True)
        tok.chat_template = qwen3_chat_template
        add_response_schema(tok)
        tools = {TOOLS!r}
        prompt = tok.apply_chat_template([{{"role": "user", "content": "Ship it"}}], tools=tools,
                                         add_generation_prompt=True, tokenize=False)
        prefix = tok(prompt, add_special_tokens=False)["input_ids"]
        text = {text!r}
        ids = tok(text, add_special_tokens=False)["input_ids"]
        extra = {{"tools": tools}} if {TRL_TAKES_TOOLS!r} else {{}}
        print(json.dumps(parse_response(tok, ids, prefix=prefix, **extra)))
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RESPONSE_TEMPLATES_DISABLE")}
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env, cwd=str(base_dir)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    import json

    lines = done.stdout.strip().splitlines()
    assert json.loads(lines[-1]) == {
        "role": "assistant",
        "reasoning_content": REASONING,
        "tool_calls": [SHIP],
        "content": "",
    }


@needs_grpo
def test_a_grpo_training_step_executes_the_rollouts_tool_call(base_dir, tmp_path, monkeypatch):
    # TRL's GRPOTrainer end to end: a tiny random model, a rollout_func that returns a Qwen3 tool-calling rollout, one
    # training step. The trainer parses the rollout with TRL's parse_response, runs the tool with the parsed
    # arguments, and hands the parsed message to the reward function.
    version = transformers_version()
    if version < (5, 0):
        pytest.skip("TRL's GRPOTrainer refuses tools= on transformers before 5.0 (its own version check)")
    pytest.importorskip("datasets")
    torch = pytest.importorskip("torch")
    from datasets import Dataset
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental
    tokenizer = load_tokenizer(base_dir)
    tokenizer.chat_template = chat_utils.qwen3_chat_template
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model = Qwen2ForCausalLM(config)

    calls = []

    def ship(weight: int, zip: str) -> str:  # noqa: A002 (the tool's parameter name)
        """Ship a parcel.

        Args:
            weight: the weight in kilograms
            zip: the postal code
        """
        calls.append((weight, zip))
        return "shipped"

    seen = []

    def reward(completions, **kwargs):
        seen.extend(completions)
        return [0.0] * len(completions)

    generated = "<think>\nWeigh it first.\n</think>\n\n" + FAMILIES["qwen3_template"].call

    def rollout_func(prompts, trainer):
        prompt_ids_list, completion_ids, logprobs = [], [], []
        for prompt in prompts:
            text = tokenizer.apply_chat_template(prompt, tools=[ship], add_generation_prompt=True, tokenize=False)
            prompt_ids_list.append(tokenizer(text, add_special_tokens=False)["input_ids"])
            ids = tokenizer(generated, add_special_tokens=False)["input_ids"]
            completion_ids.append(ids)
            logprobs.append([0.0] * len(ids))
        return {"prompt_ids": prompt_ids_list, "completion_ids": completion_ids, "logprobs": logprobs}

    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": "Ship 3 kg to 75001."}]}] * 2)
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=64,
        max_steps=1,
        max_tool_calling_iterations=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=reward,
        args=args,
        train_dataset=dataset,
        tools=[ship],
        rollout_func=rollout_func,
    )
    trainer.train()
    assert calls == [(3, "75001"), (3, "75001")]  # the tool ran, with the arguments typed by its signature
    assert seen and seen[0][0] == {
        "role": "assistant",
        "reasoning_content": REASONING,
        "tool_calls": [SHIP],
        "content": "",
    }

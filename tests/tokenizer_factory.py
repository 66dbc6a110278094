"""Build small, real tokenizers offline for tests.

``build_tokenizer_dir(path)`` trains a tiny byte-level BPE with the ``tokenizers`` library, adds the chat control
tokens of ChatML-style models (``<|im_start|>``, ``<|im_end|>``, ``<think>``, ``</think>``, ``<tool_call>``,
``</tool_call>``) and writes a directory that ``AutoTokenizer.from_pretrained`` loads on every supported
transformers release. ``load_tokenizer(path)`` does that load. Nothing here touches the network.

Other test modules may reuse these helpers (import ``tokenizer_factory``; pytest puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# <|im_start|> / <|im_end|> are special tokens; the others are ordinary added tokens, as in Qwen-style models. They
# all count as chat control tokens because they are special or appear in the chat template's literal text.
SPECIAL_TOKENS = ["<|im_start|>", "<|im_end|>"]
ADDED_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>"]
CHAT_TOKENS = SPECIAL_TOKENS + ADDED_TOKENS

# A ChatML-like chat template (our own, written for tests): reasoning in <think>, tool calls as JSON in <tool_call>.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message.get('reasoning_content') %}"
    "{{- '<think>\\n' + message['reasoning_content'] + '\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{{- message.get('content') or '' }}"
    "{%- for call in message.get('tool_calls') or [] %}"
    "{{- '\\n<tool_call>\\n' + (call.function if call.function is defined else call)|tojson + '\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking %}{{- '<think>\\n' }}{%- endif %}"
    "{%- endif %}"
)

# A response template for the chat template above (version-1 format): the prompt opens the assistant turn,
# reasoning sits in <think>...</think>, tool calls are JSON objects in <tool_call>...</tool_call>.
RESPONSE_TEMPLATE: dict[str, Any] = {
    "version": 1,
    "start_anchor": "<|im_start|>assistant\n",
    "defaults": {"role": "assistant"},
    "fields": {
        "reasoning_content": {"open": "<think>", "close": "</think>"},
        "tool_calls": {
            "open": "<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        # No "open": the implicit field that collects everything else.
        "content": {"close": "<|im_end|>"},
    },
}

# Enough varied text for the BPE to learn common English, JSON and markup pieces.
_CORPUS = [
    "The weather in Paris is sunny today, with a high of 21 degrees.",
    "Let me think about this step by step before answering the question.",
    'I will call the tool: {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}',
    "Numbers 0 1 2 3 4 5 6 7 8 9 10 42 3.14 -7 true false null",
    "def add(a, b):\n    return a + b\n",
    "Hello! How can I help you? Bonjour, ça va ? Grüße aus Köln. 東京 🙂",
    "<b>bold</b> <i>italic</i> [list] (parens) {braces} 'quotes' \"double\" a|b ~ ^ % $ # @ ! ? ; :",
    "user assistant system tool role content reasoning tool_calls function name arguments",
]


def build_tokenizer_dir(
    path: str | Path,
    *,
    response_template: dict | None = None,
    chat_template: str | None = CHAT_TEMPLATE,
    tokenizer_class: str = "PreTrainedTokenizerFast",
    extra_config: dict | None = None,
    vocab_size: int = 600,
) -> Path:
    """Train a tiny byte-level BPE and save a tokenizer directory (tokenizer.json + tokenizer_config.json) at `path`.

    `response_template`, when given, is written to tokenizer_config.json like a Hub repo would ship it.
    `extra_config` adds or overrides tokenizer_config.json keys. Returns the directory.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS * 4, trainer=trainer)
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    tokenizer.save(str(path / "tokenizer.json"))

    config: dict[str, Any] = {
        "tokenizer_class": tokenizer_class,
        "eos_token": "<|im_end|>",
        "pad_token": "<|im_end|>",
        "bos_token": None,
        "unk_token": None,
        "model_max_length": 4096,
        "clean_up_tokenization_spaces": False,
    }
    if chat_template is not None:
        config["chat_template"] = chat_template
    if response_template is not None:
        config["response_template"] = response_template
    config.update(extra_config or {})
    (path / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def load_tokenizer(path: str | Path, **kwargs):
    """Load a directory written by `build_tokenizer_dir` with `AutoTokenizer.from_pretrained` (offline)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), local_files_only=True, **kwargs)


def make_tokenizer(tmp_path: str | Path, **kwargs):
    """Build a tokenizer directory under `tmp_path` and load it: the one-call version for tests."""
    return load_tokenizer(build_tokenizer_dir(Path(tmp_path) / "tokenizer", **kwargs))


# The tool the test outputs call, as a JSON schema (typing: city stays a string, days becomes an integer).
WEATHER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    }
]

"""A small Qwen-style tokenizer built on the spot with the `tokenizers` library, so the examples run offline.

Real code loads the model's own tokenizer (`AutoTokenizer.from_pretrained("Qwen/Qwen3-8B")`); nothing else in
the examples changes. This one is a byte-level BPE trained in a fraction of a second on a few sentences, with
the chat control tokens of Qwen3 added as single tokens.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import response_templates  # noqa: F401
except ImportError:  # run from a checkout without installing: use the package next to this folder
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CONTROL_TOKENS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
ADDED_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>"]

_TRAINING_TEXT = [
    "The user wants the weather in Paris, so I should call the get_weather tool with the city.",
    'Calling {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}} now.',
    "It is 18 degrees and sunny in Paris today. Bonjour! Grüße, 東京 🙂",
    "system user assistant tool You are a helpful assistant. What is the weather like?",
]


def build_backend():
    """A `tokenizers.Tokenizer`: byte-level BPE plus the control tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(_TRAINING_TEXT * 4, trainer=trainer)
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in CONTROL_TOKENS])
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    return tokenizer


def build_tokenizer():
    """A transformers fast tokenizer wrapping `build_backend()`, or None when transformers is not installed."""
    try:
        from transformers import PreTrainedTokenizerFast
    except ImportError:
        return None
    return PreTrainedTokenizerFast(tokenizer_object=build_backend(), eos_token="<|im_end|>", pad_token="<|im_end|>")

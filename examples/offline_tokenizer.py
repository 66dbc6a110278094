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


def save_tokenizer_dir(path, response_template: str | None = "qwen3") -> bool:
    """Save `build_tokenizer()` to the directory `path`, as a model repository ships its tokenizer: with the library
    template `response_template` in its tokenizer_config.json. False when transformers is not installed."""
    tokenizer = build_tokenizer()
    if tokenizer is None:
        return False
    if response_template is not None:
        from response_templates import get_template

        tokenizer.response_template = get_template(response_template)
    tokenizer.save_pretrained(str(path))
    return True


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        description="Save the examples' small Qwen-style tokenizer (with the qwen3 response template in its "
        "tokenizer_config.json) to a directory, to try `AutoTokenizer.from_pretrained(DIR)` or "
        "`response-templates parse --template DIR` offline."
    )
    parser.add_argument("directory", help="where to save it (created if needed)")
    parser.add_argument("--template", default="qwen3", help="library template to store (default: qwen3)")
    args = parser.parse_args(argv)
    if not save_tokenizer_dir(args.directory, args.template):
        print("saving a tokenizer needs transformers: pip install transformers", file=sys.stderr)
        return 1
    print(f"saved to {args.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

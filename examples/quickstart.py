"""Quickstart: parse a Qwen3 generation (reasoning + a tool call) into a message dict, offline.

    python examples/quickstart.py

The prompt and the generation are token ids, as `model.generate` returns them; the tokenizer is a small one
built on the spot (see offline_tokenizer.py), with Qwen3's control tokens. With a real model you would write:

    tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-8B")
    message = tokenizer.parse_response(generated_ids, prefix=prompt_ids)
"""

import json

from offline_tokenizer import build_tokenizer

from response_templates import parse_response
from response_templates.library import template_for
from response_templates.openai_adapter import to_openai_message

PROMPT = (
    "<|im_start|>user\nWhat's the weather like in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n"
)
GENERATION = (
    "<think>\nThe user wants the weather in Paris, so I should call get_weather.\n</think>\n\n"
    "Let me check that for you.\n\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>'
    "<|im_end|>"
)


def main() -> None:
    template = template_for("Qwen/Qwen3-8B")  # the library's verified template for this model
    tokenizer = build_tokenizer()
    if tokenizer is None:  # transformers not installed: parse the text instead of token ids
        message = parse_response(GENERATION, template, prefix=PROMPT)
    else:
        prompt_ids = tokenizer.encode(PROMPT, add_special_tokens=False)
        generated_ids = tokenizer.encode(GENERATION, add_special_tokens=False)
        message = parse_response(generated_ids, template, prefix=prompt_ids, tokenizer=tokenizer)
    print("Parsed message:")
    print(json.dumps(message, indent=2, ensure_ascii=False))
    print("\nAs an OpenAI chat-completions message:")
    print(json.dumps(to_openai_message(message), indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()

"""Quickstart: parse a Qwen3 generation (reasoning + a tool call) with `tokenizer.parse_response`, offline.

    python examples/quickstart.py

With a real model, this is all you type (no import of response_templates: once the package is installed,
every transformers tokenizer has `parse_response`):

    tokenizer = AutoTokenizer.from_pretrained(model_dir)       # a Hub id or a local directory
    inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True, return_tensors="pt")
    prompt_ids = inputs["input_ids"][0]
    generated_ids = model.generate(**inputs)[0][len(prompt_ids):]
    message = tokenizer.parse_response(generated_ids, prefix=prompt_ids)

Here there is no model and no network. A model repository is stood in for by a small Qwen-style tokenizer, built
on the spot and saved to a temporary directory with the library's qwen3 response template in its
tokenizer_config.json, where a repository ships it (`save_tokenizer_dir` in offline_tokenizer.py). The "model output" is a canned
Qwen3 generation, as token ids. The script loads the directory with `AutoTokenizer.from_pretrained`, parses the ids
and prints the message dict (reasoning_content, content and a get_weather tool call), then the same message in
OpenAI chat-completions form (`to_openai_message`, which gives each call an id and its arguments as JSON text).
"""

import argparse
import json
import tempfile

from offline_tokenizer import save_tokenizer_dir

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


def parse_with_transformers(model_dir: str) -> dict:
    """The flow you type: load the tokenizer, take the model's output ids, parse them."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompt_ids = tokenizer.encode(PROMPT, add_special_tokens=False)  # what apply_chat_template returns
    generated_ids = tokenizer.encode(GENERATION, add_special_tokens=False)  # what model.generate adds after it
    return tokenizer.parse_response(generated_ids, prefix=prompt_ids)


def main(argv=None) -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    from response_templates import parse_response
    from response_templates.integrations.openai_adapter import to_openai_message

    with tempfile.TemporaryDirectory(prefix="quickstart-model-") as model_dir:
        if save_tokenizer_dir(model_dir, "qwen3"):  # stands in for a model repository
            message = parse_with_transformers(model_dir)
        else:  # transformers not installed: the core API parses the text with the library's template
            message = parse_response(GENERATION, "qwen3", prefix=PROMPT)
    print("Parsed message:")
    print(json.dumps(message, indent=2, ensure_ascii=False))
    print("\nAs an OpenAI chat-completions message:")
    print(json.dumps(to_openai_message(message), indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()

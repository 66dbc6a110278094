"""Guaranteed tool calls with transformers' `generate`: a grammar from the response template forces the model to
write a valid call of the tool you name (or of any tool, or none), which `parse_response` then reads.

    pip install 'response-templates[grammar]'     # xgrammar (and torch)
    python examples/constrained_tool_calls.py                     # offline: a random 1-layer model
    python examples/constrained_tool_calls.py --model Qwen/Qwen3-0.6B

With a real model the lines that matter are:

    processor = logits_processor(tokenizer, TOOLS, prefix=prompt, tool_choice="required",
                                 vocab_size=model.config.vocab_size)
    ids = model.generate(**inputs, logits_processor=[processor], max_new_tokens=512)[0][len(prompt_ids):]
    message = response_templates.parse_response(tokenizer.decode(ids, skip_special_tokens=False), template,
                                                prefix=prompt, tools=TOOLS)

Offline there is no model download: a Llama with one layer and random weights and a byte-level tokenizer carrying
the library's qwen3 template stand in. Its answers are noise, yet every one is a call of the tool asked for, with
arguments valid for its schema, because the grammar leaves it no other choice.
"""

import argparse
import json
import sys

import response_templates as rt
from response_templates.integrations.constrain import logits_processor

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.", "parameters": {
    "type": "object",
    "properties": {"city": {"type": "string", "enum": ["Paris", "Lyon", "Oslo"]},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                   "hourly": {"type": "boolean"}},
    "required": ["city", "hourly"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "The time now.", "parameters": {
        "type": "object", "properties": {}}}}]
MESSAGES = [{"role": "user", "content": "What's the weather like in Paris?"}]
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def random_model():
    """A 1-layer Llama with random weights and a byte-level tokenizer (one token per byte), qwen3's template."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = Tokenizer(models.BPE(vocab={symbol: index for index, symbol in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>",
                                        additional_special_tokens=["<|im_start|>"])
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.response_template = rt.get_template("qwen3")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                         bos_token_id=None, eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True)
    return tokenizer, LlamaForCausalLM(config)


def generate(tokenizer, model, tool_choice, *, parallel_tool_calls=True, seed=0, max_new_tokens=1500) -> dict:
    """One constrained answer, parsed."""
    import torch

    prompt = tokenizer.apply_chat_template(MESSAGES, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    processor = logits_processor(tokenizer, TOOLS, prefix=prompt, tool_choice=tool_choice,
                                 parallel_tool_calls=parallel_tool_calls, vocab_size=model.config.vocab_size)
    torch.manual_seed(seed)
    output = model.generate(**inputs, logits_processor=[processor], do_sample=True, max_new_tokens=max_new_tokens,
                            pad_token_id=tokenizer.eos_token_id)
    text = tokenizer.decode(output[0][inputs["input_ids"].shape[1]:], skip_special_tokens=False)
    return {"text": text, "message": rt.parse_response(text, tokenizer.response_template, prefix=prompt, tools=TOOLS)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a Hub model id with a library template (default: a random offline model)")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
        import xgrammar  # noqa: F401
    except ImportError as missing:
        sys.exit(f"this example needs xgrammar and torch ({missing.name} is missing): "
                 "pip install 'response-templates[grammar]'")
    if args.model:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.model)
        tokenizer.response_template = tokenizer.response_template or rt.template_for(args.model)
        model = AutoModelForCausalLM.from_pretrained(args.model)
    else:
        tokenizer, model = random_model()
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        answer = generate(tokenizer, model, choice, parallel_tool_calls=False)
        print(f"tool_choice={json.dumps(choice)}")
        print("  generated:", json.dumps(answer["text"][:300], ensure_ascii=False))
        print("  tool_calls:", json.dumps(answer["message"].get("tool_calls"), ensure_ascii=False))


if __name__ == "__main__":
    main()

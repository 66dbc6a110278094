"""Integrations: where the parser meets other software at run time.

- `transformers_patch`: `parse_response`, `get_response_parser` and `response_template` on every transformers tokenizer
  (4.46 on), with `_autopatch`, the import hook the `.pth` file installs at start-up;
- `openai_adapter`: messages and streamed deltas in OpenAI's chat-completions form;
- `vllm_plugin`, `sglang_plugin` (with `_serving`, what they share): our reasoning and tool-call parsers inside vLLM
  and SGLang;
- `grammar`: `structural_tag()`, an xgrammar constraint that makes a model write valid tool calls (the vLLM plugin
  sets it on requests that force calls); `constrain`: the same constraint as a logits processor for `generate`;
- `trl`: TRL's chat template helpers told that every tokenizer takes `prefix=` and `tools=` (its rollout parsing).

They use the core and the library, never the authoring tools.
"""

"""Constrained `generate` in transformers: a logits processor that makes the model write valid tool calls.

    from response_templates.integrations.constrain import logits_processor
    processor = logits_processor(tokenizer, tools, prefix=prompt, tool_choice="required")
    output = model.generate(**inputs, logits_processor=[processor], max_new_tokens=512)

The constraint is `structural_tag(...)` compiled by xgrammar for the tokenizer's vocabulary and applied through
xgrammar's own transformers integration (`xgrammar.contrib.hf.LogitsProcessor`). Needs `pip install
response-templates[grammar]` (xgrammar, torch). A processor serves one `generate` call: build a new one each time.
"""

from __future__ import annotations

import json
from typing import Any

from .grammar import structural_tag

__all__ = ["logits_processor"]


def _template_of(tokenizer: Any, template: Any) -> Any:
    if template is not None:
        return template
    own = getattr(tokenizer, "response_template", None)
    if own:
        return own
    from ..library import template_for

    found = template_for(tokenizer)
    if found is None:
        raise ValueError("the tokenizer has no response_template and the library knows none for it: pass template=")
    return found


def logits_processor(tokenizer: Any, tools: Any = None, *, template: Any = None, prefix: str = "",
                     tool_choice: Any = "auto", parallel_tool_calls: bool = True, vocab_size: int | None = None) -> Any:
    """A `transformers.LogitsProcessor` that keeps `generate` inside the grammar of `structural_tag`.

    `template`: the response template (default: the tokenizer's own `response_template`, else the library's
    template for it). `prefix`: the prompt text (it tells whether the prompt left the reasoning open).
    `vocab_size`: the model's output size when it is larger than the tokenizer's (padded embeddings; pass
    `model.config.vocab_size`). The end of the turn is the tokenizer's EOS token."""
    try:
        import xgrammar
        from xgrammar.contrib.hf import LogitsProcessor
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("constrained generation needs xgrammar: pip install 'response-templates[grammar]'") from error
    tag = structural_tag(_template_of(tokenizer, template), tools, prefix=prefix, tool_choice=tool_choice,
                         parallel_tool_calls=parallel_tool_calls)
    info = xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
    compiled = xgrammar.GrammarCompiler(info).compile_structural_tag(json.dumps(tag))
    return LogitsProcessor(compiled)

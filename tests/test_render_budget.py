"""Issue 31: rendering a chat template (verify, infer_template) has a time budget, so a hostile chat template stops
with a clear error instead of rendering for hours."""

from __future__ import annotations

import pytest

import response_templates as rt
from response_templates.authoring import rendering as verification

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
NESTED_LOOPS = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}" + CHATML
MACRO_TREE = "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}" + CHATML


@pytest.fixture
def short_budget(monkeypatch):
    monkeypatch.setattr(verification, "RENDER_TIME_LIMIT", 0.3)


@pytest.mark.parametrize("hostile", [NESTED_LOOPS, MACRO_TREE])
def test_a_runaway_chat_template_stops_with_a_clear_error(hostile, short_budget):
    with pytest.raises(verification.RenderTimeoutError, match="RENDER_TIME_LIMIT"):
        verification.render_chat_template(hostile, [{"role": "user", "content": "hi"}])
    with pytest.raises(verification.RenderTimeoutError, match="verify: rendering the chat template took more than"):
        rt.verify("qwen2.5", hostile)
    inferred = rt.infer_template(hostile)
    assert inferred.template is None
    assert "RENDER_TIME_LIMIT" in inferred.reasons[0]


def test_a_chat_template_within_the_budget_renders_as_before(short_budget):
    text = verification.render_chat_template(CHATML, [{"role": "user", "content": "hi"}], add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    looped = "{% for i in range(3) %}{{ loop.index }}{% if loop.last %}!{% endif %}{% endfor %}"
    assert verification.render_chat_template(looped, []) == "123!"
    # a budget that ran out in one call does not carry over to the next
    with pytest.raises(verification.RenderTimeoutError):
        verification.render_chat_template(NESTED_LOOPS, [])
    assert verification.render_chat_template(looped, []) == "123!"

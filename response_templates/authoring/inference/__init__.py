"""Infer a response template from a chat template.

A chat template already knows how its model writes a message: give it an assistant turn and it writes
the reasoning, the content and the tool calls with the model's own markers. We render probe turns whose
values are easy to find again (a content marker, a reasoning marker, calls with known names and
arguments), and read the markup around those values: the assistant header the prompt ends with (the
start anchor), what follows the content (end of turn), what surrounds the reasoning, and the envelope
and argument syntax of tool calls. This differential reading follows the idea of llama.cpp's
"autoparser"; the result here is a portable, declarative response template.

The pieces are assembled into a version-1 template that follows the library's rules (whitespace that
belongs to markup sits inside the delimiters, a call closes only after a complete value, text around
calls is kept, a generation cut inside a marker leaves no marker text behind), and the result is run
through `verify`. Whatever could not be decided is reported with its reason; a template that does not
pass verification is never returned.

    result = infer_template(chat_template_source)
    result.template        # the response template dict, or None
    result.reasons         # why it gave up, or what it could not decide

The modules, in the order the work is done: `probes` (probe turns, the renderer), `turns` (header, end of turn,
reasoning), `calls` and `markup` (tool-call syntax), `assemble` (the template), `infer` (the entry points and the
final verification); `result` holds what is returned.
"""

from ...core.errors import InferenceError
from .infer import infer_for_tokenizer, infer_template, load_chat_template
from .result import InferredResponseTemplate, InferredTemplate

__all__ = [
    "InferenceError",
    "InferredResponseTemplate",
    "InferredTemplate",
    "infer_for_tokenizer",
    "infer_template",
    "load_chat_template",
]

"""response-templates: turn what chat models generate into structured assistant messages.

    from response_templates import parse_response, ResponseParser
    message = parse_response(generated_text, template, prefix=prompt_text)

This module is the façade over the layers (see docs/architecture.md): the core parser, the template library, the
integrations (transformers, OpenAI, vLLM) and, loaded on demand, the authoring tools (verify, infer, grammar).
Importing it patches transformers' tokenizers (unless RESPONSE_TEMPLATES_DISABLE=1).
"""

from typing import Any

from ._version import __version__ as __version__
from .core import (
    CompiledTemplate,
    RegexTimeoutError,
    ResponseParser,
    ResponseTemplatesError,
    TemplateError,
    TransformError,
    get_regex_timeout,
    load_template,
    parse_response,
    set_regex_timeout,
)
from .core.errors import GrammarError
from .core.template import set_name_resolver
from .integrations import _autopatch
from .integrations.openai_adapter import OpenAIStreamAdapter, to_openai_message
from .integrations.transformers_patch import attach, patch, unpatch
from .library import get_entry, get_template, guess_for, list_templates

__all__ = [
    "CompiledTemplate",
    "InferredTemplate",
    "OpenAIStreamAdapter",
    "RegexTimeoutError",
    "ResponseParser",
    "ResponseTemplatesError",
    "TemplateError",
    "TransformError",
    "VerifyReport",
    "attach",
    "get_entry",
    "get_regex_timeout",
    "get_template",
    "guess_for",
    "infer_template",
    "list_templates",
    "load_template",
    "parse_response",
    "patch",
    "set_regex_timeout",
    "structural_tag",
    "GrammarError",
    "template_for",
    "to_openai_message",
    "unpatch",
    "verify",
    "verify_entry",
]

# A str template (`parse_response(text, "qwen3", ...)`) names a library template; the core asks the library.
set_name_resolver(get_template)


def template_for(model_id_or_tokenizer: Any, *, infer: bool = False) -> dict | None:
    """The library's response template for a Hub model id (e.g. "Qwen/Qwen3-8B") or a loaded tokenizer, or None.

    A tokenizer is matched by its `name_or_path`, then by the fingerprint of its `chat_template`; never a guess
    (`guess_for` gives an unverified suggestion). With `infer=True` (opt-in), a tokenizer the library does not know
    gets a template inferred from its chat template and verified against it (`infer_template`): a dict marked
    `.inferred = True`, with the inference report in `.result`, or None when inference gives up. A bare model id
    has nothing to infer from.
    """
    from .library import template_for as library_template_for

    found = library_template_for(model_id_or_tokenizer)
    if found is None and infer:
        from .authoring.inference import infer_for_tokenizer

        return infer_for_tokenizer(model_id_or_tokenizer)
    return found


# The authoring tools render chat templates with jinja2: their modules are loaded only when one of these is asked
# for. No submodule shares a name with a public attribute, so `rt.verify` is the function whatever was imported.
_LAZY_FROM = {
    "verify": "authoring.verification",
    "verify_entry": "authoring.verification",
    "VerifyReport": "authoring.verification",
    "infer_template": "authoring.inference",
    "InferredTemplate": "authoring.inference",
    "structural_tag": "integrations.grammar",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY_FROM:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY_FROM[name]}", __name__), name)
    raise AttributeError(f"module 'response_templates' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_FROM))


# `import response_templates` patches transformers: now for what is loaded, lazily (import hook) for the rest.
if not _autopatch.disabled():
    try:
        patch()
    except Exception as _error:  # importing the package must not fail because of transformers
        import logging

        logging.getLogger(__name__).warning("response-templates could not patch transformers: %r", _error)

"""response-templates: turn what chat models generate into structured assistant messages.

    from response_templates import parse_response, ResponseParser
    message = parse_response(generated_text, template, prefix=prompt_text)
"""

from .core import (
    CompiledTemplate,
    RegexTimeoutError,
    ResponseParser,
    TemplateError,
    TransformError,
    get_regex_timeout,
    load_template,
    parse_response,
    set_regex_timeout,
)

from .integration import attach, patch, unpatch
from .library import get_entry, get_template, list_templates, template_for
from .openai_adapter import OpenAIStreamAdapter, to_openai_message

__version__ = "0.1.0"

__all__ = [
    "OpenAIStreamAdapter",
    "attach",
    "get_entry",
    "get_template",
    "list_templates",
    "patch",
    "template_for",
    "to_openai_message",
    "unpatch",
    "structural_tag",
    "verify",
    "verify_entry",
    "CompiledTemplate",
    "RegexTimeoutError",
    "ResponseParser",
    "TemplateError",
    "TransformError",
    "VerifyReport",
    "get_regex_timeout",
    "load_template",
    "parse_response",
    "set_regex_timeout",
]


# verify() and infer_template() render chat templates with jinja2: their modules are loaded only when one of these
# is asked for. No submodule shares a name with a public attribute, so `rt.verify` is the function whatever was
# imported.
_LAZY_FROM = {"verify": "verification", "verify_entry": "verification", "VerifyReport": "verification",
              "infer_template": "infer", "InferredTemplate": "infer",
              "structural_tag": "authoring.grammar", "GrammarError": "authoring.grammar"}
_LAZY = set(_LAZY_FROM)


def __getattr__(name: str):
    if name in _LAZY_FROM:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY_FROM[name]}", __name__), name)
    raise AttributeError(f"module 'response_templates' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)

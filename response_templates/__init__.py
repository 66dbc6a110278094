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

from .infer import InferredTemplate, infer_template  # noqa: F401  (inference from chat templates)
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


# verify() renders chat templates with jinja2: response_templates.verification is loaded only when one of these is
# asked for. No submodule shares a name with a public attribute, so `rt.verify` is the function whatever was imported.
_LAZY = {"verify", "verify_entry", "VerifyReport"}


def __getattr__(name: str):
    if name in _LAZY:
        from . import verification

        return getattr(verification, name)
    raise AttributeError(f"module 'response_templates' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)

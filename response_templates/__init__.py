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
    "verify",
    "CompiledTemplate",
    "RegexTimeoutError",
    "ResponseParser",
    "TemplateError",
    "TransformError",
    "get_regex_timeout",
    "load_template",
    "parse_response",
    "set_regex_timeout",
]


def __getattr__(name: str):
    # verify() renders chat templates with jinja2: load it only when asked for
    if name == "verify":
        from .verify import verify

        return verify
    raise AttributeError(f"module 'response_templates' has no attribute {name!r}")

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

__version__ = "0.1.0"

__all__ = [
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

"""The parsing core: templates, content parsers, the streaming scanner. It knows nothing of transformers."""

from .errors import (
    RegexTimeoutError,
    ResponseTemplatesError,
    TemplateError,
    TransformError,
    get_regex_timeout,
    set_regex_timeout,
)
from .parse_whole import parse_response
from .parser import ResponseParser
from .template import CompiledTemplate, load_template

__all__ = [
    "CompiledTemplate",
    "RegexTimeoutError",
    "ResponseParser",
    "ResponseTemplatesError",
    "TemplateError",
    "TransformError",
    "get_regex_timeout",
    "load_template",
    "parse_response",
    "set_regex_timeout",
]

"""Exceptions raised by the parsing core, and the regex time limit they enforce."""

from __future__ import annotations

import os


class TemplateError(ValueError):
    """A response template is malformed. The message names the field and the key at fault."""


class RegexTimeoutError(ValueError):
    """A regex of the template took longer than the configured time limit (a hostile or catastrophic pattern)."""


class TransformError(ValueError):
    """A transform placeholder does not resolve against the parsed value."""


class TransformKeyError(TransformError, KeyError):
    """A transform placeholder names a variable that is not defined (also a KeyError, as in transformers)."""

    def __str__(self) -> str:  # KeyError would print the repr of its message
        return str(self.args[0]) if self.args else ""


# Longest quotation of input (model output, a template value) an error message holds.
QUOTE_LIMIT = 200


def excerpt(text: str, at: int | None = None, limit: int = QUOTE_LIMIT) -> str:
    """`repr(text)`, or when it is longer than `limit` characters, the part around `at` (the start without it) with
    an ellipsis where it is cut and where that part lies in the text, so that messages stay short."""
    if not isinstance(text, str):
        text = repr(text)
    if len(text) <= limit:
        return repr(text)
    at = 0 if at is None else min(max(at, 0), len(text))
    start = max(0, min(at - limit // 2, len(text) - limit))
    end = start + limit
    head = "…" if start else ""
    tail = "…" if end < len(text) else ""
    return f"{head}{text[start:end]!r}{tail} (characters {start} to {end} of {len(text)})"


def _timeout_from_env() -> float:
    raw = os.environ.get("RESPONSE_TEMPLATES_REGEX_TIMEOUT", "")
    try:
        value = float(raw)
    except ValueError:
        return 1.0
    return value if value > 0 else 1.0


# Seconds one regex operation of a template may take. Template regexes come from Hub repos and are untrusted.
_regex_timeout = _timeout_from_env()


def get_regex_timeout() -> float:
    """The time limit, in seconds, of one regex operation on template-supplied patterns."""
    return _regex_timeout


def set_regex_timeout(seconds: float) -> None:
    """Set the time limit of one regex operation on template-supplied patterns (default 1 s, or the
    `RESPONSE_TEMPLATES_REGEX_TIMEOUT` environment variable)."""
    global _regex_timeout
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not seconds > 0:
        raise ValueError(f"regex timeout must be a positive number of seconds, got {seconds!r}")
    _regex_timeout = float(seconds)

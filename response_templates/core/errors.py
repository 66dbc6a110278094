"""Every exception the package raises, under one base class (`ResponseTemplatesError`), and the regex time limit.

Each also derives from the built-in class callers already catch (`ValueError` for bad templates and bad input,
`KeyError` for an unknown name), so code written against transformers' parser keeps working.
"""

from __future__ import annotations

import os
import threading
import time


class ResponseTemplatesError(Exception):
    """The base class of the package's exceptions."""


# --- the core ---------------------------------------------------------------------------------------------------


class TemplateError(ResponseTemplatesError, ValueError):
    """A response template is malformed. The message names the field and the key at fault."""


class RegexTimeoutError(ResponseTemplatesError, ValueError):
    """A regex of the template took longer than the configured time limit (a hostile or catastrophic pattern)."""


class TransformError(ResponseTemplatesError, ValueError):
    """A transform placeholder does not resolve against the parsed value."""


class TransformKeyError(TransformError, KeyError):
    """A transform placeholder names a variable that is not defined (also a KeyError, as in transformers)."""

    def __str__(self) -> str:  # KeyError would print the repr of its message
        return str(self.args[0]) if self.args else ""


class JSONTooDeepError(ResponseTemplatesError, ValueError):
    """JSON text nests arrays and objects more than `limits.MAX_JSON_DEPTH` levels deep."""


# --- the library -------------------------------------------------------------------------------------------------


class LibraryError(ResponseTemplatesError, ValueError):
    """A library file is malformed; the message names the file and the key."""


class UnknownTemplateError(ResponseTemplatesError, KeyError):
    """No library template has that name."""

    def __str__(self) -> str:  # KeyError would show the repr of the message
        return str(self.args[0]) if self.args else ""


# --- the authoring tools -----------------------------------------------------------------------------------------


class InferenceError(ResponseTemplatesError):
    """Inference gave up, or was given input it cannot use; the message says why."""


class PublishError(ResponseTemplatesError):
    """A problem with one repository while publishing; reported in the summary, the run goes on."""


class PublishUsageError(ResponseTemplatesError):
    """A problem with the publisher's command line or selection; the run does not start."""


class UnreadableFile(ResponseTemplatesError, ValueError):
    """A file named by the user that cannot be read at all."""


class NotUTF8(ResponseTemplatesError, ValueError):
    """A file (or input stream) whose bytes are not UTF-8 text."""


class NotJSON(ResponseTemplatesError, ValueError):
    """A file that is not valid JSON."""


# Longest quotation of input (model output, a template value) an error message holds.
QUOTE_LIMIT = 200


def excerpt(text: object, at: int | None = None, limit: int = QUOTE_LIMIT) -> str:
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
    """The time limit, in seconds, of the regex work of one `feed`, `finalize` or `parse_response` call on
    template-supplied patterns (a budget shared by all the searches of that call, once per million characters)."""
    return _regex_timeout


def set_regex_timeout(seconds: float) -> None:
    """Set the time limit of the regex work of one `feed`, `finalize` or `parse_response` call on template-supplied
    patterns (default 1 s, or the `RESPONSE_TEMPLATES_REGEX_TIMEOUT` environment variable)."""
    global _regex_timeout
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not seconds > 0:
        raise ValueError(f"regex timeout must be a positive number of seconds, got {seconds!r}")
    _regex_timeout = float(seconds)


# The deadline of the call in progress on this thread (None outside one): every regex search of a `feed`,
# `finalize` or `parse_response` draws on one budget, so many cheap-looking searches cannot add up to a hang.
_budget = threading.local()

HOW_TO_RAISE = (
    "raise it with response_templates.set_regex_timeout(seconds) or the RESPONSE_TEMPLATES_REGEX_TIMEOUT "
    "environment variable (seconds; the command line reads it too)"
)


# The budget grows with the text a call handles: the limit is per this many characters (at least one limit).
BUDGET_CHARS = 1_000_000


class regex_budget:  # noqa: N801 - used as a function: `with regex_budget(size):`
    """Share one regex time budget among the searches run inside (nested uses join the outer budget): the limit,
    once per million characters of text the call handles (`size`), so large benign inputs scale while hostile
    patterns on small inputs stop after about the limit.

    A small class rather than a generator-based context manager: it is entered once per parse and per feed, where
    the generator machinery cost more than the rest of a short message's bookkeeping."""

    __slots__ = ("size", "outer")

    def __init__(self, size: int = 0):
        self.size = size

    def __enter__(self):
        self.outer = not open_budget(self.size)

    def __exit__(self, *exc_info):
        if not self.outer:
            close_budget()
        return False


def open_budget(size: int) -> bool:
    """`regex_budget` without the context manager, for the hottest paths: opens a budget for `size` characters
    unless one is open, and says whether it did; the caller then ends it with `close_budget()` (in a `finally`)."""
    if getattr(_budget, "deadline", None) is not None:
        return False
    _budget.deadline = time.monotonic() + _regex_timeout * max(1.0, size / BUDGET_CHARS)
    return True


def close_budget() -> None:
    """End the budget `open_budget` opened."""
    _budget.deadline = None


def grow_regex_budget(size: int) -> None:
    """Add to the budget of the call in progress (if any) its share for `size` more characters of text: the text of a
    region the call closes, which its content parser reads in full (an 8 MB argument closed by a small last chunk)."""
    deadline = getattr(_budget, "deadline", None)
    if deadline is not None and size > 0:
        _budget.deadline = deadline + _regex_timeout * size / BUDGET_CHARS


def regex_time_left() -> float:
    """Seconds left for the next regex search (the whole limit outside a budget). Raises `TimeoutError` when the
    budget of the call in progress is spent."""
    deadline = getattr(_budget, "deadline", None)
    if deadline is None:
        return _regex_timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("regex time budget spent")
    return left


def timeout_message(what: str) -> str:
    """The message of a `RegexTimeoutError` about `what` (a pattern and where it comes from)."""
    return (
        f"{what} used up the regex time limit of {_regex_timeout} s (the limit covers all the regex work of one "
        f"feed, finalize or parse_response call, per million characters it handles); {HOW_TO_RAISE}"
    )

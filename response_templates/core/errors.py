"""Every exception the package raises, under one base class (`ResponseTemplatesError`), and the regex time limit.

Each also derives from the built-in class callers already catch (`ValueError` for bad templates and bad input,
`KeyError` for an unknown name), so code written against transformers' parser keeps working.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any


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


class GrammarError(TemplateError):
    """The grammar compiler cannot express this template (or these options) as a constraint; the message says why."""


class RenderTimeoutError(ResponseTemplatesError, TimeoutError):
    """Rendering a chat template used up the rendering time budget (a hostile or runaway chat template)."""


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


# The accepted range of the regex time limit: more than 0 seconds, at most this many. Past it `regex` cannot represent
# the time limit (it counts clock ticks in a machine integer: `inf` or `1e300` made every search time out at once).
MAX_REGEX_TIMEOUT = 1e6
# The most that is ever passed to `regex` as a `timeout=` (it multiplies the limit: per million characters, and by
# the load factor below), well inside what its clock-tick count holds.
_REGEX_TIMEOUT_MOST = 1e9
ENV_VARIABLE = "RESPONSE_TEMPLATES_REGEX_TIMEOUT"


def check_regex_timeout(value: object, source: str = "regex timeout") -> float:
    """`value` as a time limit in seconds, or ValueError saying why it cannot be one (not a number, not finite, or
    not more than 0, or more than MAX_REGEX_TIMEOUT)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{source} must be a number of seconds, got {value!r}")
    try:
        seconds = float(value)
    except (ValueError, OverflowError):
        raise ValueError(f"{source} must be a number of seconds, got {value!r}") from None
    if not 0 < seconds <= MAX_REGEX_TIMEOUT:  # (False for nan)
        raise ValueError(
            f"{source} must be a number of seconds more than 0 and at most {MAX_REGEX_TIMEOUT:g}, got {value!r}"
        )
    return seconds


def _timeout_from_env() -> float:
    raw = os.environ.get(ENV_VARIABLE, "").strip()
    if not raw:
        return 1.0
    # refused at import rather than silently replaced: a server set up with a typo would otherwise run with 1 s
    return check_regex_timeout(raw, f"the {ENV_VARIABLE} environment variable")


# Seconds one regex operation of a template may take. Template regexes come from Hub repos and are untrusted.
_regex_timeout = _timeout_from_env()


def get_regex_timeout() -> float:
    """The time limit, in seconds, of the regex work of one `feed`, `finalize` or `parse_response` call on
    template-supplied patterns (a budget shared by all the searches of that call, once per million characters),
    counted in the CPU time of the thread that runs the call."""
    return _regex_timeout


def set_regex_timeout(seconds: float) -> None:
    """Set the time limit of the regex work of one `feed`, `finalize` or `parse_response` call on template-supplied
    patterns (default 1 s, or the `RESPONSE_TEMPLATES_REGEX_TIMEOUT` environment variable). Accepts a number of
    seconds more than 0 and at most MAX_REGEX_TIMEOUT (1e6); anything else raises ValueError."""
    global _regex_timeout
    if isinstance(seconds, str):  # a number, not its text (the environment variable is the place for text)
        raise ValueError(f"regex timeout must be a number of seconds, got {seconds!r}")
    _regex_timeout = check_regex_timeout(seconds)


HOW_TO_RAISE = (
    "raise it with response_templates.set_regex_timeout(seconds) or the RESPONSE_TEMPLATES_REGEX_TIMEOUT "
    "environment variable (seconds; the command line reads it too)"
)


# The budget grows with the text a call handles: the limit is per this many characters (at least one limit).
BUDGET_CHARS = 1_000_000

# How far the load factor may grow (see `retry_after_timeout`): past this a timeout stands.
_MAX_FACTOR = 4096.0


class _Budget:
    """The regex time budget of the call in progress on a thread.

    What is charged is the CPU time of the thread (`time.thread_time`), not the wall clock: on a loaded server the
    time a call waits for the GIL or for a core is not the template's doing. The wall clock is read on the hot path
    (it is several times cheaper, and a thread's CPU time never runs ahead of it): the thread's CPU time is read only
    once `deadline` has passed on the wall clock, and then `deadline` moves to where the budget could end at the
    earliest.

    `owner` is the frame of the function that opened the budget: a budget whose opener is no longer running was left
    behind by an interruption (a signal between opening and the `try` that closes it) and is ignored, so it cannot
    make later calls on the thread time out."""

    __slots__ = ("deadline", "cpu_start", "allowance", "factor", "owner")

    # (set by `_open`: one per thread, used again by each call, which costs less than making one per call)
    deadline: float  # (wall clock) the budget cannot be spent before this
    cpu_start: float  # this thread's CPU time when the budget opened
    allowance: float  # seconds of this thread's CPU time the call may spend on regex work
    # `regex`'s own `timeout=` reads the process's CPU clock, which other threads advance too: the time passed to it
    # is multiplied by this factor, doubled each time a search timed out before this thread spent its budget
    factor: float
    owner: Any


class _Local(threading.local):
    budget: _Budget | None = None  # the budget of the call in progress, or None

    def __init__(self):  # (run once in each thread that uses the budget)
        self.own = _Budget()


# The budget of the call in progress on this thread (None outside one): every regex search of a `feed`, `finalize`
# or `parse_response` draws on one budget, so many cheap-looking searches cannot add up to a hang.
_local = _Local()


def _running(frame: Any) -> bool:
    """Whether `frame` is on the current thread's stack (the function that opened a budget is still running)."""
    current: Any = sys._getframe(2)
    while current is not None:
        if current is frame:
            return True
        current = current.f_back
    return False


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
        # the owner is the function with the `with` statement (this method returns at once)
        self.outer = not _open(self.size, sys._getframe(1))

    def __exit__(self, *exc_info):
        if not self.outer:
            close_budget()
        return False


def open_budget(size: int) -> bool:
    """`regex_budget` without the context manager, for the hottest paths: opens a budget for `size` characters
    unless one is open, and says whether it did; the caller then ends it with `close_budget()` (in a `finally`).
    The budget belongs to the caller's frame: if an interruption skips the `close_budget`, it ends with that call."""
    if _local.budget is not None:  # inside a call (`_open`, inlined: nested calls are on hot paths)
        return False
    return _open(size, sys._getframe(1))


def _open(size: int, owner: Any) -> bool:
    local = _local
    # A budget open on the thread is joined without asking whether its call is still running (nested opens are on
    # hot paths): one left behind by an interruption is dropped at the first check after its deadline (`_cpu_left`,
    # `retry_after_timeout`), so it can shorten the budget of the calls of the next `limit` seconds, never time one out.
    if local.budget is not None:
        return False
    budget = local.own
    allowance = _regex_timeout if size <= BUDGET_CHARS else _regex_timeout * size / BUDGET_CHARS
    budget.allowance = allowance
    budget.factor = 1.0
    budget.owner = owner
    budget.cpu_start = time.thread_time()
    budget.deadline = time.monotonic() + allowance
    local.budget = budget
    return True


def close_budget() -> None:
    """End the budget `open_budget` opened."""
    local = _local
    local.own.owner = None  # (the opener's frame holds the call's text: not kept past the call)
    local.budget = None


def grow_regex_budget(size: int) -> None:
    """Add to the budget of the call in progress (if any) its share for `size` more characters of text: the text of a
    region the call closes, which its content parser reads in full (an 8 MB argument closed by a small last chunk)."""
    budget = _local.budget
    if budget is not None and size > 0:
        extra = _regex_timeout * size / BUDGET_CHARS
        budget.deadline += extra
        budget.allowance += extra


def regex_time_left() -> float:
    """The `timeout=` for the next regex search (the whole limit outside a budget). Raises `TimeoutError` when the
    budget of the call in progress is spent (in the CPU time of this thread)."""
    budget = _local.budget
    if budget is None:
        return _regex_timeout
    left = budget.deadline - time.monotonic()
    if left <= 0:
        left = _cpu_left(budget)
    if budget.factor != 1.0:
        left = min(left * budget.factor, _REGEX_TIMEOUT_MOST)
    return left


def _cpu_left(budget: _Budget) -> float:
    """The budget left in this thread's CPU time, once the wall clock says it could be spent; raises TimeoutError
    when it is. (A budget left behind by an interrupted call is dropped: see `_Budget`.)"""
    if not _running(budget.owner):
        _local.budget = None
        return _regex_timeout
    left = budget.allowance - (time.thread_time() - budget.cpu_start)
    if left <= 0:
        raise TimeoutError("regex time budget spent")
    budget.deadline = time.monotonic() + left
    return left


def retry_after_timeout() -> bool:
    """Called when a search given `timeout=regex_time_left()` raised TimeoutError: True when the thread has not spent
    its budget (regex's clock counts the CPU time of every thread of the process), after which the caller runs the
    search again, given a doubled allowance; False when the timeout stands (the template's pattern is at fault).
    Alone in the process, the first timeout stands, so a hostile pattern is stopped after about the limit; under
    load it is stopped after about the limit of its own thread's CPU time."""
    budget = _local.budget
    if budget is None or budget.factor >= _MAX_FACTOR:
        return False
    if not _running(budget.owner):  # left behind by an interrupted call: the search runs again without it
        _local.budget = None
        return True
    if budget.allowance - (time.thread_time() - budget.cpu_start) <= 0:
        return False
    budget.factor *= 2
    return True


def timeout_message(what: str) -> str:
    """The message of a `RegexTimeoutError` about `what` (a pattern and where it comes from)."""
    return (
        f"{what} used up the regex time limit of {_regex_timeout} s (the limit covers all the regex work of one "
        f"feed, finalize or parse_response call, per million characters it handles, in its thread's CPU time); {HOW_TO_RAISE}"
    )

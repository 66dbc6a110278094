"""Issue 31: the regex time budget under load and interruption, and the time limit's accepted range.

The budget charges the CPU time of the thread that parses, not the wall clock: time spent waiting for the GIL or a
core is not the template's doing. `regex`'s own `timeout=` reads the process's CPU clock (other threads advance it):
a search it stops before the thread spent its budget is run again. A budget left behind by an interrupted call
cannot make later calls on the thread time out."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import response_templates as rt
from response_templates.core import content as content_module
from response_templates.core.errors import RegexTimeoutError

CODER_OUTPUT = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
)
CODER_CALL = {"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}


@pytest.fixture
def regex_timeout():
    before = rt.get_regex_timeout()
    yield rt.set_regex_timeout
    rt.set_regex_timeout(before)


def _call(message):
    return message["tool_calls"][0]["function"]


def test_time_the_thread_spends_waiting_is_not_charged(regex_timeout, monkeypatch):
    # the thread sleeps (as it would waiting for the GIL) for longer than the whole limit, between two searches of
    # one parse: no CPU time is spent, so nothing times out
    regex_timeout(0.05)
    template = rt.get_template("qwen3-coder")
    compiled = content_module._compiled

    def slow_compiled(key, source):
        time.sleep(0.2)
        return compiled(key, source)

    monkeypatch.setattr(content_module, "_compiled", slow_compiled)
    assert _call(rt.parse_response(CODER_OUTPUT, template, prefix="")) == CODER_CALL


class _ClockAhead:
    """A compiled tag pattern whose timed searches first time out at once, as `regex` does when other threads of the
    process advanced its (process-wide) CPU clock; `spend` seconds of this thread's CPU time are spent first."""

    def __init__(self, pattern, false_timeouts: int, spend: float = 0.0):
        self.pattern, self.left, self.spend, self.timeouts = pattern, false_timeouts, spend, []

    def finditer(self, text, *args, timeout=None, **kwargs):
        if timeout is not None and self.left:
            self.left -= 1
            self.timeouts.append(timeout)
            start = time.thread_time()
            while time.thread_time() - start < self.spend:
                pass
            raise TimeoutError("regex timed out")
        return self.pattern.finditer(text, *args, timeout=timeout, **kwargs)

    def __getattr__(self, name):
        return getattr(self.pattern, name)


def _clock_ahead(monkeypatch, false_timeouts, spend=0.0):
    compiled = content_module._compiled
    made = []

    def wrapped(key, source):
        if not made:
            made.append(_ClockAhead(compiled(key, source), false_timeouts, spend))
        return made[0]

    monkeypatch.setattr(content_module, "_compiled", wrapped)
    monkeypatch.setattr(content_module, "_untimed_tags", lambda pattern, text: False)  # the timed search
    return made


def test_a_search_regex_stops_before_the_thread_spent_its_budget_runs_again(monkeypatch):
    made = _clock_ahead(monkeypatch, false_timeouts=3)
    template = rt.get_template("qwen3-coder")
    assert _call(rt.parse_response(CODER_OUTPUT, template, prefix="")) == CODER_CALL
    timeouts = made[0].timeouts
    assert len(timeouts) == 3
    # each run again is given a longer allowance (regex's clock runs ahead of this thread's under load)
    assert timeouts[1] > timeouts[0] and timeouts[2] > timeouts[1]


def test_a_search_that_spent_the_threads_budget_still_times_out(regex_timeout, monkeypatch):
    regex_timeout(0.02)
    _clock_ahead(monkeypatch, false_timeouts=100, spend=0.03)
    with pytest.raises(RegexTimeoutError, match="tag_pattern"):
        rt.parse_response(CODER_OUTPUT, rt.get_template("qwen3-coder"), prefix="")


def test_a_hostile_pattern_is_still_stopped(regex_timeout):
    regex_timeout(0.05)
    template = {"start_anchor": "<|a|>", "fields": {"content": {}, "call": {"open_pattern": r"(a|aa)+$", "close": "."}}}
    with pytest.raises(RegexTimeoutError, match="open_pattern"):
        rt.parse_response("a" * 60 + "b", template, prefix="")


def _interrupt_at(event_number: int):
    """A trace function raising KeyboardInterrupt at the `event_number`-th line run in the package (as a signal
    handler would), wherever that is."""
    count = [0]

    def tracer(frame, event, arg):
        if "response_templates" not in frame.f_code.co_filename:
            return None
        if event == "line":
            count[0] += 1
            if count[0] == event_number:
                raise KeyboardInterrupt
        return tracer

    return tracer, count


def test_an_interrupted_parse_does_not_poison_its_thread(regex_timeout):
    template = rt.get_template("qwen3-coder")
    rt.parse_response(CODER_OUTPUT, template, prefix="")  # compiled and cached before counting lines
    tracer, count = _interrupt_at(0)
    sys.settrace(tracer)
    try:
        rt.parse_response(CODER_OUTPUT, template, prefix="")
    finally:
        sys.settrace(None)
    lines = count[0]
    assert lines > 20
    interrupted = 0
    for number in range(1, lines + 1):
        regex_timeout(0.01)
        tracer, _ = _interrupt_at(number)
        sys.settrace(tracer)
        try:
            rt.parse_response(CODER_OUTPUT, template, prefix="")
        except KeyboardInterrupt:
            interrupted += 1
        finally:
            sys.settrace(None)
        time.sleep(0.02)  # any deadline left behind is now in the past
        regex_timeout(1.0)
        assert _call(rt.parse_response(CODER_OUTPUT, template, prefix="")) == CODER_CALL, f"after line {number}"
        parser = rt.ResponseParser(template, prefix="")
        parser.feed(CODER_OUTPUT)
        assert _call(parser.finalize()[0]) == CODER_CALL, f"after line {number}"
    assert interrupted == lines


def test_an_interrupted_stream_does_not_poison_its_thread(regex_timeout):
    template = rt.get_template("qwen3-coder")
    for number in range(1, 200, 7):
        regex_timeout(0.01)
        parser = rt.ResponseParser(template, prefix="")
        tracer, _ = _interrupt_at(number)
        sys.settrace(tracer)
        try:
            parser.feed(CODER_OUTPUT)
            parser.finalize()
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        time.sleep(0.02)
        regex_timeout(1.0)
        assert _call(rt.parse_response(CODER_OUTPUT, template, prefix="")) == CODER_CALL, f"after line {number}"


# -- the time limit's accepted range ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [float("inf"), 1e300, float("nan"), "abc", "1", -1, 0, 1e7, None, True])
def test_set_regex_timeout_refuses_what_it_cannot_honour(bad, regex_timeout):
    before = rt.get_regex_timeout()
    with pytest.raises(ValueError, match="regex timeout must be a number of seconds"):
        rt.set_regex_timeout(bad)
    assert rt.get_regex_timeout() == before


@pytest.mark.parametrize("good", [1e-9, 0.5, 30, 1e6])
def test_set_regex_timeout_accepts_what_works(good, regex_timeout):
    regex_timeout(good)
    assert rt.get_regex_timeout() == good
    if good >= 0.5:  # benign output of a template with timed searches parses (1e300 made every search time out)
        assert _call(rt.parse_response(CODER_OUTPUT, rt.get_template("qwen3-coder"), prefix="")) == CODER_CALL
        hermes = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"
        assert _call(rt.parse_response(hermes, rt.get_template("hermes"), prefix=""))["name"] == "f"


@pytest.mark.parametrize("raw", ["nan", "abc", "-1", "0", "inf", "1e300"])
def test_a_bad_environment_variable_is_refused_clearly(raw, tmp_path):
    env = dict(os.environ, RESPONSE_TEMPLATES_REGEX_TIMEOUT=raw, RESPONSE_TEMPLATES_DISABLE="1")
    out = subprocess.run(
        [sys.executable, "-c", "import response_templates"],
        env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert out.returncode != 0
    assert "RESPONSE_TEMPLATES_REGEX_TIMEOUT environment variable must be a number of seconds" in out.stderr
    assert repr(raw) in out.stderr

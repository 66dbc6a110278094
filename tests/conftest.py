"""Settings for the whole test session."""

import os

import pytest

import response_templates as rt

# The regex time limit (1 s by default) stops hostile template patterns on a server. On a shared, loaded test
# machine a benign parse can be paused long enough to reach it, so the suite runs with a roomier limit unless the
# environment sets one. The tests of the limit itself set their own short limits; the large-input tests count work
# instead of timing it.
if not os.environ.get("RESPONSE_TEMPLATES_REGEX_TIMEOUT"):
    rt.set_regex_timeout(10.0)


@pytest.fixture
def regex_limit():
    """A setter for the regex time limit that puts the session's limit back after the test (`regex_limit(0.05)`)."""
    before = rt.get_regex_timeout()
    yield rt.set_regex_timeout
    rt.set_regex_timeout(before)

"""transformers' own response parser as the oracle of the differential tests, on the reference release only.

Our parser matches transformers 5.25's (the reference). Releases 5.20 to 5.24 ship a parser whose results differ in
places (they are older versions of it), so comparing with them would fail for reasons that are not ours:
`pip install -e ".[test]"` resolves transformers 5.24 (5.25 declares a dependency PyPI lacks), and there the
differential tests skip with this reason instead. CI runs them on 5.25 (`bash .ci/run`).
"""

from __future__ import annotations

import pytest

REFERENCE = (5, 25)


def transformers_version() -> tuple[int, int] | None:
    try:
        import transformers
    except ImportError:
        return None
    major, minor = transformers.__version__.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def reference_module(name: str = "transformers.utils.chat_parsing"):
    """The transformers module `name` to compare with, or a skip (also usable at module level) saying why not."""
    module = pytest.importorskip(name, reason="this transformers release has no response parser (< 5.20) to compare with")
    version = transformers_version()
    if version is not None and version < REFERENCE:
        import transformers

        pytest.skip(
            f"transformers {transformers.__version__}'s response parser differs from {REFERENCE[0]}.{REFERENCE[1]}'s, "
            f"the reference these tests compare with; run them with transformers>={REFERENCE[0]}.{REFERENCE[1]} "
            "(`bash .ci/run` does)",
            allow_module_level=True,
        )
    return module


def reference_parse_or_ours():
    """transformers' `parse_response` on the reference release; elsewhere our own, so a test that also checks other
    things still runs on every release while its comparison with transformers runs where it means something (CI runs
    the suite on 5.25 too)."""
    version = transformers_version()
    if version is not None and version >= REFERENCE:
        try:
            from transformers.utils.chat_parsing import parse_response

            return parse_response
        except ImportError:
            pass
    import response_templates

    return response_templates.parse_response


def check_against_transformers(parse, case: dict, where: str) -> None:
    """Compare transformers' answer on a corpus case with the case's `expected`. A case that shows one of the
    deliberate differences (docs/differences.md) names it in `transformers_differs` and records what transformers
    gives instead: `transformers_expected` (a message) or `transformers_raises: true` (a ValueError)."""
    def run():
        return parse(case["output"], case["template_dict"], prefix=case["prefix"], tools=case.get("tools"))

    if "transformers_differs" not in case:
        assert run() == case["expected"], where
        return
    assert isinstance(case["transformers_differs"], str) and "docs/differences.md" in case["transformers_differs"], (
        f"{where}: transformers_differs must say which difference of docs/differences.md this is"
    )
    if case.get("transformers_raises"):
        with pytest.raises(ValueError):
            run()
        return
    answer = run()
    assert answer == case["transformers_expected"], f"{where}: transformers gives {answer!r}"
    assert answer != case["expected"], f"{where}: transformers now agrees; drop transformers_differs"

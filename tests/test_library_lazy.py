"""The library compiles only what is asked for (issue 29): the first parse with a library template used to validate
and compile all of them (about a second), as did `response-templates list`. Every template is still validated by
`validate_library` (tests/test_library.py checks each file too), so CI catches a broken library file."""

from __future__ import annotations

import contextlib
import io

import pytest

from response_templates import library, parse_response
from response_templates.core import template as template_module
from response_templates.library import LibraryError


@pytest.fixture
def fresh(monkeypatch):
    """A library and compiled-template cache as in a new process; `compiled` collects every template compiled."""
    compiled: list = []
    real = template_module._compile
    monkeypatch.setattr(template_module, "_compile", lambda spec: compiled.append(spec) or real(spec))
    monkeypatch.setattr(template_module, "_BY_CONTENT", {})
    monkeypatch.setattr(template_module, "_BY_ID", {})
    monkeypatch.setattr(library, "_CHECKED", {})
    monkeypatch.setattr(library, "_ALONE", {})
    loader = library._entries  # (a test may replace it)
    loader.cache_clear()
    yield compiled
    loader.cache_clear()


def test_the_first_parse_with_a_library_template_compiles_that_template_only(fresh):
    message = parse_response("<think>a</think>b", "qwen3", prefix="")
    assert message["content"] == "b"
    assert len(fresh) == 1 and fresh[0] == library.get_template("qwen3")
    parse_response("<think>a</think>b", "qwen3", prefix="")
    assert len(fresh) == 1  # compiled once, whether asked for by name or as the dict get_template returns


def test_the_first_get_template_reads_only_its_own_file(fresh):
    library.get_template("hermes")
    assert library._entries.cache_info().currsize == 0  # the other 47 files were not read


def test_listing_compiles_no_template(fresh):
    from response_templates.cli import main

    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(["list"]) == 0
    assert "qwen3" in out.getvalue() and "gpt-oss" in out.getvalue()
    assert fresh == []
    assert [entry["name"] for entry in library.list_entries()] == library.list_templates()
    assert fresh == []


def test_validate_library_compiles_every_template(fresh):
    names = library.validate_library()
    assert names == library.list_templates() and len(names) >= 40
    distinct = {repr(library.get_template(name)) for name in names}  # equal templates share one compilation
    assert len(fresh) == len(distinct)


def test_validate_library_names_a_file_whose_template_is_broken(fresh, monkeypatch):
    entries = {name: dict(entry) for name, entry in library._entries().items()}
    broken = dict(entries["qwen3"]["template"], fields={"content": {"content": "yaml"}})
    entries["qwen3"] = {**entries["qwen3"], "template": broken}
    monkeypatch.setattr(library, "_entries", lambda: entries)
    with pytest.raises(LibraryError, match=r"qwen3\.json: 'template' is not a valid response template.*yaml"):
        library.validate_library()
    with pytest.raises(LibraryError, match=r"qwen3\.json"):
        library.get_template("qwen3")  # the same check when the template is first asked for

"""The character tables of the safety analysis (core/unicode_tables.py; regex_syntax `charset_members`, `subset`).

Compiling a template lists the members of small character sets. It used to scan every code point (1.1 million)
for each new set; now sets are listed from their pieces, categories from tables shipped for one `regex` version.
These tests check the listing against the full scan, and that the shipped tables are current."""

from __future__ import annotations

import re

import pytest
import regex

from response_templates.core import regex_syntax, unicode_tables
from response_templates.core.regex_syntax import Charset, charset_members, charset_of, sre_parse, subset

UNIVERSE = unicode_tables.universe()


def _by_scan(source: str) -> str | None:
    """What `charset_members` must return: every code point the class matches, or None past 4096 of them."""
    found = []
    for match in regex.finditer(source, UNIVERSE, regex.DOTALL):
        if len(found) == 4096:
            return None
        found.append(match.group())
    return "".join(found)


def _set(pattern: str) -> Charset:
    (op, av), = sre_parse.parse(pattern, re.DOTALL)
    return charset_of(op, av)


CLASSES = [
    "a", "[ab]", "[a-f]", "[^<]", r"\s", r"[\s]", r"\d", r"[\d_]", r"\w", r"[\w.-]", r"\S", r"\D", r"[^\S]", r"[^\w\W]",
    r"[^\s\S]", r"[\s\d]", ".", "[\n\r\t ]", r"[\u0660-\u0669]", r"[\U00010000-\U00010fff]", r"[\U00010000-\U00011000]",
    r"[\U0001d7ce-\U0001d7ff]", r"[\u3000\u2028]", r"[\ud800-\udfff]", r"[^\u0000-\uffff]", r"[\x00-\x1f]",
]
# For the subset grid (each case may scan every code point): sets with and without members past the BMP, negated ones.
SUBSET_CLASSES = ["[ab]", "[^<]", r"\s", "[\n\r\t ]", r"\d", r"[\d_]", r"[\w.-]", r"\S", r"[^\S]", ".", r"[^\u0000-\uffff]",
                  r"[\U0001d7ce-\U0001d7ff]"]


@pytest.mark.parametrize("category", unicode_tables.SMALL_CATEGORIES)
def test_a_small_category_lists_what_a_scan_of_every_code_point_finds(category):
    assert unicode_tables.category_members(category) == unicode_tables.scanned_members(category)


def test_the_shipped_tables_are_current_for_the_regex_version_they_name():
    if unicode_tables.TABLES_REGEX_VERSION != regex.__version__:
        pytest.skip(
            f"the tables are for regex {unicode_tables.TABLES_REGEX_VERSION}, this is {regex.__version__}: they are not "
            "used here (categories are scanned, checked above); run scripts/unicode_tables.py to ship tables for it"
        )
    for category in unicode_tables.SMALL_CATEGORIES:
        shipped = "".join(chr(code) for low, high in unicode_tables.TABLES[category] for code in range(low, high + 1))
        assert shipped == unicode_tables.scanned_members(category), f"{category}: run scripts/unicode_tables.py"


def test_another_regex_version_scans_instead_of_trusting_the_tables(monkeypatch):
    monkeypatch.setattr(unicode_tables, "TABLES_REGEX_VERSION", "0.0")
    monkeypatch.setattr(unicode_tables, "TABLES", {r"\s": ((0x20, 0x20),), r"\d": ((0x30, 0x30),)})  # stale on purpose
    monkeypatch.setattr(unicode_tables, "_FOUND", {})
    assert unicode_tables.category_members(r"\s") == _by_scan(r"\s")
    assert unicode_tables.category_members(r"\d") == _by_scan(r"\d")


@pytest.mark.parametrize("category", unicode_tables.LARGE_CATEGORIES)
def test_a_large_category_has_more_members_than_are_listed(category):
    assert _by_scan(category) is None


@pytest.mark.parametrize("pattern", CLASSES)
def test_members_of_a_class_are_what_a_scan_finds(pattern, monkeypatch):
    monkeypatch.setattr(regex_syntax, "_MEMBERS", {})
    chars = _set(pattern)
    assert charset_members(chars) == _by_scan(chars.source())


@pytest.mark.parametrize("outer", SUBSET_CLASSES)
@pytest.mark.parametrize("inner", SUBSET_CLASSES)
def test_subset_is_exact_over_every_code_point(inner, outer, monkeypatch):
    monkeypatch.setattr(regex_syntax, "_SUBSETS", {})
    first, second = _set(inner), _set(outer)
    outside = regex.compile(f"(?!{second.source()})(?:{first.source()})", regex.DOTALL)
    assert subset(first, second) is (outside.search(UNIVERSE) is None)


def test_compiling_a_library_template_does_not_scan_every_code_point(monkeypatch):
    """The first parse with a library template used to spend most of its time on scans of the 1.1 million code
    points; the shipped tables make them unneeded for every library template."""
    if unicode_tables.TABLES_REGEX_VERSION != regex.__version__:
        pytest.skip("the shipped tables are for another regex version: categories are scanned here")
    from response_templates import library
    from response_templates.core.template import _compile

    scanned = []
    monkeypatch.setattr(regex_syntax, "_MEMBERS", {})
    monkeypatch.setattr(regex_syntax, "_SUBSETS", {})
    monkeypatch.setattr(regex_syntax, "_UNIVERSE", {})
    monkeypatch.setattr(unicode_tables, "_FOUND", {})
    monkeypatch.setattr(unicode_tables, "scanned_members", lambda category: scanned.append(category) or "")
    for name in library.list_templates():
        _compile(library.get_template(name))
    assert not scanned
    assert "rest" not in regex_syntax._UNIVERSE  # the code points past the BMP were never needed

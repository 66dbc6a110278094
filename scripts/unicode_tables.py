"""Regenerate response_templates/core/unicode_tables.py: the members of `\\s` and `\\d` as the installed `regex` reads
them, so compiling a template need not scan every code point (tests/test_core_unicode_tables.py checks it is current).

    python scripts/unicode_tables.py          # rewrites the module for the installed regex version
"""

from __future__ import annotations

import sys
from pathlib import Path

import regex

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from response_templates.core.unicode_tables import SMALL_CATEGORIES, scanned_members  # noqa: E402

TARGET = ROOT / "response_templates" / "core" / "unicode_tables.py"
BEGIN, END = "# --- generated tables: begin", "# --- generated tables: end"


def ranges(members: str) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for code in map(ord, members):
        if out and out[-1][1] == code - 1:
            out[-1][1] = code
        else:
            out.append([code, code])
    return [(low, high) for low, high in out]


def generated() -> str:
    lines = [BEGIN + " (scripts/unicode_tables.py writes this block; do not edit it by hand)",
             f"TABLES_REGEX_VERSION = {regex.__version__!r}", "TABLES = {"]
    for category in SMALL_CATEGORIES:
        pairs = [f"(0x{low:x}, 0x{high:x})," for low, high in ranges(scanned_members(category))]
        lines.append(f"    {category!r}: (")
        lines += ["        " + " ".join(pairs[at:at + 6]) for at in range(0, len(pairs), 6)]
        lines.append("    ),")
    lines += ["}", END]
    return "\n".join(lines)


def main() -> int:
    text = TARGET.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    TARGET.write_text(head + generated() + tail, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)} for regex {regex.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The corpora the library's templates are checked with: one JSON file per template (generations and the message
each must parse to), used by `response-templates check` and the tests.

The files live in tests/data/corpora of a checkout; a wheel ships a copy as package data in
response_templates/library/corpora/ (pyproject.toml copies them at build time), so the commands that need them work
from an installed package too.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent
# In a wheel: package data next to this module. In a checkout (or an editable install of one): the tests' folder.
PACKAGED = _HERE / "corpora"
CHECKOUT = _HERE.parent.parent / "tests" / "data" / "corpora"


def corpora_dir() -> Path | None:
    """The folder holding this installation's corpora (package data, else the checkout's), or None."""
    for folder in (PACKAGED, CHECKOUT):
        if folder.is_dir():
            return folder
    return None

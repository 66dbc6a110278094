"""Reading the files people hand the tools: chat templates, tokenizer configs, template and tools JSON files.

Each error names the file and what it was meant to be, and its class says what went wrong, so that the command line
can give each its exit status: `UnreadableFile` (missing, a directory, no permission), `NotUTF8` (with the offset
of the first bad byte) and `NotJSON`.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.errors import NotJSON, NotUTF8, UnreadableFile


def decode_text(data: bytes, what: str, where: str) -> str:
    """`data` as UTF-8 text (decoded strictly: no lone surrogates slip in); `NotUTF8` naming `what`, `where` and the
    first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = data[error.start : error.start + 1].hex()
        raise NotUTF8(f"{what} {where} is not UTF-8 text: byte 0x{bad} at offset {error.start} ({error.reason})") from None


def read_text(path: str, what: str = "file") -> str:
    """The text of the file at `path` (UTF-8, line endings as written)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise UnreadableFile(f"cannot read {what} {path!r}: {error.strerror or error}") from None
    return decode_text(data, what, repr(path))


def read_json(path: str, what: str = "file") -> Any:
    """The JSON value held by the file at `path`."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise NotJSON(f"{what} {path!r} is not valid JSON: {error}") from None

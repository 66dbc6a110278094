"""The shipped template library: one JSON file per model family in response_templates/templates/.

    get_template("qwen3")            -> the response template dict (a fresh copy)
    list_templates()                 -> ["hermes", "llama3.1", ...]
    get_entry("qwen3")               -> the whole entry: models, chat templates verified against, notes, ...
    template_for("Qwen/Qwen3-8B")    -> the template for a Hub id or a loaded tokenizer, or None when unsure

The file format is described in templates/FORMAT.md.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from importlib import resources
from typing import Any

__all__ = [
    "LibraryError",
    "UnknownTemplateError",
    "get_entry",
    "get_template",
    "list_templates",
    "name_for",
    "template_for",
    "validate_entry",
]

_NAME = re.compile(r"[a-z0-9_.-]+")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
_REQUIRED = {"name", "family", "description", "models", "chat_templates", "supports", "template"}
_OPTIONAL = {"model_patterns", "notes", "verify"}
_SUPPORTS = ("reasoning", "tool_calls", "parallel_tool_calls")


class LibraryError(ValueError):
    """A library file is malformed; the message names the file and the key."""


class UnknownTemplateError(KeyError):
    """No library template has that name."""

    def __str__(self) -> str:  # KeyError would show the repr of the message
        return str(self.args[0]) if self.args else ""


def _fail(source: str, key: str, problem: str) -> LibraryError:
    return LibraryError(f"{source}: '{key}' {problem}")


def _string_list(entry: dict, key: str, source: str) -> list[str]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise _fail(source, key, "must be a list of non-empty strings")
    return value


def validate_entry(entry: Any, source: str, *, stem: str | None = None) -> None:
    """Check one library entry's metadata and template; raise LibraryError naming `source` and the key."""
    from . import TemplateError, load_template
    from .verify import check_options

    if not isinstance(entry, dict):
        raise LibraryError(f"{source}: the file must hold a JSON object, got {type(entry).__name__}")
    missing = sorted(_REQUIRED - set(entry))
    if missing:
        raise LibraryError(f"{source}: missing required keys {missing}")
    unknown = sorted(set(entry) - _REQUIRED - _OPTIONAL)
    if unknown:
        raise LibraryError(f"{source}: unknown keys {unknown} (allowed: {sorted(_REQUIRED | _OPTIONAL)})")

    name = entry["name"]
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise _fail(source, "name", f"must be lowercase letters, digits, '_', '.' or '-', got {name!r}")
    if stem is not None and name != stem:
        raise _fail(source, "name", f"is {name!r} but the file is named {stem!r}.json; they must be the same")
    for key in ("family", "description"):
        if not isinstance(entry[key], str) or not entry[key].strip():
            raise _fail(source, key, "must be a non-empty string")

    for model in _string_list(entry, "models", source):
        if not _HUB_ID.fullmatch(model):
            raise _fail(source, "models", f"holds {model!r}, which is not a Hub id of the form owner/name")
    for pattern in _string_list(entry, "model_patterns", source):
        try:
            re.compile(pattern)
        except re.error as e:
            raise _fail(source, "model_patterns", f"holds an invalid regex {pattern!r}: {e}") from None
    _string_list(entry, "notes", source)

    chat_templates = entry["chat_templates"]
    if not isinstance(chat_templates, list):
        raise _fail(source, "chat_templates", "must be a list of {\"file\", \"sha256\"} objects")
    for i, item in enumerate(chat_templates):
        key = f"chat_templates[{i}]"
        if not isinstance(item, dict):
            raise _fail(source, key, "must be an object with 'file' and 'sha256'")
        extra = sorted(set(item) - {"file", "sha256", "verify"})
        if extra:
            raise _fail(source, key, f"has unknown keys {extra}")
        if not isinstance(item.get("file"), str) or not item["file"]:
            raise _fail(source, f"{key}.file", "must be a non-empty file name")
        if item["file"].startswith(("/", "\\")) or ".." in item["file"].replace("\\", "/").split("/"):
            raise _fail(source, f"{key}.file", "must be a path inside the chat templates folder (no '..', not absolute)")
        if not isinstance(item.get("sha256"), str) or not _SHA256.fullmatch(item["sha256"]):
            raise _fail(source, f"{key}.sha256", "must be 64 lowercase hex digits (the sha256 of the file bytes)")
        if "verify" in item:
            _check_verify(item["verify"], source, f"{key}.verify", check_options)

    supports = entry["supports"]
    if not isinstance(supports, dict) or set(supports) != set(_SUPPORTS):
        raise _fail(source, "supports", f"must be an object with exactly the keys {list(_SUPPORTS)}")
    for key in _SUPPORTS:
        if not isinstance(supports[key], bool):
            raise _fail(source, f"supports.{key}", "must be true or false")
    if supports["parallel_tool_calls"] and not supports["tool_calls"]:
        raise _fail(source, "supports.parallel_tool_calls", "cannot be true when tool_calls is false")

    if "verify" in entry:
        _check_verify(entry["verify"], source, "verify", check_options)

    try:
        load_template(entry["template"])
    except TemplateError as e:
        raise LibraryError(f"{source}: 'template' is not a valid response template: {e}") from None


def _check_verify(options: Any, source: str, key: str, check_options) -> None:
    if not isinstance(options, dict):
        raise _fail(source, key, "must be an object")
    try:
        check_options(options)
    except ValueError as e:
        raise _fail(source, key, f"is invalid: {e}") from None


@functools.lru_cache(maxsize=None)
def _entries() -> dict[str, dict]:
    """Every library entry by name, validated. Cached: the files ship with the package."""
    folder = resources.files("response_templates") / "templates"
    entries: dict[str, dict] = {}
    owner_of_model: dict[str, str] = {}
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if not item.name.endswith(".json"):
            continue
        source = f"response_templates/templates/{item.name}"
        try:
            entry = json.loads(item.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise LibraryError(f"{source}: not valid JSON: {e}") from None
        validate_entry(entry, source, stem=item.name[: -len(".json")])
        for model in entry["models"]:
            if model in owner_of_model:
                raise _fail(source, "models", f"lists {model!r}, which {owner_of_model[model]}.json lists too")
            owner_of_model[model] = entry["name"]
        entries[entry["name"]] = entry
    return entries


def list_templates() -> list[str]:
    """Names of the shipped templates, sorted."""
    return sorted(_entries())


def get_entry(name: str) -> dict:
    """The whole library entry (metadata and template) named `name`, as a fresh copy."""
    entries = _entries()
    if name not in entries:
        raise UnknownTemplateError(f"no library template named {name!r}; known: {', '.join(sorted(entries))}")
    return copy.deepcopy(entries[name])


def get_template(name: str) -> dict:
    """The response template named `name` (a dict you may change freely: it is a copy)."""
    return get_entry(name)["template"]


# ---------------------------------------------------------------------------------------------
# Lookup


def fingerprints(chat_template: Any) -> set[str]:
    """sha256 hex digests of every chat template a tokenizer carries (one string or named templates)."""
    if isinstance(chat_template, str):
        sources = [chat_template]
    elif isinstance(chat_template, dict):
        sources = [t for t in chat_template.values() if isinstance(t, str)]
    elif isinstance(chat_template, (list, tuple)):  # [{"name": ..., "template": ...}] as in tokenizer_config.json
        sources = [t.get("template") for t in chat_template if isinstance(t, dict)]
        sources = [t for t in sources if isinstance(t, str)]
    else:
        sources = []
    digests = set()
    for text in sources:
        # Files saved from a tokenizer sometimes gain or lose one final newline, and a file with CRLF line endings
        # reaches the tokenizer with LF ones (read in text mode).
        for lines in {text, text.replace("\n", "\r\n")}:
            for variant in {lines, lines.rstrip("\r\n"), lines + ("\r\n" if "\r\n" in lines else "\n")}:
                digests.add(hashlib.sha256(variant.encode("utf-8")).hexdigest())
    return digests


def _one(names: set[str]) -> str | None:
    return next(iter(names)) if len(names) == 1 else None


def name_for(model_id_or_tokenizer: Any) -> str | None:
    """The name of the library template serving a Hub model id or a loaded tokenizer, or None when unsure.

    Order: an exact Hub id listed in `models`; else the `model_patterns` (None if patterns of two
    templates match, never a guess); else the sha256 of the tokenizer's chat template.
    """
    if isinstance(model_id_or_tokenizer, str):
        model_id, chat_template = model_id_or_tokenizer, None
    else:
        model_id = getattr(model_id_or_tokenizer, "name_or_path", None)
        chat_template = getattr(model_id_or_tokenizer, "chat_template", None)
    entries = _entries()
    if isinstance(model_id, str) and model_id:
        for name, entry in entries.items():
            if model_id in entry["models"]:
                return name
        matched = {
            name
            for name, entry in entries.items()
            if any(re.fullmatch(pattern, model_id) for pattern in entry.get("model_patterns", []))
        }
        if len(matched) > 1:
            return None  # ambiguous: a wrong template silently misparses, so refuse
        if matched:
            return _one(matched)
    digests = fingerprints(chat_template)
    if digests:
        return _one({name for name, entry in entries.items() for ct in entry["chat_templates"] if ct["sha256"] in digests})
    return None


def template_for(model_id_or_tokenizer: Any) -> dict | None:
    """The library's response template for a Hub model id (e.g. "Qwen/Qwen3-8B") or a loaded tokenizer.

    A tokenizer is matched by its `name_or_path`, then by the fingerprint of its `chat_template`.
    Returns a fresh copy of the template dict, or None when no single template is a sure match.
    """
    name = name_for(model_id_or_tokenizer)
    return None if name is None else get_template(name)

"""What a library entry must hold: its metadata, the chat templates it was verified against, the verify options.

`validate_entry` checks one entry (the library checks every file it loads with it; the publisher checks the entries
it pushes); `check_options` checks the "verify" options that tell `response_templates.verify` how to render a
chat template. The file format is described in templates/FORMAT.md.
"""

from __future__ import annotations

import re
from typing import Any

from ..core.errors import LibraryError, TemplateError, UnknownTemplateError
from ..core.template import load_template

__all__ = [
    "CASE_NAMES",
    "LibraryError",
    "UnknownTemplateError",
    "VERIFY_OPTION_KEYS",
    "check_options",
    "check_template",
    "entry_error",
    "validate_entry",
]

VERIFY_OPTION_KEYS = frozenset(
    {"scenarios", "render_kwargs", "tools_always", "reasoning_in_content", "bos_token", "eos_token", "arguments", "cases", "skip_cases", "reasoning_synthesis",
     "source_edits", "reasoning_key", "tools_shape", "content_parts"}
)
_SCENARIO_KEYS = frozenset({"name", "render_kwargs", "reasoning"})


# Names usable in the "cases" and "skip_cases" options (see templates/FORMAT.md for what each covers).
CASE_NAMES = (
    "plain",
    "reasoning_only",
    "single_call",
    "parallel_calls",
    "no_arguments",
    "nested_unicode_arguments",
    "marker_text_arguments",
    "text_before_call",
    "multi_turn",
    "multi_turn_answer",
)


def check_options(options: dict) -> None:
    """Raise ValueError naming what is wrong in a verify options dict (see templates/FORMAT.md)."""
    unknown = set(options) - VERIFY_OPTION_KEYS
    if unknown:
        raise ValueError(f"verify options: unknown keys {sorted(unknown)} (known: {sorted(VERIFY_OPTION_KEYS)})")
    for i, scenario in enumerate(options.get("scenarios") or []):
        if not isinstance(scenario, dict) or not isinstance(scenario.get("name"), str):
            raise ValueError(f"verify options: scenarios[{i}] must be an object with a string 'name'")
        bad = set(scenario) - _SCENARIO_KEYS
        if bad:
            raise ValueError(f"verify options: scenarios[{i}] has unknown keys {sorted(bad)}")
    key: str | None  # option names, then the value of reasoning_key
    for key, parts in (("reasoning_synthesis", ("prefill", "close")), ("reasoning_in_content", ("open", "close"))):
        value = options.get(key)
        if value is not None and (not isinstance(value, dict) or set(value) != set(parts)
                                  or not all(isinstance(value[p], str) for p in parts)):
            raise ValueError(f"verify options: '{key}' must be an object with exactly the string keys {list(parts)}")
    for key in ("render_kwargs", "skip_cases"):
        if not isinstance(options.get(key, {}), dict):
            raise ValueError(f"verify options: '{key}' must be an object")
    key = options.get("reasoning_key")
    if key is not None and (not isinstance(key, str) or not key.isidentifier()):
        raise ValueError("verify options: 'reasoning_key' must be a message key name such as 'thinking'")
    if options.get("arguments", "dict") not in ("dict", "json_string"):
        raise ValueError("verify options: 'arguments' must be 'dict' or 'json_string'")
    for key in ("tools_always", "content_parts"):
        if not isinstance(options.get(key, False), bool):
            raise ValueError(f"verify options: '{key}' must be true or false")
    if options.get("tools_shape", "wrapped") not in ("wrapped", "function"):
        raise ValueError("verify options: 'tools_shape' must be 'wrapped' or 'function'")
    edits = options.get("source_edits", [])
    if not isinstance(edits, list):
        raise ValueError("verify options: 'source_edits' must be a list")
    for i, edit in enumerate(edits):
        if (not isinstance(edit, dict) or set(edit) != {"remove", "why"}
                or not all(isinstance(edit[k], str) and edit[k] for k in ("remove", "why"))):
            raise ValueError(f"verify options: source_edits[{i}] must be an object with non-empty strings 'remove' and 'why'")
    unknown_cases = set(options.get("cases") or []) | set(options.get("skip_cases") or {})
    unknown_cases -= set(CASE_NAMES)
    if unknown_cases:
        raise ValueError(f"verify options: unknown case names {sorted(unknown_cases)} (known: {list(CASE_NAMES)})")



_NAME = re.compile(r"[a-z0-9_.-]+")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
_REQUIRED = {"name", "family", "description", "models", "chat_templates", "supports", "template"}
_OPTIONAL = {"model_patterns", "same_format", "notes", "verify"}
_SUPPORTS = ("reasoning", "tool_calls", "parallel_tool_calls")


def entry_error(source: str, key: str, problem: str) -> LibraryError:
    """The error for a library file whose `key` is wrong."""
    return LibraryError(f"{source}: '{key}' {problem}")


def _string_list(entry: dict, key: str, source: str) -> list[str]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise entry_error(source, key, "must be a list of non-empty strings")
    return value


def validate_entry(entry: Any, source: str, *, stem: str | None = None, compile_template: bool = True) -> None:
    """Check one library entry's metadata and template; raise LibraryError naming `source` and the key.

    `compile_template=False` checks the metadata only: the library loads every file that way (cheap) and compiles a
    template when it is first asked for (`check_template`), so the first parse pays for one template, not all."""
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
        raise entry_error(source, "name", f"must be lowercase letters, digits, '_', '.' or '-', got {name!r}")
    if stem is not None and name != stem:
        raise entry_error(source, "name", f"is {name!r} but the file is named {stem!r}.json; they must be the same")
    for key in ("family", "description"):
        if not isinstance(entry[key], str) or not entry[key].strip():
            raise entry_error(source, key, "must be a non-empty string")

    for model in _string_list(entry, "models", source):
        if not _HUB_ID.fullmatch(model):
            raise entry_error(source, "models", f"holds {model!r}, which is not a Hub id of the form owner/name")
    patterns = _string_list(entry, "model_patterns", source)
    for pattern in patterns:
        try:
            re.compile(pattern, re.IGNORECASE)
        except re.error as e:
            raise entry_error(source, "model_patterns", f"holds an invalid regex {pattern!r}: {e}") from None
    same_format = entry.get("same_format", {})
    if not isinstance(same_format, dict):
        raise entry_error(source, "same_format", "must be an object mapping a listed model id or pattern to its evidence")
    for key, evidence in same_format.items():
        if key not in entry["models"] and key not in patterns:
            raise entry_error(source, f"same_format[{key!r}]", "names neither a listed model id nor a listed model pattern")
        if not isinstance(evidence, str) or not evidence.strip():
            raise entry_error(source, f"same_format[{key!r}]", "must be a non-empty string saying why the format is the same")
    _string_list(entry, "notes", source)

    chat_templates = entry["chat_templates"]
    if not isinstance(chat_templates, list):
        raise entry_error(source, "chat_templates", "must be a list of {\"file\", \"sha256\"} objects")
    for i, item in enumerate(chat_templates):
        key = f"chat_templates[{i}]"
        if not isinstance(item, dict):
            raise entry_error(source, key, "must be an object with 'file' and 'sha256'")
        extra = sorted(set(item) - {"file", "sha256", "verify"})
        if extra:
            raise entry_error(source, key, f"has unknown keys {extra}")
        if not isinstance(item.get("file"), str) or not item["file"]:
            raise entry_error(source, f"{key}.file", "must be a non-empty file name")
        if item["file"].startswith(("/", "\\")) or ".." in item["file"].replace("\\", "/").split("/"):
            raise entry_error(source, f"{key}.file", "must be a path inside the chat templates folder (no '..', not absolute)")
        if not isinstance(item.get("sha256"), str) or not _SHA256.fullmatch(item["sha256"]):
            raise entry_error(source, f"{key}.sha256", "must be 64 lowercase hex digits (the sha256 of the file bytes)")
        if "verify" in item:
            _check_verify(item["verify"], source, f"{key}.verify")

    supports = entry["supports"]
    if not isinstance(supports, dict) or set(supports) != set(_SUPPORTS):
        raise entry_error(source, "supports", f"must be an object with exactly the keys {list(_SUPPORTS)}")
    for key in _SUPPORTS:
        if not isinstance(supports[key], bool):
            raise entry_error(source, f"supports.{key}", "must be true or false")
    if supports["parallel_tool_calls"] and not supports["tool_calls"]:
        raise entry_error(source, "supports.parallel_tool_calls", "cannot be true when tool_calls is false")

    if "verify" in entry:
        _check_verify(entry["verify"], source, "verify")

    if compile_template:
        check_template(entry, source)


def check_template(entry: dict, source: str) -> None:
    """Validate and compile an entry's template (kept in the compiled-template cache: the first parse with it then
    compiles nothing); raise LibraryError naming `source`."""
    try:
        load_template(entry["template"])
    except TemplateError as e:
        raise LibraryError(f"{source}: 'template' is not a valid response template: {e}") from None


def _check_verify(options: Any, source: str, key: str) -> None:
    if not isinstance(options, dict):
        raise entry_error(source, key, "must be an object")
    try:
        check_options(options)
    except ValueError as e:
        raise entry_error(source, key, f"is invalid: {e}") from None



"""The shipped template library: one JSON file per model family in response_templates/templates/.

    get_template("qwen3")            -> the response template dict (a fresh copy)
    list_templates()                 -> ["hermes", "llama3.1", ...]
    get_entry("qwen3")               -> the whole entry: models, chat templates verified against, notes, ...
    template_for("Qwen/Qwen3-8B")    -> the template for a Hub id or a loaded tokenizer, or None when unsure
    guess_for("unsloth/Qwen3-8B")    -> an unverified guess (name + reason), never given by template_for

The file format is described in templates/FORMAT.md.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from importlib import resources
from typing import Any, NamedTuple

__all__ = [
    "LibraryError",
    "UnknownTemplateError",
    "get_entry",
    "get_template",
    "Guess",
    "guess_for",
    "list_templates",
    "name_for",
    "template_for",
    "validate_entry",
]

_NAME = re.compile(r"[a-z0-9_.-]+")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
_REQUIRED = {"name", "family", "description", "models", "chat_templates", "supports", "template"}
_OPTIONAL = {"model_patterns", "same_format", "notes", "verify"}
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
    from .verification import check_options

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
    patterns = _string_list(entry, "model_patterns", source)
    for pattern in patterns:
        try:
            re.compile(pattern, re.IGNORECASE)
        except re.error as e:
            raise _fail(source, "model_patterns", f"holds an invalid regex {pattern!r}: {e}") from None
    same_format = entry.get("same_format", {})
    if not isinstance(same_format, dict):
        raise _fail(source, "same_format", "must be an object mapping a listed model id or pattern to its evidence")
    for key, evidence in same_format.items():
        if key not in entry["models"] and key not in patterns:
            raise _fail(source, f"same_format[{key!r}]", "names neither a listed model id nor a listed model pattern")
        if not isinstance(evidence, str) or not evidence.strip():
            raise _fail(source, f"same_format[{key!r}]", "must be a non-empty string saying why the format is the same")
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
            if model.lower() in owner_of_model:
                raise _fail(source, "models", f"lists {model!r}, which {owner_of_model[model.lower()]}.json lists too")
            owner_of_model[model.lower()] = entry["name"]
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


def _by_id(model_id: str, entries: dict[str, dict]) -> str | None:
    """The entry serving a Hub id through `models` (exact, any letter case) or `model_patterns` (unique match)."""
    wanted = model_id.lower()
    for name, entry in entries.items():
        if any(model.lower() == wanted for model in entry["models"]):
            return name
    matched = {
        name
        for name, entry in entries.items()
        if any(re.fullmatch(pattern, model_id, re.IGNORECASE) for pattern in entry.get("model_patterns", []))
    }
    return _one(matched)  # two families claiming one id is ambiguous: a wrong template silently misparses


def name_for(model_id_or_tokenizer: Any) -> str | None:
    """The name of the library template serving a Hub model id or a loaded tokenizer, or None when unsure.

    Order: for a loaded tokenizer, the sha256 of its chat template when it names exactly one entry (the
    chat template in use decides the format the model is prompted to write: a Llama 4 tokenizer given
    vLLM's pythonic chat template gets the pythonic entry, not the JSON one its name gives); then an
    exact Hub id listed in `models`; else the `model_patterns` (None if patterns of two templates
    match, never a guess); else None. Hub ids are compared without regard to letter case, as the Hub
    does. A mirror (`unsloth/Qwen3-8B`) is served only when it is listed itself or, for a loaded
    tokenizer, when its chat template's fingerprint is one the library verified: its files are then
    known to be the same. `guess_for` offers more, marked.
    """
    if isinstance(model_id_or_tokenizer, str):
        model_id, chat_template = model_id_or_tokenizer, None
    else:
        model_id = getattr(model_id_or_tokenizer, "name_or_path", None)
        chat_template = getattr(model_id_or_tokenizer, "chat_template", None)
    entries = _entries()
    digests = fingerprints(chat_template)
    by_fingerprint = (
        _one({name for name, entry in entries.items() for ct in entry["chat_templates"] if ct["sha256"] in digests})
        if digests
        else None
    )
    if by_fingerprint is not None:
        return by_fingerprint
    if isinstance(model_id, str) and model_id:
        return _by_id(model_id, entries)
    return None


def template_for(model_id_or_tokenizer: Any, *, infer: bool = False) -> dict | None:
    """The library's response template for a Hub model id (e.g. "Qwen/Qwen3-8B") or a loaded tokenizer.

    A tokenizer is matched by its `name_or_path`, then by the fingerprint of its `chat_template`.
    Returns a fresh copy of the template dict, or None when no single template is a sure match
    (never a guess: see `guess_for` for an unverified suggestion).

    With `infer=True` (opt-in), a tokenizer the library does not know gets a template inferred from its chat
    template and verified against it (`response_templates.infer`): a dict marked `.inferred = True`, with the
    inference report in `.result`, or None when inference gives up. A bare model id has nothing to infer from.
    """
    name = name_for(model_id_or_tokenizer)
    if name is None and infer:
        from .infer import infer_for_tokenizer

        return infer_for_tokenizer(model_id_or_tokenizer)
    return None if name is None else get_template(name)


# Hub accounts that republish other publishers' models (quantized or converted) under the same repository name.
# Their chat template is often, not always, a copy: a mirror is only *guessed* from its name (`guess_for`);
# template_for serves it when the entry lists it or when its tokenizer's chat template fingerprint matches.
MIRROR_OWNERS = (
    "unsloth",
    "lmstudio-community",
    "bartowski",
    "mlx-community",
    "TheBloke",
    "MaziyarPanahi",
    "QuantFactory",
    "RedHatAI",
    "nm-testing",
    "ggml-org",
)

# Suffixes that quantized or converted copies add to a repository name.
_VARIANT_SUFFIX = re.compile(
    r"(?:[-_.](?:GGUF|AWQ|GPTQ(?:-Int[48])?|FP8(?:-dynamic)?|FP4|NVFP4|MLX|bnb-4bit|unsloth-bnb-4bit|[2-8]bit|"
    r"Int[48]|W4A16|W8A8|MXFP4|EXL2|ONNX|quantized\.w4a16|quantized\.w8a8))+\Z",
    re.IGNORECASE,
)


class Guess(NamedTuple):
    """An unverified suggestion from `guess_for`: the library template `name` and why it was guessed."""

    name: str
    reason: str
    verified: bool = False


def guess_for(model_id: str) -> Guess | None:
    """An unverified guess of the library template for a Hub id that `template_for` does not serve.

    Never an answer by itself: the model's chat template was not checked against the template, so the
    parse may be wrong. Tries a mirror of a listed model (same repository name under one of
    MIRROR_OWNERS) and the id without a quantization suffix (-GGUF, -AWQ, -FP8, ...). Returns
    `Guess(name, reason, verified=True)` when the id is served for sure (`name_for` knows it), a
    `Guess(name, reason)` with `verified=False` for a guess, or None.
    """
    if not isinstance(model_id, str) or "/" not in model_id:
        raise TypeError(f"guess_for expects a Hub id 'owner/name', got {model_id!r}")
    entries = _entries()
    sure = _by_id(model_id, entries)
    if sure is not None:
        return Guess(sure, f"{model_id} is served by {sure} (verified or documented in the entry)", True)
    owner, _, repo = model_id.partition("/")
    stripped = _VARIANT_SUFFIX.sub("", repo)
    candidates = [f"{owner}/{stripped}"] if stripped != repo else []
    if owner.lower() in {m.lower() for m in MIRROR_OWNERS}:
        for name, entry in entries.items():
            for listed in entry["models"]:
                if listed.split("/", 1)[1].lower() in (repo.lower(), stripped.lower()):
                    candidates.append(listed)
    for candidate in candidates:
        name = _by_id(candidate, entries)
        if name is not None:
            return Guess(
                name,
                f"unverified: {model_id} looks like a copy of {candidate} (served by {name}); its chat template was "
                "not checked, so compare it (or pass the loaded tokenizer to template_for) before trusting this",
            )
    return None

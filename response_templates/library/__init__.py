"""The shipped template library: one JSON file per model family in response_templates/library/templates/.

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

from .entries import LibraryError, UnknownTemplateError, check_template, entry_error, validate_entry

__all__ = [
    "LibraryError",
    "UnknownTemplateError",
    "get_entry",
    "get_template",
    "Guess",
    "guess_for",
    "list_entries",
    "list_templates",
    "name_for",
    "template_for",
    "validate_entry",
    "validate_library",
]


_NAME = re.compile(r"[a-z0-9_.-]+")  # a library file's name (no path), as entries.py requires of `name`


def _source(name: str) -> str:
    return f"response_templates/library/templates/{name}.json"


@functools.lru_cache(maxsize=None)
def _entries() -> dict[str, dict]:
    """Every library entry by name, its metadata validated. Cached: the files ship with the package. A template is
    compiled when first asked for (`get_entry`), not here: compiling all of them took about a second, which the
    first parse, `list` and every other command paid (issue 29). `validate_library` checks them all."""
    folder = resources.files(__name__) / "templates"
    entries: dict[str, dict] = {}
    owner_of_model: dict[str, str] = {}
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if not item.name.endswith(".json"):
            continue
        source = f"response_templates/library/templates/{item.name}"
        try:
            entry = json.loads(item.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise LibraryError(f"{source}: not valid JSON: {e}") from None
        validate_entry(entry, source, stem=item.name[: -len(".json")], compile_template=False)
        for model in entry["models"]:
            if model.lower() in owner_of_model:
                raise entry_error(source, "models", f"lists {model!r}, which {owner_of_model[model.lower()]}.json lists too")
            owner_of_model[model.lower()] = entry["name"]
        entries[entry["name"]] = entry
    return entries


def list_templates() -> list[str]:
    """Names of the shipped templates, sorted."""
    return sorted(_entries())


def list_entries() -> list[dict]:
    """Every entry (fresh copies, sorted by name) for listing: metadata validated, templates not compiled (that is
    `get_entry`'s job, one template at a time)."""
    entries = _entries()
    return [copy.deepcopy(entries[name]) for name in sorted(entries)]


def get_entry(name: str) -> dict:
    """The whole library entry (metadata and template) named `name`, as a fresh copy; its template validated."""
    entry = _one_entry(name)
    if _CHECKED.get(name) is not entry:
        check_template(entry, _source(name))
        _CHECKED[name] = entry
    return copy.deepcopy(entry)


# The entry whose template was validated and compiled (`get_entry`), by name; entries read alone, by name.
_CHECKED: dict = {}
_ALONE: dict = {}


def _one_entry(name: str) -> dict:
    """The entry `name`, its metadata validated: from the loaded library, or (before it is loaded: the first
    `get_template`) from its own file alone, the others unread."""
    unread = getattr(_entries, "cache_info", None) is not None and _entries.cache_info().currsize == 0
    if unread and isinstance(name, str) and _NAME.fullmatch(name):
        if name in _ALONE:
            return _ALONE[name]
        item = resources.files(__name__) / "templates" / f"{name}.json"
        if item.is_file():
            try:
                entry = json.loads(item.read_text(encoding="utf-8"))
            except json.JSONDecodeError as e:
                raise LibraryError(f"{_source(name)}: not valid JSON: {e}") from None
            validate_entry(entry, _source(name), stem=name, compile_template=False)
            _ALONE[name] = entry
            return entry
    entries = _entries()
    if name not in entries:
        raise UnknownTemplateError(f"no library template named {name!r}; known: {', '.join(sorted(entries))}")
    return entries[name]


def validate_library() -> list[str]:
    """Validate every library file, metadata and template (what loading the library used to do up front); raise
    LibraryError naming the file at fault. Returns the names checked. Tests and `response-templates check` run it."""
    names = list_templates()
    for name in names:
        get_entry(name)
    return names


def get_template(name: str) -> dict:
    """The response template named `name` (a dict you may change freely: it is a copy)."""
    return get_entry(name)["template"]


# ---------------------------------------------------------------------------------------------
# Lookup


def fingerprints(chat_template: Any) -> set[str]:
    """sha256 hex digests of every chat template a tokenizer carries (one string or named templates)."""
    sources: list[Any]  # strings once filtered
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
    model_id: str | None
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


def template_for(model_id_or_tokenizer: Any) -> dict | None:
    """The library's response template for a Hub model id (e.g. "Qwen/Qwen3-8B") or a loaded tokenizer.

    A tokenizer is matched by its `name_or_path`, then by the fingerprint of its `chat_template`.
    Returns a fresh copy of the template dict, or None when no single template is a sure match
    (never a guess: see `guess_for` for an unverified suggestion). `response_templates.template_for(...,
    infer=True)` adds inference from the chat template for tokenizers the library does not know.
    """
    name = name_for(model_id_or_tokenizer)
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
    name: str | None  # entry names, then a lookup's answer
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

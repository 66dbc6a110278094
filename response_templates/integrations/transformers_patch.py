"""Give every transformers tokenizer (4.46 and later) `parse_response`, `get_response_parser` and `response_template`.

`patch()` adds them to `PreTrainedTokenizerBase` (and `parse_response` to `ProcessorMixin`), backed by this package's
parsing core; on releases with a built-in parser (5.20+) ours replaces it. `response_template` is read from
tokenizer_config.json by `from_pretrained` and written by `save_pretrained` on every release. `unpatch()` restores the
originals; `attach(tokenizer)` sets a tokenizer's template from the shipped library.

Importing this module never imports transformers: transformers modules that are not loaded yet are patched by the
import hook in `_autopatch` as soon as they are. `import response_templates` calls `patch()` unless
RESPONSE_TEMPLATES_DISABLE=1.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import os
import sys
from typing import Any

from . import _autopatch

logger = logging.getLogger(__name__)

__all__ = ["patch", "unpatch", "attach", "is_patched"]

# The file from_pretrained reads a tokenizer's settings from, and save_pretrained writes them to.
TOKENIZER_CONFIG = "tokenizer_config.json"
_MISSING = object()
# (class, attribute name) -> what the class itself defined before we patched it (_MISSING if nothing)
_ORIGINALS: dict[tuple[type, str], Any] = {}


# ---------------------------------------------------------------------------------------------------------------
# Input normalisation: strings, token ids, numpy arrays, torch tensors, batches of them
# ---------------------------------------------------------------------------------------------------------------


def _to_python(value: Any) -> Any:
    """numpy arrays, torch tensors (and their scalars) become nested Python lists / ints; lists are walked."""
    if isinstance(value, (str, bytes)):
        return value
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_to_python(item) for item in value]
    return value


def _is_ids(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, int) and not isinstance(item, bool) for item in value)


def _sequences(value: Any, argument: str) -> tuple[list, bool, bool]:
    """Split `value` into (items, batched, are_ids): one text, one id sequence, or a batch of either."""
    if isinstance(value, str):
        return [value], False, False
    if isinstance(value, (list, tuple)) and not value:
        return [], True, False  # an empty batch (as in transformers; an empty 1-D array is one empty sequence)
    value = _to_python(value)
    if _is_ids(value):
        return [value], False, True
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value, True, False
    if isinstance(value, list) and all(_is_ids(item) for item in value):
        return value, True, True
    raise TypeError(
        f"`{argument}` must be a string, a sequence of token ids (list, 1-D numpy array or torch tensor), or a batch "
        f"of them (list of strings, list of id lists, 2-D array or tensor); got {_describe(value)}"
    )


def _describe(value: Any) -> str:
    if isinstance(value, list) and value:
        kinds = sorted({type(item).__name__ for item in value})
        return f"a list of {'/'.join(kinds)}"
    return type(value).__name__


# ---------------------------------------------------------------------------------------------------------------
# Templates: the tokenizer's own, or the library's
# ---------------------------------------------------------------------------------------------------------------


def _library_template(tokenizer: Any) -> dict | None:
    """The shipped library's template for this tokenizer, or None (also when the library module is unavailable)."""
    try:
        from ..library import template_for
    except ImportError:
        return None
    return template_for(tokenizer)


def _resolve_template(tokenizer: Any, explicit: Any) -> Any:
    """The template to parse with: `explicit`, else the tokenizer's, else the library's; AttributeError if none."""
    if explicit is not None:
        return explicit
    own = getattr(tokenizer, "response_template", None)
    if isinstance(own, str):
        # A library name is for the Python API; a tokenizer (and its tokenizer_config.json) holds the template itself.
        raise ValueError(
            f"response_template must be a dict, got str {own!r:.60}: a tokenizer holds the template itself "
            "(for a library template: tokenizer.response_template = response_templates.get_template(NAME))"
        )
    if own is not None:
        return own
    found = _library_template(tokenizer)
    if found is not None:
        logger.debug(
            "%s %r has no response_template; using the template that response_templates.library.template_for "
            "found for it (call response_templates.attach(tokenizer) to set it explicitly)",
            type(tokenizer).__name__,
            getattr(tokenizer, "name_or_path", ""),
        )
        return found
    raise AttributeError(
        f"{type(tokenizer).__name__} has no `response_template` for parsing chat responses, and the "
        f"response-templates library has none for {getattr(tokenizer, 'name_or_path', '') or 'it'!r}: set "
        "`tokenizer.response_template = {...}`, pass a template as the second argument, or see "
        "`response-templates list` for the shipped templates"
    )


def _is_fast(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "is_fast", False)) and hasattr(tokenizer, "backend_tokenizer")


# ---------------------------------------------------------------------------------------------------------------
# The methods we add to PreTrainedTokenizerBase / ProcessorMixin
# ---------------------------------------------------------------------------------------------------------------


def parse_response(self, response, schema=None, *, prefix=None, tools=None, truncated=False, malformed="raise"):
    """Parse generated output into a message dict (or a list of them for a batch), like transformers 5.25.

    `response` is text, token ids (list, 1-D numpy array or torch tensor) or a batch of either (list of strings, list
    of id lists, 2-D array or tensor). `schema` overrides the tokenizer's `response_template`; without either, the
    response-templates library's template for this tokenizer is used. `prefix` (required) is the prompt that came
    before generation, in the same forms: one (broadcast to the whole batch) or one per item; "" or [] opts out.
    Fast tokenizers parse token ids directly, so control tokens only act as delimiters when generated as ids.
    `tools` casts tool-call arguments with each tool's JSON schema. `truncated=True` (our extension) says the
    generation was cut off (e.g. by max_new_tokens): an unfinished tool call is dropped instead of parsed.
    `malformed=` (our extension) is what to do with a tool call whose text does not parse: "raise" (the default,
    as transformers), "content" (kept as text in `content`) or "drop".
    """
    from ..core import parse_response as core_parse
    from ..core.message import PREFIX_REQUIRED, check_malformed, check_truncated
    from ..core.template import load_template

    legacy = _legacy_parser(self, schema, prefix)
    if legacy is not None:
        if tools is not None or truncated or malformed != "raise":
            raise ValueError(
                "a legacy `response_schema` is parsed by this transformers release's own parser, which takes no "
                "`tools=`, `truncated=` or `malformed=`: set a `response_template` to use them"
            )
        return legacy(self, response, schema)
    template = load_template(_resolve_template(self, schema))
    if prefix is None:
        raise ValueError(PREFIX_REQUIRED)
    check_malformed(malformed)
    check_truncated(truncated)

    responses, batched, are_ids = _sequences(response, "response")
    tokenizer = None
    if are_ids:
        if _is_fast(self):
            tokenizer = self  # the core decodes ids itself, keeping spelled-out control tokens as text
        else:
            responses = [self.decode(ids) for ids in responses]

    if isinstance(prefix, (list, tuple)) and len(prefix) == 0:
        prefixes, prefix_batched = [""], False  # the explicit opt-out, for every item
    else:
        prefixes, prefix_batched, prefix_ids = _sequences(prefix, "prefix")
        if prefix_ids and tokenizer is None:
            prefixes = [self.decode(ids) for ids in prefixes]
    if not prefix_batched:
        prefixes = prefixes * len(responses)
    elif len(prefixes) != len(responses):
        raise ValueError(
            f"got {len(responses)} response(s) but {len(prefixes)} prefixes: pass one prefix (used for every "
            "response) or exactly one prefix per response"
        )

    messages = []
    for index, (item, item_prefix) in enumerate(zip(responses, prefixes)):
        try:
            messages.append(
                core_parse(
                    item, template, prefix=item_prefix, tools=tools, tokenizer=tokenizer, truncated=truncated,
                    malformed=malformed,
                )
            )
        except (ValueError, TypeError) as error:
            if not batched:
                raise
            raise _batch_error(index, len(responses), error) from error
    return messages if batched else messages[0]


def _batch_error(index: int, size: int, error: Exception) -> Exception:
    """`error` raised by one item of a batch, its message led by the item's index; of the same class when that class
    takes a message alone (else ValueError or TypeError), so `except` clauses still catch it."""
    message = f"batch item {index} (of {size}): {error}"
    try:
        named = type(error)(message)
        if str(named) == message:
            return named
    except Exception:  # a class whose constructor wants more than a message (json.JSONDecodeError)
        pass
    return ValueError(message) if isinstance(error, ValueError) else TypeError(message)


def _is_legacy_schema(schema: Any) -> bool:
    # transformers 5.13's own rule: a response template has `version` or `fields`; a legacy schema has neither.
    return isinstance(schema, dict) and "version" not in schema and "fields" not in schema


def _legacy_parser(tokenizer: Any, schema: Any, prefix: Any) -> Any:
    """transformers' own `parse_response` when the call is for a legacy `response_schema` and this release ships the
    parser for that format (5.0 to 5.14), else None.

    The call is a legacy one when `schema` is a legacy schema, or when no schema is passed, the tokenizer has a
    `response_schema` but no `response_template`, and no `prefix=` is given (what TRL before 1.8, and TRL on
    these releases without this package, do). The release parses it exactly as it would without this package."""
    if schema is not None:
        legacy_call = _is_legacy_schema(schema)
    else:
        legacy_call = (
            prefix is None
            and getattr(tokenizer, "response_template", None) is None
            and getattr(tokenizer, "response_schema", None) is not None
        )
    if not legacy_call:
        return None
    base = sys.modules.get("transformers.tokenization_utils_base")
    tokenizer_class = getattr(base, "PreTrainedTokenizerBase", None)
    if getattr(base, "recursive_parse", None) is None or not isinstance(tokenizer_class, type):
        return None  # this release has no legacy parser (before 5.0, or 5.15 and later)
    original = _ORIGINALS.get((tokenizer_class, "parse_response"), _MISSING)
    if original is _MISSING or original is None:
        return None
    if prefix is not None:
        raise ValueError(
            "`prefix=` is only supported with a response template, not with a legacy `response_schema` "
            "(transformers 5.0-5.14's format, parsed by this release's own parser)"
        )
    return original


def get_response_parser(
    self, response_template=None, *, prefix=None, tools=None, token_ids=False, malformed="raise"
):
    """A streaming `ResponseParser` for this tokenizer's template (or `response_template`), like transformers 5.25.

    `prefix` (required; "" opts out) is the prompt before generation, as text or one sequence of token ids.
    `feed` takes generated text or, on a fast tokenizer, generated token ids: the first `feed` decides, so
    `get_response_parser(prefix=prompt_ids)` then `feed(new_ids)` works as well as feeding decoded text (text is
    what transformers 5.25 takes by default; it has no such switch). `token_ids=True` (fast tokenizers only) says
    up front that ids will be fed. Ids are decoded so that control tokens act as delimiters only when the model
    generated them as their own ids, and a multi-byte character split across ids is never torn.
    `malformed=` (our extension): "raise" (default), "content" or "drop", as for `parse_response`.
    """
    template = _resolve_template(self, response_template)
    if token_ids:
        if not _is_fast(self):
            raise ValueError(
                f"token_ids=True needs a fast tokenizer; {type(self).__name__} is not one: decode the ids and "
                "feed text instead"
            )
        if prefix is not None and not isinstance(prefix, str):
            prefix = _single_prefix(prefix)
        return _parser_class()(template, prefix, tools=tools, tokenizer=self, mode="ids", malformed=malformed)
    text_prefix = prefix
    if prefix is not None and not isinstance(prefix, str):
        prefix = _single_prefix(prefix)
        text_prefix = self.decode(prefix)
    parser = _parser_class()(
        template, text_prefix, tools=tools, mode="text" if not _is_fast(self) else None, malformed=malformed
    )
    parser._switch = (template, prefix, tools, self)
    return parser


_PARSER_CLASS = None


def _parser_class():
    """The ResponseParser subclass `get_response_parser` returns (made on first use: the core loads lazily)."""
    global _PARSER_CLASS
    if _PARSER_CLASS is None:
        from ..core import ResponseParser

        class TokenizerResponseParser(ResponseParser):
            """A ResponseParser made by `tokenizer.get_response_parser`: its first `feed` decides whether it takes
            text or token ids (unless `token_ids=True` decided for ids, or the tokenizer is not a fast one)."""

            def __init__(self, template, prefix=None, *, tools=None, tokenizer=None, mode=None, malformed="raise"):
                super().__init__(template, prefix, tools=tools, tokenizer=tokenizer, malformed=malformed)
                self._mode = mode
                self._switch = None

            def feed(self, chunk):
                ids = not isinstance(chunk, str)
                if self._mode is None and not self._finalized:
                    self._mode = "ids" if ids else "text"
                    if ids:
                        # Read the prompt again the way ids are read, then take ids from here on.
                        _, prefix, tools, tokenizer = self._switch
                        super().__init__(self.template, prefix, tools=tools, tokenizer=tokenizer, malformed=self.malformed)
                elif self._mode == "text" and ids and not self._finalized:
                    owner = self._switch[3] if self._switch else None
                    if owner is not None and not _is_fast(owner):
                        raise TypeError(
                            f"feed() takes text here: {type(owner).__name__} is not a fast tokenizer, so it cannot "
                            "decode ids incrementally; decode the ids and feed the text"
                        )
                    raise TypeError(
                        "this parser was fed text first, so feed() takes text; to feed token ids, feed ids from the "
                        "start or create it with tokenizer.get_response_parser(..., token_ids=True)"
                    )
                elif self._mode == "ids" and not ids and not self._finalized:
                    raise TypeError(
                        "this parser takes token ids (it was created with token_ids=True or was fed ids first); to "
                        "feed text, create a new parser with tokenizer.get_response_parser(prefix=...) and feed text "
                        "from the start"
                    )
                return super().feed(chunk)

        TokenizerResponseParser.__module__ = __name__
        _PARSER_CLASS = TokenizerResponseParser
    return _PARSER_CLASS


def _single_prefix(prefix: Any) -> list:
    prefix = _to_python(prefix)
    if not _is_ids(prefix):
        raise ValueError(
            "`prefix=` must be a single sequence (a string, a list of token ids, or a 1-D array or tensor) for "
            f"get_response_parser; got {_describe(prefix)}"
        )
    return prefix


def _processor_parse_response(
    self, response, schema=None, *, prefix=None, tools=None, truncated=False, malformed="raise"
):
    """Parse generated output with this processor's tokenizer: see the tokenizer's `parse_response`."""
    tokenizer = getattr(self, "tokenizer", None)
    if tokenizer is None:
        raise ValueError(f"{type(self).__name__} has no tokenizer, so it cannot parse responses")
    from ..core.message import check_truncated

    extra = {}
    if check_truncated(truncated):
        extra["truncated"] = True
    if malformed != "raise":
        extra["malformed"] = malformed
    return tokenizer.parse_response(response, schema, prefix=prefix, tools=tools, **extra)


def _wrap_init(original):
    # Take `response_template` out of the kwargs before any release sees it: old releases would keep it in
    # `init_kwargs` (and save a stale copy later), and the attribute is set the same way everywhere.
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        template = kwargs.pop("response_template", None)
        original(self, *args, **kwargs)
        self.response_template = template

    return __init__


def _wrap_save_pretrained(original):
    # Every release writes the keys of `init_kwargs` with the current attribute values, so the template is saved
    # by putting it there for the duration of the save (and taken out when it is None, so no stale value is written).
    @functools.wraps(original)
    def save_pretrained(self, *args, **kwargs):
        init_kwargs = getattr(self, "init_kwargs", None)
        if not isinstance(init_kwargs, dict):
            return original(self, *args, **kwargs)
        before = init_kwargs.get("response_template", _MISSING)
        template = getattr(self, "response_template", None)
        if template is not None and hasattr(template, "to_dict"):
            template = template.to_dict()  # a CompiledTemplate: save the dict it came from
        if template is not None and not _is_json_data(template):
            # never crash a fine-tuning script over it: the value cannot be written to tokenizer_config.json
            logger.warning(
                "tokenizer.response_template is a %s, not JSON data; save_pretrained does not write it",
                type(template).__name__,
            )
            template = None
        if template is None:
            init_kwargs.pop("response_template", None)
        else:
            # a dict, or whatever JSON value tokenizer_config.json held (written back as it was loaded)
            init_kwargs["response_template"] = template
        swapped = self.__dict__.get("response_template", _MISSING)
        self.__dict__["response_template"] = template  # what the release reads back while saving
        try:
            saved = original(self, *args, **kwargs)
            if isinstance(template, dict):
                _restore_key_order(saved, template)
            return saved
        finally:
            if before is _MISSING:
                init_kwargs.pop("response_template", None)
            else:
                init_kwargs["response_template"] = before
            if swapped is _MISSING:
                self.__dict__.pop("response_template", None)
            else:
                self.__dict__["response_template"] = swapped

    return save_pretrained


def _is_json_data(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _restore_key_order(saved: Any, template: dict) -> None:
    """transformers writes tokenizer_config.json with sorted keys, nested ones included, which would reorder the
    template's `defaults` (the first keys of every parsed message) and transforms (the keys of every tool call).
    Write the template back in its own order; the other keys keep the order transformers gave them."""
    for name in saved if isinstance(saved, (list, tuple)) else ():
        if not isinstance(name, (str, os.PathLike)) or not os.fspath(name).endswith(TOKENIZER_CONFIG):
            continue
        try:
            with open(name, encoding="utf-8") as handle:
                config = json.load(handle)
            if not isinstance(config, dict) or config.get("response_template") != template:
                continue
            if json.dumps(config["response_template"]) == json.dumps(template):
                continue  # already in the template's order
            config["response_template"] = template
            text = json.dumps(config, indent=2, ensure_ascii=False) + "\n"
            with open(name, "w", encoding="utf-8") as handle:
                handle.write(text)
        except (OSError, ValueError, RecursionError) as error:  # the save itself succeeded: keep it as it is
            logger.warning("could not keep the key order of response_template in %s: %s", name, error)


def _response_template_property() -> property:
    # The value lives in the instance __dict__, as on transformers 5.20+. A tokenizer built before patching has none
    # there: on older releases its loaded tokenizer_config.json value is still in `init_kwargs`, so read that.
    def get(self):
        try:
            return self.__dict__["response_template"]
        except KeyError:
            init_kwargs = self.__dict__.get("init_kwargs")
            return init_kwargs.get("response_template") if isinstance(init_kwargs, dict) else None

    def set(self, value):
        self.__dict__["response_template"] = value

    def delete(self):
        self.__dict__["response_template"] = None

    return property(get, set, delete, "The response template (a dict) used by parse_response; saved by save_pretrained.")


# ---------------------------------------------------------------------------------------------------------------
# Patching
# ---------------------------------------------------------------------------------------------------------------


def _set(cls: type, name: str, value: Any) -> None:
    key = (cls, name)
    if key not in _ORIGINALS:
        _ORIGINALS[key] = cls.__dict__.get(name, _MISSING)
    setattr(cls, name, value)


def _patch_tokenizer_base(cls: type) -> None:
    if (cls, "parse_response") in _ORIGINALS:
        return  # already patched
    original_init = cls.__dict__["__init__"]
    original_save = cls.__dict__["save_pretrained"]
    _set(cls, "parse_response", parse_response)
    _set(cls, "get_response_parser", get_response_parser)
    _set(cls, "__init__", _wrap_init(original_init))
    _set(cls, "save_pretrained", _wrap_save_pretrained(original_save))
    if "response_template" not in cls.__dict__:
        _set(cls, "response_template", _response_template_property())


def _patch_processor(cls: type) -> None:
    if (cls, "parse_response") not in _ORIGINALS:
        _set(cls, "parse_response", _processor_parse_response)


def patch_loaded_module(module: Any) -> None:
    """Patch one loaded transformers module (called by the import hook and by `patch`)."""
    name = module.__name__
    if name == "transformers.tokenization_utils_base":
        _patch_tokenizer_base(module.PreTrainedTokenizerBase)
    elif name == "transformers.processing_utils":
        _patch_processor(module.ProcessorMixin)
    elif name == "trl.chat_template_utils":
        from .trl import patch_module

        patch_module(module)


def patch() -> None:
    """Patch transformers now for the modules already imported, and on import for the others.

    `import response_templates` calls it (the `.pth` hook patches each watched module as it is imported instead);
    explicit calls work even with RESPONSE_TEMPLATES_DISABLE=1. Never imports transformers itself. Safe to call twice.
    """
    _autopatch.install(force=True)
    for name in _autopatch.WATCHED:
        module = sys.modules.get(name)
        if module is not None:
            patch_loaded_module(module)


def unpatch() -> None:
    """Restore transformers' original classes and stop patching modules imported later."""
    _autopatch.uninstall()
    if "trl.chat_template_utils" in sys.modules:
        from .trl import unpatch_module

        unpatch_module()
    for (cls, name), original in reversed(list(_ORIGINALS.items())):
        if original is _MISSING:
            if name in cls.__dict__:
                delattr(cls, name)
        else:
            setattr(cls, name, original)
    _ORIGINALS.clear()


def is_patched() -> bool:
    """True while transformers' tokenizer class carries our methods."""
    return any(name == "parse_response" for _, name in _ORIGINALS)


def attach(tokenizer: Any) -> dict:
    """Set `tokenizer.response_template` from the shipped library (so it is also saved by `save_pretrained`).

    Returns the template; raises LookupError when the library has none for this tokenizer.
    """
    template = _library_template(tokenizer)
    if template is None:
        raise LookupError(
            f"the response-templates library has no template for {type(tokenizer).__name__} "
            f"{getattr(tokenizer, 'name_or_path', '')!r}; set tokenizer.response_template yourself "
            "(`response-templates list` shows the shipped templates)"
        )
    template = copy.deepcopy(template)
    tokenizer.response_template = template
    return template

"""TRL sees what the patched tokenizers can do, on every transformers release.

TRL's `trl.chat_template_utils` decides by transformers' version whether a tokenizer understands a
`response_template` and `parse_response(..., prefix=...)` (`_SUPPORTS_RESPONSE_TEMPLATE`, 5.13+) and
`parse_response(..., tools=...)` (`_SUPPORTS_PARSE_RESPONSE_TOOLS`, 5.15+). With this package installed every
tokenizer has both, on every release; left alone, TRL would set the legacy `response_schema` on older releases and
call `parse_response(ids)` without the prompt, so every tool call of a rollout would come back as plain text.

`patch_module(module)` runs when `trl.chat_template_utils` has been imported (the import hook) or from `patch()`:
each such flag that is False while the patched `parse_response` takes the argument it stands for is set to True, and
the module-level values TRL derived from it (`NAME = A if FLAG else B`, e.g. `_XML_INLINE_VALUE_PARSER`, which the
response templates share) are given the value TRL computes when the flag is true, read from TRL's own source. TRL's
helpers and trainers then take the path they take on transformers 5.25. Only names that exist with the expected
types are touched: a TRL release without them is left as it is. `unpatch_module()` restores everything.
"""

from __future__ import annotations

import ast
import copy
import inspect
import logging
import sys
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

MODULE = "trl.chat_template_utils"

# TRL's version-gated flags -> the keyword of the patched `tokenizer.parse_response` that provides the capability.
CAPABILITIES = {
    "_SUPPORTS_RESPONSE_TEMPLATE": "prefix",
    "_SUPPORTS_PARSE_RESPONSE_TOOLS": "tools",
}


@dataclass
class _Change:
    """One value we changed, and how to put it back."""

    module: Any
    name: str
    before: Any
    in_place: Any = None  # the mutable object updated in place (shared by TRL's templates), if any


@dataclass
class _State:
    changes: list[_Change] = field(default_factory=list)
    raised: list[str] = field(default_factory=list)  # the flags set to True


_STATE = _State()


def raised_flags() -> list[str]:
    """The TRL flags this package set to True (empty when TRL is not loaded, already supports it, or is unpatched)."""
    return list(_STATE.raised)


def _parse_response_keywords() -> set[str]:
    base = sys.modules.get("transformers.tokenization_utils_base")
    method = getattr(getattr(base, "PreTrainedTokenizerBase", None), "parse_response", None)
    if method is None:
        return set()
    try:
        return set(inspect.signature(method).parameters)
    except (TypeError, ValueError):
        return set()


def patch_module(module: Any) -> None:
    """Raise TRL's capability flags that the patched tokenizers satisfy (see the module docstring). Never raises for
    a TRL release shaped differently: unknown shapes are left alone."""
    if _STATE.raised:
        return
    # By feature: the tokenizer class's parse_response (ours once patched; transformers' own, or none, otherwise).
    keywords = _parse_response_keywords()
    raised = [
        flag
        for flag, keyword in CAPABILITIES.items()
        if module.__dict__.get(flag) is False and keyword in keywords
    ]
    if not raised:
        return
    for flag in raised:
        _STATE.changes.append(_Change(module, flag, False))
        setattr(module, flag, True)
    _STATE.raised = raised
    _rederive(module, raised)
    # Modules that already copied a flag by name (`from ..chat_template_utils import _SUPPORTS_RESPONSE_TEMPLATE`)
    # when we patch late, e.g. `import trl` before `import response_templates` without the .pth hook. (Modules
    # imported later copy the raised value.)
    _set_copies(module, raised, True)
    logger.debug("response-templates: %s now sees %s (the patched parse_response provides them)", MODULE, raised)


def _set_copies(module: Any, flags: list[str], value: bool) -> None:
    """Set the other loaded `trl.*` modules' copies of `flags` to `value`."""
    for name, other in list(sys.modules.items()):
        if other is module or other is None or not name.startswith("trl."):
            continue
        namespace = getattr(other, "__dict__", {})
        for flag in flags:
            if namespace.get(flag) is (not value):
                setattr(other, flag, value)


def _rederive(module: Any, raised: list[str]) -> None:
    """Give every `NAME = A if FLAG else B` of TRL's module (FLAG one we raised) the value A, from TRL's source."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError) as error:
        logger.debug("response-templates: cannot read the source of %s (%s); derived values left as they are", MODULE, error)
        return
    for statement in tree.body:
        if not (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, ast.IfExp)
        ):
            continue
        test, chosen = statement.value.test, statement.value.body
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, chosen = test.operand, statement.value.orelse
        if not (isinstance(test, ast.Name) and test.id in raised):
            continue
        name = statement.targets[0].id
        try:
            value = ast.literal_eval(chosen)
        except ValueError:
            logger.debug("response-templates: %s.%s is not a literal; left as it is", MODULE, name)
            continue
        current = module.__dict__.get(name)
        if current == value:
            continue
        # Update dicts and lists in place: TRL's response templates hold this very object.
        if isinstance(current, dict) and isinstance(value, dict):
            _STATE.changes.append(_Change(module, name, copy.deepcopy(current), in_place=current))
            current.clear()
            current.update(value)
        elif isinstance(current, list) and isinstance(value, list):
            _STATE.changes.append(_Change(module, name, copy.deepcopy(current), in_place=current))
            current[:] = value
        else:
            _STATE.changes.append(_Change(module, name, current))
            setattr(module, name, value)


def unpatch_module() -> None:
    """Put back every TRL value `patch_module` changed, and TRL's modules' copies of the flags."""
    module = sys.modules.get(MODULE)
    if _STATE.raised:
        _set_copies(module, _STATE.raised, False)
    for change in reversed(_STATE.changes):
        if isinstance(change.in_place, dict):
            change.in_place.clear()
            change.in_place.update(change.before)
        elif isinstance(change.in_place, list):
            change.in_place[:] = change.before
        else:
            setattr(change.module, change.name, change.before)
    _STATE.changes.clear()
    _STATE.raised = []

"""Lazy import hook that patches transformers when its tokenizer module is first imported.

The ``response_templates_autopatch.pth`` file installed next to the package loads this file at interpreter start-up
*without* importing the ``response_templates`` package (see ``boot_from_pth``) and calls ``install()``, which only
puts a small finder on ``sys.meta_path``. Nothing else runs until a watched transformers module is imported; then
``response_templates.integrations.transformers_patch`` patches it. ``RESPONSE_TEMPLATES_DISABLE=1`` turns all of this off.

This module uses the standard library only (and only modules Python has already loaded at start-up), and must never
raise at start-up.
"""

import importlib
import os
import sys

# Modules we patch as soon as each has finished executing: transformers' tokenizer and processor classes, and TRL's
# chat template helpers (which decide by transformers' version what a tokenizer can parse).
WATCHED = ("transformers.tokenization_utils_base", "transformers.processing_utils", "trl.chat_template_utils")

_MARKER = "_response_templates_autopatch"  # attribute that identifies our finder, whichever copy of this file made it


def disabled() -> bool:
    """True when the user turned automatic patching off with RESPONSE_TEMPLATES_DISABLE."""
    return os.environ.get("RESPONSE_TEMPLATES_DISABLE", "").strip().lower() in ("1", "true", "yes", "on")


def _on_loaded(module) -> None:
    """Called right after a watched module has executed: patch it (errors are reported, never raised)."""
    try:
        patching = importlib.import_module("response_templates.integrations.transformers_patch")
        patching.patch_loaded_module(module)
    except Exception as error:  # never break `import transformers` because of us
        import warnings

        warnings.warn(
            f"response-templates could not patch {module.__name__}: {error!r}; "
            "call response_templates.patch() to see the full error",
            RuntimeWarning,
            stacklevel=2,
        )


class _PatchingLoader:
    """Wraps the real loader of a watched module: executes it, then patches it. Everything else is delegated."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _on_loaded(module)

    def __getattr__(self, name):  # get_source, get_filename, is_package, ... for inspect and friends
        return getattr(self._loader, name)


class _Finder:
    """A meta-path finder that only answers for the watched modules: it finds the real spec with the other finders
    and swaps in a loader that patches the module once it has executed."""

    def __init__(self):
        setattr(self, _MARKER, True)
        self._busy: set[str] = set()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in WATCHED or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            for finder in sys.meta_path:
                if finder is self or getattr(finder, _MARKER, False) or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.discard(fullname)
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None  # an exotic loader: let the normal machinery handle it, unpatched
        spec.loader = _PatchingLoader(spec.loader)
        return spec

    def invalidate_caches(self):
        pass


def installed() -> bool:
    return any(getattr(finder, _MARKER, False) for finder in sys.meta_path)


def install(force: bool = False) -> bool:
    """Put the finder on sys.meta_path (once). Returns True if the hook is active afterwards.

    RESPONSE_TEMPLATES_DISABLE=1 prevents it unless `force` (an explicit `response_templates.patch()`)."""
    if disabled() and not force:
        return False
    if not installed():
        sys.meta_path.insert(0, _Finder())
    return True


def uninstall() -> None:
    """Remove every copy of our finder from sys.meta_path."""
    sys.meta_path[:] = [finder for finder in sys.meta_path if not getattr(finder, _MARKER, False)]


def boot_from_pth() -> None:
    """Entry point of the .pth file: install the hook, swallowing any error (start-up must never fail)."""
    try:
        install()
    except Exception:
        pass

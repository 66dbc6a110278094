"""What the commands share: errors worth one line (`CLIError`), reading input files and templates (a library name,
a JSON file, a saved tokenizer), and printing JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, NoReturn

from ..authoring.files import decode_text, read_json, read_text
from ..integrations.transformers_patch import TOKENIZER_CONFIG

PROG = "response-templates"


class CLIError(Exception):
    """An error worth one line to the user (exit status 2: a usage error)."""

    status = 2


class InputError(CLIError):
    """Input the command cannot use, such as a file that is not UTF-8 (exit status 1)."""

    status = 1


def library_module():
    from .. import library

    return library


def library_entry(name: str) -> dict:
    """The whole library entry (metadata + template) named `name`."""
    try:
        return library_module().get_entry(name)
    except KeyError as error:  # unknown name: the library's message lists the known ones
        raise CLIError(str(error)) from None


def list_entries() -> list[dict]:
    """Every library entry's metadata (listing compiles no template)."""
    return library_module().list_entries()


def _unwrap(data: Any, where: str) -> Any:
    """A response template from a library entry or a bare template dict."""
    if isinstance(data, dict) and "template" in data and "fields" not in data:
        return data["template"]
    if isinstance(data, dict):
        return data
    raise CLIError(f"{where}: expected a JSON object (a response template or a library entry)")


def looks_like_file(value: str) -> bool:
    return os.path.sep in value or value.endswith(".json") or os.path.isfile(value)




def is_tokenizer_config(data: Any, path: str) -> bool:
    if not isinstance(data, dict) or "fields" in data or "template" in data:
        return False
    return os.path.basename(path) == TOKENIZER_CONFIG or bool({"response_template", "chat_template", "tokenizer_class"} & set(data))


def tokenizer_chat_templates(config: dict, config_path: str) -> dict[str, str]:
    """{name: source} of a saved tokenizer's chat templates (chat_template.jinja and additional_chat_templates/ next to
    its tokenizer_config.json, else its "chat_template" key), as transformers reads them."""
    folder = os.path.dirname(os.path.abspath(config_path))
    found = {}
    jinja = os.path.join(folder, "chat_template.jinja")
    if os.path.isfile(jinja):
        found["chat_template.jinja"] = read_text(jinja, "chat template")
        extra = os.path.join(folder, "additional_chat_templates")
        if os.path.isdir(extra):
            for name in sorted(os.listdir(extra)):
                if name.endswith(".jinja"):
                    found[name] = read_text(os.path.join(extra, name), "chat template")
        return found
    value = config.get("chat_template")
    if isinstance(value, str):
        found["chat_template"] = value
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and isinstance(item.get("template"), str):
                found[str(item.get("name", "default"))] = item["template"]
    return found


def from_tokenizer(path: str, config: dict) -> tuple[Any, dict[str, str]]:
    """The template a saved tokenizer serves: its response_template, else the library's match for its chat
    template; and its chat templates."""
    chat_templates = tokenizer_chat_templates(config, path)
    template = config.get("response_template")
    if isinstance(template, dict):
        return template, chat_templates
    if template is not None:
        raise CLIError(f"{path}: 'response_template' must be a JSON object, got {type(template).__name__}")
    library = library_module()
    from types import SimpleNamespace

    source = chat_templates.get("chat_template.jinja") or chat_templates.get("chat_template") or chat_templates
    name = library.name_for(SimpleNamespace(name_or_path=config.get("name_or_path") or "", chat_template=source))
    if name is None:
        raise CLIError(
            f"{path} has no response_template and no library template matches its chat template; "
            "pick one with --template NAME|FILE"
        )
    return library_entry(name), chat_templates


def tokenizer_config_path(value: str) -> str | None:
    """tokenizer_config.json of a saved tokenizer directory, or `value` when it names that file; else None."""
    if os.path.isdir(value):
        path = os.path.join(value, TOKENIZER_CONFIG)
        if not os.path.isfile(path):
            if os.sep not in value and value in library_module().list_templates():
                return None  # a folder that happens to be named like a library template: the name wins
            raise CLIError(f"{value!r} is a directory without {TOKENIZER_CONFIG} (expected a saved tokenizer)")
        return path
    if os.path.basename(value) == TOKENIZER_CONFIG and os.path.isfile(value):
        return value
    return None


def load_template_source(value: str) -> tuple[Any, dict[str, str]]:
    """A library entry (by name), the JSON in a file (an entry or a bare template), or what a saved tokenizer (its
    directory or its tokenizer_config.json) holds; with the chat templates that came with it (a tokenizer's)."""
    config_path = tokenizer_config_path(value)
    if config_path is not None:
        return from_tokenizer(config_path, read_json(config_path, "tokenizer config"))
    if looks_like_file(value):
        data = read_json(value, "template file")
        if is_tokenizer_config(data, value):
            return from_tokenizer(value, data)
        if not isinstance(data, dict):
            raise CLIError(f"template file {value!r} must hold a JSON object (a response template or a library entry)")
        return data, {}
    return library_entry(value), {}


def resolve_entry_or_template(value: str) -> Any:
    """A library entry (by name), the JSON in a file (an entry or a bare template), or a saved tokenizer's template."""
    return load_template_source(value)[0]


def resolve_template(args: argparse.Namespace) -> Any:
    if args.model and args.template:
        raise CLIError("give either --model or --template, not both")
    if args.model and tokenizer_config_path(args.model) is not None:
        return _unwrap(resolve_entry_or_template(args.model), args.model)
    if args.model:
        template = library_module().template_for(args.model)
        if template is None:
            raise CLIError(f"no library template is known to serve {args.model!r}; pick one with --template")
        return _unwrap(template, f"template for {args.model}")
    if args.template:
        return _unwrap(resolve_entry_or_template(args.template), args.template)
    raise CLIError("say which template to use: --model HUB_ID or --template NAME|FILE")


def read_input_text(path: str | None, what: str) -> str:
    if path is None or path == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:  # a text stream (tests, embedding): already decoded
            return sys.stdin.read()
        # bytes, decoded strictly: a locale's lenient decoding would smuggle lone surrogates into the output
        return decode_text(stream.read(), what, "<stdin>")
    return read_text(path, what)


# A lone surrogate (`"\ud800"` in JSON the model wrote) cannot be written as UTF-8: it is printed escaped, as JSON
# allows inside a string (the only place one can be), so the output reads back to the same value.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def print_json(value: Any, *, indent: int | None = None) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    print(_LONE_SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text))


def template_name(args: argparse.Namespace) -> str:
    name = args.template or "response-templates"
    return os.path.splitext(os.path.basename(name))[0]


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage dump
        raise CLIError(f"{message} (see `{self.prog} --help`)")


def fail(message: str) -> None:
    """Report an error on one line of stderr."""
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)

"""The `response-templates` command line.

    response-templates list                                   # the shipped templates
    response-templates show qwen3                             # one library entry, as JSON
    response-templates parse --model Qwen/Qwen3-8B out.txt    # parse a generation (file or stdin) to a message
    response-templates parse --template qwen3 --prefix-file prompt.txt --stream < out.txt     # events, one per line
    response-templates parse --template my_template.json --openai --tools tools.json < out.txt  # OpenAI chunks
    response-templates verify --template qwen3 --chat-template Qwen--Qwen3-8B.jinja
    response-templates infer path/to/model_dir                # infer a template from a chat template
    response-templates check --engine all qwen3 hermes        # which serving engines give the same messages
    response-templates push --help                            # open Hub pull requests (maintainers)

Errors are reported as one line on stderr with a non-zero exit status (2 for usage errors, 1 otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

PROG = "response-templates"


class CLIError(Exception):
    """An error worth one line to the user (exit status 2: a usage error)."""

    status = 2


class InputError(CLIError):
    """Input the command cannot use, such as a file that is not UTF-8 (exit status 1)."""

    status = 1


# --- helpers -----------------------------------------------------------------------------------------------


def _library():
    from .. import library

    return library


def _library_entry(name: str) -> dict:
    """The whole library entry (metadata + template) named `name`."""
    library = _library()
    if hasattr(library, "get_entry"):
        try:
            return library.get_entry(name)
        except KeyError as error:  # unknown name: the library's message lists the known ones
            raise CLIError(str(error)) from None
    from importlib import resources

    path = resources.files("response_templates.library") / "templates" / f"{name}.json"
    if not name or "/" in name or not path.is_file():
        raise CLIError(f"no library template named {name!r} (see `{PROG} list`)")
    return json.loads(path.read_text(encoding="utf-8"))


def _list_entries() -> list[dict]:
    library = _library()
    found = library.list_templates()
    entries = []
    for item in found:
        if isinstance(item, dict):
            entries.append(item)
        else:
            try:
                entries.append(_library_entry(str(item)))
            except Exception:  # a name we cannot describe is still listed
                entries.append({"name": str(item)})
    return entries


def _unwrap(data: Any, where: str) -> Any:
    """A response template from a library entry or a bare template dict."""
    if isinstance(data, dict) and "template" in data and "fields" not in data:
        return data["template"]
    if isinstance(data, dict):
        return data
    raise CLIError(f"{where}: expected a JSON object (a response template or a library entry)")


def _decode(data: bytes, what: str, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = data[error.start : error.start + 1].hex()
        raise InputError(
            f"{what} {where} is not UTF-8 text: byte 0x{bad} at offset {error.start} ({error.reason})"
        ) from None


def _read_file_text(path: str, what: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise CLIError(f"cannot read {what} {path!r}: {error.strerror or error}") from None
    return _decode(data, what, repr(path))


def _read_json(path: str, what: str) -> Any:
    text = _read_file_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise CLIError(f"{what} {path!r} is not valid JSON: {error}") from None


def _looks_like_file(value: str) -> bool:
    return os.path.sep in value or value.endswith(".json") or os.path.isfile(value)


TOKENIZER_CONFIG = "tokenizer_config.json"


def _is_tokenizer_config(data: Any, path: str) -> bool:
    if not isinstance(data, dict) or "fields" in data or "template" in data:
        return False
    return os.path.basename(path) == TOKENIZER_CONFIG or bool({"response_template", "chat_template", "tokenizer_class"} & set(data))


def _tokenizer_chat_templates(config: dict, config_path: str) -> dict[str, str]:
    """{name: source} of a saved tokenizer's chat templates (chat_template.jinja and additional_chat_templates/ next to
    its tokenizer_config.json, else its "chat_template" key), as transformers reads them."""
    folder = os.path.dirname(os.path.abspath(config_path))
    found = {}
    jinja = os.path.join(folder, "chat_template.jinja")
    if os.path.isfile(jinja):
        found["chat_template.jinja"] = _read_file_text(jinja, "chat template")
        extra = os.path.join(folder, "additional_chat_templates")
        if os.path.isdir(extra):
            for name in sorted(os.listdir(extra)):
                if name.endswith(".jinja"):
                    found[name] = _read_file_text(os.path.join(extra, name), "chat template")
        return found
    value = config.get("chat_template")
    if isinstance(value, str):
        found["chat_template"] = value
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and isinstance(item.get("template"), str):
                found[str(item.get("name", "default"))] = item["template"]
    return found


def _from_tokenizer(path: str, config: dict) -> tuple[Any, dict[str, str]]:
    """The template a saved tokenizer serves: its response_template, else the library's match for its chat
    template; and its chat templates."""
    chat_templates = _tokenizer_chat_templates(config, path)
    template = config.get("response_template")
    if isinstance(template, dict):
        return template, chat_templates
    if template is not None:
        raise CLIError(f"{path}: 'response_template' must be a JSON object, got {type(template).__name__}")
    library = _library()
    from types import SimpleNamespace

    source = chat_templates.get("chat_template.jinja") or chat_templates.get("chat_template") or chat_templates
    name = library.name_for(SimpleNamespace(name_or_path=config.get("name_or_path") or "", chat_template=source))
    if name is None:
        raise CLIError(
            f"{path} has no response_template and no library template matches its chat template; "
            "pick one with --template NAME|FILE"
        )
    return _library_entry(name), chat_templates


def _tokenizer_config_path(value: str) -> str | None:
    """tokenizer_config.json of a saved tokenizer directory, or `value` when it names that file; else None."""
    if os.path.isdir(value):
        path = os.path.join(value, TOKENIZER_CONFIG)
        if not os.path.isfile(path):
            if os.sep not in value and value in _library().list_templates():
                return None  # a folder that happens to be named like a library template: the name wins
            raise CLIError(f"{value!r} is a directory without {TOKENIZER_CONFIG} (expected a saved tokenizer)")
        return path
    if os.path.basename(value) == TOKENIZER_CONFIG and os.path.isfile(value):
        return value
    return None


def _load_template_source(value: str) -> tuple[Any, dict[str, str]]:
    """A library entry (by name), the JSON in a file (an entry or a bare template), or what a saved tokenizer (its
    directory or its tokenizer_config.json) holds; with the chat templates that came with it (a tokenizer's)."""
    config_path = _tokenizer_config_path(value)
    if config_path is not None:
        return _from_tokenizer(config_path, _read_json(config_path, "tokenizer config"))
    if _looks_like_file(value):
        data = _read_json(value, "template file")
        if _is_tokenizer_config(data, value):
            return _from_tokenizer(value, data)
        if not isinstance(data, dict):
            raise CLIError(f"template file {value!r} must hold a JSON object (a response template or a library entry)")
        return data, {}
    return _library_entry(value), {}


def _resolve_entry_or_template(value: str) -> Any:
    """A library entry (by name), the JSON in a file (an entry or a bare template), or a saved tokenizer's template."""
    return _load_template_source(value)[0]


def _resolve_template(args: argparse.Namespace) -> Any:
    if args.model and args.template:
        raise CLIError("give either --model or --template, not both")
    if args.model and _tokenizer_config_path(args.model) is not None:
        return _unwrap(_resolve_entry_or_template(args.model), args.model)
    if args.model:
        template = _library().template_for(args.model)
        if template is None:
            raise CLIError(f"no library template is known to serve {args.model!r}; pick one with --template")
        return _unwrap(template, f"template for {args.model}")
    if args.template:
        return _unwrap(_resolve_entry_or_template(args.template), args.template)
    raise CLIError("say which template to use: --model HUB_ID or --template NAME|FILE")


def _read_text(path: str | None, what: str) -> str:
    if path is None or path == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:  # a text stream (tests, embedding): already decoded
            return sys.stdin.read()
        # bytes, decoded strictly: a locale's lenient decoding would smuggle lone surrogates into the output
        return _decode(stream.read(), what, "<stdin>")
    return _read_file_text(path, what)


def _print_json(value: Any, *, indent: int | None = None) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=indent))


# --- commands ----------------------------------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace) -> int:
    entries = _list_entries()
    if args.json:
        _print_json([{k: e.get(k) for k in ("name", "family", "description", "models")} for e in entries], indent=2)
        return 0
    width = max((len(e.get("name", "")) for e in entries), default=0)
    for entry in entries:
        line = entry.get("name", "").ljust(width)
        if entry.get("family") or entry.get("description"):
            line += f"  {entry.get('family', '')}: {entry.get('description', '')}"
        print(line.rstrip())
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    _print_json(_library_entry(args.name), indent=2)
    return 0


def _cmd_parse(args: argparse.Namespace) -> int:
    from ..core import ResponseParser, parse_response
    from ..core.template import load_template

    template = load_template(_resolve_template(args))
    if args.prefix is not None and args.prefix_file is not None:
        raise CLIError("give either --prefix or --prefix-file, not both")
    prefix = args.prefix or ""
    if args.prefix_file is not None:
        prefix = _read_text(args.prefix_file, "prefix file")
    tools = _read_json(args.tools, "tools file") if args.tools else None
    if tools is not None and not isinstance(tools, list):
        raise CLIError(f"tools file {args.tools!r} must hold a JSON list of tool schemas")
    text = _read_text(args.input, "input file")
    if args.chunk_size is not None and args.chunk_size < 1:
        raise CLIError("--chunk-size must be at least 1")
    size = args.chunk_size or max(len(text), 1)
    pieces = [text[i : i + size] for i in range(0, len(text), size)] or [""]

    if args.openai:
        from response_templates.integrations.openai_adapter import OpenAIStreamAdapter

        model = args.model or _template_name(args)
        if args.early_arguments and args.truncated:
            raise CLIError("--early-arguments streams arguments before a call is complete; it cannot be used with --truncated")
        if args.early_arguments and args.malformed != "raise":
            raise CLIError("--early-arguments streams calls before they are complete; it cannot be used with --malformed content/drop")
        adapter = OpenAIStreamAdapter(
            template, prefix, tools=tools, model=model, may_truncate=not args.early_arguments, malformed=args.malformed
        )
        with _cut_off_hint(args, text, template, prefix, tools):
            for chunk in adapter.stream(pieces, truncated=args.truncated):
                _print_json(chunk)
        _note_if_cut_off(args, text, template, prefix, tools, adapter.message)
        return 0
    if args.stream:
        parser = ResponseParser(template, prefix, tools=tools, malformed=args.malformed)
        for event in parser.initial_events:
            _print_json(event)
        with _cut_off_hint(args, text, template, prefix, tools):
            for piece in pieces:
                for event in parser.feed(piece):
                    _print_json(event)
            message, events = parser.finalize(truncated=args.truncated)
        for event in events:
            _print_json(event)
        _print_json({"type": "message", "message": message})
        _note_if_cut_off(args, text, template, prefix, tools, message)
        return 0
    with _cut_off_hint(args, text, template, prefix, tools):
        message = parse_response(
            text, template, prefix=prefix, tools=tools, truncated=args.truncated, malformed=args.malformed
        )
    _print_json(message, indent=None if args.compact else 2)
    _note_if_cut_off(args, text, template, prefix, tools, message)
    return 0


_CUT_OFF = "if the generation was cut off (max tokens), pass --truncated to drop the unfinished part"


def _parses_when_truncated(text: str, template: Any, prefix: str, tools: Any) -> dict | None:
    from ..core import parse_response

    try:
        return parse_response(text, template, prefix=prefix, tools=tools, truncated=True)
    except Exception:
        return None


class _cut_off_hint:
    """A parse failure that --truncated would avoid gets the hint appended (the output may be cut off)."""

    def __init__(self, args, text, template, prefix, tools):
        self._check = None if args.truncated else (text, template, prefix, tools)

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if error is None or self._check is None or not isinstance(error, ValueError):
            return False
        if _parses_when_truncated(*self._check) is None:
            return False
        raise InputError(f"{error}; the output ends inside an unfinished region: {_CUT_OFF}") from error


def _note_if_cut_off(args, text: str, template: Any, prefix: str, tools: Any, message: dict | None) -> None:
    """Parsed, but the output ends inside a region that --truncated would drop: say so on stderr."""
    if args.truncated or message is None:
        return
    dropped = _parses_when_truncated(text, template, prefix, tools)
    if dropped is not None and dropped != message:
        fields = sorted(key for key in set(message) | set(dropped) if message.get(key) != dropped.get(key))
        print(f"{PROG}: note: the output ends inside an unfinished {', '.join(fields)} region; {_CUT_OFF}",
              file=sys.stderr)


def _template_name(args: argparse.Namespace) -> str:
    name = args.template or "response-templates"
    return os.path.splitext(os.path.basename(name))[0]


def _chat_template_folder(args: argparse.Namespace) -> str | None:
    return args.chat_templates_dir or os.environ.get("RESPONSE_TEMPLATES_CHAT_TEMPLATES") or None


def _find_chat_template(path: str, folder: str | None) -> str:
    """`path` itself, else the file of that name in the chat templates folder (or one of its subfolders)."""
    if os.path.exists(path) or os.path.isabs(path):
        return path
    if folder:
        candidate = os.path.join(folder, path)
        if os.path.isfile(candidate):
            return candidate
        if os.sep not in path and "/" not in path:
            matches = sorted(
                os.path.join(root, name) for root, _, names in os.walk(folder) for name in names if name == path
            )
            if len(matches) == 1:
                return matches[0]
            if matches:
                raise CLIError(f"chat template {path!r} is ambiguous in {folder}: {', '.join(matches)}")
        raise CLIError(f"cannot read chat template {path!r}: no such file, here or in {folder}")
    raise CLIError(
        f"cannot read chat template {path!r}: no such file (give a path, or set RESPONSE_TEMPLATES_CHAT_TEMPLATES / "
        "--chat-templates-dir to the folder that holds it)"
    )


def _cmd_verify(args: argparse.Namespace) -> int:
    from ..core.template import load_template
    from response_templates.authoring.verification import entry_options, verify, verify_entry

    entry, own_chat_templates = _load_template_source(args.template)
    is_entry = isinstance(entry, dict) and "template" in entry and "fields" not in entry
    load_template(entry["template"] if is_entry else entry)  # an invalid template is one error, not one per case
    folder = _chat_template_folder(args)
    if not args.chat_template and own_chat_templates:
        # A saved tokenizer: check its template against its own chat template(s).
        sources = {name: source for name, source in own_chat_templates.items()}
    elif not args.chat_template:
        # Default: every chat template the library entry lists, from the shared folder (checked by sha256).
        if not is_entry or not entry.get("chat_templates"):
            raise CLIError("give the chat template to check against with --chat-template FILE")
        if not folder:
            raise CLIError(
                "give --chat-template FILE, or --chat-templates-dir DIR (or set RESPONSE_TEMPLATES_CHAT_TEMPLATES) "
                "to check the chat templates the entry lists"
            )
        try:
            reports = verify_entry(entry, folder)
        except (OSError, ValueError) as error:
            raise CLIError(str(error)) from error
        sources = None
    else:
        sources = {}
        for path in args.chat_template:
            found = _find_chat_template(path, folder)
            sources[os.path.basename(path)] = _read_file_text(found, "chat template")
    if sources is not None:
        reports = {}
        for name, source in sources.items():
            # The entry's per-chat-template options apply to the file it was verified against (same bytes).
            options = entry_options(entry, source) if is_entry else None
            report = verify(entry, source, options=options) if options is not None else verify(entry, source)
            reports[name] = report
    failed = 0
    for name, report in reports.items():
        print(f"== {name}")
        print(report.summary())
        failed += not report.ok
    return 1 if failed else 0


def _cmd_infer(args: argparse.Namespace) -> int:
    from response_templates.authoring.inference import InferenceError, cli_infer

    try:
        return cli_infer(args)
    except InferenceError as error:
        raise CLIError(str(error)) from None


def _cmd_check(args: argparse.Namespace) -> int:
    from response_templates.authoring import engines

    names = args.names or [str(n) for n in _library().list_templates()]
    for name in names:
        _library_entry(name)  # unknown names: one clear line
    wanted = list(engines.ENGINES) if args.engine == "all" else [args.engine]
    if args.engine != "all" and engines.engine_unavailable(args.engine):
        raise CLIError(engines.engine_unavailable(args.engine))
    try:
        engines.corpora_dir(args.corpora)
    except FileNotFoundError as error:
        raise CLIError(str(error)) from None
    transform = engines.thinking_form if args.form == "thinking" else None
    reports = engines.check(names, wanted, corpora=args.corpora, transform=transform)
    if args.json:
        _print_json([r.as_dict() for r in reports], indent=2)
    else:
        print(engines.matrix_markdown(reports))
    bad = [r for r in reports if r.status in (engines.REJECTED, engines.DIFFERS)]
    return 1 if args.strict and bad else 0


def _cmd_push(argv: list[str]) -> int:
    from response_templates.authoring import publish  # imported only here: it needs huggingface_hub

    return publish.main(argv, prog=f"{PROG} push")


# --- argument parsing --------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        raise CLIError(f"{message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Parse chat model outputs with response templates.")
    from .._version import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("list", help="list the library's templates")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")

    p = sub.add_parser("show", help="print one library entry as JSON")
    p.add_argument("name")

    p = sub.add_parser("parse", help="parse a generation into a message")
    p.add_argument("input", nargs="?", help="file holding the generated text (default: stdin)")
    p.add_argument("--model", help="Hub model id (its library template is used), or a saved tokenizer directory")
    p.add_argument(
        "--template",
        help="library template name, a JSON file (a template or a library entry), or a saved tokenizer (its "
        "directory or tokenizer_config.json)",
    )
    p.add_argument(
        "--prefix",
        help="the prompt text that preceded the generation (default: none, i.e. the input holds the whole message)",
    )
    p.add_argument("--prefix-file", help="file holding the prompt text")
    p.add_argument("--tools", help="JSON file holding the list of tool schemas offered to the model")
    p.add_argument("--truncated", action="store_true", help="the generation was cut off (max tokens)")
    p.add_argument(
        "--malformed",
        choices=("raise", "content", "drop"),
        default="raise",
        help="a tool call whose text does not parse: fail (default), keep its raw text in content, or drop it",
    )
    p.add_argument("--stream", action="store_true", help="print the parser events as JSON lines")
    p.add_argument("--openai", action="store_true", help="print OpenAI chat.completion.chunk objects as JSON lines")
    p.add_argument(
        "--early-arguments",
        action="store_true",
        help="with --openai: send tool calls while they are written (only for output that is not truncated)",
    )
    p.add_argument("--chunk-size", type=int, help="with --stream/--openai: feed the text in pieces of N characters")
    p.add_argument("--compact", action="store_true", help="print the message on one line")

    p = sub.add_parser("verify", help="check a template against real chat templates")
    p.add_argument(
        "--template",
        required=True,
        help="library template name, a JSON file, or a saved tokenizer (its directory or tokenizer_config.json: "
        "checked against its own chat template unless --chat-template is given)",
    )
    p.add_argument(
        "--chat-template",
        action="append",
        help="Jinja chat template file (repeatable); a name not found here is looked for in --chat-templates-dir",
    )
    p.add_argument(
        "--chat-templates-dir",
        help="folder holding the chat templates a library entry lists (default: RESPONSE_TEMPLATES_CHAT_TEMPLATES)",
    )

    from response_templates.authoring.inference import add_infer_parser  # `infer` lives with the inference code

    add_infer_parser(sub)
    p = sub.add_parser("check", help="measure which serving engines load each template and give the same message")
    p.add_argument("names", nargs="*", metavar="NAME", help="library templates (default: all)")
    p.add_argument("--engine", default="all", choices=["transformers", "transformers-serve", "vllm", "sglang", "all"],
                   help="engine to run (default: all installed ones)")
    p.add_argument("--form", default="published", choices=["published", "thinking"],
                   help="check the template as published, or with reasoning_content renamed thinking")
    p.add_argument("--corpora", help="folder of template corpora (default: tests/data/corpora of a checkout)")
    p.add_argument("--json", action="store_true", help="print one JSON object per template and engine")
    p.add_argument("--strict", action="store_true", help="exit 1 when an engine rejects a template or differs")

    sub.add_parser("push", help="open Hub pull requests adding templates (see `push --help`)", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "push":
            return _cmd_push(argv[1:])
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        if args.command == "parse" and args.stream and args.openai:
            raise CLIError("give either --stream or --openai, not both")
        if args.command == "parse" and args.early_arguments and not args.openai:
            raise CLIError("--early-arguments only applies with --openai")
        if args.command == "parse" and args.chunk_size is not None and not (args.stream or args.openai):
            raise CLIError("--chunk-size only applies with --stream or --openai")
        if args.command == "infer":
            return _cmd_infer(args)
        commands = {"list": _cmd_list, "show": _cmd_show, "parse": _cmd_parse, "verify": _cmd_verify}
        commands["check"] = _cmd_check
        return commands[args.command](args)
    except CLIError as error:
        _fail(str(error))
        return error.status
    except KeyboardInterrupt:
        _fail("interrupted")
        return 130
    except BrokenPipeError:
        return 1
    except Exception as error:  # any other failure: one readable line, no traceback
        _fail(f"{type(error).__name__}: {error}" if not isinstance(error, (ValueError, OSError)) else str(error))
        return 1


def _fail(message: str) -> None:
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)

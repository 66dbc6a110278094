"""`response-templates parse`: a generation (a file or stdin) parsed into a message, or into the parser's events
(`--stream`), or into OpenAI chat.completion.chunk objects (`--openai`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..authoring.files import read_json
from .common import PROG, CLIError, InputError, print_json, read_input_text, resolve_template, template_name


def run(args: argparse.Namespace) -> int:
    if args.stream and args.openai:
        raise CLIError("give either --stream or --openai, not both")
    if args.early_arguments and not args.openai:
        raise CLIError("--early-arguments only applies with --openai")
    if args.chunk_size is not None and not (args.stream or args.openai):
        raise CLIError("--chunk-size only applies with --stream or --openai")
    from ..core import ResponseParser, parse_response
    from ..core.template import load_template

    template = load_template(resolve_template(args))
    if args.prefix is not None and args.prefix_file is not None:
        raise CLIError("give either --prefix or --prefix-file, not both")
    prefix = args.prefix or ""
    if args.prefix_file is not None:
        prefix = read_input_text(args.prefix_file, "prefix file")
    tools = read_json(args.tools, "tools file") if args.tools else None
    if tools is not None and not isinstance(tools, list):
        raise CLIError(f"tools file {args.tools!r} must hold a JSON list of tool schemas")
    text = read_input_text(args.input, "input file")
    if args.chunk_size is not None and args.chunk_size < 1:
        raise CLIError("--chunk-size must be at least 1")
    size = args.chunk_size or max(len(text), 1)
    pieces = [text[i : i + size] for i in range(0, len(text), size)] or [""]

    if args.openai:
        from ..integrations.openai_adapter import OpenAIStreamAdapter

        model = args.model or template_name(args)
        if args.early_arguments and args.truncated:
            raise CLIError("--early-arguments streams arguments before a call is complete; it cannot be used with --truncated")
        if args.early_arguments and args.malformed != "raise":
            raise CLIError("--early-arguments streams calls before they are complete; it cannot be used with --malformed content/drop")
        adapter = OpenAIStreamAdapter(
            template, prefix, tools=tools, model=model, may_truncate=not args.early_arguments, malformed=args.malformed
        )
        with _cut_off_hint(args, text, template, prefix, tools):
            for chunk in adapter.stream(pieces, truncated=args.truncated):
                print_json(chunk)
        _note_if_cut_off(args, text, template, prefix, tools, adapter.message)
        return 0
    if args.stream:
        parser = ResponseParser(template, prefix, tools=tools, malformed=args.malformed)
        for event in parser.initial_events:
            print_json(event)
        with _cut_off_hint(args, text, template, prefix, tools):
            for piece in pieces:
                for event in parser.feed(piece):
                    print_json(event)
            message, events = parser.finalize(truncated=args.truncated)
        for event in events:
            print_json(event)
        print_json({"type": "message", "message": message})
        _note_if_cut_off(args, text, template, prefix, tools, message)
        return 0
    with _cut_off_hint(args, text, template, prefix, tools):
        message = parse_response(
            text, template, prefix=prefix, tools=tools, truncated=args.truncated, malformed=args.malformed
        )
    print_json(message, indent=None if args.compact else 2)
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


def add_parser(sub) -> None:
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

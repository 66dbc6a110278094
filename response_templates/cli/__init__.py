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

import importlib
import sys
from typing import Sequence

from ..authoring.files import NotJSON, UnreadableFile
from .common import PROG, ArgumentParser, CLIError, fail

# One module per command, each with `add_parser(subparsers)` and `run(args)`; they import what their work needs
# when they run, so `response-templates list` stays quick. (`list` lives in `listing`: a submodule named `list`
# would shadow the builtin in this package's namespace once imported.)
COMMANDS = {"list": "listing", "show": "show", "parse": "parse", "verify": "verify", "infer": "infer",
            "check": "check", "push": "push"}


def _command(name: str):
    return importlib.import_module(f".{COMMANDS[name]}", __name__)


def build_parser() -> ArgumentParser:
    from .._version import __version__

    parser = ArgumentParser(prog=PROG, description="Parse chat model outputs with response templates.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    for name in COMMANDS:
        _command(name).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "push":  # the publisher parses its own options
            return _command("push").run(argv[1:])
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        return _command(args.command).run(args)
    except CLIError as error:
        fail(str(error))
        return error.status
    except (UnreadableFile, NotJSON) as error:  # a file named on the command line: a usage error
        fail(str(error))
        return 2
    except KeyboardInterrupt:
        fail("interrupted")
        return 130
    except BrokenPipeError:
        return 1
    except Exception as error:  # any other failure: one readable line, no traceback
        fail(f"{type(error).__name__}: {error}" if not isinstance(error, (ValueError, OSError)) else str(error))
        return 1

"""`response-templates infer`: infer a response template from a chat template file, a tokenizer_config.json or a
model folder, or (`--diff NAME`) from the chat templates a library entry lists, beside the entry's template.
"""

from __future__ import annotations

import argparse
import json
import os

from .common import CLIError


def add_parser(sub) -> None:
    p = sub.add_parser("infer", help="infer a response template from a chat template")
    p.add_argument("path", nargs="?", metavar="FILE_OR_MODEL_DIR",
                   help="a .jinja file, a tokenizer_config.json, or a directory holding chat_template.jinja or "
                        "tokenizer_config.json")
    p.add_argument("--diff", metavar="NAME",
                   help="infer from the chat templates a library entry lists and show the result beside the entry's")
    p.add_argument("--chat-templates-dir", help="with --diff: folder holding the entry's chat templates "
                                                "(default: $RESPONSE_TEMPLATES_CHAT_TEMPLATES)")
    p.add_argument("--json", action="store_true", help="print the whole result (template, confidence, report) as JSON")


def run(args: argparse.Namespace) -> int:
    from ..authoring.inference import InferenceError

    try:
        return _infer(args)
    except InferenceError as error:
        raise CLIError(str(error)) from None


def _infer(args: argparse.Namespace) -> int:
    import sys

    from ..authoring.inference import InferenceError, infer_template, load_chat_template

    if bool(args.path) == bool(args.diff):
        raise InferenceError("give either FILE_OR_MODEL_DIR or --diff NAME")
    if args.diff:
        return _cli_diff(args)
    source, settings = load_chat_template(args.path)
    result = infer_template(source, render_kwargs=settings)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(json.dumps(result.template, indent=2, ensure_ascii=False))
        print(result.report(), file=sys.stderr)
    return 0 if result.ok else 1


def _cli_diff(args: argparse.Namespace) -> int:
    import difflib

    from ..authoring.files import read_text
    from ..authoring.inference import InferenceError, infer_template
    from ..library import get_entry

    try:
        entry = get_entry(args.diff)
    except KeyError as error:
        raise InferenceError(str(error).strip("'\"")) from None
    folder = args.chat_templates_dir or os.environ.get("RESPONSE_TEMPLATES_CHAT_TEMPLATES")
    if not folder:
        raise InferenceError("give --chat-templates-dir DIR (or set RESPONSE_TEMPLATES_CHAT_TEMPLATES) to read the "
                             f"chat templates {args.diff!r} lists")
    library_text = json.dumps(entry["template"], indent=2, ensure_ascii=False).splitlines()
    options = entry.get("verify") or {}
    tokens = {k: options[k] for k in ("bos_token", "eos_token") if k in options}
    inferred_any = False
    for item in entry["chat_templates"]:
        path = os.path.join(folder, item["file"])
        if not os.path.isfile(path):
            raise InferenceError(f"{path}: no such file (listed by {args.diff!r})")
        result = infer_template(read_text(path, "chat template").replace("\r\n", "\n"), render_kwargs=tokens)
        print(f"== {item['file']}")
        if args.json:
            print(json.dumps({"library": entry["template"], **result.to_dict()}, indent=2, ensure_ascii=False))
            continue
        print(result.report())
        if result.ok:
            inferred_any = True
            inferred_text = json.dumps(result.template, indent=2, ensure_ascii=False).splitlines()
            diff = difflib.unified_diff(library_text, inferred_text, f"library: {args.diff}", "inferred", lineterm="")
            print("\n".join(diff) or "(identical)")
    return 0 if inferred_any else 1

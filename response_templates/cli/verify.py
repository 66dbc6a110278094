"""`response-templates verify`: a template checked against real chat templates (see `response_templates.verify`).
"""

from __future__ import annotations

import argparse
import os

from ..authoring.files import read_text
from .common import CLIError, load_template_source


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


def run(args: argparse.Namespace) -> int:
    from ..authoring.verification import entry_options, verify, verify_entry
    from ..core.template import load_template

    entry, own_chat_templates = load_template_source(args.template)
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
            files = [item.get("file", "?") for item in entry["chat_templates"]]
            raise CLIError(
                f"{entry.get('name', 'this entry')} is verified against the chat templates {', '.join(files)}, which "
                "are not shipped with the package: save them under those names (OWNER--NAME.jinja, or with __DATE for an "
                "earlier revision, is the chat template of Hub model OWNER/NAME: its chat_template.jinja or the "
                "chat_template of its tokenizer_config.json; they are checked by sha256) in a folder given with "
                "--chat-templates-dir DIR (or RESPONSE_TEMPLATES_CHAT_TEMPLATES), or check one file with "
                "--chat-template FILE"
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
            sources[os.path.basename(path)] = read_text(found, "chat template")
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


def add_parser(sub) -> None:
    p = sub.add_parser(
        "verify",
        help="check a template against real chat templates",
        description="Check a response template against the chat templates it must invert: each conversation the "
        "chat template renders must parse back to its message. The chat templates are the models' own (Jinja, "
        "from their Hub repositories) and are not shipped with this package: pass them with --chat-template FILE, "
        "give --template a saved tokenizer (checked against its own chat template), or, for a library template, "
        "save the chat templates its entry lists (`response-templates show NAME`, key chat_templates: file "
        "OWNER--NAME.jinja is the chat template of Hub model OWNER/NAME, checked by sha256) in a folder given with "
        "--chat-templates-dir or RESPONSE_TEMPLATES_CHAT_TEMPLATES.",
    )
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

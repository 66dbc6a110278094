"""`response-templates check`: which serving engines load each library template and give the same messages.
"""

from __future__ import annotations

import argparse

from .common import CLIError, library_entry, library_module, print_json


def run(args: argparse.Namespace) -> int:
    from ..authoring import engines

    names = args.names or [str(n) for n in library_module().list_templates()]
    for name in names:
        library_entry(name)  # unknown names: one clear line
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
        print_json([r.as_dict() for r in reports], indent=2)
    else:
        print(engines.matrix_markdown(reports))
    bad = [r for r in reports if r.status in (engines.REJECTED, engines.DIFFERS)]
    return 1 if args.strict and bad else 0


def add_parser(sub) -> None:
    p = sub.add_parser("check", help="measure which serving engines load each template and give the same message")
    p.add_argument("names", nargs="*", metavar="NAME", help="library templates (default: all)")
    p.add_argument("--engine", default="all", choices=["transformers", "transformers-serve", "vllm", "sglang", "all"],
                   help="engine to run (default: all installed ones)")
    p.add_argument("--form", default="published", choices=["published", "thinking"],
                   help="check the template as published, or with reasoning_content renamed thinking")
    p.add_argument(
        "--corpora",
        help="folder of template corpora, <template>.json (default: the corpora installed with the package; "
        "$RESPONSE_TEMPLATES_CORPORA)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object per template and engine")
    p.add_argument("--strict", action="store_true", help="exit 1 when an engine rejects a template or differs")

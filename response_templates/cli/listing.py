"""`response-templates list`: the shipped templates, one per line (or `--json`).
"""

from __future__ import annotations

import argparse

from .common import list_entries, print_json


def run(args: argparse.Namespace) -> int:
    entries = list_entries()
    if args.json:
        print_json([{k: e.get(k) for k in ("name", "family", "description", "models")} for e in entries], indent=2)
        return 0
    width = max((len(e.get("name", "")) for e in entries), default=0)
    for entry in entries:
        line = entry.get("name", "").ljust(width)
        if entry.get("family") or entry.get("description"):
            line += f"  {entry.get('family', '')}: {entry.get('description', '')}"
        print(line.rstrip())
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("list", help="list the library's templates")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")

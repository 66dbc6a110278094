"""`response-templates show NAME`: one library entry as JSON.
"""

from __future__ import annotations

import argparse

from .common import library_entry, print_json


def run(args: argparse.Namespace) -> int:
    print_json(library_entry(args.name), indent=2)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("show", help="print one library entry as JSON")
    p.add_argument("name")

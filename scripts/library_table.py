#!/usr/bin/env python3
"""Write docs/template-library.md, the library's page, from the template files and their corpora.

    python scripts/library_table.py            # print the markdown
    python scripts/library_table.py --write    # (re)write docs/template-library.md
    python scripts/library_table.py --check    # exit 1 if it is out of date

The page holds the table of templates (models, what each supports, the chat templates it was verified against, its
corpus) and every template's format notes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "response_templates" / "library" / "templates"
CORPORA = ROOT / "tests" / "data" / "corpora"
DOC = ROOT / "docs" / "template-library.md"

INTRO = """\
# Template library

`response_templates` ships verified response templates for the model families below. Use them by name
(`get_template("qwen3")`, `list_templates()`) or let the package pick one for a Hub model id or a loaded
tokenizer (`template_for("Qwen/Qwen3-8B")`, `template_for(tokenizer)`): an exact Hub id first (letter case
ignored, as on the Hub), then the family's model-name patterns, then the fingerprint (sha256) of the
tokenizer's chat template. A model id resolves only to a template its own chat template was verified
against, or whose format the entry documents to be the same (`same_format`); mirrors such as
`unsloth/...` resolve when listed or when their chat template's fingerprint matches. When unsure (no match,
or two families match), `template_for` returns `None` rather than guess; `guess_for(model_id)` offers an
unverified suggestion, marked as such.

Every template streams: text fields (content, reasoning) arrive chunk by chunk with `dirty=False`, tool
calls arrive parsed on their `region_close`. How each was verified:

- **chat templates**: `response_templates.verify` renders canonical conversations (plain answer, reasoning,
  single/parallel/argument-less calls, nested and unicode arguments, marker text inside arguments, text
  before a call, multi-turn history) through each listed real chat template and parses the rendering back
  (cases a chat template cannot render are skipped with a reason, see the template file's `verify`).
- **corpus**: hand-written raw outputs in `tests/data/corpora/<name>.json` (whitespace variants, marker text
  in arguments, multi-turn prefixes, truncated output, ...), each parsed one-shot and character by
  character, and compared with transformers 5.25's own parser.
- **real outputs**: `tests/data/real_outputs/<name>.json`, outputs written in the shapes the serving engines'
  parser test suites (vLLM, llama.cpp, SGLang) record from real models (a doubled or missing marker, an end
  token inside the reasoning, a call written before `</think>`, a tool block with no opener, a generation cut
  right after a marker, engine-specific variants such as Gemma 4 bare `call:` or Mistral calls without
  `[ARGS]`), each with the shape it stands for and where it was learned; parsed the same three ways. A shape
  the format cannot express, or that is ambiguous, is kept as an expected failure with its reason.

"""


def _yes(value: bool) -> str:
    return "yes" if value else "—"


def _entries() -> list[dict]:
    return [json.loads(path.read_text(encoding="utf-8")) for path in sorted(TEMPLATES.glob("*.json"))]


def _corpus_size(name: str) -> int:
    path = CORPORA / f"{name}.json"
    if not path.is_file():
        return 0
    return len(json.loads(path.read_text(encoding="utf-8"))["cases"])


def _models(entry: dict) -> str:
    models = entry["models"]
    shown = ", ".join(f"`{m}`" for m in models[:3])
    if len(models) > 3:
        shown += f" (+{len(models) - 3} more)"
    if entry.get("model_patterns"):
        shown += " and matching names" if shown else "matching names"
    return shown or "—"


def render() -> str:
    lines = [INTRO.rstrip("\n"), ""]
    lines.append("| Template | Family | Models | Reasoning | Tool calls | Parallel calls | Streaming | Verified against | Corpus cases |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for entry in _entries():
        supports = entry["supports"]
        verified = "<br>".join(f"`{item['file']}`" for item in entry["chat_templates"]) or "—"
        lines.append(
            f"| `{entry['name']}` | {entry['family']} | {_models(entry)} | {_yes(supports['reasoning'])} | "
            f"{_yes(supports['tool_calls'])} | {_yes(supports['parallel_tool_calls'])} | yes | {verified} | "
            f"{_corpus_size(entry['name'])} |"
        )
    lines.append("")
    lines.append("Format notes per template (from each file's `notes`):")
    lines.append("")
    for entry in _entries():
        entry_notes = entry.get("notes") or []
        if entry_notes:
            lines.append(f"- `{entry['name']}`: " + " ".join(entry_notes))
    lines.append("")
    lines.append("Regenerate this section with `python scripts/library_table.py --write`.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help=f"write {DOC.relative_to(ROOT)}")
    group.add_argument("--check", action="store_true", help=f"fail if {DOC.relative_to(ROOT)} is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(text, encoding="utf-8")
    elif args.check:
        if not DOC.is_file() or DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC.relative_to(ROOT)} is out of date: run python scripts/library_table.py --write", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

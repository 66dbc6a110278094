#!/usr/bin/env python3
"""Measure `infer_template` over every chat template in the shared folder and write the table of docs/inference.md.

    RESPONSE_TEMPLATES_CHAT_TEMPLATES=../shared/chat_templates python scripts/infer_coverage.py           # print
    RESPONSE_TEMPLATES_CHAT_TEMPLATES=../shared/chat_templates python scripts/infer_coverage.py --write   # docs/inference.md
    ... --check     # exit 1 if the docs/inference.md table is out of date

For every file listed in MANIFEST.json (and trl/MANIFEST.json): does the chat template render a tool call;
does inference give a template that passes verify; for files a library entry lists, does that template
parse the entry's corpus (tests/data/corpora/<name>.json) to the same messages as the library's template.
Corpus cases marked `outside_chat_template` (a way of writing that the model uses when its system prompt asks for
it, which no chat template renders, such as LFM2's JSON calls) are left out: inference reads what the chat
template shows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from response_templates import library, parse_response  # noqa: E402
from response_templates.authoring.inference import InferredTemplate, infer_template  # noqa: E402
from response_templates.authoring.rendering import SAMPLE_TOOLS, render_chat_template  # noqa: E402

CORPORA = ROOT / "tests" / "data" / "corpora"
README = ROOT / "docs" / "inference.md"  # the page that holds the coverage table
START, END = "<!-- infer-coverage:start -->", "<!-- infer-coverage:end -->"


@dataclass
class Row:
    file: str
    entry: str | None
    renders_calls: bool
    result: InferredTemplate
    corpus_total: int = 0
    corpus_same: int = 0
    corpus_diff: list = field(default_factory=list)

    @property
    def inferred(self) -> bool:
        return self.result.template is not None

    @property
    def passes(self) -> bool:
        """Verified, and (for a library family) the corpus parses to the library's messages."""
        return self.inferred and self.corpus_same == self.corpus_total


def chat_template_files(folder: str) -> list[str]:
    files = []
    for manifest, prefix in (("MANIFEST.json", ""), (os.path.join("trl", "MANIFEST.json"), "trl/")):
        path = os.path.join(folder, manifest)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                files += [prefix + item["file"] for item in json.load(f)]
    return files


def _owners() -> dict[str, str]:
    owners = {}
    for name in library.list_templates():
        for item in library.get_entry(name)["chat_templates"]:
            owners.setdefault(item["file"], name)
    return owners


def renders_tool_calls(source: str, options: dict) -> bool:
    """Whether the chat template writes a tool call's name and arguments (as dicts or as JSON strings)."""
    for arguments in ({"city": "Paris"}, json.dumps({"city": "Paris"})):
        call = {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}
        messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
        try:
            text = render_chat_template(source, messages, tools=SAMPLE_TOOLS, bos_token=options.get("bos_token", ""),
                                        eos_token=options.get("eos_token", ""))
        except Exception:
            continue
        tail = text[text.rindex("hi"):]
        if "get_weather" in tail and "Paris" in tail:
            return True
    return False


def _parse(text, template, case):
    try:
        return parse_response(text, template, prefix=case.get("prefix", ""), tools=case.get("tools"),
                              truncated=bool(case.get("truncated")))
    except Exception as error:  # a parse error is an answer too: compare it
        return f"error: {type(error).__name__}"


def measure(folder: str, only: list[str] | None = None) -> list[Row]:
    owners = _owners()
    rows = []
    for file in chat_template_files(folder):
        if only and file not in only:
            continue
        with open(os.path.join(folder, file), "rb") as f:
            source = f.read().decode("utf-8")
        name = owners.get(file)
        tokens = {}
        if name:  # the tokenizer's bos/eos, as the library entry records them
            options = library.get_entry(name).get("verify") or {}
            tokens = {k: options[k] for k in ("bos_token", "eos_token") if k in options}
        result = infer_template(source, render_kwargs=tokens)
        row = Row(file, name, renders_tool_calls(source, tokens), result)
        if name and result.template is not None:
            corpus = json.loads((CORPORA / f"{name}.json").read_text(encoding="utf-8"))
            reference = library.get_template(name)
            for case in corpus["cases"]:
                if case.get("outside_chat_template"):
                    continue
                row.corpus_total += 1
                want, got = _parse(case["output"], reference, case), _parse(case["output"], result.template, case)
                if want == got:
                    row.corpus_same += 1
                else:
                    row.corpus_diff.append((case["name"], want, got))
        rows.append(row)
    return rows


def summary(rows: list[Row]) -> tuple[int, int]:
    tool_rows = [r for r in rows if r.renders_calls]
    return sum(r.passes for r in tool_rows), len(tool_rows)


def render(rows: list[Row]) -> str:
    passed, total = summary(rows)
    tool_rows = [r for r in rows if r.renders_calls]
    verified = sum(r.inferred for r in tool_rows)
    same = sum(r.corpus_same for r in tool_rows)
    cases = sum(r.corpus_total for r in tool_rows)
    lines = [f"Inference over the {len(rows)} chat templates of the shared test folder: {total} render tool calls; for "
             f"{passed} of them ({100 * passed // max(total, 1)}%) the inferred template passes `verify` and, for "
             "files a library entry lists, parses that entry's corpus to the same messages as the library's template "
             "(leaving out the cases no chat template renders, such as LFM2's JSON calls). "
             f"For {verified} ({100 * verified // max(total, 1)}%) it passes `verify`; over their corpora, {same} of "
             f"{cases} cases ({100 * same // max(cases, 1)}%) parse as with the library's template. The others say "
             "why inference gave up.",
             "", "| Chat template | Library entry | Tool calls rendered | Inferred | Corpus (same as library) | Reason |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        corpus = f"{r.corpus_same}/{r.corpus_total}" if r.corpus_total else "—"
        reason = "" if r.inferred else (r.result.reasons[-1] if r.result.reasons else "")
        reason = reason.replace("|", "\\|").replace("\n", " ")[:140]
        lines.append(f"| `{r.file}` | {r.entry or '—'} | {'yes' if r.renders_calls else 'no'} | "
                     f"{'yes' if r.inferred else 'no'} | {corpus} | {reason} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="rewrite the table in docs/inference.md")
    parser.add_argument("--check", action="store_true", help="exit 1 if the docs/inference.md table is out of date")
    parser.add_argument("--verbose", action="store_true", help="print each file's report and corpus differences")
    parser.add_argument("files", nargs="*", help="only these files (relative to the folder)")
    args = parser.parse_args(argv)
    folder = os.environ.get("RESPONSE_TEMPLATES_CHAT_TEMPLATES")
    if not folder or not os.path.isdir(folder):
        print("set RESPONSE_TEMPLATES_CHAT_TEMPLATES to the chat templates folder", file=sys.stderr)
        return 2
    rows = measure(folder, args.files or None)
    if args.verbose:
        for r in rows:
            print(f"== {r.file} [{r.entry}] calls={r.renders_calls} corpus={r.corpus_same}/{r.corpus_total}")
            print(r.result.report())
            for name, want, got in r.corpus_diff:
                print(f"   corpus {name}:\n     library:  {want}\n     inferred: {got}")
    table = render(rows)
    if not args.write and not args.check:
        print(table)
        return 0
    text = README.read_text(encoding="utf-8")
    start, end = text.index(START) + len(START), text.index(END)
    updated = text[:start] + "\n" + table + "\n" + text[end:]
    if args.check:
        if updated != text:
            print("docs/inference.md: the inference coverage table is out of date: run scripts/infer_coverage.py --write", file=sys.stderr)
            return 1
        return 0
    README.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

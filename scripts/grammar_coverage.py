"""Write the compiler's coverage table (docs/grammar.md, between its markers): which library templates
`response_templates.structural_tag` compiles, and the reason for each it refuses.

    python scripts/grammar_coverage.py          # rewrite the table
    python scripts/grammar_coverage.py --check  # exit 1 when the file is out of date (tests/test_readme.py runs it)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import response_templates as rt
from response_templates.integrations.grammar import GrammarError, explain, structural_tag

DOC = Path(__file__).resolve().parent.parent / "docs" / "grammar.md"
BEGIN, END = "<!-- coverage:begin -->", "<!-- coverage:end -->"
# Two tools of different shapes: enough for the compiler's self-check to try one and two calls.
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "search_web", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}, "safe": {"type": "boolean"}},
        "required": ["query"]}}},
]


def _cell(text: str, most: int = 0) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text[:most - 3] + "..." if most and len(text) > most else text


def table() -> str:
    rows, accepted, forced_only, total = [], 0, 0, 0
    for name in rt.list_templates():
        entry = rt.get_entry(name)
        if not entry["supports"]["tool_calls"]:
            rows.append(f"| {name} | - | the template writes no tool calls |")
            continue
        total += 1
        try:
            structural_tag(name, TOOLS)
        except GrammarError as error:
            try:  # "auto" and "none" may be refused where "required" and named choices compile (Llama's `{`)
                structural_tag(name, TOOLS, tool_choice="required")
            except GrammarError:
                rows.append(f"| {name} | no | {_cell(str(error), 220)} |")
                continue
            forced_only += 1
            rows.append(f"| {name} | required and named only | {_cell('; '.join(explain(name, TOOLS)))} |")
            continue
        accepted += 1
        notes = _cell("; ".join(explain(name, TOOLS)))
        rows.append(f"| {name} | yes | {notes} |" if notes else f"| {name} | yes | |")
    head = [f"{accepted} of the {total} library templates with tool calls compile in every tool_choice mode, "
            f"{forced_only} more for \"required\" and named functions only.", "",
            "| template | compiles | why not, or what the grammar leaves out |", "| --- | --- | --- |"]
    return "\n".join(head + rows)


def main() -> int:
    text = DOC.read_text()
    start, stop = text.index(BEGIN) + len(BEGIN), text.index(END)
    updated = text[:start] + "\n" + table() + "\n" + text[stop:]
    if "--check" in sys.argv:
        if updated != text:
            print(f"{DOC} is out of date: run python scripts/grammar_coverage.py")
            return 1
        return 0
    DOC.write_text(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main())

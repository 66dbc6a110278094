#!/usr/bin/env python3
"""Write tests/data/damaged/<template>.json: cut-off and malformed variants of each template's corpus outputs.

    python scripts/damaged_corpora.py                  # every library template
    python scripts/damaged_corpora.py kimi-k3 glm      # some of them

For each template, from the complete cases of tests/data/corpora/<template>.json that hold tool calls:

* "truncated": up to three outputs cut inside their last call (just after the start of its last `Paris`, `"name"`
  or `(`), with the message `parse_response(..., truncated=True)` gives. A cut may only keep the clean output's
  first calls (checked here and by the tests).
* "malformed": up to two outputs damaged by the first rule below that makes transformers' own parser raise (the
  oracle for "malformed"), with the messages under `malformed="content"` and `"drop"`. Formats whose parser
  accepts any text between its tags get one damaged case that still parses (`"raises": false`), with the same
  message under every policy, equal to transformers'.

The expected messages are what this package returns; review the diff when regenerating. The tests
(tests/test_damaged_corpora.py) also check each case against facts that do not come from this package.
Needs transformers 5.20 or later (the oracle).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import response_templates as rt  # noqa: E402
from response_templates import library  # noqa: E402

CORPORA = ROOT / "tests" / "data" / "corpora"
OUT = ROOT / "tests" / "data" / "damaged"


def _replace(old: str, new: str):
    return lambda text: text.replace(old, new, 1) if old in text else None


def _sub(pattern: str, new: str):
    return lambda text: re.sub(pattern, new, text, count=1) if re.search(pattern, text) else None


# (label, rule): a rule returns the damaged output, or None when it does not apply.
RULES = [
    ("unterminated JSON string", _replace('"Paris"', '"Paris')),
    ("unquoted JSON string", _replace('"Paris"', "Paris")),
    ("unterminated Python string", _replace("'Paris'", "'Paris")),
    ("set literal in a Python call", _replace("'Paris'", "{'Paris', 'Oslo'}")),
    ("unterminated delimited string", lambda t: _replace('Paris<|"|>', "Paris")(t) or _replace("Paris<escape>", "Paris")(t)),
    ("missing brace before the close marker", _sub(r"\}(?=\s*<)", "")),
    ("missing closing brace", _replace("}}", "}")),
    ("missing closing parenthesis", _replace(")]", "]")),
    ("invalid JSON parameter value", _sub(r"(<parameter[^>]*>)(\s*)(\d+)", r"\1\2{\3")),
]
# For formats that accept anything between their tags.
LENIENT_RULES = [
    ("unclosed parameter tag", _sub(r"</(?:[^<>\s]*parameter|arg_value|param|arg_value:opensource)>", "")),
    ("unterminated delimited string", lambda t: _replace('Paris<|"|>', "Paris")(t) or _replace("Paris<escape>", "Paris")(t)),
    ("unclosed argument", _replace("<|close|>argument<|sep|>", "")),
    ("unterminated JSON string", _replace('"Paris"', '"Paris')),
    ("unterminated string", _replace("'Paris'", "'Paris")),
    ("closing tag without its namespace token", _replace("]<]minimax[>[</city>", "</city>")),
]


def _calls(message: dict) -> list:
    return message.get("tool_calls") or []


def _extra(case: dict) -> dict:
    return {"tools": case["tools"]} if case.get("tools") else {}


def damaged_cases(name: str, hf_parse) -> list[dict]:
    template = library.get_template(name)
    corpus = json.loads((CORPORA / f"{name}.json").read_text(encoding="utf-8"))
    clean = [c for c in corpus["cases"] if not c.get("truncated") and _calls(c["expected"])]

    def parse(case, output, **options):
        return rt.parse_response(output, template, prefix=case["prefix"], tools=case.get("tools"), **options)

    cases = []
    for case in clean[:3]:
        output = case["output"]
        at = max(output.rfind("Paris"), output.rfind('"name"'), output.rfind("("))
        cut = output[: at + 3] if at > 0 else output[: len(output) * 2 // 3]
        message = parse(case, cut, truncated=True)
        calls = _calls(message)
        if calls != _calls(case["expected"])[: len(calls)]:
            raise AssertionError(f"{name}/{case['name']}: the cut returns a call the clean output lacks")
        cases.append({
            "name": f"{case['name']}__cut", "damage": "truncated", "source": case["name"],
            "prefix": case["prefix"], "output": cut, **_extra(case), "truncated": True, "expected": message,
        })
    made = 0
    for case in clean:
        if made == 2:
            break
        for label, rule in RULES:
            bad = rule(case["output"])
            if bad is None:
                continue
            try:
                hf_parse(bad, template, prefix=case["prefix"], tools=case.get("tools"))
                continue  # still parses: not malformed for this format
            except ValueError:
                pass
            try:
                parse(case, bad)
                raise AssertionError(f"{name}/{case['name']}: transformers raises on {label!r}, we do not")
            except ValueError:
                pass
            expected = {policy: parse(case, bad, malformed=policy) for policy in ("content", "drop")}
            cases.append({
                "name": f"{case['name']}__{label.replace(' ', '_')}", "damage": "malformed", "source": case["name"],
                "description": label, "prefix": case["prefix"], "output": bad, **_extra(case),
                "raises": True, "expected": expected,
            })
            made += 1
            break
    if not made:
        for case in clean:
            found = next(((label, rule(case["output"])) for label, rule in LENIENT_RULES if rule(case["output"])), None)
            if found is None:
                continue
            label, bad = found
            expected = {policy: parse(case, bad, malformed=policy) for policy in ("raise", "content", "drop")}
            oracle = hf_parse(bad, template, prefix=case["prefix"], tools=case.get("tools"))
            if not expected["raise"] == expected["content"] == expected["drop"] == oracle:
                raise AssertionError(f"{name}/{case['name']}: {label!r} parses differently by policy or from transformers")
            cases.append({
                "name": f"{case['name']}__{label.replace(' ', '_')}", "damage": "malformed", "source": case["name"],
                "description": f"{label} (the format's parser accepts it: nothing raises)", "prefix": case["prefix"],
                "output": bad, **_extra(case), "raises": False, "expected": expected,
            })
            break
    return cases


def main(argv: list[str]) -> int:
    from transformers.utils.chat_parsing import parse_response as hf_parse

    names = argv or library.list_templates()
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names:
        cases = damaged_cases(name, hf_parse)
        kinds = sorted({case["damage"] for case in cases})
        (OUT / f"{name}.json").write_text(
            json.dumps({"template": name, "cases": cases}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
        )
        print(f"{name}: {len(cases)} cases ({', '.join(kinds)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

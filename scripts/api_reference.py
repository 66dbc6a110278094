"""Write docs/api.md, the API reference, from the docstrings of the public names.

    python scripts/api_reference.py            # rewrite docs/api.md
    python scripts/api_reference.py --check    # exit 1 if docs/api.md is not what the docstrings give

Every name in `response_templates.__all__` is documented (names no section lists land in "Other"), plus the
methods the package adds to transformers tokenizers. Signatures come from `inspect.signature`, text from
`inspect.getdoc`: to change the page, change the docstring and run this script (tests/test_readme.py runs --check).
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import response_templates as rt  # noqa: E402
from response_templates.integrations import transformers_patch as integration  # noqa: E402

OUTPUT = ROOT / "docs" / "api.md"

SECTIONS = [
    ("Parsing", "Parse generated text or token ids into a message dict, one-shot or streaming.", [
        "parse_response", "ResponseParser", "load_template", "CompiledTemplate", "ResponseTemplatesError", "TemplateError",
        "TransformError",
        "set_regex_timeout", "get_regex_timeout", "RegexTimeoutError",
    ]),
    ("Template library", "The verified templates shipped with the package.", [
        "get_template", "get_entry", "list_templates", "template_for", "guess_for",
    ]),
    ("transformers integration", "What every transformers tokenizer gets (the package patches transformers when "
     "it is installed; see the README).", [
        "tokenizer.parse_response", "tokenizer.get_response_parser", "attach", "patch", "unpatch",
    ]),
    ("Authoring", "Check a response template against a real chat template (see "
     "[FORMAT.md](../response_templates/library/templates/FORMAT.md) for the options), or infer one from it.", [
        "verify", "verify_entry", "VerifyReport", "infer_template", "InferredTemplate",
    ]),
    ("Constrained decoding", "A grammar that makes a model write valid calls of the given tools in its own format "
     "(see [grammar.md](grammar.md)).", [
        "structural_tag", "GrammarError",
    ]),
    ("OpenAI-compatible output", "Parsed messages and streams in OpenAI chat-completions form.", [
        "to_openai_message", "OpenAIStreamAdapter",
    ]),
]

# Internals a public class carries: not part of the API.
HIDDEN_MEMBERS = {("CompiledTemplate", "fresh_defaults"), ("CompiledTemplate", "truncate_prefix")}
NO_CONSTRUCTOR = {"CompiledTemplate"}  # made by load_template, not by calling the class

TOKENIZER_METHODS = {
    "tokenizer.parse_response": integration.parse_response,
    "tokenizer.get_response_parser": integration.get_response_parser,
}


def _anchor(name: str) -> str:
    return name.lower().replace(".", "")  # GitHub's heading ids: lower case, punctuation other than _ dropped


def _annotation(value) -> str:
    return value if isinstance(value, str) else inspect.formatannotation(value)


def _format(signature: inspect.Signature) -> str:
    """Like str(signature), with string annotations (from `from __future__ import annotations`) unquoted."""
    parts, star_done = [], False
    kinds = inspect.Parameter
    params = list(signature.parameters.values())
    params = [param for param in params if not param.name.startswith("_")]  # private switches
    for i, param in enumerate(params):
        if param.kind == kinds.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        text = param.name
        if param.kind == kinds.VAR_POSITIONAL:
            text, star_done = "*" + text, True
        elif param.kind == kinds.VAR_KEYWORD:
            text = "**" + text
        if param.annotation is not param.empty:
            text += f": {_annotation(param.annotation)}"
        if param.default is not param.empty:
            text += f" = {param.default!r}" if param.annotation is not param.empty else f"={param.default!r}"
        parts.append(text)
        if param.kind == kinds.POSITIONAL_ONLY and (i + 1 == len(params) or params[i + 1].kind != kinds.POSITIONAL_ONLY):
            parts.append("/")
    result = f"({', '.join(parts)})"
    if signature.return_annotation is not signature.empty:
        result += f" -> {_annotation(signature.return_annotation)}"
    return result


def _signature(name: str, obj) -> str:
    try:
        signature = _format(inspect.signature(obj))
    except (TypeError, ValueError):
        return name
    if name.startswith("tokenizer."):
        signature = signature.replace("(self, ", "(", 1).replace("(self)", "()", 1)
    return f"{name}{signature}"


def _doc(obj) -> str:
    doc = inspect.getdoc(obj)
    return doc.strip() if doc else "(no docstring)"


def _members(cls) -> list[tuple[str, object]]:
    """Public methods and properties a class defines or documents itself (not those of object or Exception)."""
    found = []
    for name, value in cls.__dict__.items():
        if name.startswith("_"):
            continue
        if isinstance(value, property) or inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod)):
            found.append((name, value))
    return found


def _document(name: str, obj) -> list[str]:
    lines = []
    if inspect.isclass(obj):
        kind = "exception" if issubclass(obj, BaseException) else "class"
        if issubclass(obj, BaseException):
            bases = ", ".join(base.__name__ for base in obj.__bases__)
            head = f"{name}({bases})"
        elif name in NO_CONSTRUCTOR:
            head = name
        else:
            head = _signature(name, obj).removesuffix(" -> None")
        lines += [f"### `{name}`", "", f"{kind} `{head}`", "", _doc(obj), ""]
        for member, value in _members(obj):
            if (name, member) in HIDDEN_MEMBERS:
                continue
            if isinstance(value, property):
                lines += [f"- **`.{member}`** (property): {_doc(value.fget) if value.fget else ''}", ""]
            else:
                function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
                signature = _signature(member, function).replace("(self, ", "(", 1).replace("(self)", "()", 1)
                body = _doc(function).replace("\n", "\n  ")
                lines += [f"- **`.{signature}`**: {body}", ""]
    else:
        lines += [f"### `{name}`", "", "```python", _signature(name, obj), "```", "", _doc(obj), ""]
    return lines


def render() -> str:
    names = list(rt.__all__)
    placed = {name for _, _, members in SECTIONS for name in members}
    leftover = sorted(name for name in names if name not in placed)
    sections = SECTIONS + ([("Other", "Further public names.", leftover)] if leftover else [])
    lines = [
        "# API reference",
        "",
        "<!-- Generated by scripts/api_reference.py from the docstrings: do not edit by hand; run "
        "`python scripts/api_reference.py` after changing a docstring. -->",
        "",
        f"`import response_templates as rt` (version {rt.__version__}). Every name below is available as "
        "`rt.NAME`; the tokenizer methods are on every transformers tokenizer once the package is installed.",
        "",
    ]
    for title, _, members in sections:
        links = ", ".join(f"[`{m}`](#{_anchor(m)})" for m in members)
        lines.append(f"- {title}: {links}")
    lines.append("")
    for title, intro, members in sections:
        lines += [f"## {title}", "", intro, ""]
        for name in members:
            obj = TOKENIZER_METHODS[name] if name in TOKENIZER_METHODS else getattr(rt, name)
            lines += _document(name, obj)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/api.md is out of date; write nothing")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.is_file() else ""
        if current != text:
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(), "docs/api.md", "from the docstrings",
                                        lineterm="", n=1)
            print("\n".join(list(diff)[:60]), file=sys.stderr)
            print("docs/api.md is out of date: run python scripts/api_reference.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

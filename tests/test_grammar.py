"""The grammar compiler (response_templates.structural_tag): every string the constraint admits parses, with our
own parser and the same prefix, to calls of the given tools whose arguments validate against their schemas, as
many as the grammar opened; every corpus output with calls of the given tools is admitted under "auto".

The grammars are walked at random with xgrammar's matcher over a tiny vocabulary (single characters plus the
template's markers as whole tokens, so that marker text is tried often). Skipped when xgrammar is not installed."""

import json
import random
import re
from pathlib import Path

import pytest

import response_templates as rt
from response_templates.integrations import grammar
from response_templates.integrations.grammar import GrammarError, structural_tag

xgr = pytest.importorskip("xgrammar", reason="xgrammar is not installed (pip install response-templates[grammar])")
np = pytest.importorskip("numpy")
jsonschema = pytest.importorskip("jsonschema")

CORPORA = Path(__file__).parent / "data" / "corpora"

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                       "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "search_web", "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "number"}, "safe": {"type": "boolean"},
                       "filters": {"type": "object", "properties": {"lang": {"type": "string"}},
                                   "required": ["lang"]},
                       "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["query", "safe"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
]
SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}
MODES = [("auto", True), ("required", True), ("required", False),
         ({"type": "function", "function": {"name": "search_web"}}, True), ("none", True)]
WALKS = 8


def accepted_templates():
    names = []
    for name in rt.list_templates():
        try:
            structural_tag(name, TOOLS)
        except GrammarError:
            continue
        names.append(name)
    return names


ACCEPTED = accepted_templates()


def corpus(name):
    path = CORPORA / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {"cases": []}


def prefixes(name):
    found = [""]
    for case in corpus(name)["cases"]:
        if case.get("prefix") and case["prefix"] not in found and len(found) < 2:
            found.append(case["prefix"])
    return found


class Walker:
    """A random walk through what a grammar admits, one vocabulary item at a time."""

    def __init__(self, markers):
        chars = [chr(code) for code in range(32, 127)] + ["\n", "\t", "é", "\uff5c", "▁"]
        self.vocab = chars + sorted(set(markers) - set(chars))
        self.marker_ids = set(range(len(chars), len(self.vocab)))
        self.eos = len(self.vocab)
        self.vocab.append("<eos>")
        self.info = xgr.TokenizerInfo(self.vocab, stop_token_ids=[self.eos])
        self.compiler = xgr.GrammarCompiler(self.info)
        self.closing = {self.vocab.index(c) for c in '"}]>' if c in self.vocab} | self.marker_ids | {self.eos}

    def walk(self, grammar, rng, steps=4000):
        matcher = xgr.GrammarMatcher(grammar)
        mask = np.zeros(xgr.get_bitmask_shape(1, len(self.vocab)), dtype=np.int32)
        out = []
        for step in range(steps):
            if matcher.is_terminated():
                return "".join(out)
            matcher.fill_next_token_bitmask(mask)
            allowed = np.nonzero(np.unpackbits(mask[0].view(np.uint8), bitorder="little")[:len(self.vocab)])[0]
            assert len(allowed), f"the grammar admits nothing after {''.join(out)!r}"
            weights = [(20 if token in self.marker_ids else 1) * (40 if step > 150 and token in self.closing else 1)
                       for token in allowed]
            token = int(rng.choices(allowed, weights)[0])
            if token == self.eos:
                return "".join(out)
            assert matcher.accept_token(token)
            out.append(self.vocab[token])
        return None  # ran too long: not judged


def grammar_markers(node, found):
    if isinstance(node, dict):
        for key in ("begin", "end"):
            if isinstance(node.get(key), str) and node[key]:
                found.add(node[key])
        for key in ("triggers", "excludes"):
            found.update(text for text in node.get(key, []) if text)
        for value in node.values():
            grammar_markers(value, found)
    elif isinstance(node, list):
        for item in node:
            grammar_markers(item, found)
    return found


def test_some_templates_are_accepted():
    # the compiler's coverage is reported in docs/grammar.md; this guards against it silently dropping to nothing
    assert {"qwen3", "glm", "qwen3-coder", "hermes"} <= set(ACCEPTED)


@pytest.mark.parametrize("name", ACCEPTED)
def test_every_admitted_string_parses_to_the_calls_meant(name):
    rng = random.Random(name)
    for prefix in prefixes(name):
        for choice, parallel in MODES:
            try:
                tag = structural_tag(name, TOOLS, prefix=prefix, tool_choice=choice, parallel_tool_calls=parallel)
            except GrammarError:
                # refusing is allowed (never a wrong grammar); the template itself compiles without a prompt
                assert prefix, f"{name} compiles for tool_choice='auto' but not for {choice!r}"
                continue
            sections = [opener for opener, _ in grammar._plan(name, TOOLS, prefix).wrappers]
            walker = Walker(grammar_markers(tag, set()))
            compiled = walker.compiler.compile_structural_tag(json.dumps(tag))
            for _ in range(WALKS):
                text = walker.walk(compiled, rng)
                if text is None:
                    continue
                where = f"{name} prefix={prefix[-40:]!r} tool_choice={choice} parallel={parallel}: {text!r}"
                try:
                    message = rt.parse_response(text, name, prefix=prefix, tools=TOOLS)
                except ValueError as error:
                    raise AssertionError(f"the parser refuses an admitted string ({error}): {where}") from None
                calls = message.get("tool_calls") or []
                meant = opened_calls(tag, text, sections)
                assert len(calls) == meant, f"{len(calls)} calls parsed, {meant} opened: {where} -> {message}"
                if choice == "none":
                    assert not calls, where
                if choice == "required" or isinstance(choice, dict):
                    assert calls, where
                if not parallel:
                    assert len(calls) <= 1, where
                for call in calls:
                    function = call["function"]
                    if isinstance(choice, dict):
                        assert function["name"] == choice["function"]["name"], where
                    assert function["name"] in SCHEMAS, where
                    jsonschema.validate(function["arguments"], SCHEMAS[function["name"]])


def opened_calls(tag, text, sections=()):
    """How many calls the grammar opened in `text`: its call begins, which free text and arguments cannot hold,
    each followed by that call's end (a begin may also start markup inside a call: `<｜DSML｜` of a parameter).
    `sections`: the openers of section markers around calls; their calls are counted inside them."""
    pairs = set()

    def visit(node):
        if isinstance(node, dict):
            if node.get("type") in ("triggered_tags", "tags_with_separator"):
                for tag_node in node["tags"]:
                    if tag_node["begin"] in sections:
                        visit(tag_node["content"])  # a section around calls: count the calls in it
                    else:
                        pairs.add((tag_node["begin"], tag_node["end"]))
                return
            if node.get("type") == "or" and all(item.get("type") == "tag" for item in node["elements"]):
                pairs.update((tag_node["begin"], tag_node["end"]) for tag_node in node["elements"])  # in a section
                return
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for item in node:
                visit(item)

    visit(tag["format"])
    count, at = 0, 0
    while pairs:
        found = [(text.find(begin, at), begin, end) for begin, end in pairs]
        found = [item for item in found if item[0] >= 0]
        if not found:
            break
        index, begin, end = min(found)
        count += 1
        close = text.find(end, index + len(begin))
        at = len(text) if close < 0 else close + len(end)
    return count


def end_of_turn(name, output):
    """`output` cut where the model's turn ends: at the first end-of-turn special token of the library's formats."""
    match = re.search(r"<\|(?:im_end|endoftext|end|eot_id|eot|eom|end_of_text|return|call)\|>|<｜end▁of▁sentence｜>"
                      r"|<SPECIAL_12>|<end_of_turn>|<turn\|>|<\|tool_response>|</s>|<seed:eos>"
                      r"|<\|observation\|>|<\|user\|>", output)
    return output[:match.start()] if match else output


@pytest.mark.parametrize("name", ACCEPTED)
def test_the_canonical_calls_are_admitted_in_every_mode(name):
    # the compiler checked that these parse back to exactly the calls; the grammar must let a model write them
    info = xgr.TokenizerInfo([chr(c) for c in range(32, 127)] + ["\n", "\t", "<eos>"], stop_token_ids=[97])
    compiler = xgr.GrammarCompiler(info)
    for prefix in prefixes(name):
        try:
            plan = grammar._plan(name, TOOLS, prefix)
        except GrammarError:
            assert prefix
            continue
        lead = grammar._reasoning_text(plan) if plan.reasoning_open is not None else ""
        weather = plan.calls["get_weather"].write({"city": "Paris", "days": 3})
        search = plan.calls["search_web"].write({"query": "bakeries", "safe": True})
        cases = [("required", True, lead + weather), ("required", True, lead + weather + plan.separator + search),
                 ("required", False, lead + search),
                 ({"type": "function", "function": {"name": "search_web"}}, True, lead + search),
                 ("auto", True, lead + "Let me look. " + weather)]
        for choice, parallel, text in cases:
            tag = structural_tag(name, TOOLS, prefix=prefix, tool_choice=choice, parallel_tool_calls=parallel)
            matcher = xgr.GrammarMatcher(compiler.compile_structural_tag(json.dumps(tag)))
            assert matcher.accept_string(text) and matcher.is_completed(), f"{name} {choice} refuses {text!r}"


# Not met yet (issue 27): the grammar admits one canonical shape per call (with optional whitespace) and keeps the
# template's markers out of argument strings, so list forms, ```json fences, optional section markers and marker
# text inside string arguments are refused. Kept running so that each template's refusals stay visible.
@pytest.mark.xfail(reason="corpus outputs in non-canonical shapes are not admitted yet (docs/grammar.md)", strict=False)
@pytest.mark.parametrize("name", ACCEPTED)
def test_corpus_outputs_with_calls_are_admitted_under_auto(name):
    cases = [case for case in corpus(name)["cases"]
             if not case.get("truncated") and (case.get("expected") or {}).get("tool_calls") and case.get("tools")]
    if not cases:
        pytest.skip(f"no corpus output of {name} has calls of given tools")
    refused = []
    for case in cases:
        try:
            tag = structural_tag(name, case["tools"], prefix=case["prefix"])
        except GrammarError as error:
            refused.append((case["name"], f"not compiled: {error}"))
            continue
        info = xgr.TokenizerInfo([chr(c) for c in range(32, 127)] + ["<eos>"], stop_token_ids=[95])
        grammar = xgr.GrammarCompiler(info).compile_structural_tag(json.dumps(tag))
        matcher = xgr.GrammarMatcher(grammar)
        # the end-of-turn token is the engine's stop token, not text the grammar writes
        output = end_of_turn(name, case["output"])
        if not (matcher.accept_string(output) and matcher.is_completed()):
            refused.append((case["name"], output))
    assert not refused, f"{len(refused)} of {len(cases)} corpus outputs refused: {refused}"

"""The grammar compiler (response_templates.structural_tag): every string the constraint admits parses, with our
own parser and the same prefix, to calls of the given tools whose arguments validate against their schemas, as
many as the grammar opened; every corpus output with calls of the given tools is admitted under "auto".

The grammars are walked at random with xgrammar's matcher over a tiny vocabulary (single characters plus the
template's markers as whole tokens, so that marker text is tried often). Skipped when xgrammar is not installed."""

import functools
import json
import os
import random
import re
from pathlib import Path

import pytest

import response_templates as rt
from response_templates.integrations.grammar import patterns, planning
from response_templates.integrations.grammar import GrammarError, explain, structural_tag

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
# Random walks per grammar; RESPONSE_TEMPLATES_GRAMMAR_WALKS=100 makes a longer search for a counterexample.
WALKS = int(os.environ.get("RESPONSE_TEMPLATES_GRAMMAR_WALKS") or 8)


def accepted_templates():
    """The templates the compiler accepts: under "required" (some compile for "required" and named choices only,
    where free text could open a call: FORCED_ONLY)."""
    names, forced_only = [], []
    for name in rt.list_templates():
        try:
            structural_tag(name, TOOLS, tool_choice="required")
        except GrammarError:
            continue
        names.append(name)
        try:
            structural_tag(name, TOOLS)
        except GrammarError:
            forced_only.append(name)
    return names, forced_only


ACCEPTED, FORCED_ONLY = accepted_templates()


def corpus(name):
    path = CORPORA / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {"cases": []}


def corpus_output(name, case_name):
    """The corpus case of `name` called `case_name`, and its output as the grammar writes it (the end-of-turn token
    is the engine's stop token, not text)."""
    case = next(case for case in corpus(name)["cases"] if case["name"] == case_name)
    return case, end_of_turn(name, case["output"], case["prefix"], case["tools"])


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


def walks(tag, rng, count=WALKS, markers=()):
    """`count` random strings the grammar of `tag` admits (walks that ran too long are left out). The vocabulary
    holds the tag's markers, and `markers` (the template's: those free text may hold are in no exclude list)."""
    walker = Walker(grammar_markers(tag, set(markers)))
    compiled = walker.compiler.compile_structural_tag(json.dumps(tag))
    for _ in range(count):
        text = walker.walk(compiled, rng)
        if text is not None:
            yield text


def formats_of(node, descend=lambda node: True):
    """Every format (dict) of a structural tag, depth first; below a format only where `descend` says so."""
    if isinstance(node, dict):
        yield node
        if descend(node):
            for value in node.values():
                yield from formats_of(value, descend)
    elif isinstance(node, list):
        for item in node:
            yield from formats_of(item, descend)


def grammar_markers(node, found):
    for format_ in formats_of(node):
        for key in ("begin", "end"):
            if isinstance(format_.get(key), str) and format_[key]:
                found.add(format_[key])
        for key in ("triggers", "excludes"):
            found.update(text for text in format_.get(key, []) if text)
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
                assert prefix or name in FORCED_ONLY and choice in ("auto", "none"), (
                    f"{name} compiles for tool_choice='required' but not for {choice!r}")
                continue
            plan = planning._plan(name, TOOLS, prefix)
            sections = [marker for pair in plan.wrappers for marker in pair]
            line_blocks = [form.begin for form in plan.calls.values() if form.block_lines]
            listed = [form.begin for form in plan.calls.values() if form.list_body is not None and not form.block_lines]
            for text in walks(tag, rng, markers=patterns._markers(rt.get_template(name))):
                where = f"{name} prefix={prefix[-40:]!r} tool_choice={choice} parallel={parallel}: {text!r}"
                try:
                    message = rt.parse_response(text, name, prefix=prefix, tools=TOOLS)
                except ValueError as error:
                    raise AssertionError(f"the parser refuses an admitted string ({error}): {where}") from None
                calls = message.get("tool_calls") or []
                meant = opened_calls(tag, text, sections, line_blocks, listed, plan.guard)
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


def opened_calls(tag, text, sections=(), line_blocks=(), listed=(), guard=None):
    """How many calls the grammar opened in `text`: its call begins, which free text and arguments cannot hold,
    each followed by that call's end (a begin may also start markup inside a call: `<｜DSML｜` of a parameter).
    `sections`: the markers (openers and closers) of sections around calls; their calls are counted inside them, and
    a section marker that starts like a call (MiniMax M3's namespace token starts both) opens none, nor does a content
    message that opens like one (gpt-oss's commentary preamble). A tag holding a JSON list of calls (Mistral v3's
    `[TOOL_CALLS][...]`) opens as many calls as the list has items; so does a block of calls one per line (MiniMax
    M1's `<tool_calls>`, OLMo 3's `<function_calls>`), whose begin is in `line_blocks`, and a list of calls whose
    begin is in `listed` (Apertus's `<|tools_prefix|>[{"NAME": {...}}, ...]`). `guard`: where the opener is plain
    text that free text may hold (Llama's `{`), the text every call holds and free text does not (`"name"`)."""
    pairs = set()
    lists = set()
    messages = set()  # the begins of content messages, which may start like a call (gpt-oss's preamble)
    # what a call's body holds that may spell its end inside (argument strings may hold markers the parser reads as
    # text there): its parameter tags, skipped whole, and whether its body is plain JSON, skipped as one value
    inner = {}
    json_bodies = set()

    def call_pair(tag_node):
        # (a tag with several ends: the calls that end the answer, whose closer may be left out, as a tuple whose
        # first end is the closer)
        end = tag_node["end"]
        pair = (tag_node["begin"], tuple(end) if isinstance(end, list) else end)
        pairs.add(pair)
        inner.setdefault(pair, []).extend(
            (format_["begin"], format_["end"]) for format_ in formats_of(
                tag_node["content"], descend=lambda format_: format_.get("type") != "tag")
            if format_.get("type") == "tag")
        if not inner[pair] and any(format_.get("type") == "json_schema" and format_.get("style", "json") == "json"
                                   for format_ in formats_of(tag_node["content"])):
            json_bodies.add(pair)

    def holds_list(node):
        if isinstance(node, dict):
            if node.get("type") == "grammar":  # a Python call list, not one call's arguments (FunctionGemma's)
                return node["grammar"].startswith('root ::= "["')
            schema = node.get("json_schema") if node.get("type") == "json_schema" else None
            if schema is not None and schema.get("type") == "array":  # a list of call objects, not an argument
                items = schema.get("items") or {}
                return any(isinstance(value, dict) and "const" in value
                           for item in items.get("anyOf", [items]) for value in (item.get("properties") or {}).values())
            return any(holds_list(value) for value in node.values())
        return isinstance(node, list) and any(holds_list(item) for item in node)

    def visit(node):
        if isinstance(node, dict):
            if node.get("type") == "tag" and (holds_list(node["content"]) or node["begin"] in (*line_blocks, *listed)):
                # a region holding the list of calls
                pairs.add((node["begin"], node["end"]))
                lists.add((node["begin"], node["end"]))
                return
            if node.get("type") in ("triggered_tags", "tags_with_separator"):
                for tag_node in node["tags"]:
                    if tag_node["content"].get("type") == "any_text":
                        messages.add(tag_node["begin"])  # a content message (gpt-oss's final channel), not a call
                        continue
                    if tag_node["begin"] in sections:
                        visit(tag_node["content"])  # a section around calls: count the calls in it
                    else:
                        call_pair(tag_node)
                        if holds_list(tag_node["content"]) or tag_node["begin"] in (*line_blocks, *listed):
                            lists.add((tag_node["begin"], tag_node["end"]))
                return
            if node.get("type") == "or" and all(item.get("type") == "tag" for item in node["elements"]):
                for tag_node in node["elements"]:  # in a section
                    call_pair(tag_node)
                return
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for item in node:
                visit(item)

    visit(tag["format"])
    # a call whose closer may be left out stands for the same call with its closer
    optional_closers = {begin for begin, end in pairs if isinstance(end, tuple)}
    pairs = {(begin, end) for begin, end in pairs if isinstance(end, tuple) or begin not in optional_closers}

    def next_call(at):
        return min([found for found in (text.find(begin, at) for begin, _ in pairs) if found >= 0], default=-1)

    count, at = 0, 0
    while pairs:
        found = [(text.find(begin, at), begin, end) for begin, end in pairs]
        found = [item for item in found if item[0] >= 0]
        if not found:
            break
        index, begin, end = min(found)
        section = next((opener for opener in sections if text.startswith(opener, index)), None)
        if section:  # a section marker that starts like a call (DSML's `<｜DSML｜tool_calls>`) is no call
            at = index + len(section)
            continue
        message = next((opener for opener in messages if opener != begin and text.startswith(opener, index)), None)
        if message:  # nor a message that opens like one (gpt-oss's `<|channel|>commentary<|message|>` preamble)
            at = index + len(message)
            continue
        after = index + len(begin)
        if begin in line_blocks:  # a block of calls, one per line: call objects read one by one, or lines
            start = after + len(text[after:]) - len(text[after:].lstrip())
            if text.startswith("{", start):
                _, stop = json.JSONDecoder().raw_decode(text, start)
                count += 1
                while text.startswith("\n{", stop):
                    _, stop = json.JSONDecoder().raw_decode(text, stop + 1)
                    count += 1
                close = text.find(end, stop)
            else:  # (no string holds a line break, nor the block's end)
                close = text.find(end, after)
                count += len(text[after:close if close >= 0 else len(text)].strip().split("\n"))
            at = len(text) if close < 0 else close + len(end)
            continue
        if (begin, end) in lists:  # one region, as many calls as its list has items
            start = after + len(text[after:]) - len(text[after:].lstrip())
            if not begin and guard:  # text first, which cannot hold the guard: the list starts at the `[` before it
                held = text.find(guard, at)
                if held < 0:
                    break
                start = text.rfind("[", at, held + 1)
            if not begin and not text.startswith("[", start):
                break  # text, which a list that opens with no marker cannot start (Gemma 3's text under "auto")
            items = None
            if text.startswith("[", start) and text[start + 1:].lstrip()[:1] in ("{", "]"):  # a JSON list
                try:
                    items, stop = json.JSONDecoder().raw_decode(text, start)
                except ValueError:  # an optional `[` before one call object, with no `]` after it (Phi-4-mini)
                    start = text.index("{", start)
            if isinstance(items, list):
                count += len(items)
            elif text.startswith("{", start):  # a region that holds one call object or a list of them
                _, stop = json.JSONDecoder().raw_decode(text, start)
                count += 1
            else:
                calls, stop = python_list_items(text, start)
                count += calls
            if not begin:
                break  # a list that opens with no marker is the whole answer
            close = text.find(end, stop) if end else -1
            at = stop if close < 0 else close + len(end)
            continue
        elif len(begin) < 2:  # a plain opener (Llama's `{`) also opens the arguments: the call is one JSON object
            try:
                _, stop = json.JSONDecoder().raw_decode(text, index)
            except ValueError:
                stop = None
            if guard and (stop is None or guard not in text[index:stop]):
                at = index + 1  # free text's `{`: no call
                continue
            at = len(text) if stop is None else stop
            count += 1
            continue
        else:
            count += 1
        at = index + len(begin)
        if (begin, end) in json_bodies:  # the arguments (or the call object): one JSON value, strings and all
            start = min([found for found in (text.find("{", at), text.find("[", at)) if found >= 0], default=-1)
            try:
                _, at = json.JSONDecoder().raw_decode(text, start)
            except ValueError:
                pass
        while inner.get((begin, end)):  # parameter tags, each skipped to its own end
            found = [(text.find(tag_begin, at), tag_begin, tag_end) for tag_begin, tag_end in inner[(begin, end)]
                     if tag_begin and tag_end]
            found = [item for item in found if item[0] >= 0]
            close = text.find(end[0] if isinstance(end, tuple) else end, at)
            if isinstance(end, tuple):  # (or the next call, where its closer was left out)
                close = min([found for found in (close, next_call(at)) if found >= 0], default=-1)
            if not found or close >= 0 and close < min(found)[0]:
                break
            start, tag_begin, tag_end = min(found)
            stop = text.find(tag_end, start + len(tag_begin))
            at = len(text) if stop < 0 else stop + len(tag_end)
        if isinstance(end, tuple):  # its closer, or the next call where it was left out
            close = text.find(end[0], at)
            following = next_call(at)
            if following >= 0 and (close < 0 or following < close):
                at = following
                continue
            at = len(text) if close < 0 else close + len(end[0])
            continue
        close = text.find(end, at)
        at = len(text) if close < 0 else close + len(end)
    return count


def python_list_items(text, start):
    """(how many items the Python list at `start` holds at its top level, where it ends): commas outside strings,
    brackets and parentheses, read without our parser."""
    depth, items, at, quote = 0, 0, start, None
    while at < len(text):
        char = text[at]
        if quote:
            if char == "\\":
                at += 1
            elif char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char in "[({":
            depth += 1
            if depth == 2 and items == 0:
                items = 1
        elif char in "])}":
            depth -= 1
            if depth == 0:
                return items, at + 1
        elif char == "," and depth == 1:
            items += 1
        elif depth == 1 and items == 0 and not char.isspace():
            items = 1
        at += 1
    return items, at


def end_of_turn(name, output, prefix="", tools=None):
    """`output` cut where the model's turn ends, as an engine stops at its end-of-turn token before the grammar
    sees it: at the first of the template's end markers (a marker after which the template reads nothing, in plain
    text: `<|im_end|>`, `[e~[`...) before which the output already gives its whole message."""
    template = rt.get_template(name)

    def parsed(text):
        try:
            return rt.parse_response(text, template, prefix=prefix, tools=tools)
        except ValueError:
            return None

    # a call's own end is written by the grammar, whatever the parser reads after it (gpt-oss drops any text
    # outside its messages, so "Trailing text." reads as nothing after every marker there)
    call_ends = {form.end for form in planning._plan(name, tools, prefix).calls.values()} if tools else set()
    markers = [marker for marker in patterns._markers(template)
               if not any(marker in end for end in call_ends)]  # (nor a piece of one: Cohere's `<|END_`)
    ends = [marker for marker in markers if parsed("Hello." + marker + " Trailing text.") == parsed("Hello.")]
    whole = parsed(output)
    for start in sorted(match.start() for marker in ends for match in re.finditer(re.escape(marker), output)):
        if parsed(output[:start]) == whole:
            return output[:start]
    # a marker the template spells in pieces, from where its first piece stands (Llama 4 pythonic's
    # `<\|(?:(?:eot|...)\|>.*|python_end...)` gives `<|` and `eot|>`): what follows there must end the turn
    for start in sorted({match.start() for marker in markers for match in re.finditer(re.escape(marker), output)}):
        if parsed("Hello." + output[start:] + " Trailing text.") == parsed("Hello.") and parsed(output[:start]) == whole:
            return output[:start]
    return output


@pytest.mark.parametrize("name", ACCEPTED)
def test_the_canonical_calls_are_admitted_in_every_mode(name):
    # the compiler checked that these parse back to exactly the calls; the grammar must let a model write them
    info = xgr.TokenizerInfo([chr(c) for c in range(32, 127)] + ["\n", "\t", "<eos>"], stop_token_ids=[97])
    compiler = xgr.GrammarCompiler(info)
    for prefix in prefixes(name):
        try:
            plan = planning._plan(name, TOOLS, prefix)
        except GrammarError:
            assert prefix
            continue
        lead = planning._reasoning_text(plan) if plan.reasoning_open is not None else ""
        weather = plan.calls["get_weather"].write({"city": "Paris", "days": 3})
        search = plan.calls["search_web"].write({"query": "bakeries", "safe": True})
        both = weather + plan.separator + search
        if plan.calls["get_weather"].write_list is not None:  # one region holds the list of calls
            both = plan.calls["get_weather"].write_list([("get_weather", {"city": "Paris", "days": 3}),
                                                         ("search_web", {"query": "bakeries", "safe": True})])
        cases = [("required", True, lead + weather), *([] if plan.one_call else [("required", True, lead + both)]),
                 ("required", False, lead + search),
                 ({"type": "function", "function": {"name": "search_web"}}, True, lead + search),
                 ("auto", True, lead + "Let me look. " + weather)]
        for choice, parallel, text in cases:
            if choice == "auto" and name in FORCED_ONLY:
                continue
            tag = structural_tag(name, TOOLS, prefix=prefix, tool_choice=choice, parallel_tool_calls=parallel)
            matcher = xgr.GrammarMatcher(compiler.compile_structural_tag(json.dumps(tag)))
            assert matcher.accept_string(text) and matcher.is_completed(), f"{name} {choice} refuses {text!r}"


def admits(tag, text):
    info = xgr.TokenizerInfo([chr(c) for c in range(32, 127)] + ["\n", "<eos>"], stop_token_ids=[96])
    matcher = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_structural_tag(json.dumps(tag)))
    return matcher.accept_string(text) and matcher.is_completed()


WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}]


@pytest.mark.parametrize("name, output", [
    # Kimi K2's section markers (`s?` in the template: both spellings), its `functions.` namespace and `:N` index
    ("kimi-k2", "Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                '<|tool_call_argument_begin|>{"city": "Paris", "days": 2}<|tool_call_end|><|tool_calls_section_end|>'),
    ("kimi-k2", "<|tool_call_section_begin|><|tool_call_begin|>get_weather:12<|tool_call_argument_begin|>"
                '{"city": "Paris"}<|tool_call_end|><|tool_call_section_end|>'),
    # DSML as DeepSeek V3.2 and V4 write it: a section whose opener spells the call's begin further, and
    # string="true" raw strings beside string="false" JSON values
    ("deepseek_v4", '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" '
                    'string="true">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name="days" string="false">2'
                    '</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'),
    ("deepseek_v3.2", '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" '
                      'string="true">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>'),
    # DeepSeek R1's optional `function` before the separator
    ("deepseek_r1", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
                    '{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
])
def test_calls_as_models_write_them_are_admitted_and_parse_to_those_calls(name, output):
    tag = structural_tag(name, WEATHER, prefix="")
    assert admits(tag, output), f"{name} refuses {output!r}"
    calls = rt.parse_response(output, name, prefix="", tools=WEATHER)["tool_calls"]
    assert [call["function"]["name"] for call in calls] == ["get_weather"]
    assert calls[0]["function"]["arguments"]["city"] == "Paris"


def test_calls_that_end_the_turn_leave_no_text_after_them():
    # Mistral's closer writes nothing: a call ends where the next opens or the turn ends, and text after it would be
    # read as part of its arguments, so under "auto" only calls may follow the first call
    tag = structural_tag("mistral", TOOLS, prefix="")
    one = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'
    two = one + '[TOOL_CALLS]search_web[ARGS]{"query": "rain", "safe": true}'
    assert admits(tag, "Let me check." + two)
    assert not admits(tag, one + " Done.")
    assert [call["function"]["name"] for call in rt.parse_response("Let me check." + two, "mistral", prefix="",
                                                                    tools=TOOLS)["tool_calls"]] == ["get_weather", "search_web"]
    single = structural_tag("mistral", TOOLS, prefix="", tool_choice="required", parallel_tool_calls=False)
    assert admits(single, one) and not admits(single, two)


@pytest.mark.parametrize("name, begin, end", [
    ("mistral_v3", "[TOOL_CALLS]", ""), ("cohere-command", "<|START_ACTION|>", "<|END_ACTION|>"),
    ("hunyuan_a13b", "<tool_calls>", "</tool_calls>"), ("granite-3", "<|tool_call|>", ""),
])
def test_a_list_of_calls_is_one_region_whose_items_follow_the_tools(name, begin, end):
    keys = ("tool_name", "parameters") if name == "cohere-command" else ("name", "arguments")

    def region(*calls):
        return begin + json.dumps([{keys[0]: tool, keys[1]: arguments} for tool, arguments in calls]) + end

    weather, search = ("get_weather", {"city": "Paris"}), ("search_web", {"query": "rain", "safe": True})
    required = structural_tag(name, TOOLS, prefix="", tool_choice="required")
    assert admits(required, region(weather, search))
    assert rt.parse_response(region(weather, search), name, prefix="", tools=TOOLS)["tool_calls"] == [
        {"type": "function", "function": {"name": tool, "arguments": arguments}} for tool, arguments in (weather, search)]
    assert not admits(required, region())  # at least one call
    assert not admits(required, region(("get_weather", {"days": 2})))  # arguments follow the schema
    single = structural_tag(name, TOOLS, prefix="", tool_choice="required", parallel_tool_calls=False)
    assert admits(single, region(search)) and not admits(single, region(weather, search))
    named = structural_tag(name, TOOLS, prefix="", tool_choice={"type": "function", "function": {"name": "search_web"}})
    assert admits(named, region(search, search)) and not admits(named, region(search, weather))


FLAT_TOOLS = [tool for tool in TOOLS if tool["function"]["name"] != "search_web"] + [
    {"type": "function", "function": {"name": "search_web", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "number"},
                                         "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["query"]}}}]


@pytest.mark.parametrize("name", ["llama3.1", "llama4"])
def test_a_plain_opener_keeps_its_guard_out_of_free_text_and_its_arguments_parse_back(name):
    # Llama's call opener `{` is also text, but every call holds `"name"`: under "auto" and "none" free text may
    # hold braces but not that, so it cannot open a call
    assert "free text holds no '\"name\"'" in " ".join(explain(name, FLAT_TOOLS))
    call = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    auto, none = (structural_tag(name, FLAT_TOOLS, tool_choice=choice) for choice in ("auto", "none"))
    for text, calls in (("Sure. " + call, 1), (call + "\nDone.", 1), ("Use {x} or {}.", 0), ("f() { return 1; }", 0)):
        assert admits(auto, text), text
        assert len(rt.parse_response(text, name, prefix="", tools=FLAT_TOOLS).get("tool_calls") or []) == calls, text
        assert admits(none, text) == (calls == 0), text
    # text holding the guard outside a call, a call of another tool, a call whose arguments break the schema
    for text in ('The "name" key.', call.replace("get_weather", "other"), call.replace('"Paris"', "2")):
        assert not admits(auto, text) and not admits(none, text), text
    # its closer `}` also ends a call where nested arguments close before a line break: where tools have object
    # arguments, a call is written on one line (spaces only), and one with a line break there is not admitted
    nested = structural_tag(name, TOOLS, tool_choice="required")
    assert "written on one line" in " ".join(explain(name, TOOLS))
    one_line = '{"name": "search_web", "parameters": {"query": "x", "safe": true, "filters": {"lang": "en"}}}'
    assert admits(nested, one_line)
    assert rt.parse_response(one_line, name, prefix="", tools=TOOLS)["tool_calls"][0]["function"]["arguments"] == {
        "query": "x", "safe": True, "filters": {"lang": "en"}}
    assert not admits(nested, one_line.replace('"en"}}}', '"en"}\n}}'))
    assert "written on one line" not in " ".join(explain(name, FLAT_TOOLS))
    rng = random.Random(name)
    for tools in (FLAT_TOOLS, TOOLS):
        schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in tools}
        for choice, parallel in MODES[1:4]:
            tag = structural_tag(name, tools, prefix="", tool_choice=choice, parallel_tool_calls=parallel)
            for text in walks(tag, rng, WALKS * 2):
                calls = rt.parse_response(text, name, prefix="", tools=tools).get("tool_calls") or []
                assert 1 <= len(calls) == opened_calls(tag, text) and (parallel or len(calls) == 1), text
                for call in calls:
                    if isinstance(choice, dict):
                        assert call["function"]["name"] == choice["function"]["name"], text
                    jsonschema.validate(call["function"]["arguments"], schemas[call["function"]["name"]])


@pytest.mark.parametrize("name, begin, end", [
    ("lfm2", "<|tool_call_start|>", "<|tool_call_end|>"), ("llama4_pythonic", "", ""), ("gemma-3", "", ""),
])
def test_python_call_lists_follow_the_tools_schemas(name, begin, end):
    weather, search = "get_weather(city='Paris', days=2)", "search_web(query=\"it's\", safe=False, tags=['a'])"

    def region(*calls):
        return begin + "[" + ", ".join(calls) + "]" + end

    required = structural_tag(name, TOOLS, prefix="", tool_choice="required")
    assert admits(required, region(weather, search))
    assert [call["function"] for call in rt.parse_response(region(weather, search), name, prefix="", tools=TOOLS)[
        "tool_calls"]] == [{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}},
                           {"name": "search_web", "arguments": {"query": "it's", "safe": False, "tags": ["a"]}}]
    # keyword arguments in any order (a model writes them in the order it learnt), each once
    reordered = region("search_web(tags=['a'], safe=False, query='x')")
    assert admits(required, reordered)
    assert rt.parse_response(reordered, name, prefix="", tools=TOOLS)["tool_calls"][0]["function"]["arguments"] == {
        "tags": ["a"], "safe": False, "query": "x"}
    for refused in (region(), region("get_weather(days=2)"), region("get_weather(city=3)"),
                    region("get_weather(city='a)]b')"), region("get_weather('Paris')"),
                    region("get_weather(city='a', days=1, city='b')")):
        assert not admits(required, refused), refused  # no call, a required argument missing, a wrong type, ...
    single = structural_tag(name, TOOLS, prefix="", tool_choice="required", parallel_tool_calls=False)
    assert admits(single, region(weather)) and not admits(single, region(weather, weather))
    named = structural_tag(name, TOOLS, prefix="", tool_choice={"type": "function", "function": {"name": "search_web"}})
    assert admits(named, region(search)) and not admits(named, region(weather))
    if begin:  # LFM2's list has its own markers: text may stand around it under "auto", and one list only
        auto = structural_tag(name, TOOLS, prefix="")
        assert admits(auto, "Let me check. " + region(weather) + " Done.")
        assert not admits(auto, region(weather) + region(search))


def test_a_content_message_the_prompt_left_open_is_closed_before_calls():
    # Kimi K3 with thinking off: the prompt opens the response channel, the model writes its text and closes it
    prefix = ('<|open|>message role="user"<|sep|>Weather?<|close|>message<|sep|><|end_of_msg|>'
              '<|open|>message role="assistant"<|sep|><|open|>response<|sep|>')
    call = planning._plan("kimi-k3", WEATHER, prefix).calls["get_weather"].write({"city": "Paris"})
    text = "Checking.<|close|>response<|sep|><|open|>tools<|sep|>" + call + "<|close|>tools<|sep|>"
    assert admits(structural_tag("kimi-k3", WEATHER, prefix=prefix), text)
    message = rt.parse_response(text, "kimi-k3", prefix=prefix, tools=WEATHER)
    assert message["content"] == "Checking." and message["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}
    rng = random.Random("kimi-k3 response open")
    sections = [opener for opener, _ in planning._plan("kimi-k3", TOOLS, prefix).wrappers]
    for choice, parallel in MODES:
        tag = structural_tag("kimi-k3", TOOLS, prefix=prefix, tool_choice=choice, parallel_tool_calls=parallel)
        for written in walks(tag, rng):
            calls = rt.parse_response(written, "kimi-k3", prefix=prefix, tools=TOOLS).get("tool_calls") or []
            assert len(calls) == opened_calls(tag, written, sections), written
            assert (choice == "none") == (not calls) or choice == "auto", written
            for found in calls:
                jsonschema.validate(found["function"]["arguments"], SCHEMAS[found["function"]["name"]])


def test_none_is_refused_where_free_text_could_open_a_call():
    # Apertus opens a later call after any `}` followed by `, {"NAME": `, in text too: nothing every call holds
    # could be kept out of text, so "none" cannot hold
    with pytest.raises(GrammarError, match="lookbehind"):
        structural_tag("apertus", WEATHER, tool_choice="none")
    assert structural_tag("qwen3", WEATHER, tool_choice="none")


def test_calls_that_open_with_no_marker_are_kept_out_of_text_by_what_every_call_holds():
    # Llama 4's pythonic calls are Python lists the parser finds anywhere in text (an opener that is a lookahead for
    # `[NAME(`): free text holds no `[`; xLAM's JSON lists (a lookahead for `[{"name":`) hold `"name"`
    call = '[get_weather(city="Paris")]'
    auto, none = (structural_tag("llama4_pythonic", WEATHER, tool_choice=choice) for choice in ("auto", "none"))
    for text, calls in (("Sure. " + call, 1), (call + " Done.", 1), ("Fine (really).", 0)):
        assert admits(auto, text) and admits(none, text) == (calls == 0), text
        assert len(rt.parse_response(text, "llama4_pythonic", prefix="", tools=WEATHER).get("tool_calls") or []) == calls
    for text in ("See [1].", "[get_weather(town='Paris')]"):
        assert not admits(auto, text) and not admits(none, text), text
    listed = '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    auto = structural_tag("xlam", WEATHER, tool_choice="auto")
    assert admits(auto, "Sure. " + listed) and admits(auto, "See [1] or {2}.") and not admits(auto, 'a "name" b')
    assert len(rt.parse_response("Sure. " + listed, "xlam", prefix="", tools=WEATHER)["tool_calls"]) == 1


def test_where_calls_open_only_at_the_answers_start_text_cannot_start_like_one():
    # Gemma 3 reads a Python call list (or its ```tool_code fence) only at the start of the answer: under "auto" the
    # answer is the calls (then perhaps text), or text whose start is no call's
    auto = structural_tag("gemma-3", WEATHER, prefix="")
    call = '[get_weather(city="Paris", days=2)]'
    for text in (call, call + "\nDone.", call + "\n\nDone.", "Sure. " + call, "``inline``", "```python\nx = 1\n```"):
        assert admits(auto, text), text
        calls = rt.parse_response(text, "gemma-3", prefix="", tools=WEATHER).get("tool_calls") or []
        assert len(calls) == (1 if text.startswith("[") else 0), text
    for text in ("[not a call", " [x", "```tool_code\n" + call + "\n```", "```tool_codex", "Ok <end_of_turn> b"):
        assert not admits(auto, text), text
    # "none": text that cannot start like a call, or nothing (the tools are not needed to find that out)
    for tools in (WEATHER, None):
        none = structural_tag("gemma-3", tools, tool_choice="none")
        for text in ("", "Sure. " + call, "``inline``"):
            assert admits(none, text), text
        for text in (call, "```tool_code\n" + call + "\n```", " [x"):
            assert not admits(none, text), text


def test_bare_key_json_with_delimited_strings_follows_the_schema_and_keeps_markers_out_of_strings():
    # FunctionGemma: `call:NAME{key:<escape>text<escape>,...}`, written through an EBNF grammar of such values
    tools = [{"type": "function", "function": {"name": "note", "parameters": {"type": "object", "properties": {
        "text": {"type": "string"}, "done": {"type": "boolean"}, "at": {"type": "null"},
        "meta": {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}},
                                                  "level": {"type": "integer"}}, "required": ["level"]},
        "mood": {"enum": ["calm", "busy"]}}, "required": ["text"]}}}]
    tag = structural_tag("functiongemma", tools, tool_choice="required")

    def call(body):
        return f"<start_function_call>call:note{body}<end_function_call>"

    admitted = {
        "{text:<escape>a < b, ends here: end<escape>}": {"text": "a < b, ends here: end"},
        "{text:<escape>x<escape>,done:False, at:None,meta:{tags:[<escape>p<escape>,<escape>q<escape>],level:2}}": {
            "text": "x", "done": False, "at": None, "meta": {"tags": ["p", "q"], "level": 2}},
        "{text:<escape><escape>,mood:<escape>busy<escape>}": {"text": "", "mood": "busy"},
    }
    for body, arguments in admitted.items():
        assert admits(tag, call(body)), body
        assert rt.parse_response(call(body), "functiongemma", prefix="", tools=tools)["tool_calls"] == [
            {"type": "function", "function": {"name": "note", "arguments": arguments}}]
    refused = ["{text:<escape>stop <end_function_call> here<escape>}", "{text:<escape>a<escape>,mood:<escape>x<escape>}",
               "{done:true}", '{text:"quoted"}', "{text:<escape>a<escape>,meta:{tags:[]}}",
               "{text:<escape>a<escape>,done:<escape>true<escape>}"]
    for body in refused:
        assert not admits(tag, call(body)), body
    # the canonical writing is the one the grammar admits
    form = planning._plan("functiongemma", tools, "").calls["note"]
    written = form.write({"text": "hi", "done": True, "meta": {"tags": ["a"], "level": 1}})
    assert admits(tag, written), written


def test_a_grammar_does_not_depend_on_the_grammars_compiled_before_it():
    # Hy3's calls are spelled as the prompt spells its markers; what argument strings may hold is found by probes
    # written in that spelling, and cached per spelling, not per template
    prompts = [case["prefix"] for case in corpus("hunyuan3")["cases"] if case.get("tools")]
    opensource = next(prompt for prompt in prompts if prompt.endswith("<think:opensource>"))
    preview = next(prompt for prompt in prompts if "opensource" not in prompt)
    planning._string_excludes_spelled.cache_clear()
    alone = structural_tag("hunyuan3", TOOLS, prefix=opensource)
    planning._string_excludes_spelled.cache_clear()
    structural_tag("hunyuan3", TOOLS, prefix=preview)
    assert structural_tag("hunyuan3", TOOLS, prefix=opensource) == alone


def test_a_closer_spelled_across_whitespace_is_kept_out_of_strings_in_every_spacing():
    # Llama's closer `(?<=\})\s*\}` ends a call inside a string at `} }B` as at `}}B` (the parser then fails on
    # the rest): no spacing of it may stand in an argument string
    tag = structural_tag("llama3.1", WEATHER, tool_choice="required")

    def call(city):
        return '{"name": "get_weather", "parameters": {"city": "%s"}}' % city

    for city in ("a}}B", "a} }B", "a}   }B"):
        with pytest.raises(ValueError):
            rt.parse_response(call(city), "llama3.1", prefix="", tools=WEATHER)
        assert not admits(tag, call(city)), city
    for city in ("a} b", "{x} y"):
        assert admits(tag, call(city)), city
        assert rt.parse_response(call(city), "llama3.1", prefix="", tools=WEATHER)["tool_calls"][0]["function"][
            "arguments"] == {"city": city}
    # Phi-4-mini's opener `functools\s*\[` opens a call from free text in any spacing: free text under "auto" holds
    # neither `functools[` nor the word followed by whitespace
    auto = structural_tag("phi-4-mini", WEATHER)
    for spacing in ("", " ", "\n  "):
        text = f'Sure. functools{spacing}[{{"name": "get_weather", "parameters": {{"city": "x"}}}}]'
        assert rt.parse_response(text, "phi-4-mini", prefix="", tools=WEATHER).get("tool_calls"), spacing
        assert not admits(auto, text), spacing
    assert admits(auto, "I like functools.")


def test_an_optional_part_the_parser_reads_otherwise_is_not_admitted():
    # DSML's self-closing `/>` ends a call with no parameters: a call that has some may not be written with it
    tag = structural_tag("deepseek_v4", WEATHER, prefix="", tool_choice="required")
    written = '<｜DSML｜invoke name="get_weather"/><｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter></｜DSML｜invoke>'
    assert not admits(tag, written)
    assert admits(tag, written.replace("/>", ">", 1))


def test_dsml_string_parameters_are_written_raw_and_others_as_json():
    form = planning._plan("deepseek_v4", WEATHER, "").calls["get_weather"]
    text = form.write({"city": "Paris", "days": 2})
    assert 'name="city" string="true">Paris<' in text and 'name="days" string="false">2<' in text
    assert rt.parse_response(text, "deepseek_v4", prefix="", tools=WEATHER)["tool_calls"][0]["function"][
        "arguments"] == {"city": "Paris", "days": 2}


def test_objects_lists_and_booleans_may_be_python_literals_where_the_parser_types_raw_values():
    # Seed-OSS's chat template writes dict, list and boolean arguments with Python's str(); its raw values are typed
    # by the schema, which reads them back
    case, output = corpus_output("seed_oss", "python_literal_object_and_array_arguments_with_schema")
    assert "{'metadata': False" in output
    assert admits(structural_tag("seed_oss", case["tools"], prefix=case["prefix"]), output)
    required = structural_tag("seed_oss", TOOLS, tool_choice="required")
    call = ("<seed:tool_call>\n<function=search_web>\n<parameter=query>x</parameter>\n<parameter=safe>True</parameter>"
            "\n<parameter=filters>{'lang': 'fr'}</parameter>\n<parameter=tags>['a', \"b\"]</parameter>\n</function>"
            "\n</seed:tool_call>")
    assert admits(required, call)
    assert rt.parse_response(call, "seed_oss", prefix="", tools=TOOLS)["tool_calls"][0]["function"]["arguments"] == {
        "query": "x", "safe": True, "filters": {"lang": "fr"}, "tags": ["a", "b"]}
    # typed by the schema: no string where the schema says list, no list of numbers where it says strings
    assert not admits(required, call.replace("['a', \"b\"]", "'a'"))
    assert not admits(required, call.replace("['a', \"b\"]", "[1]"))
    # DSML's string="false" values are read as JSON, which a Python literal is not: only JSON there
    dsml = structural_tag("deepseek_v4", TOOLS, prefix="", tool_choice="required")
    form = planning._plan("deepseek_v4", TOOLS, "").calls["search_web"]
    written = form.write({"query": "x", "safe": True, "filters": {"lang": "fr"}})
    assert admits(dsml, written)
    assert not admits(dsml, written.replace('{"lang": "fr"}', "{'lang': 'fr'}"))


def test_harmony_calls_open_with_the_channel_marker_and_free_text_cannot_name_the_tool_first():
    # gpt-oss is walked at random under every tool_choice by the property test above
    assert "gpt-oss" in ACCEPTED
    tag = structural_tag("gpt-oss", WEATHER, prefix="")
    call = ('<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary '
            'to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>')
    assert admits(tag, call)
    assert rt.parse_response(call, "gpt-oss", prefix="", tools=WEATHER)["tool_calls"] == [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]
    answer = ("<|channel|>analysis<|message|>No tool needed.<|end|><|start|>assistant<|channel|>final<|message|>"
              "It is sunny.<|return|>")
    assert admits(tag, answer)
    assert rt.parse_response(answer, "gpt-oss", prefix="", tools=WEATHER)["content"] == "It is sunny."
    # text that names a tool before the channel marker: the parser reads the call as that tool's
    named_first = 'to=functions.evil<|channel|>commentary to=functions.get_weather<|message|>{"city": "Paris"}<|call|>'
    assert rt.parse_response(named_first, "gpt-oss", prefix="", tools=WEATHER)["tool_calls"][0]["function"][
        "name"] == "evil"
    assert not admits(tag, named_first)
    assert not admits(tag, 'to=get_weather<|channel|>commentary to=functions.get_weather<|message|>{"city": "P"}<|call|>')
    # a final message left unclosed would swallow the call that follows it
    assert not admits(tag, '<|channel|>final <|message|>Hi<|channel|>commentary to=functions.get_weather'
                           '<|message|>{"city": "Paris"}<|call|>')
    required = structural_tag("gpt-oss", WEATHER, prefix="", tool_choice="required")
    assert admits(required, call)
    assert not admits(required, answer)
    # a prompt that opens the analysis message: the grammar starts inside it
    opened = "<|start|>user<|message|>Weather in Paris?<|end|><|start|>assistant<|channel|>analysis<|message|>"
    rest = call[len("<|channel|>analysis<|message|>"):]
    assert admits(structural_tag("gpt-oss", WEATHER, prefix=opened, tool_choice="required"), rest)
    assert rt.parse_response(rest, "gpt-oss", prefix=opened, tools=WEATHER)["tool_calls"][0]["function"][
        "arguments"] == {"city": "Paris"}


def test_a_preamble_that_opens_like_a_call_is_admitted_before_calls_under_auto():
    # gpt-oss writes a commentary message before its calls (`<|channel|>commentary<|message|>`...`<|end|>`), which
    # shares the calls' trigger: it is its own tag there, read as content, and opens no call
    case, output = corpus_output("gpt-oss", "preamble_then_two_calls")
    assert "<|channel|>commentary<|message|>" in output
    assert admits(structural_tag("gpt-oss", case["tools"], prefix=case["prefix"]), output)
    assert rt.parse_response(output, "gpt-oss", prefix=case["prefix"], tools=case["tools"]) == case["expected"]
    tag = structural_tag("gpt-oss", WEATHER, prefix="")
    preamble = "<|channel|>commentary<|message|>Checking.<|end|>"
    call = ('<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>'
            '{"city": "Paris"}<|call|>')
    assert admits(tag, preamble + call)
    message = rt.parse_response(preamble + call, "gpt-oss", prefix="", tools=WEATHER)
    assert message["content"] == "Checking." and len(message["tool_calls"]) == 1
    # the preamble's text holds no marker: a call's header inside it would be read as the call's
    assert not admits(tag, "<|channel|>commentary<|message|>Checking <|channel|>commentary to=functions.get_weather"
                           '<|message|>{"city": "Paris"}<|call|>')
    # only under "auto": "required" writes the calls, "none" the final message
    assert not admits(structural_tag("gpt-oss", WEATHER, prefix="", tool_choice="required"), preamble + call)
    assert not admits(structural_tag("gpt-oss", WEATHER, prefix="", tool_choice="none"), preamble)


@pytest.mark.parametrize("name, case_name", [
    ("apriel_thinker", "v16_reasoning_then_single_call"),  # `[BEGIN FINAL RESPONSE]` opens the answer
    ("ernie4.5_thinking", "response_then_parallel_calls"),  # `<response>`...`</response>` around the text
    ("kimi-k3", "empty_response_call_without_arguments"),  # a response block, then a tools block
    # where text outside messages is dropped: the header of the next message, the section of the calls
    ("solar_open", "content_then_parallel_calls"),  # <|end|><|begin|>assistant<|tool_calls|><|tool_call:begin|>
    ("inkling", "thinking_text_and_two_calls"),  # <|end_message|><|message_model|>get_weather<|content_invoke_...
])
def test_markup_a_model_writes_around_its_text_is_admitted_under_auto(name, case_name):
    case, output = corpus_output(name, case_name)
    plan = planning._plan(name, case["tools"], case["prefix"])
    assert any(marker in output for marker in plan.free_markers), plan.free_markers
    assert admits(structural_tag(name, case["tools"], prefix=case["prefix"]), output)
    # the markup is dropped where the model writes it once; written in the middle of text it is still no call
    assert rt.parse_response(output, name, prefix=case["prefix"], tools=case["tools"]) == case["expected"]


def test_argument_strings_may_hold_the_markers_the_parser_reads_there_as_text():
    # Hermes ends a call at `</tool_call>` only right after the arguments' `}`: elsewhere in a string the marker is
    # text, and the grammar lets a model write it (code that prints the tag); right after a `}` it is kept out
    tag = structural_tag("hermes", WEATHER, tool_choice="required")
    call = planning._plan("hermes", WEATHER, "").calls["get_weather"]
    for city in ('print("</tool_call>")', "a <|im_end|> b", "</tool_call>"):
        text = call.write({"city": city})
        assert admits(tag, text), text
        assert rt.parse_response(text, "hermes", prefix="", tools=WEATHER)["tool_calls"][0]["function"]["arguments"] == {
            "city": city}
    for city in ("x}</tool_call>", "x} </tool_call>", "x}   </tool_call>", "x}```</tool_call>"):
        assert not admits(tag, call.write({"city": city})), city
    # a call's opener stays out of strings: read as text, it would still count one more call to other readers
    assert not admits(tag, call.write({"city": "a <tool_call> b"}))
    # gpt-oss ends a call at `<|call|>` wherever it stands: kept out everywhere
    gpt = planning._plan("gpt-oss", WEATHER, "").calls["get_weather"]
    assert not admits(structural_tag("gpt-oss", WEATHER, tool_choice="required"), gpt.write({"city": "a <|call|> b"}))


@pytest.mark.parametrize("name, case_name, marker, pair", [
    # Nemotron 3: `</tool_call>` in a value is text (the value runs to `</parameter>`); after `</function>` it ends
    # the call, and so does `<|im_end|>`: `</function>`, in both pairs, is the one kept out
    ("nemotron3", "nested_unicode_and_escapes", "</tool_call>", ("</function>", "</tool_call>")),
    # Ling 3 (GLM's shape): `<tool_call>x</tool_call>` in a value reads as a call without arguments; `<tool_call>`,
    # which opens calls, is the one kept out
    ("ling3", "text_and_two_calls", "</tool_call>", ("<tool_call>", "x</tool_call>")),
])
def test_of_two_markers_that_end_a_call_side_by_side_one_is_kept_out_of_strings(name, case_name, marker, pair):
    case, output = corpus_output(name, case_name)
    assert marker in output
    assert admits(structural_tag(name, case["tools"], prefix=case["prefix"]), output)
    assert rt.parse_response(output, name, prefix=case["prefix"], tools=case["tools"]) == case["expected"]
    # side by side, or a line break apart, at the start of a value they end the call: not admitted
    call = planning._plan(name, WEATHER, "").calls["get_weather"]
    tag = structural_tag(name, WEATHER, tool_choice="required")
    for between in ("", "\n"):
        city = f"{pair[0]}{between}{pair[1]} b"
        text = call.write({"city": city})
        calls = rt.parse_response(text, name, prefix="", tools=WEATHER).get("tool_calls") or []
        assert [call["function"]["arguments"] for call in calls] != [{"city": city}], text
        assert not admits(tag, text), text


@pytest.mark.parametrize("name, case_name", [
    ("deepseek_v4", "call_block_ends_open_reasoning"),  # `<｜DSML｜tool_calls>` ends the reasoning the prompt opened
    ("ling3", "call_opened_inside_reasoning"),  # `<tool_call>` does
    ("qwen3.5", "real_call_inside_thinking_never_closed"),  # Qwen3.6 wrote it so
])
def test_a_call_may_open_inside_reasoning_where_its_opener_ends_the_reasoning(name, case_name):
    case, output = corpus_output(name, case_name)
    assert "</think>" not in output and case["expected"]["reasoning_content"] and case["expected"]["tool_calls"]
    assert admits(structural_tag(name, case["tools"], prefix=case["prefix"]), output)
    assert rt.parse_response(output, name, prefix=case["prefix"], tools=case["tools"]) == case["expected"]
    # only under "auto": forced calls come after the reasoning is closed
    assert not admits(structural_tag(name, case["tools"], prefix=case["prefix"], tool_choice="required"), output)


def test_a_call_whose_opener_does_not_end_the_reasoning_cannot_open_inside_it():
    # DeepSeek V4 ends open reasoning at its section's opener `<｜DSML｜tool_calls>`, not at a bare invoke: written
    # inside the reasoning, a bare invoke is reasoning text, so the grammar does not admit it there
    case, output = corpus_output("deepseek_v4", "call_block_ends_open_reasoning")
    bare = output.replace("<｜DSML｜tool_calls>\n", "").replace("\n</｜DSML｜tool_calls>", "")
    assert bare != output and "<｜DSML｜invoke" in bare
    assert not rt.parse_response(bare, "deepseek_v4", prefix=case["prefix"], tools=case["tools"]).get("tool_calls")
    assert not admits(structural_tag("deepseek_v4", case["tools"], prefix=case["prefix"]), bare)


def test_nested_element_arguments_follow_the_schema_at_every_level():
    # MiniMax M3: an object's members and an array's <item>s are child elements, a leaf is its text; strings hold no
    # namespace token (where the parser ends a leaf), and an empty element holds no layout (it would read as " ")
    case = next(case for case in corpus("minimax_m3")["cases"]
                if case["name"] == "nested object and array arguments, typed by the nested schemas")
    tag = structural_tag("minimax_m3", case["tools"], prefix=case["prefix"])
    output = end_of_turn("minimax_m3", case["output"], case["prefix"], case["tools"])
    assert admits(tag, output)
    assert rt.parse_response(output, "minimax_m3", prefix=case["prefix"], tools=case["tools"]) == case["expected"]
    namespace = "]<]minimax[>["
    # (a number, a boolean and an integer that are not; a string written as an object)
    for wrong in ("<max_price>cheap", "<pets>maybe", "<adults>two", f"<city>{namespace}<name>Lyon{namespace}</name>"):
        opened = output.index(wrong[:wrong.index(">") + 1])
        right = output[opened:output.index(namespace, opened)]
        assert not admits(tag, output.replace(right, wrong, 1)), wrong
    empty = output.index("<tags>") + len("<tags>")
    end = output.index(namespace + "</tags>")
    assert admits(tag, output[:empty] + output[end:])
    assert not admits(tag, output[:empty] + " " + output[end:])


def test_a_reasoning_closer_alone_at_the_start_is_admitted_where_the_parser_drops_it():
    # MiniMax M3's adaptive prompt: the model skips its reasoning by writing `</mm:think>` first
    case, output = corpus_output("minimax_m3", "two calls after text")
    assert output.startswith("</mm:think>") and admits(structural_tag("minimax_m3", case["tools"],
                                                                      prefix=case["prefix"]), output)
    # where the parser reads it as reasoning's end (the prompt opened the reasoning), it is the reasoning's closer
    assert not planning._plan("minimax_m3", TOOLS, "<mm:think>").lone_reasoning_close


@pytest.mark.parametrize("name", ["deepseek_v3.2", "deepseek_v4"])
def test_inside_a_section_a_dsml_call_body_may_be_one_json_object(name):
    # SGLang's DeepSeek detectors read `<｜DSML｜invoke name="f">{...}</｜DSML｜invoke>` (content_args.json_body);
    # our parser ends such a call only before another invoke or the section's end, so the grammar writes one only
    # inside a section of calls, its strings holding none of the format's markers
    case, output = corpus_output(name, "json_body_invoke_then_tagged_invoke")
    tag = structural_tag(name, case["tools"], prefix=case["prefix"])
    assert admits(tag, output)
    assert rt.parse_response(output, name, prefix=case["prefix"], tools=case["tools"]) == case["expected"]
    # a bare invoke with a JSON body, outside a section, is not admitted (text after it would join the call)
    invoke = output[output.index("<｜DSML｜invoke"):output.index("</｜DSML｜invoke>") + len("</｜DSML｜invoke>")]
    assert "{" in invoke and not admits(tag, "Sure. " + invoke)
    # nor a JSON string holding a marker
    assert not admits(tag, output.replace('"Paris"', '"Paris</｜DSML｜invoke>"', 1))


def test_a_region_may_hold_a_list_of_call_objects_where_its_brackets_are_optional():
    # Nemotron's chat template writes parallel calls as one list, `<TOOLCALL>[{...}, {...}]</TOOLCALL>`; the
    # template reads a region holding one call object too
    case, output = corpus_output("nemotron_super_v1.5", "text_before_parallel_calls")
    assert admits(structural_tag("nemotron_super_v1.5", case["tools"], prefix=case["prefix"]), output)
    plan = planning._plan("nemotron_super_v1.5", TOOLS, "")
    listed = plan.calls["get_weather"].write_list_region([("get_weather", {"city": "Paris"}), ("get_time", {})])
    assert listed == '<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {}}]</TOOLCALL>'
    assert admits(structural_tag("nemotron_super_v1.5", TOOLS, tool_choice="required"), listed)
    # one call at most: no list of two
    assert not admits(structural_tag("nemotron_super_v1.5", TOOLS, tool_choice="required", parallel_tool_calls=False),
                      listed)
    # Apriel reads the second item of a list only where no `</tool_calls>` came before it in the region: in a list,
    # its strings cannot hold that marker
    apriel = planning._plan("apriel_thinker", WEATHER, "").calls["get_weather"]
    tag = structural_tag("apriel_thinker", WEATHER, tool_choice="required")
    quoted = apriel.write_list_region([("get_weather", {"city": "a </tool_calls> b"}), ("get_weather", {"city": "x"})])
    assert len(rt.parse_response(quoted, "apriel_thinker", prefix="", tools=WEATHER)["tool_calls"]) == 1
    assert not admits(tag, quoted)


def test_a_block_of_calls_one_per_line_is_one_region_whose_calls_are_lines():
    # MiniMax M1 writes its calls as lines of one `<tool_calls>` block: the first opens with the block, the next ones
    # with no marker (a lookbehind) at a line start; a line break inside a call object would end the call
    for case in corpus("minimax_m1")["cases"]:
        if case.get("tools") and (case.get("expected") or {}).get("tool_calls") and not case.get("truncated"):
            output = end_of_turn("minimax_m1", case["output"], case["prefix"], case["tools"])
            assert admits(structural_tag("minimax_m1", case["tools"], prefix=case["prefix"]), output), case["name"]
    form = planning._plan("minimax_m1", TOOLS, "").calls["get_weather"]
    assert form.block_lines
    two = form.write_list([("get_weather", {"city": "Paris"}), ("get_time", {})])
    assert two == ('<tool_calls>{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
                   '{"name": "get_time", "arguments": {}}</tool_calls>')
    required = structural_tag("minimax_m1", TOOLS, tool_choice="required")
    assert admits(required, two)
    assert [call["function"]["name"] for call in rt.parse_response(two, "minimax_m1", prefix="", tools=TOOLS)[
        "tool_calls"]] == ["get_weather", "get_time"]
    assert admits(required, two.replace("<tool_calls>", "<tool_calls>\n").replace("</tool_calls>", "\n</tool_calls>"))
    # a call object over two lines, one block per call, two blocks: not written; nor a call object whose name
    # comes after its arguments (the parser finds a call by `{"name"` at a line's start), though arguments may
    # come in any order
    assert not admits(required, two.replace('"arguments": {"city"', '"arguments":\n{"city"'))
    assert not admits(required, two.replace('{"name": "get_time", "arguments": {}}',
                                            '{"arguments": {}, "name": "get_time"}'))
    assert admits(required, two.replace('{"city": "Paris"}', '{"days": 2, "city": "Paris"}'))
    assert not admits(required, two.replace("}}\n{", "}}</tool_calls><tool_calls>{"))
    assert not admits(structural_tag("minimax_m1", TOOLS, tool_choice="required", parallel_tool_calls=False), two)
    # under "auto", text after the block cannot start another call object on a line of its own
    after = '<tool_calls>{"name": "get_time", "arguments": {}}</tool_calls>\nDone.'
    assert admits(structural_tag("minimax_m1", TOOLS), after)
    assert not admits(structural_tag("minimax_m1", TOOLS), after + '}\n{"name": "get_time", "arguments": {}}')


def test_keyword_arguments_follow_the_schema_in_a_block_of_call_lines():
    # OLMo 3 writes `NAME(key=value, ...)` lines inside `<function_calls>`: each value runs to the next `, KEY=`,
    # so a top-level string is one JSON string or raw between single quotes, and strings nested in an object or a
    # list hold no `=` (a `, x=` inside one would end the value there)
    case, output = corpus_output("olmo3", "python_booleans_typed_by_schema")
    assert admits(structural_tag("olmo3", case["tools"], prefix=case["prefix"]), output)
    form = planning._plan("olmo3", TOOLS, "").calls["search_web"]
    assert form.block_lines
    call = {"query": "a, b=c 'quoted'", "safe": True, "filters": {"lang": "fr"}, "tags": ["x"]}
    two = form.write_list([("search_web", call), ("get_time", {})])
    assert two == ('<function_calls>search_web(query="a, b=c \'quoted\'", safe=true, filters={"lang": "fr"}, '
                   'tags=["x"])\nget_time()</function_calls>')
    required = structural_tag("olmo3", TOOLS, tool_choice="required")
    assert admits(required, two)
    assert rt.parse_response(two, "olmo3", prefix="", tools=TOOLS)["tool_calls"] == [
        {"type": "function", "function": {"name": "search_web", "arguments": call}},
        {"type": "function", "function": {"name": "get_time", "arguments": {}}}]
    raw = "<function_calls>search_web(query='cheap flights', safe=False)</function_calls>"
    assert admits(required, raw)
    assert rt.parse_response(raw, "olmo3", prefix="", tools=TOOLS)["tool_calls"][0]["function"]["arguments"] == {
        "query": "cheap flights", "safe": False}
    # the parser would end these values early: a quote inside a raw string, `, x=` inside a nested string
    assert not admits(required, raw.replace("cheap flights", "it's cheap"))
    assert not admits(required, two.replace('{"lang": "fr"}', '{"lang": "fr, x=1"}'))
    # arguments in any order, each once, the required ones always
    reordered = "<function_calls>search_web(safe=true, query=\"a\")</function_calls>"
    assert admits(required, reordered)
    assert rt.parse_response(reordered, "olmo3", prefix="", tools=TOOLS)["tool_calls"][0]["function"][
        "arguments"] == {"safe": True, "query": "a"}
    assert not admits(required, "<function_calls>search_web(query=\"a\")</function_calls>")
    assert not admits(required, "<function_calls>search_web(query=\"a\", safe=true, query=\"b\")</function_calls>")


def test_a_tag_attribute_naming_the_value_type_follows_the_schema():
    # Kimi K3's chat template writes type="number" for any number (integers too), type="array"/"object"/"boolean"
    # for the others: the grammar writes the type the value's schema gives, as the model does
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "n": {"type": "integer"}, "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
        "s": {"type": "string"}}, "required": ["n", "ok", "tags", "s"]}}}]
    written = planning._plan("kimi-k3", tools, "").calls["f"].write({"n": 3, "ok": True, "tags": ["a"], "s": "x"})
    for key, kind in (("n", "number"), ("ok", "boolean"), ("tags", "array"), ("s", "string")):
        assert f'<|open|>argument key="{key}" type="{kind}"<|sep|>' in written, written
    assert rt.parse_response(written, "kimi-k3", prefix="", tools=tools)["tool_calls"][0]["function"]["arguments"] == {
        "n": 3, "ok": True, "tags": ["a"], "s": "x"}


def test_text_after_calls_that_end_the_answer_starts_on_a_new_line():
    # Mistral's calls have no closer: text after one on the same line would be read as part of it, text on a new
    # line that starts with a word is content (Devstral writes it so)
    case, output = corpus_output("mistral", "text_after_call_devstral_style")
    tag = structural_tag("mistral", case["tools"], prefix=case["prefix"])
    assert admits(tag, output)
    call = planning._plan("mistral", WEATHER, "").calls["get_weather"].write({"city": "Paris"})
    tag = structural_tag("mistral", WEATHER)
    assert admits(tag, call + "\nDone.") and not admits(tag, call + " Done.") and not admits(tag, call + "\n{}")
    message = rt.parse_response(call + "\nDone.", "mistral", prefix="", tools=WEATHER)
    assert message["content"] == "Done." and len(message["tool_calls"]) == 1
    # or after a blank line, as models write a closing sentence, where the parser reads that as content too
    assert admits(tag, call + "\n\nDone.") and not admits(tag, call + "\n\n{}")
    message = rt.parse_response(call + "\n\nDone.", "mistral", prefix="", tools=WEATHER)
    assert message["content"] == "Done." and len(message["tool_calls"]) == 1


def test_under_auto_the_last_call_may_stop_before_its_closer_where_the_parser_reads_it():
    # Qwen and Hermes models sometimes end their turn right after a call's JSON, before `</tool_call>`, or leave it
    # out before their next call; our parser reads those calls, so "auto" admits them among the calls that end the
    # answer; the forced modes write the closer
    form = planning._plan("hermes", WEATHER, "").calls["get_weather"]
    closed = form.write({"city": "Paris"})
    unclosed = closed[:-len(form.end)]
    auto = structural_tag("hermes", WEATHER)
    for text in (unclosed, unclosed + "\n", "Sure. " + unclosed, closed + "\n" + unclosed, unclosed + "\n" + closed,
                 "Sure. " + unclosed + "\n" + unclosed):
        assert admits(auto, text), text
        calls = rt.parse_response(text, "hermes", prefix="", tools=WEATHER)["tool_calls"]
        assert [call["function"]["arguments"] for call in calls] == [{"city": "Paris"}] * text.count("<tool_call>")
    for text in (unclosed + "\nDone.", unclosed + "\nDone. " + closed):
        assert not admits(auto, text), text
    single = structural_tag("hermes", WEATHER, parallel_tool_calls=False)
    assert admits(single, "Sure. " + unclosed) and not admits(single, closed + "\n" + unclosed)
    assert not admits(structural_tag("hermes", WEATHER, tool_choice="required"), unclosed)
    assert "the last call may stop before its closer" in " ".join(explain("hermes", WEATHER))
    # gpt-oss's too, before `<|call|>`, with the optional `<|constrain|>json` hint (it reads the same so)
    harmony = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}'
    assert admits(structural_tag("gpt-oss", WEATHER), harmony)
    assert rt.parse_response(harmony, "gpt-oss", prefix="", tools=WEATHER)["tool_calls"][0]["function"] == {
        "name": "get_weather", "arguments": {"city": "Paris"}}
    # where the parser does not read a call without its closer (LFM2's `<|tool_call_end|>`), none is admitted
    form = planning._plan("lfm2", WEATHER, "").calls["get_weather"]
    assert not admits(structural_tag("lfm2", WEATHER), form.write({"city": "Paris"})[:-len(form.end)])


def test_a_call_object_may_hold_its_keys_in_either_order():
    # Inkling's chat template writes {"args": ..., "name": ...}; Hermes' models write "name" first
    case, output = corpus_output("inkling", "call_first")
    assert '{"args":' in output
    assert admits(structural_tag("inkling", case["tools"], prefix=case["prefix"]), output)
    tag = structural_tag("hermes", WEATHER, tool_choice="required")
    for text in ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
                 '<tool_call>\n{"arguments": {"city": "Paris"}, "name": "get_weather"}\n</tool_call>'):
        assert admits(tag, text)
        assert rt.parse_response(text, "hermes", prefix="", tools=WEATHER)["tool_calls"][0]["function"] == {
            "name": "get_weather", "arguments": {"city": "Paris"}}
    assert not admits(tag, '<tool_call>\n{"arguments": {"city": "Paris"}}\n</tool_call>')


def test_a_template_that_reads_one_call_per_answer_is_given_one():
    # GigaChat 3 writes its call as a message after the text's `<|message_sep|>`; after a call the turn is over, so
    # a second call would be dropped: even with parallel calls allowed, the grammar writes one
    case, output = corpus_output("gigachat3", "text_then_call")
    assert output.startswith("Let me check.<|message_sep|>\n\nfunction call<|role_sep|>")
    assert admits(structural_tag("gigachat3", case["tools"], prefix=case["prefix"]), output)
    plan = planning._plan("gigachat3", WEATHER, "")
    assert plan.one_call
    call = plan.calls["get_weather"].write({"city": "Paris"})
    tag = structural_tag("gigachat3", WEATHER, tool_choice="required", parallel_tool_calls=True)
    assert admits(tag, call) and not admits(tag, call + "\n" + call)


def test_markers_are_spelled_as_the_prompt_spells_them():
    # Hunyuan's markers take an optional `:opensource` (Hy3 writes it, the preview does not): the grammar writes
    # the spelling the prompt shows, for the reasoning block, the calls and their arguments
    case = next(case for case in corpus("hunyuan3")["cases"] if case["name"] == "reasoning_text_and_parallel_calls")
    assert "<think:opensource>" in case["prefix"] and "</think:opensource>" not in case["prefix"]
    output = end_of_turn("hunyuan3", case["output"], case["prefix"], case["tools"])
    assert admits(structural_tag("hunyuan3", case["tools"], prefix=case["prefix"]), output)
    plan = planning._plan("hunyuan3", case["tools"], case["prefix"])
    assert plan.reasoning_open == "</think:opensource>"
    assert plan.calls["get_weather"].write({"city": "Paris"}).startswith("<tool_call:opensource>get_weather")
    preview = "<｜hy_User｜>What's the weather in Paris?<｜hy_Assistant｜><think>"
    plan = planning._plan("hunyuan3", case["tools"], preview)
    assert plan.reasoning_open == "</think>"
    assert plan.calls["get_weather"].write({"city": "Paris"}).startswith("<tool_call>get_weather")


def test_both_spellings_of_a_format_are_admitted_where_the_prompt_does_not_choose():
    # DeepSeek V4.1 writes its DSML markers with a space (`<｜DSML｜ invoke`, `<｜DSML｜ parameter`), V4 without:
    # each call is admitted in either spelling, its parameter tags spelled alike
    case, output = corpus_output("deepseek_v4", "v41_spaced_dsml_text_then_parallel_calls")
    assert "<｜DSML｜ parameter" in output
    assert admits(structural_tag("deepseek_v4", case["tools"], prefix=case["prefix"]), output)
    # Hunyuan with a prompt that shows no spelling: `<tool_call>` (preview) or `<tool_call:opensource>` (Hy3)
    plan = planning._plan("hunyuan3", WEATHER, "")
    assert plan.calls["get_weather"].begin == "<tool_call>"
    assert plan.spelled["get_weather"].begin == "<tool_call:opensource>"
    tag = structural_tag("hunyuan3", WEATHER, tool_choice="required")
    for form in (plan.calls["get_weather"], plan.spelled["get_weather"]):
        text = form.write({"city": "Paris"})
        assert admits(tag, text), text
        assert rt.parse_response(text, "hunyuan3", prefix="", tools=WEATHER)["tool_calls"][0]["function"][
            "arguments"] == {"city": "Paris"}


def test_a_run_of_any_character_but_a_few_in_a_call_opener_is_written_as_such():
    # Kimi K3 writes ` index="1"` where its opener has `[^<]*`; gpt-oss's `[^<]*` after the tool's name stays
    # whitespace (a letter there would lengthen the name)
    prefix = '<|open|>message role="assistant"<|sep|><|open|>think<|sep|>'
    call = planning._plan("kimi-k3", WEATHER, prefix).calls["get_weather"].write({"city": "Paris"})
    indexed = call.replace('"get_weather"', '"get_weather" index="1"', 1)
    text = "Thinking.<|close|>think<|sep|><|open|>tools<|sep|>" + indexed + "<|close|>tools<|sep|>"
    assert admits(structural_tag("kimi-k3", WEATHER, prefix=prefix), text)
    assert rt.parse_response(text, "kimi-k3", prefix=prefix, tools=WEATHER)["tool_calls"][0]["function"] == {
        "name": "get_weather", "arguments": {"city": "Paris"}}
    header = "<|channel|>commentary to=functions.get_weather{}<|constrain|>json<|message|>{{}}<|call|>"
    tag = structural_tag("gpt-oss", WEATHER, tool_choice="required")
    assert admits(tag, header.format(" ").replace("{}", '{"city": "Paris"}'))
    assert not admits(tag, header.format("x").replace("{}", '{"city": "Paris"}'))


def test_an_optional_run_that_stops_at_tags_is_written_with_its_own_class():
    # MiroThinker's `(?:<server_name>[^<]*</server_name>\s*)?`: server names as models write them (25 characters,
    # a hyphen) are admitted, up to 32 characters on one line; a `<` ends the run, as in the parser
    case, output = corpus_output("mirothinker", "mcp_call_after_reasoning_and_text")
    assert "<server_name>search_and_scrape_webpage</server_name>" in output
    tag = structural_tag("mirothinker", case["tools"], prefix=case["prefix"])
    assert admits(tag, output)
    assert rt.parse_response(output, "mirothinker", prefix=case["prefix"], tools=case["tools"]) == case["expected"]
    for name in ("tool-python", "x" * 32):
        assert admits(tag, output.replace("search_and_scrape_webpage", name)), name
    for name in ("a<b", "x" * 33, "a\nb"):
        assert not admits(tag, output.replace("search_and_scrape_webpage", name)), name


# Not met yet: the grammar admits one canonical shape per call (with optional whitespace, optional name
# decorations and section markers) and keeps the template's markers out of argument strings, so list forms,
# marker text inside string arguments and damaged shapes are refused. Kept running so that each template's refusals
# stay visible; the whole corpus has a floor below.
@pytest.mark.xfail(reason="corpus outputs in non-canonical shapes are not admitted yet (docs/grammar.md)", strict=False)
@pytest.mark.parametrize("name", ACCEPTED)
def test_corpus_outputs_with_calls_are_admitted_under_auto(name):
    refused, total = corpus_refusals(name)
    if not total:
        pytest.skip(f"no corpus output of {name} has calls of given tools")
    assert not refused, f"{len(refused)} of {total} corpus outputs refused: {refused}"


# The share of corpus outputs with calls that the grammar admits under "auto", over every template it compiles
# (360 of 441 when this floor was last set, the templates compiled for forced calls only counted as refusing under
# "auto": Apertus, whose text could open calls): it may grow, not shrink.
ADMITTED_FLOOR = 360


def test_the_share_of_corpus_outputs_admitted_does_not_shrink():
    counts = [corpus_refusals(name) for name in ACCEPTED]
    admitted = sum(total - len(refused) for refused, total in counts)
    assert admitted >= ADMITTED_FLOOR, f"{admitted} of {sum(total for _, total in counts)} corpus outputs admitted"


@functools.lru_cache(maxsize=None)
def corpus_refusals(name):
    """(the corpus outputs of `name` with calls of given tools that the grammar under "auto" refuses, how many
    there are)."""
    cases = [case for case in corpus(name)["cases"]
             if not case.get("truncated") and (case.get("expected") or {}).get("tool_calls") and case.get("tools")]
    refused = []
    for case in cases:
        try:
            tag = structural_tag(name, case["tools"], prefix=case["prefix"])
        except GrammarError as error:
            refused.append((case["name"], f"not compiled: {error}"))
            continue
        # the end-of-turn token is the engine's stop token, not text the grammar writes
        output = end_of_turn(name, case["output"], case["prefix"], case["tools"])
        if not admits(tag, output):
            refused.append((case["name"], output))
    return refused, len(cases)


def test_the_calls_of_tools_behind_one_opener_are_one_json_schema():
    # xgrammar builds the automaton of a JSON schema's excluded texts once per json_schema element: ten tools behind
    # Qwen3's `<tool_call>` are one element whose alternatives are their call objects (each in both key orders),
    # not twenty elements (seconds of compile time); the language is the same
    tools = [{"type": "function", "function": {"name": f"tool_{at}", "parameters": {
        "type": "object", "properties": {"x": {"type": "string"}, "n": {"type": "integer"}}, "required": ["x"]}}}
        for at in range(10)]
    tag = structural_tag("qwen3", tools, tool_choice="required")
    found = [node for node in formats_of(tag) if node.get("type") == "json_schema"]
    assert len(found) == 1 and len(found[0]["json_schema"]["anyOf"]) == 20
    for text in ('<tool_call>\n{"name": "tool_0", "arguments": {"x": "a"}}\n</tool_call>',
                 '<tool_call>\n{"arguments": {"x": "a", "n": 2}, "name": "tool_9"}\n</tool_call>'):
        assert admits(tag, text)
        call = rt.parse_response(text, "qwen3", prefix="", tools=tools)["tool_calls"][0]["function"]
        assert call["name"] in ("tool_0", "tool_9") and call["arguments"]["x"] == "a"
    for text in ('<tool_call>\n{"name": "tool_10", "arguments": {"x": "a"}}\n</tool_call>',
                 '<tool_call>\n{"name": "tool_1", "arguments": {"n": 2}}\n</tool_call>',
                 '<tool_call>\n{"name": "tool_1", "arguments": {"x": "a}</tool_call>"}}\n</tool_call>'):
        assert not admits(tag, text)


def test_an_object_of_any_members_is_refused_where_closers_meeting_inside_it_would_end_the_call():
    # inside an object of any members the grammar may write any JSON, so closers meeting too: Apertus's call ends at
    # `}}` before `, {"NAME": {` (the next call), which a list of such objects also holds
    free = [{"type": "function", "function": {"name": "search_web", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}, "filters": {"type": "object"}}}}}]
    nested = '{"query": "x", "filters": {"k": [{"k": {"k": 1}}, {"k": {"k": 2}}]}}'
    with pytest.raises(ValueError, match="not valid JSON"):
        rt.parse_response(f'<|tools_prefix|>[{{"search_web": {nested}}}]<|tools_suffix|>', "apertus", prefix="",
                          tools=free)
    with pytest.raises(GrammarError, match="closers meet"):
        structural_tag("apertus", free, tool_choice="required")
    # a template whose calls such JSON cannot end keeps compiling it, and the call reads back whole
    tag = structural_tag("qwen3", free, tool_choice="required")
    text = f'<tool_call>\n{{"name": "search_web", "arguments": {nested}}}\n</tool_call>'
    assert admits(tag, text)
    assert rt.parse_response(text, "qwen3", prefix="", tools=free)["tool_calls"][0]["function"]["arguments"] == (
        json.loads(nested))


def test_calls_that_are_the_items_of_one_list_are_written_as_that_list():
    # Apertus's chat template writes its calls as one list, `, ` between them; the next call opens with
    # `, {"NAME": ` after the previous call's `}`, anywhere in the text, so text cannot stand beside the calls
    case, output = corpus_output("apertus", "text_and_parallel_calls")
    assert '}}, {"search_web"' in output
    for choice in ("auto", "none"):
        with pytest.raises(GrammarError, match="wherever it follows a call's end"):
            structural_tag("apertus", case["tools"], prefix=case["prefix"], tool_choice=choice)
    required = structural_tag("apertus", case["tools"], prefix=case["prefix"], tool_choice="required")
    calls = output[output.index("<|tools_prefix|>"):]
    assert admits(required, calls)
    assert [call["function"]["name"] for call in rt.parse_response(
        calls, "apertus", prefix=case["prefix"], tools=case["tools"])["tool_calls"]] == ["get_weather", "search_web"]
    single = structural_tag("apertus", case["tools"], prefix=case["prefix"], tool_choice="required",
                            parallel_tool_calls=False)
    assert not admits(single, calls)
    assert not admits(required, "Checking." + calls)  # no text beside them

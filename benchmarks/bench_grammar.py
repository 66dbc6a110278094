"""Cost of the tool-call constraint: our structural tags against xgrammar's hand-written ones, same run.

    python benchmarks/bench_grammar.py [--quick] [--tools N] [NAME ...]

For each library template that xgrammar 0.2.9 also covers by name (`get_model_structural_tag`), with two tools
(one string/integer, one with an object, a list and a boolean; `--tools N`: N tools, copies of those two under
other names, as an agent's tool set), under tool_choice "auto" ("required" for
templates compiled for forced calls only): the time to build the tag (the first call in the process, which runs
the compiler's probes, and the median of later calls), the tag's size, and xgrammar's compile time (its cache off)
for both tags over a 32,000-token vocabulary (random pieces of text plus the template's markers). Prints medians
and our/xgrammar ratios; xgrammar's tags are not the same constraint (they keep fewer markers out of strings, and
write other spellings), so the ratio is a cost comparison, not a claim of equivalence.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import response_templates as rt  # noqa: E402
from response_templates.integrations.grammar import structural_tag  # noqa: E402
from response_templates.integrations.grammar.patterns import _markers  # noqa: E402

# our library template -> xgrammar's name for the same format
PEERS = {
    "qwen3": "qwen_3", "qwen3.5": "qwen_3_5", "qwen3-coder": "qwen_3_coder", "deepseek_r1": "deepseek_r1",
    "deepseek_v3.1": "deepseek_v3_1", "deepseek_v3.2": "deepseek_v3_2", "deepseek_v4": "deepseek_v4",
    "kimi-k2": "kimi", "kimi-k3": "kimi_k3", "glm": "glm_4_7", "gpt-oss": "harmony", "minimax_m2": "minimax",
    "minimax_m3": "minimax_m3", "gemma-4": "gemma_4", "mimo": "mimo", "cohere-command": "cohere", "llama3.1": "llama",
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "search_web", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}, "safe": {"type": "boolean"},
                                         "filters": {"type": "object", "properties": {"lang": {"type": "string"}}},
                                         "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["query"]}}},
]


def _tools(count: int) -> list:
    """`count` tools: the two above, then copies of them under other names."""
    tools = []
    for at in range(count):
        tool = copy.deepcopy(TOOLS[at % 2])
        tool["function"]["name"] += "" if at < 2 else f"_{at}"
        tools.append(tool)
    return tools


def _vocabulary(markers: list) -> list:
    rng = random.Random(0)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,:;{}[]()<>|\"'=/\\\n\t"
    words = {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8))) for _ in range(40000)}
    return sorted(words)[:32000] + [marker for marker in markers if marker not in words] + ["<eos>"]


def _compile_ms(xgr, info, tag: dict, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        xgr.GrammarCompiler(info, cache_enabled=False).compile_structural_tag(json.dumps(tag))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="library templates (default: every one xgrammar also covers)")
    parser.add_argument("--quick", action="store_true", help="fewer repeats (3 instead of 7)")
    parser.add_argument("--tools", type=int, default=2, metavar="N", help="how many tools (default 2)")
    args = parser.parse_args(argv)
    try:
        import xgrammar as xgr
        from xgrammar.builtin_structural_tag import get_model_structural_tag
    except ImportError:
        print("xgrammar is not installed: pip install 'response-templates[grammar]'", file=sys.stderr)
        return 2
    unknown = [name for name in args.names if name not in PEERS]
    if unknown:
        print(f"no xgrammar peer for {', '.join(unknown)}; known: {', '.join(PEERS)}", file=sys.stderr)
        return 2
    if args.tools < 1:
        print("--tools must be at least 1", file=sys.stderr)
        return 2
    repeats = 3 if args.quick else 7
    tools = _tools(args.tools)
    rows, ratios = [], []
    print(f"{'template':16} {'first ms':>9} {'build ms':>9} {'KB':>7} {'xgr KB':>7} {'compile ms':>11} "
          f"{'xgr ms':>8} {'ours/xgr':>9}")
    for name in args.names or list(PEERS):
        choice = "auto"
        start = time.perf_counter()
        try:
            ours = structural_tag(name, tools, tool_choice=choice)
        except rt.GrammarError:
            choice = "required"
            ours = structural_tag(name, tools, tool_choice=choice)
        first = (time.perf_counter() - start) * 1000
        builds = []
        for _ in range(repeats):
            start = time.perf_counter()
            structural_tag(name, tools, tool_choice=choice)
            builds.append((time.perf_counter() - start) * 1000)
        peer = get_model_structural_tag(PEERS[name], tools, tool_choice=choice).model_dump(exclude_none=True)
        words = _vocabulary(_markers(rt.get_template(name)))
        info = xgr.TokenizerInfo(words, stop_token_ids=[len(words) - 1])
        compiled, peer_compiled = _compile_ms(xgr, info, ours, repeats), _compile_ms(xgr, info, peer, repeats)
        ratio = compiled / peer_compiled
        ratios.append(ratio)
        rows.append(name)
        print(f"{name:16} {first:9.1f} {statistics.median(builds):9.1f} {len(json.dumps(ours)) / 1024:7.1f} "
              f"{len(json.dumps(peer)) / 1024:7.1f} {compiled:11.1f} {peer_compiled:8.1f} {ratio:8.2f}x"
              + ("  (required)" if choice == "required" else ""), flush=True)
    print(f"median compile ratio ours/xgrammar over {len(rows)} templates: {statistics.median(ratios):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

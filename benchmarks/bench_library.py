"""Streaming cost of every library template: does a chunk cost the same in a short and a long generation?

    python benchmarks/bench_library.py

For each template, the longest complete output of its corpus is preceded by ordinary prose (4K, then 32K
characters) and fed 4 characters at a time. Prints microseconds per chunk for both and their ratio; a ratio well
above 1 means the template's delimiters make streaming cost grow with the output (for example a regex whose
partial matching keeps text on hold), which is a bug in that template. Medians are not taken: this is a screen
for growth, not a speed measurement; run benchmarks/bench_parsing.py for speed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import response_templates as rt  # noqa: E402

CORPORA = Path(__file__).resolve().parents[1] / "tests" / "data" / "corpora"
PROSE = "Lorem ipsum dolor sit amet, the weather is fine today. "


def per_chunk(template: dict, prefix: str, text: str) -> float:
    chunks = [text[i:i + 4] for i in range(0, len(text), 4)]
    parser = rt.ResponseParser(template, prefix=prefix)
    start = time.perf_counter()
    for chunk in chunks:
        parser.feed(chunk)
    parser.finalize()
    return (time.perf_counter() - start) / len(chunks) * 1e6


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    print(f"{'template':24} {'4K µs/chunk':>12} {'32K µs/chunk':>13} {'ratio':>6}")
    worst = 0.0
    for path in sorted(CORPORA.glob("*.json")):
        corpus = json.loads(path.read_text(encoding="utf-8"))
        template = rt.get_template(corpus["template"])
        cases = [case for case in corpus["cases"] if not case.get("truncated")]
        case = max(cases, key=lambda case: len(case["output"]))
        short, long = (
            per_chunk(template, case["prefix"], (PROSE * (size // len(PROSE) + 1))[:size] + case["output"])
            for size in (4_000, 32_000)
        )
        worst = max(worst, long / short)
        print(f"{corpus['template']:24} {short:12.2f} {long:13.2f} {long / short:6.2f}")
    print(f"\nlargest ratio: {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

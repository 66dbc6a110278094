"""Benign parses under CPU pressure from other threads: how many raise RegexTimeoutError?

    python benchmarks/bench_thread_pressure.py --busy 0 8 --parses 150

While N threads of the same process spin in pure Python (they hold the GIL most of the time), the main thread
parses the longest corpus case of each library template that have regex delimiters (each output is benign: it parses in
milliseconds alone). Prints, for each N, how many parses raised `RegexTimeoutError` and the longest wall time of
one parse. The regex time limit is meant to stop hostile templates, not to fail valid output because the machine
is busy: the count should be 0 whatever N is. (Issue 31, item 1; a screen, not a speed measurement.)
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import response_templates as rt
from response_templates.core.errors import RegexTimeoutError

CORPORA = Path(__file__).resolve().parents[1] / "tests" / "data" / "corpora"
PATTERN_KEYS = ("open_pattern", "close_pattern", "start_anchor_pattern", "tag_pattern")


def _has_pattern(value) -> bool:
    if isinstance(value, dict):
        return any(key in PATTERN_KEYS or _has_pattern(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_pattern(item) for item in value)
    return False


def cases(corpora: Path) -> list[tuple[str, dict]]:
    found = []
    for path in sorted(corpora.glob("*.json")):
        corpus = json.loads(path.read_text(encoding="utf-8"))
        if _has_pattern(rt.get_template(corpus["template"])):
            # the longest output of each template: the more searches a parse runs, the more often it waits for the GIL
            found.append((corpus["template"], max(corpus["cases"], key=lambda case: len(case["output"]))))
    return found


def _spin(stop: threading.Event) -> None:
    count = 0
    while not stop.is_set():
        for _ in range(1000):
            count += 1


def run(busy: int, work: list[tuple[str, dict]], parses: int) -> tuple[int, int, float]:
    """(parses that raised RegexTimeoutError, parses done, longest wall time of one parse in seconds)."""
    stop = threading.Event()
    threads = [threading.Thread(target=_spin, args=(stop,), daemon=True) for _ in range(busy)]
    for thread in threads:
        thread.start()
    timeouts = done = 0
    worst = 0.0
    try:
        for name, case in itertools.islice(itertools.cycle(work), parses):
            template = rt.get_template(name)
            start = time.monotonic()
            try:
                rt.parse_response(case["output"], template, prefix=case["prefix"], tools=case.get("tools"))
            except RegexTimeoutError:
                timeouts += 1
            except ValueError:
                pass  # a damaged case of the corpus: not a timeout
            worst = max(worst, time.monotonic() - start)
            done += 1
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    return timeouts, done, worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 8], help="numbers of busy threads to try")
    parser.add_argument("--parses", type=int, default=150, help="parses per number of busy threads")
    parser.add_argument("--corpora", type=Path, default=CORPORA)
    args = parser.parse_args(argv)
    work = cases(args.corpora)
    print(f"regex time limit {rt.get_regex_timeout()} s; {len(work)} corpus cases of templates with regex delimiters")
    for busy in args.busy:
        timeouts, done, worst = run(busy, work, args.parses)
        print(f"busy threads {busy:3d}: {timeouts:4d} of {done} benign parses raised RegexTimeoutError; "
              f"longest parse {worst:.2f} s wall")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

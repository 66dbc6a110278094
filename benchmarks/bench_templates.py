"""Speed of every library template: this package, transformers' built-in parser and a floor, in the same run.

    python benchmarks/bench_templates.py                 # full run (about 3-5 minutes)
    python benchmarks/bench_templates.py --quick         # smaller sizes, fewer repeats (under a minute)
    python benchmarks/bench_templates.py qwen3 mistral   # only these templates
    python benchmarks/bench_templates.py --short         # only the short-stream column (about a minute)

With RESPONSE_TEMPLATES_TRANSFORMERS_TESTS pointing at a copy of transformers' tests/utils/test_chat_parsing.py (or
--transformers-tests PATH), the short-stream column also covers the templates that file defines (read from it, not
copied here) on a generation of each one's format.

Texts are built from each template's corpus (tests/data/corpora/<name>.json): the corpus case with the most kinds
of fields (reasoning, text, tool calls) has its reasoning and text scaled up with prose that holds `<`, `>`,
unicode, emoji, runs of spaces and blank lines, so the generation looks like a real one (the message keeps the
corpus case's structure; the run checks that ours and transformers agree on it).

Per template, printed in one row (medians of the repeats):
  stream µs/chunk   the generation (128K characters; --quick 32K) fed 4 characters at a time, per chunk: the floor,
                    ours, transformers, and the ratios ours/floor and transformers/ours. The floor is the least any
                    streaming parser does: append each chunk, and run one compiled partial search for the template's
                    literal markers (the text its delimiters must contain) from a moving position.
  2K stream         a short generation (about 2,000 characters, the common case on a server) fed in tokens of 2-6
                    characters, each stream built, fed and finalized: ours in µs per token, and transformers' time /
                    ours (median over rounds that each run both back to back, in process CPU time; above 1: ours is
                    faster). The set-up of a stream counts here, where it is a large share.
  growth            ours per chunk at 512K divided by ours per chunk at 16K (--quick: 128K / 8K); 1.0 is flat.
  one-shot          one parse_response of the same generation: transformers' time / ours (median over rounds that
                    each run both back to back, in process CPU time).
  batch             1000 parse_response calls of the corpus cases (short messages): transformers' time / ours (the
                    same way, 7 rounds; --quick 5).
  feed 1MB          one feed() of a 1 MB generation (--quick 256K) divided by the same text fed in 4-character chunks
                    (below 1 means one big feed is no slower per character than small chunks: linear).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import regex

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import response_templates as rt  # noqa: E402
from response_templates.core.template import load_template  # noqa: E402

try:  # the reference implementation, when this transformers has one (5.20 and later)
    from transformers.utils.chat_parsing import ResponseParser as ReferenceParser
    from transformers.utils.chat_parsing import parse_response as reference_parse
except Exception:  # pragma: no cover - depends on the installed transformers
    ReferenceParser = reference_parse = None

CORPORA = Path(__file__).resolve().parents[1] / "tests" / "data" / "corpora"
PROSE = (
    "The forecast for Paris says 18 °C with light rain, so if x < 10 we stay in and otherwise we go out.  "
    "Ça va — 天气很好 🌤 today.\nCompare a<b with b > c, then weigh   the    options once more; "
    "nothing here is final.\n\n"
)


def comparable(case: dict) -> bool:
    """A complete corpus case that transformers parses as we do (deliberate differences are marked in the corpus)."""
    return not case.get("truncated") and "transformers_differs" not in case


def pick_case(corpus: dict) -> dict:
    """The complete corpus case with the most kinds of fields (then the longest output), among those transformers
    parses as we do (the run compares the two; deliberate differences are marked `transformers_differs`)."""
    cases = [case for case in corpus["cases"] if comparable(case)]

    def score(case):
        expected = case["expected"]
        kinds = sum(1 for key in ("reasoning_content", "content", "tool_calls") if expected.get(key))
        return kinds, len(case["output"])

    return max(cases, key=score)


def generation(case: dict, size: int) -> str:
    """The case's output with its reasoning and text grown by prose to about `size` characters."""
    output = case["output"]
    expected = case["expected"]
    spots = []
    for key, share in (("reasoning_content", 0.6), ("content", 0.4)):
        value = expected.get(key)
        if isinstance(value, str) and len(value.strip()) >= 4 and value in output:
            spots.append((value, share))
    if not spots:  # only calls: grow the text before them
        spots = [("", 1.0)]
    missing = max(0, size - len(output))
    total = sum(share for _, share in spots)
    for value, share in spots:
        amount = int(missing * share / total)
        filler = (PROSE * (amount // len(PROSE) + 1))[:amount]
        if value:
            output = output.replace(value, value + " " + filler.rstrip() + ".", 1)
        else:
            output = filler + output
    return output


def chunks_of(text: str, size: int = 4) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


_META = regex.compile(r"\(\?(?:P?<\w+>|<=|<!|[:=!])|\[(?:\\.|[^\]])*\]|\\[AbBdDsSwWZ]|\\(.)|[(){}?*+.^$|]")


def markers(template: dict) -> str:
    """A regex of the literal text the template's delimiters spell (for the floor): the literal delimiters, and the
    runs of literal characters (3 or more) in regex delimiters."""
    compiled = load_template(template)
    pieces = set()
    for field in compiled.fields.values():
        for delimiter in (field.open, field.close):
            if delimiter is None:
                continue
            if delimiter.literals is not None:
                pieces.update(delimiter.literals)
            else:
                runs = _META.sub(lambda m: m.group(1) or "\0", delimiter.regex.pattern).split("\0")
                pieces.update(run for run in runs if len(run) >= 3)
    return "|".join(regex.escape(piece) for piece in sorted(pieces, key=lambda piece: (-len(piece), piece)))


def stream_floor(pattern, chunks: list[str]) -> None:
    parts: list[str] = []
    text, position = "", 0
    search = pattern.search
    for chunk in chunks:
        parts.append(chunk)
        text += chunk
        found = search(text, position, partial=True)
        if found is None:
            position = len(text)
        elif found.partial:
            position = found.start()
        else:
            position = found.end()
        # A match holds a reference to `text`: drop it, or the next append copies the whole text (quadratic).
        found = None


def stream_ours(template, prefix: str, chunks: list[str]) -> dict:
    parser = rt.ResponseParser(template, prefix=prefix)
    for chunk in chunks:
        parser.feed(chunk)
    return parser.finalize()[0]


def stream_reference(template, prefix: str, chunks: list[str]) -> dict:
    parser = ReferenceParser(template, prefix=prefix)
    for chunk in chunks:
        parser.feed(chunk)
    return parser.finalize()[0]


def tokens_of(text: str, seed: int = 0) -> list[str]:
    """The text cut into tokens of 2 to 6 characters (a fixed pseudo-random sequence of sizes)."""
    sizes = random.Random(seed)
    tokens, at = [], 0
    while at < len(text):
        size = sizes.randint(2, 6)
        tokens.append(text[at:at + size])
        at += size
    return tokens


SHORT_SIZE = 2_000


def short_stream(template, compiled, prefix: str, text: str, rounds: int) -> tuple[float, float | None]:
    """The 2K stream column: ours in µs per token (construct, feed every token, finalize) and transformers' time /
    ours, medians over `rounds` rounds of 10 streams each side."""
    tokens = tokens_of(text)
    streams = 10

    def ours():
        for _ in range(streams):
            stream_ours(compiled, prefix, tokens)

    def reference():
        for _ in range(streams):
            stream_reference(template, prefix, tokens)

    ours()  # warm: the first stream of a template builds its one-time plans
    mine, ratio = paired(ours, reference if ReferenceParser is not None else None, rounds)
    return mine / streams / len(tokens) * 1e6, ratio


# Generations in the format of each template transformers' own test file defines (the templates are read from that
# file, see transformers_test_templates): {r} and {c} are filled with prose up to SHORT_SIZE characters.
TRANSFORMERS_TEST_SAMPLES = {
    "cohere_template": (
        "<|START_THINKING|>{r}<|END_THINKING|><|START_RESPONSE|>{c}<|END_RESPONSE|><|START_ACTION|>[{{\"tool_call_id\": "
        "\"0\", \"tool_name\": \"get_weather\", \"parameters\": {{\"city\": \"Paris\"}}}}]<|END_ACTION|>"
    ),
    "ernie_template": (
        "{r}\n</think>\n\n<response>\n{c}\n</response>\n<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": "
        "{{\"city\": \"Paris\"}}}}\n</tool_call>\n"
    ),
    "gpt_oss_template": (
        "<|channel|>analysis<|message|>{r}<|end|><|start|>assistant<|channel|>final<|message|>{c}<|end|><|start|>assistant"
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{{\"city\": \"Paris\"}}<|call|>"
    ),
    "smollm_template": (
        "<think>{r}</think>{c}<tool_call>{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"Paris\"}}}}"
        "</tool_call><|im_end|>"
    ),
    "qwen3_template": (
        "<think>{r}</think>{c}<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
        "</tool_call>"
    ),
    "gemma4_template": (
        "<|channel>thought\n{r}<channel|>{c}<|tool_call>call:get_weather{{city:<|\"|>Paris<|\"|>}}<tool_call|><turn|>"
    ),
    "inkling_template": (
        "<|content_thinking|>{r}<|end_message|><|message_model|>assistant<|content_text|>{c}<|end_message|>"
        "<|message_model|>assistant<|content_invoke_tool_json|>{{\"name\": \"get_weather\", \"args\": {{\"city\": "
        "\"Paris\"}}}}<|end_message|>"
    ),
}


def transformers_test_templates(path: str | None) -> dict[str, dict]:
    """The module-level `*_template` dicts of transformers' tests/utils/test_chat_parsing.py (a file, or a folder
    holding it), read without importing it; plus the gpt-oss one with a dotted tool name (`[\\w.-]+`), a common
    variant whose lazy `.*?` after the name made short streams slow (issue 29). Empty without a path."""
    if not path:
        return {}
    file = Path(path)
    if file.is_dir():
        file = file / "test_chat_parsing.py"
    found = {}
    for node in ast.parse(file.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name.endswith("_template") and name in TRANSFORMERS_TEST_SAMPLES:
                found[name] = ast.literal_eval(node.value)
    if "gpt_oss_template" in found:
        dotted = json.loads(json.dumps(found["gpt_oss_template"]))
        opener = dotted["fields"]["tool_calls"]["open_pattern"]
        dotted["fields"]["tool_calls"]["open_pattern"] = opener.replace("(?P<name>\\w+)", "(?P<name>[\\w.-]+)")
        found["gpt_oss_template[dotted]"] = dotted
    return found


def run_transformers_test(name: str, template: dict, quick: bool) -> dict:
    """The 2K stream column for one of transformers' test templates."""
    sample = TRANSFORMERS_TEST_SAMPLES[name.split("[")[0]]
    room = max(0, SHORT_SIZE - len(sample.format(r="", c="")))
    reasoning = (PROSE * (room // len(PROSE) + 1))[: room * 6 // 10].rstrip() + "."
    content = (PROSE * (room // len(PROSE) + 1))[: room * 4 // 10].rstrip() + "."
    text = sample.format(r=reasoning, c=content)
    compiled = load_template(template)
    ours_message = stream_ours(compiled, "", tokens_of(text))
    assert ours_message == rt.parse_response(text, compiled, prefix=""), f"{name}: stream != one-shot"
    if ReferenceParser is not None:
        assert ours_message == reference_parse(text, template, prefix=""), f"{name}: ours and transformers differ"
    row = {"template": name, "chars": len(text)}
    row["short_us"], row["short_ratio"] = short_stream(template, compiled, "", text, 5 if quick else 9)
    return row


def median_time(function, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def paired(ours, reference, rounds: int) -> tuple[float, float | None]:
    """Our median time and the median of transformers' time / ours over `rounds` rounds that each time both back to
    back (process CPU time): a load that comes and goes on a shared machine weighs on both sides of a round alike."""
    times, ratios = [], []
    for _ in range(rounds):
        start = time.process_time()
        ours()
        mine = time.process_time() - start
        times.append(mine)
        if reference is not None:
            start = time.process_time()
            reference()
            ratios.append((time.process_time() - start) / mine)
    return statistics.median(times), (statistics.median(ratios) if ratios else None)


def run(name: str, quick: bool, short_only: bool = False) -> dict:
    corpus = json.loads((CORPORA / f"{name}.json").read_text(encoding="utf-8"))
    template = rt.get_template(name)
    compiled = load_template(template)
    case = pick_case(corpus)
    prefix = case["prefix"]
    short_text = generation(case, SHORT_SIZE)
    short_message = stream_ours(compiled, prefix, tokens_of(short_text))
    assert short_message == rt.parse_response(short_text, compiled, prefix=prefix), f"{name}: 2K stream != one-shot"
    if ReferenceParser is not None:
        assert short_message == reference_parse(short_text, template, prefix=prefix), f"{name}: 2K: ours != transformers"
    short_us, short_ratio = short_stream(template, compiled, prefix, short_text, 5 if quick else 9)
    if short_only:
        return {"template": name, "chars": len(short_text), "short_us": short_us, "short_ratio": short_ratio}
    size = 32_000 if quick else 128_000
    small, large = (8_000, 128_000) if quick else (16_000, 512_000)
    repeats = 3 if quick else 5
    text = generation(case, size)
    chunks = chunks_of(text)
    ours_message = stream_ours(compiled, prefix, chunks)
    assert ours_message == rt.parse_response(text, compiled, prefix=prefix), f"{name}: stream != one-shot"
    have_reference = ReferenceParser is not None
    if have_reference:
        reference_message = reference_parse(text, template, prefix=prefix)
        assert ours_message == reference_message, f"{name}: ours and transformers differ on the benchmark text"
    floor_pattern = regex.compile(markers(template), regex.DOTALL)
    row = {"template": name, "chars": len(text), "short_us": short_us, "short_ratio": short_ratio}
    per_chunk = 1e6 / len(chunks)
    row["floor"] = median_time(lambda: stream_floor(floor_pattern, chunks), repeats) * per_chunk
    row["ours"] = median_time(lambda: stream_ours(compiled, prefix, chunks), repeats) * per_chunk
    row["transformers"] = (
        median_time(lambda: stream_reference(template, prefix, chunks), 1 if not quick else 1) * per_chunk
        if have_reference
        else None
    )
    growth = []
    for grow_size in (small, large):
        grow_chunks = chunks_of(generation(case, grow_size))
        growth.append(
            median_time(lambda: stream_ours(compiled, prefix, grow_chunks), repeats if grow_size < large else 3)
            / len(grow_chunks)
        )
    row["growth"] = growth[1] / growth[0]
    one_ours, one_ratio = paired(
        lambda: rt.parse_response(text, compiled, prefix=prefix),
        (lambda: reference_parse(text, template, prefix=prefix)) if have_reference else None,
        max(repeats, 5),
    )
    row["oneshot_ours_ms"] = one_ours * 1e3
    if one_ratio is not None:
        row["oneshot_ratio"] = one_ratio
    batch = [case for case in corpus["cases"] if comparable(case)]
    batch = (batch * (1000 // len(batch) + 1))[:1000]
    batch_ours, batch_ratio = paired(
        lambda: [rt.parse_response(c["output"], template, prefix=c["prefix"]) for c in batch],
        (lambda: [reference_parse(c["output"], template, prefix=c["prefix"]) for c in batch]) if have_reference else None,
        5 if quick else 7,
    )
    row["batch_ours_per_s"] = 1000 / batch_ours
    if batch_ratio is not None:
        row["batch_ratio"] = batch_ratio
    big = generation(case, 256_000 if quick else 1_000_000)
    big_chunks = chunks_of(big)

    def one_feed():
        parser = rt.ResponseParser(compiled, prefix=prefix)
        parser.feed(big)
        parser.finalize()

    row["feed_ratio"] = median_time(one_feed, 3) / median_time(lambda: stream_ours(compiled, prefix, big_chunks), 1)
    return row


def main(argv: list[str] | None = None) -> int:
    options = argparse.ArgumentParser(
        description="Speed of every library template: ours, transformers' parser and a floor, in the same run.",
        epilog="See the module docstring (or the README's Benchmarks section) for what each column measures.",
    )
    options.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats (under a minute)")
    options.add_argument("--short", action="store_true", help="only the 2K stream column")
    options.add_argument(
        "--transformers-tests",
        default=os.environ.get("RESPONSE_TEMPLATES_TRANSFORMERS_TESTS"),
        help="transformers' tests/utils/test_chat_parsing.py (or its folder): its templates join the 2K stream column "
        "(default: $RESPONSE_TEMPLATES_TRANSFORMERS_TESTS)",
    )
    options.add_argument("templates", nargs="*", help="library template names (default: all)")
    args = options.parse_args(argv)
    names = args.templates or rt.list_templates()
    unknown = sorted(set(names) - set(rt.list_templates()))
    if unknown:
        options.error(f"unknown template(s) {unknown}; see response-templates list")
    if args.short:
        print("2K stream: a ~2,000-character generation in 2-6 character tokens, built + fed + finalized")
        print(f"{'template':26} {'ours µs/token':>13} {'transformers/ours':>17}")
    else:
        header = (
            f"{'template':22} {'floor':>6} {'ours':>6} {'transf.':>7} {'ours/':>6} {'transf./':>8} {'growth':>7} "
            f"{'one-shot':>9} {'batch':>7} {'feed 1MB':>9} {'2K stream':>9}"
        )
        print("stream: µs per 4-character chunk; ratios: transformers' time / ours; growth: per-chunk large / small")
        print(header)
        print(
            f"{'':22} {'':>6} {'':>6} {'':>7} {'floor':>6} {'ours':>8} {'':>7} {'tf/ours':>9} {'tf/ours':>7} "
            f"{'/chunked':>9} {'tf/ours':>9}"
        )
    rows = []

    def short_line(row):
        ratio = row["short_ratio"] if row["short_ratio"] is not None else float("nan")
        print(f"{row['template']:26} {row['short_us']:13.2f} {ratio:16.2f}x", flush=True)

    for name in names:
        row = run(name, args.quick, args.short)
        rows.append(row)
        if args.short:
            short_line(row)
            continue
        transformers = row["transformers"]
        print(
            f"{name:22} {row['floor']:6.2f} {row['ours']:6.2f} "
            f"{transformers if transformers is not None else float('nan'):7.2f} {row['ours'] / row['floor']:5.2f}x "
            f"{(transformers or float('nan')) / row['ours']:7.1f}x {row['growth']:6.2f}x "
            f"{row.get('oneshot_ratio', float('nan')):8.1f}x {row.get('batch_ratio', float('nan')):6.1f}x "
            f"{row['feed_ratio']:8.2f}x {row['short_ratio'] or float('nan'):8.2f}x",
            flush=True,
        )
    test_rows = []
    for name, template in transformers_test_templates(args.transformers_tests).items():
        if not test_rows:
            print("\ntransformers' own test templates (2K stream only)")
        row = run_transformers_test(name, template, args.quick)
        test_rows.append(row)
        short_line(row)

    def med(key, among=rows):
        values = [row[key] for row in among if row.get(key) is not None]
        return statistics.median(values) if values else float("nan")

    def worst(key, high=True, among=rows):
        values = [(row[key], row["template"]) for row in among if row.get(key) is not None]
        return (max if high else min)(values) if values else (float("nan"), "-")

    short = (
        f"2K stream {med('short_ratio'):.2f}x (least {worst('short_ratio', False)[0]:.2f}x "
        f"{worst('short_ratio', False)[1]})"
    )
    if test_rows:
        least = worst("short_ratio", False, test_rows)
        short += f"; transformers' test templates {med('short_ratio', test_rows):.2f}x (least {least[0]:.2f}x {least[1]})"
    if args.short:
        print(f"\nmedian transformers/ours: {short}")
        return 0
    ours_floor = [row["ours"] / row["floor"] for row in rows]
    speedup = [row["transformers"] / row["ours"] for row in rows if row["transformers"]]
    print(
        f"\nmedian: ours/floor {statistics.median(ours_floor):.2f}x (worst {max(ours_floor):.2f}x), "
        f"transformers/ours {statistics.median(speedup) if speedup else float('nan'):.1f}x "
        f"(least {min(speedup) if speedup else float('nan'):.1f}x), growth {med('growth'):.2f}x "
        f"(worst {worst('growth')[0]:.2f}x {worst('growth')[1]}), one-shot {med('oneshot_ratio'):.1f}x "
        f"(least {worst('oneshot_ratio', False)[0]:.1f}x {worst('oneshot_ratio', False)[1]}), "
        f"batch {med('batch_ratio'):.1f}x (least {worst('batch_ratio', False)[0]:.1f}x {worst('batch_ratio', False)[1]}), "
        f"feed 1MB/chunked {med('feed_ratio'):.2f}x (worst {worst('feed_ratio')[0]:.2f}x {worst('feed_ratio')[1]}), "
        f"{short}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Parsing speed: response-templates against transformers' built-in parser and a floor, in the same run.

    python benchmarks/bench_parsing.py            # full run (2K, 16K, 128K, 512K characters)
    python benchmarks/bench_parsing.py --quick    # smaller sizes, fewer repeats
    python benchmarks/bench_parsing.py --plain    # text without characters outside Latin-1 (cheaper to copy)

Streaming: a Qwen3-style generation (reasoning, text, tool calls) fed ~4 characters at a time, special tokens whole.
Reported per chunk (median of the repeats, in microseconds). The floor is the least any streaming parser must do: a
loop that appends each chunk to a list and runs one compiled search for the next delimiter from a moving position.
One-shot: the same texts parsed in one call. Short: 1000 one-shot parses of ~300-character messages.
Peers are measured in the same process, so compare the ratios: the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import regex

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from response_templates import ResponseParser, parse_response  # noqa: E402

try:  # the reference implementation, when this transformers has one (5.20 and later)
    from transformers.utils.chat_parsing import ResponseParser as ReferenceParser
    from transformers.utils.chat_parsing import parse_response as reference_parse
except Exception:  # pragma: no cover - depends on the installed transformers
    ReferenceParser = reference_parse = None

TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "reasoning_content": {"open": "<think>", "close": "</think>"},
        "tool_calls": {
            "open": "<tool_call>",
            "close": "</tool_call>",
            "content": "json",
            "repeats": True,
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close": ["<|im_end|>", "<|endoftext|>"]},
    },
}
SPECIAL = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_end|>"]
PROMPT = "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n<|im_start|>assistant\n"
WORDS = "the model thinks about weather in Paris and Lyon 🌤, checks units (°C), then writes a short answer; ".split(" ")
# Without the emoji the text fits in one byte per character, which makes copying it (as transformers' parser does on
# every feed) four times cheaper: --plain measures that case.
PLAIN_WORDS = [word.replace("🌤", "") for word in WORDS if word.replace("🌤", "")]


def generation(size: int, plain: bool = False) -> str:
    """A message of about `size` characters: long reasoning, text, and a tool call every ~2K characters."""
    words_used = PLAIN_WORDS if plain else WORDS
    reasoning_size = size // 2
    words, total, index = [], 0, 0
    while total < reasoning_size:
        word = words_used[index % len(words_used)]
        words.append(word)
        total += len(word) + 1
        index += 1
    parts = ["<think>\n", " ".join(words), "\n</think>\n\n"]
    total = sum(map(len, parts))
    call = 0
    while total < size:
        text = "Here is what I found about the weather today. " * 40
        tool = json.dumps({"name": "get_weather", "arguments": {"city": "Paris", "day": call, "unit": "celsius"}})
        piece = f"{text}\n<tool_call>\n{tool}\n</tool_call>\n"
        parts.append(piece)
        total += len(piece)
        call += 1
    parts.append("<|im_end|>")
    return "".join(parts)


def chunks_of(text: str, size: int = 4) -> list[str]:
    """Split like a tokenizer stream: special tokens whole, other text in pieces of `size` characters."""
    pieces: list[str] = []
    for part in regex.split("(" + "|".join(map(regex.escape, SPECIAL)) + ")", text):
        if part in SPECIAL:
            pieces.append(part)
        else:
            pieces.extend(part[i:i + size] for i in range(0, len(part), size))
    return [piece for piece in pieces if piece]


def stream_ours(chunks: list[str]) -> None:
    parser = ResponseParser(TEMPLATE, prefix=PROMPT)
    for chunk in chunks:
        parser.feed(chunk)
    parser.finalize()


def stream_reference(chunks: list[str]) -> None:
    parser = ReferenceParser(TEMPLATE, prefix=PROMPT)
    for chunk in chunks:
        parser.feed(chunk)
    parser.finalize()


_FLOOR_PATTERN = regex.compile("|".join(map(regex.escape, SPECIAL)))
_LONGEST = max(map(len, SPECIAL))


def stream_floor(chunks: list[str]) -> None:
    parts: list[str] = []
    text, position = "", 0
    search = _FLOOR_PATTERN.search
    for chunk in chunks:
        parts.append(chunk)
        text += chunk
        found = search(text, position)
        position = found.end() if found is not None else max(position, len(text) - _LONGEST + 1)


def timed(function, *args, repeats: int) -> float:
    """Median wall time of `repeats` calls, in seconds."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function(*args)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("--quick", action="store_true", help="sizes up to 16K and fewer repeats")
    options.add_argument("--plain", action="store_true", help="text without characters outside Latin-1")
    args = options.parse_args(argv)
    sizes = [2_000, 16_000] if args.quick else [2_000, 16_000, 128_000, 512_000]
    have_reference = ReferenceParser is not None

    print("Streaming, ~4 characters per chunk: median microseconds per chunk")
    print(f"{'size':>8} {'chunks':>7} {'floor':>8} {'ours':>8} {'transformers':>13} {'ours/floor':>11} {'transformers/ours':>18}")
    for size in sizes:
        text = generation(size, args.plain)
        chunks = chunks_of(text)
        repeats = 3 if size >= 128_000 else (5 if args.quick else 9)
        # the same message whatever the implementation (and however it is split)
        expected = parse_response(text, TEMPLATE, prefix=PROMPT)
        parser = ResponseParser(TEMPLATE, prefix=PROMPT)
        for chunk in chunks:
            parser.feed(chunk)
        assert parser.finalize()[0] == expected
        per_chunk = lambda seconds: seconds / len(chunks) * 1e6  # noqa: E731
        floor = per_chunk(timed(stream_floor, chunks, repeats=repeats))
        ours = per_chunk(timed(stream_ours, chunks, repeats=repeats))
        if have_reference:
            reference = per_chunk(timed(stream_reference, chunks, repeats=1 if size >= 128_000 else repeats))
            reference_text, ratio_text = f"{reference:13.2f}", f"{reference / ours:17.1f}x"
        else:
            reference_text, ratio_text = f"{'n/a':>13}", f"{'n/a':>18}"
        print(f"{size:>8} {len(chunks):>7} {floor:8.2f} {ours:8.2f} {reference_text} {ours / floor:10.2f}x {ratio_text}")

    print("\nOne-shot parse of the same texts: median milliseconds per parse")
    print(f"{'size':>8} {'ours':>9} {'transformers':>13} {'transformers/ours':>18}")
    for size in sizes:
        text = generation(size, args.plain)
        repeats = 3 if size >= 128_000 else 9
        ours = statistics.median(_repeat(lambda: parse_response(text, TEMPLATE, prefix=PROMPT), repeats)) * 1e3
        if have_reference:
            reference = statistics.median(_repeat(lambda: reference_parse(text, TEMPLATE, prefix=PROMPT), repeats)) * 1e3
            print(f"{size:>8} {ours:9.2f} {reference:13.2f} {reference / ours:17.1f}x")
        else:
            print(f"{size:>8} {ours:9.2f} {'n/a':>13} {'n/a':>18}")

    print("\nShort messages (~300 characters), 1000 one-shot parses: messages per second")
    short = (
        "<think>\nThe user wants the weather in Paris; call the tool.\n</think>\n\nLet me check that for you.\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 3}}\n</tool_call>'
        "<|im_end|>"
    )
    batch = [short] * 1000
    ours = 1000 / statistics.median(_repeat(lambda: [parse_response(t, TEMPLATE, prefix=PROMPT) for t in batch], 5))
    if have_reference:
        reference = 1000 / statistics.median(
            _repeat(lambda: [reference_parse(t, TEMPLATE, prefix=PROMPT) for t in batch], 3)
        )
        print(f"ours {ours:,.0f}/s   transformers {reference:,.0f}/s   ours/transformers {ours / reference:.1f}x")
    else:
        print(f"ours {ours:,.0f}/s   transformers n/a")
    return 0


def _repeat(function, repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return samples


if __name__ == "__main__":
    sys.exit(main())

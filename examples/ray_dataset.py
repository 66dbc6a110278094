"""Parse stored generations at cluster scale with Ray Data, using the response template of the model's tokenizer.

    pip install ".[ray]"                                                  # from a checkout
    python examples/ray_dataset.py --rows 20000 --output /tmp/parsed      # a local Ray with 2 CPUs
    python examples/ray_dataset.py --address auto ...                      # an existing Ray cluster

The job reads rows of (prompt, generation, truncated), as RL rollouts or synthetic data are stored, parses each
generation into a message with `tokenizer.parse_response(generation, prefix=prompt)` and writes Parquet with the
columns `reasoning_content`, `content`, `tool_calls` (the OpenAI form, as JSON text), `parse_error` and `parse_us`
(the time the row took to parse, in microseconds). Ray's progress bars show the job moving; at the end the script
prints the throughput: overall (Ray's start-up included, which dominates small runs) and of the parsing alone.

The rows here are generated on the spot (`--rows`), and the tokenizer is the small offline one of
`offline_tokenizer.py` carrying the qwen3 template in its configuration, as a tokenizer from the Hub does once its
repository holds a `response_template`. With real data, read it with `ray.data.read_parquet(...)` /
`read_json(...)` instead of `ray.data.from_items(...)`, and give `--tokenizer` a Hub id or a local folder.

Each worker is a Ray actor (`ParseGenerations`) that loads the tokenizer once and then parses batch after batch;
a failing row gets its error in `parse_error` instead of stopping the job.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

try:
    import response_templates  # noqa: F401
except ImportError:  # run from a checkout without installing: use the package next to this folder
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

NEW_COLUMNS = ("reasoning_content", "content", "tool_calls", "parse_error", "parse_us")
CITIES = ["Paris", "Oslo", "Lima", "Kyoto", "Accra", "Quito", "Hanoi", "Porto"]


def generate_rows(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """`count` Qwen3-style rows: reasoning then an answer, a tool call or two, some cut by max_tokens, a few broken."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        city = rng.choice(CITIES)
        prompt = f"<|im_start|>user\nWhat is the weather in {city}?<|im_end|>\n<|im_start|>assistant\n"
        thought = f"<think>\nThe user asks about {city}. " + "Let me think. " * rng.randint(1, 20) + "\n</think>\n\n"
        kind = index % 10
        truncated = False
        if kind < 5:
            body = f"It is {rng.randint(-5, 35)} degrees in {city} today.<|im_end|>"
        elif kind < 8:
            calls = [{"name": "get_weather", "arguments": {"city": city, "days": rng.randint(1, 7)}}]
            if kind == 7:
                calls.append({"name": "get_time", "arguments": {"city": city}})
            body = "".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>\n" for c in calls).rstrip("\n") + "<|im_end|>"
        elif kind == 8:  # cut by max_tokens in the middle of a call: the call is dropped, not invented
            body = '<tool_call>\n{"name": "get_weather", "argu'
            truncated = True
        else:  # the model wrote a broken call: the row gets a parse_error
            body = "<tool_call>\n{not json}\n</tool_call><|im_end|>"
        rows.append({"id": index, "prompt": prompt, "generation": thought + body, "truncated": truncated})
    return rows


def save_demo_tokenizer(folder: str) -> str:
    """Save the offline demo tokenizer with the qwen3 response template in its tokenizer_config.json."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from offline_tokenizer import build_tokenizer

    from response_templates import get_template

    tokenizer = build_tokenizer()
    tokenizer.response_template = get_template("qwen3")
    tokenizer.save_pretrained(folder)
    return folder


class ParseGenerations:
    """The Ray Data worker: loads the tokenizer once, then turns batches of rows into parsed columns."""

    def __init__(self, tokenizer: str):
        import response_templates  # noqa: F401  (gives the tokenizer parse_response on any transformers release)
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        if getattr(self.tokenizer, "response_template", None) is None:
            from response_templates import attach

            attach(self.tokenizer)  # no template in the repository yet: the library's, by model id (or LookupError)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        from response_templates.integrations.openai_adapter import to_openai_message

        out: dict[str, list] = {name: [] for name in NEW_COLUMNS}
        for row_id, prompt, generation, truncated in zip(
            batch["id"], batch["prompt"], batch["generation"], batch["truncated"]
        ):
            started = time.perf_counter()
            try:
                message = self.tokenizer.parse_response(str(generation), prefix=str(prompt), truncated=bool(truncated))
                # Deterministic ids: a row's output does not change between runs.
                openai = to_openai_message(message, id_factory=lambda i, row_id=row_id: f"call_{row_id}_{i}")
            except Exception as error:  # keep the job going; the row says what went wrong
                for name in ("reasoning_content", "content", "tool_calls"):
                    out[name].append(None)
                out["parse_error"].append(f"{type(error).__name__}: {error}")
                out["parse_us"].append(round((time.perf_counter() - started) * 1e6, 1))
                continue
            out["reasoning_content"].append(openai.get("reasoning_content"))
            out["content"].append(openai.get("content"))
            calls = openai.get("tool_calls")
            out["tool_calls"].append(json.dumps(calls, ensure_ascii=False) if calls else None)
            out["parse_error"].append(None)
            out["parse_us"].append(round((time.perf_counter() - started) * 1e6, 1))
        return {**batch, **out}


def run(rows: list[dict], tokenizer: str, output: str, *, workers: int = 2, batch_size: int = 500,
        cpus_per_worker: float = 0.5,
        progress: bool = True) -> dict[str, Any]:
    """Parse `rows` with Ray Data into Parquet files under `output`; returns the counts and the throughput."""
    import ray

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = progress
    started = time.perf_counter()
    dataset = ray.data.from_items(rows)
    parsed = dataset.map_batches(
        ParseGenerations,
        fn_constructor_kwargs={"tokenizer": tokenizer},
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=cpus_per_worker,
    )
    parsed.write_parquet(output)
    elapsed = time.perf_counter() - started

    import pyarrow.compute
    import pyarrow.dataset

    table = pyarrow.dataset.dataset(output, format="parquet").to_table(columns=["tool_calls", "parse_error", "parse_us"])
    parse_seconds = pyarrow.compute.sum(table.column("parse_us")).as_py() / 1e6
    return {
        "rows": table.num_rows,
        "with_tool_calls": table.num_rows - table.column("tool_calls").null_count,
        "parse_errors": table.num_rows - table.column("parse_error").null_count,
        "seconds": elapsed,
        "rows_per_second": table.num_rows / elapsed if elapsed else float("inf"),
        # Parsing alone, in one worker: what the job tends to per worker on a long run, once Ray has started up.
        "parse_rows_per_second_per_worker": table.num_rows / parse_seconds if parse_seconds else float("inf"),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="Parse a dataset of generations with Ray Data and the tokenizer's response template; "
        "write Parquet and report the throughput."
    )
    parser.add_argument("--rows", type=int, default=20000, help="how many generations to make up (default: 20000)")
    parser.add_argument("--output", help="folder for the Parquet files (default: a new temporary folder)")
    parser.add_argument("--tokenizer", help="Hub id or folder of the tokenizer (default: the offline demo one)")
    parser.add_argument("--workers", type=int, default=2, help="parsing actors (default: 2)")
    parser.add_argument("--batch-size", type=int, default=500, help="rows per batch (default: 500)")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray instance (default: 2)")
    parser.add_argument("--address", help="connect to this Ray cluster instead of starting a local one")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.workers < 1 or args.batch_size < 1:
        parser.error("--rows, --workers and --batch-size must be at least 1")

    import ray

    with tempfile.TemporaryDirectory(prefix="ray-dataset-") as scratch:
        tokenizer = args.tokenizer or save_demo_tokenizer(os.path.join(scratch, "tokenizer"))
        output = args.output or os.path.join(tempfile.mkdtemp(prefix="parsed-"), "parquet")
        if args.address:
            ray.init(address=args.address)
        else:
            ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
        try:
            stats = run(generate_rows(args.rows), tokenizer, output, workers=args.workers,
                        batch_size=args.batch_size, progress=not args.no_progress)
        finally:
            ray.shutdown()
    print(f"parsed {stats['rows']} generations in {stats['seconds']:.1f} s: {stats['rows_per_second']:,.0f} rows/s "
          f"({stats['with_tool_calls']} with tool calls, {stats['parse_errors']} parse errors), start-up included; "
          f"parsing alone: {stats['parse_rows_per_second_per_worker']:,.0f} rows/s per worker")
    print(f"Parquet written to {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Batch post-processing: parse a whole dataset of generations into messages with `datasets`.

    python examples/batch_dataset.py --num-proc 2

Needs the `datasets` package (`pip install datasets`, or the `[datasets]` extra of this package).

`parse_batch` is a plain function over a batch (a dict of columns), so it runs unchanged in
`datasets.Dataset.map(..., batched=True, num_proc=N)`, where each worker process parses its own shards. The
template is looked up by name inside the worker (library lookups are cached per process), which keeps what is
sent to the workers small and picklable.

The dataset needs a `prompt` column (the text the model was given; use "" when the generation holds the whole
message) and a `generation` column; an optional boolean `truncated` column marks generations cut by a token
limit. Rows that fail to parse get the error in `parse_error` instead of stopping the job; with
`malformed="content"` (or `"drop"`), a tool call whose text does not parse is kept as text in `content` (or left
out) and the row's other calls are kept, so such rows parse too (`fn_kwargs={"malformed": "content"}`). New columns:
`reasoning_content`, `content`, `tool_calls` (the OpenAI form: a JSON string, since Arrow needs one type per
column) and `parse_error`.

Ray Data runs the same function over a cluster:

    import ray
    ds = ray.data.from_huggingface(dataset)          # or ray.data.read_parquet(...)
    ds = ds.map_batches(parse_batch, batch_format="numpy", fn_kwargs={"template_name": "qwen3"})

With `batch_format="numpy"` a batch is a dict of numpy arrays; `parse_batch` only iterates over the columns, so
it accepts that as it is (and `batch_format="pandas"` works if you pass `dict(df)`-like batches).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from response_templates import parse_response
from response_templates.library import get_template
from response_templates.integrations.openai_adapter import to_openai_message


NEW_COLUMNS = ("reasoning_content", "content", "tool_calls", "parse_error")


def parse_batch(
    batch: dict[str, Any], indices: list[int] | None = None, template_name: str = "qwen3", malformed: str = "raise"
) -> dict:
    """Parse each row's generation; returns the new columns for the batch. `indices` (the rows' positions in the
    dataset, given by `map(..., with_indices=True)`) make tool-call ids unique across the dataset."""
    template = get_template(template_name)
    truncated = batch.get("truncated")
    if truncated is None:
        truncated = [False] * len(batch["generation"])
    out: dict[str, list] = {name: [] for name in NEW_COLUMNS}
    for row, (prompt, generation) in enumerate(zip(batch["prompt"], batch["generation"])):
        try:
            message = parse_response(
                str(generation), template, prefix=str(prompt), truncated=bool(truncated[row]), malformed=malformed
            )
            # Deterministic ids: a dataset row should not change between runs.
            position = indices[row] if indices is not None else row
            openai_message = to_openai_message(message, id_factory=lambda index: f"call_{position}_{index}")
        except Exception as error:  # keep the job going; the row says what went wrong
            out["reasoning_content"].append(None)
            out["content"].append(None)
            out["tool_calls"].append(None)
            out["parse_error"].append(f"{type(error).__name__}: {error}")
            continue
        out["reasoning_content"].append(openai_message.get("reasoning_content"))
        out["content"].append(openai_message.get("content"))
        calls = openai_message.get("tool_calls")
        out["tool_calls"].append(json.dumps(calls, ensure_ascii=False) if calls else None)
        out["parse_error"].append(None)
    return out


NEEDS_DATASETS = (
    "this example needs the `datasets` package: pip install datasets "
    "(or, from a checkout of response-templates: pip install \".[datasets]\")"
)


def _datasets():
    try:
        import datasets
    except ImportError:
        raise SystemExit(f"{__file__}: {NEEDS_DATASETS}") from None
    return datasets


def parse_dataset(
    dataset, template_name: str = "qwen3", num_proc: int | None = None, batch_size: int = 256, malformed: str = "raise"
):
    """`dataset` with the parsed columns added (see the module docstring)."""
    datasets = _datasets()
    Features, Value = datasets.Features, datasets.Value

    # Declared up front: a batch where every row is None would otherwise fix a column's type to null.
    features = Features({**dataset.features, **{name: Value("string") for name in NEW_COLUMNS}})
    return dataset.map(
        parse_batch,
        batched=True,
        with_indices=True,
        batch_size=batch_size,
        num_proc=num_proc,
        fn_kwargs={"template_name": template_name, "malformed": malformed},
        features=features,
    )


def demo_rows() -> dict[str, list]:
    prompt = "<|im_start|>user\nWeather in {city}?<|im_end|>\n<|im_start|>assistant\n"
    rows: dict[str, list] = {"prompt": [], "generation": [], "truncated": []}
    for i, city in enumerate(["Paris", "Oslo", "Lima", "Kyoto"] * 8):
        call = json.dumps({"name": "get_weather", "arguments": {"city": city}})
        rows["prompt"].append(prompt.format(city=city))
        if i % 4 == 3:  # every fourth generation was cut by max_tokens in the middle of its call
            rows["generation"].append(f"<think>\nUse the tool.\n</think>\n\n<tool_call>\n{call[:20]}")
            rows["truncated"].append(True)
        else:
            rows["generation"].append(
                f"<think>\nUse the tool.\n</think>\n\n<tool_call>\n{call}\n</tool_call><|im_end|>"
            )
            rows["truncated"].append(False)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description="Parse a small demo dataset of Qwen3 generations with datasets.Dataset.map.",
        epilog=NEEDS_DATASETS[0].upper() + NEEDS_DATASETS[1:] + ".",
    )
    parser.add_argument("--num-proc", type=int, default=2, help="worker processes for Dataset.map (default: 2)")
    args = parser.parse_args(argv)
    Dataset = _datasets().Dataset

    dataset = parse_dataset(Dataset.from_dict(demo_rows()), "qwen3", num_proc=args.num_proc)
    for row in dataset.select(range(4)):
        shown = {key: row[key] for key in ("content", "reasoning_content", "tool_calls", "truncated")}
        print(json.dumps(shown, ensure_ascii=False))
    print(f"{len(dataset)} rows, {sum(row is not None for row in dataset['tool_calls'])} with tool calls")


if __name__ == "__main__":
    main()

"""examples/ray_dataset.py: a generated dataset parsed by Ray Data on a local 2-CPU Ray, written to Parquet.

Skipped with a printed reason when Ray is not installed, except on CI (CI=true), where a missing Ray fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "ray_dataset.py")


def _need_ray():
    try:
        import pyarrow.dataset  # noqa: F401
        import ray  # noqa: F401
    except ImportError as error:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"Ray Data must be installed on CI (pip install '.[ray]'): {error}")
        pytest.skip(f"Ray Data is not installed ({error}); pip install '.[ray]'")


def _run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    import response_templates

    # The script must import the same response_templates as this test run (installed, or the source tree).
    package_home = os.path.dirname(os.path.dirname(os.path.abspath(response_templates.__file__)))
    env = dict(os.environ, HF_HUB_OFFLINE="1", RAY_USAGE_STATS_ENABLED="0")
    env["PYTHONPATH"] = os.pathsep.join([package_home, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=ROOT)


def test_help():
    result = _run("--help", timeout=60)
    assert result.returncode == 0, result.stderr
    assert "--rows" in result.stdout and "--output" in result.stdout and "Ray" in result.stdout


def test_parses_a_generated_dataset_into_parquet(tmp_path):
    _need_ray()
    import pyarrow.dataset

    sys.path.insert(0, os.path.join(ROOT, "examples"))
    try:
        import ray_dataset
    finally:
        sys.path.pop(0)
    from response_templates import get_template, parse_response
    from response_templates.integrations.openai_adapter import to_openai_message

    rows = 400
    output = tmp_path / "parsed"
    result = _run("--rows", str(rows), "--batch-size", "50", "--output", str(output))
    assert result.returncode == 0, result.stderr[-3000:]
    # Throughput and the counts are reported; Ray's progress (its log lines when not on a terminal) was shown.
    assert f"parsed {rows} generations in " in result.stdout and "rows/s" in result.stdout
    assert "120 with tool calls, 40 parse errors" in result.stdout
    assert f"Parquet written to {output}" in result.stdout
    assert "MapBatches(ParseGenerations)" in result.stdout + result.stderr

    table = pyarrow.dataset.dataset(str(output), format="parquet").to_table().to_pylist()
    assert len(table) == rows
    template = get_template("qwen3")
    by_id = {row["id"]: row for row in table}
    for source in ray_dataset.generate_rows(rows):
        row = by_id[source["id"]]
        assert row["generation"] == source["generation"] and row["parse_us"] > 0
        try:
            message = parse_response(source["generation"], template, prefix=source["prompt"],
                                     truncated=source["truncated"])
        except ValueError as error:
            assert row["parse_error"] and type(error).__name__ in row["parse_error"], row
            assert row["content"] is None and row["tool_calls"] is None
            continue
        expected = to_openai_message(message, id_factory=lambda i: f"call_{source['id']}_{i}")
        assert row["parse_error"] is None
        assert row["content"] == expected.get("content")
        assert row["reasoning_content"] == expected.get("reasoning_content")
        assert (json.loads(row["tool_calls"]) if row["tool_calls"] else None) == expected.get("tool_calls")

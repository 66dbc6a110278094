"""The examples run offline and do what their docstrings say."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


@pytest.fixture
def examples_path(monkeypatch):
    monkeypatch.syspath_prepend(EXAMPLES)
    return EXAMPLES


def _run(script: str, *args: str) -> str:
    import response_templates

    # The scripts must import the same response_templates as this test run (installed, or the source tree).
    package_home = os.path.dirname(os.path.dirname(os.path.abspath(response_templates.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([package_home, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["HF_HUB_OFFLINE"] = "1"
    result = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, script), *args],
        capture_output=True, text=True, env=env, timeout=120, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_quickstart_prints_the_parsed_message():
    out = _run("quickstart.py")
    first = out.split("\n\nAs an OpenAI chat-completions message:\n")
    message = json.loads(first[0].split("Parsed message:\n", 1)[1])
    assert message == {
        "role": "assistant",
        "reasoning_content": "The user wants the weather in Paris, so I should call get_weather.",
        "content": "Let me check that for you.",
        "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}
        ],
    }
    openai_message = json.loads(first[1])
    assert openai_message["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris", "unit": "celsius"}'


def test_streaming_renders_regions_and_final_message():
    out = _run("streaming.py", "--fast", "--no-color")
    assert "\033[" not in out
    reasoning, content = out.index("[reasoning_content] The user wants"), out.index("[content] Let me check")
    assert reasoning < content < out.index("[tool_calls]")
    assert '-> parsed: {"type": "function", "function": {"name": "get_weather"' in out
    message = json.loads(out.split("Final message:\n", 1)[1])
    assert message["tool_calls"][0]["function"]["arguments"] == {"city": "Paris", "unit": "celsius"}


@pytest.fixture
def server(examples_path):
    import openai_server

    srv = openai_server.make_server("127.0.0.1", 0)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv, openai_server
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=5)


def _client(srv):
    openai = pytest.importorskip("openai", reason="the openai package is not installed (add it to the test extras)")
    host, port = srv.server_address[:2]
    # trust_env=False: never route loopback traffic through a proxy from the environment.
    http_client = openai.DefaultHttpxClient(trust_env=False)
    return openai.OpenAI(base_url=f"http://{host}:{port}/v1", api_key="unused", http_client=http_client, max_retries=0)


def _expected(module, truncated_tokens=None):
    from response_templates import parse_response
    from response_templates.integrations.openai_adapter import to_openai_message

    backend = module.Backend()
    tokens, truncated = backend.generate(truncated_tokens)
    message = parse_response("".join(tokens), backend.template, prefix=module.PROMPT, truncated=truncated)
    return to_openai_message(message, id_factory=lambda index: "")


def _accumulate(stream):
    message: dict = {"content": None, "reasoning_content": None, "tool_calls": {}}
    finish = None
    for chunk in stream:
        choice = chunk.choices[0]
        delta = choice.delta.model_dump()
        for key in ("content", "reasoning_content"):
            if delta.get(key):
                message[key] = (message[key] or "") + delta[key]
        for call in delta.get("tool_calls") or []:
            entry = message["tool_calls"].setdefault(call["index"], {"id": "", "name": "", "arguments": ""})
            entry["id"] += call.get("id") or ""
            function = call.get("function") or {}
            entry["name"] += function.get("name") or ""
            entry["arguments"] += function.get("arguments") or ""
        finish = choice.finish_reason or finish
    return message, finish


def test_openai_server_streams_through_the_openai_client(server):
    srv, module = server
    client = _client(srv)
    stream = client.chat.completions.create(
        model="qwen3-demo", messages=[{"role": "user", "content": "What's the weather like in Paris?"}], stream=True
    )
    message, finish = _accumulate(stream)
    expected = _expected(module)
    assert finish == "tool_calls"
    assert message["content"] == expected["content"] == "Let me check the weather in Paris for you."
    assert message["reasoning_content"] == expected["reasoning_content"]
    [call] = message["tool_calls"].values()
    assert call["id"].startswith("call_")
    assert (call["name"], json.loads(call["arguments"])) == ("get_weather", {"city": "Paris", "unit": "celsius"})
    assert call["arguments"] == expected["tool_calls"][0]["function"]["arguments"]


def test_openai_server_stream_helper_and_truncation(server):
    srv, module = server
    client = _client(srv)
    # The SDK's own accumulation (ChatCompletionStreamState) over our chunks.
    with client.chat.completions.stream(model="qwen3-demo", messages=[{"role": "user", "content": "hi"}]) as stream:
        for _ in stream:
            pass
        completion = stream.get_final_completion()
    message = completion.choices[0].message
    assert message.tool_calls[0].function.name == "get_weather"
    assert json.loads(message.tool_calls[0].function.arguments) == {"city": "Paris", "unit": "celsius"}
    assert completion.choices[0].finish_reason == "tool_calls"

    # Cut inside the call: no half call is delivered.
    total = len(module.Backend().tokens)
    stream = client.chat.completions.create(
        model="qwen3-demo", messages=[{"role": "user", "content": "hi"}], stream=True, max_tokens=total - 8
    )
    message, finish = _accumulate(stream)
    assert finish == "length"
    assert message["tool_calls"] == {}
    assert message["content"] == _expected(module, total - 8)["content"]


def test_openai_server_raw_sse_and_non_streaming(server):
    srv, module = server
    host, port = srv.server_address[:2]
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    body = json.dumps({"model": "x", "messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()
    request = urllib.request.Request(f"http://{host}:{port}/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    with opener.open(request, timeout=10) as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        lines = [line for line in response.read().decode().split("\n\n") if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[len("data: "):]) for line in lines[:-1]]
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    for chunk in chunks:  # never a delimiter in a delta
        assert "<" not in json.dumps(chunk["choices"][0]["delta"])

    body = json.dumps({"model": "x", "messages": [{"role": "user", "content": "hi"}]}).encode()
    request = urllib.request.Request(f"http://{host}:{port}/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    with opener.open(request, timeout=10) as response:
        completion = json.loads(response.read())
    expected = _expected(module)
    got = completion["choices"][0]["message"]
    assert got["content"] == expected["content"] and got["reasoning_content"] == expected["reasoning_content"]
    assert got["tool_calls"][0]["function"] == expected["tool_calls"][0]["function"]
    assert completion["choices"][0]["finish_reason"] == "tool_calls"


def test_batch_dataset_with_datasets_map(examples_path):
    pytest.importorskip("datasets", reason="the datasets package is not installed")
    from datasets import Dataset

    import batch_dataset

    rows = batch_dataset.demo_rows()
    rows["prompt"].append("")
    rows["generation"].append("<tool_call>\n{not json}\n</tool_call>")
    rows["truncated"].append(False)
    result = batch_dataset.parse_dataset(Dataset.from_dict(rows), "qwen3", num_proc=2, batch_size=8)
    assert len(result) == len(rows["prompt"])
    first = result[0]
    assert first["reasoning_content"] == "Use the tool."
    assert json.loads(first["tool_calls"]) == [{
        "id": "call_0_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    }]
    assert result[3]["truncated"] and result[3]["tool_calls"] is None and result[3]["parse_error"] is None
    ids = [json.loads(calls)[0]["id"] for calls in result["tool_calls"] if calls]
    assert len(ids) == len(set(ids))  # unique across batches and worker processes
    assert result[-1]["parse_error"] and result[-1]["content"] is None


def test_batch_function_alone_takes_plain_columns(examples_path):
    import batch_dataset

    out = batch_dataset.parse_batch({"prompt": ["", ""], "generation": ["Hi!<|im_end|>", "<think>x</think>y"]})
    assert out["content"] == ["Hi!", "y"] and out["reasoning_content"] == [None, "x"]
    assert out["parse_error"] == [None, None]

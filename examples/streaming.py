"""Streaming: feed a Qwen3 generation token by token and render the parser's events live in the terminal.

    python examples/streaming.py            # add --fast to skip the typing delay

Reasoning is shown dimmed, the answer in plain text, tool calls in yellow: their raw text while the model
writes it (`dirty` chunks), then the parsed call when the region closes. A call the parser does not return (cut
off by a token limit, or malformed under `malformed="content"`) ends with a `region_discard` event instead.
"""

import argparse
import json
import sys
import time

from offline_tokenizer import build_tokenizer

from response_templates import ResponseParser
from response_templates.library import template_for

PROMPT = "<|im_start|>user\nWhat's the weather like in Paris?<|im_end|>\n<|im_start|>assistant\n"
GENERATION = (
    "<think>\nThe user wants the weather in Paris. I have a get_weather tool, so I will call it with the city "
    "and ask for celsius.\n</think>\n\n"
    "Let me check the weather in Paris for you.\n\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>'
    "<|im_end|>"
)

STYLES = {"reasoning_content": "\033[2m", "tool_calls": "\033[33m"}  # dim, yellow
RESET = "\033[0m"


class Renderer:
    """Prints events as they come: a heading when a region opens, its text as it grows."""

    def __init__(self, out=sys.stdout, color: bool = True):
        self.out, self.color = out, color
        self.fresh = False  # at the start of a region: its leading newlines are not worth showing

    def write(self, text: str, field: str | None = None) -> None:
        style = STYLES.get(field, "") if self.color else ""
        self.out.write(f"{style}{text}{RESET if style else ''}")
        self.out.flush()

    def __call__(self, event: dict) -> None:
        field = event["field"]
        if event["type"] == "region_open":
            self.write(f"\n[{field}] ", field)
            self.fresh = True
        elif event["type"] == "region_chunk":
            text = event["text"].lstrip() if self.fresh else event["text"]
            self.fresh = self.fresh and not text
            self.write(text, field)
        elif event["type"] == "region_close" and field == "tool_calls":
            self.write(f"\n  -> parsed: {json.dumps(event['value'], ensure_ascii=False)}", field)
        elif event["type"] == "region_discard":  # a region whose value is not returned
            if event["reason"] == "truncated":
                self.write("\n  -> dropped: the generation was cut inside this call", field)
            else:  # malformed; with malformed="content" its raw text follows as a content region
                self.write(f"\n  -> not a valid call ({event['error']}); kept as text", field)


def main(argv=None) -> None:
    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("--fast", action="store_true", help="no delay between tokens")
    options.add_argument("--no-color", action="store_true", help="plain text, even on a terminal")
    args = options.parse_args(argv)
    delay = 0.0 if args.fast else 0.03
    render = Renderer(color=sys.stdout.isatty() and not args.no_color)
    template = template_for("Qwen/Qwen3-8B")
    tokenizer = build_tokenizer()
    if tokenizer is not None:
        prompt_ids = tokenizer.encode(PROMPT, add_special_tokens=False)
        parser = ResponseParser(template, prompt_ids, tokenizer=tokenizer, malformed="content")
        tokens = [[token_id] for token_id in tokenizer.encode(GENERATION, add_special_tokens=False)]
    else:  # without transformers: feed the text a few characters at a time
        parser = ResponseParser(template, PROMPT, malformed="content")
        tokens = [GENERATION[i : i + 3] for i in range(0, len(GENERATION), 3)]

    for event in parser.initial_events:
        render(event)
    for token in tokens:  # one model step at a time
        for event in parser.feed(token):
            render(event)
        time.sleep(delay)
    message, events = parser.finalize()
    for event in events:
        render(event)
    print("\n\nFinal message:")
    print(json.dumps(message, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()

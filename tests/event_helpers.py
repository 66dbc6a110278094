"""Helpers shared by the streaming tests: drive a parser over chunks, and merge events independently of chunking."""

from __future__ import annotations


def collect(parser, chunks, truncated=False):
    """Feed every chunk to `parser`, finalize it, and return (message, every event including the initial ones)."""
    events = list(parser.initial_events)
    for chunk in chunks:
        events += parser.feed(chunk)
    message, final = parser.finalize(truncated=truncated)
    return message, events + final


def merged(events):
    """Events with consecutive chunks of one region joined and empty chunks dropped: what a renderer shows,
    whatever the chunking."""
    out = []
    for event in events:
        last = out[-1] if out else None
        if (
            last is not None
            and event["type"] == "region_chunk"
            and last["type"] == "region_chunk"
            and last["field"] == event["field"]
        ):
            assert last["dirty"] == event["dirty"]
            out[-1] = {**last, "text": last["text"] + event["text"]}
        elif event["type"] == "region_chunk" and event["text"] == "":
            continue
        else:
            out.append(event)
    return out

"""Turning generated token ids into the text the parser scans, so that control tokens act as delimiters only
when the model generated them as their own ids.

A model (or a user it quotes) can spell `<tool_call>` with ordinary tokens; decoded naively, that text would open a
tool call. Here every control-token spelling that comes from ordinary tokens is defused by slipping a marker
character between its characters; markers are removed from everything the parser hands back.
"""

from __future__ import annotations

from bisect import bisect_left
from functools import lru_cache
from itertools import groupby
from typing import Any

import regex

from .limits import MAX_HELD_IDS

# A lone surrogate: decoded token ids are valid UTF-8, so they can never contain one, and a model that writes any
# character, U+FDD2 and other noncharacters included, gets it back.
MARKER = "\udfff"
REPLACEMENT = "\ufffd"


def _strip(text: str) -> str:
    return text.replace(MARKER, "") if MARKER in text else text


def strip_markers(value: Any) -> Any:
    """`value` with the markers removed from every string in it (dict keys included), walked without recursion:
    parsed JSON may nest hundreds of levels deep."""
    if isinstance(value, str):
        return _strip(value)
    if not isinstance(value, (list, dict)):
        return value
    root: list = [None]
    # (what to copy, the container that receives the copy, at which index or key)
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        item, target, slot = stack.pop()
        if isinstance(item, list):
            copied: Any = [None] * len(item)
            pairs: Any = enumerate(item)
        elif isinstance(item, dict):
            # keys that become equal once stripped keep the first one's place and the last one's value
            last: dict = {}
            for key, member in item.items():
                last[_strip(key) if isinstance(key, str) else key] = member
            copied, pairs = dict.fromkeys(last), last.items()
        else:
            target[slot] = _strip(item) if isinstance(item, str) else item
            continue
        target[slot] = copied
        for key, member in pairs:
            if isinstance(member, (list, dict)):
                stack.append((member, copied, key))
            else:
                copied[key] = _strip(member) if isinstance(member, str) else member
    return root[0]


def to_python(value: Any) -> Any:
    """numpy arrays and torch tensors (any object with `tolist`) to plain lists; ints stay ints."""
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple, str)):
        return value.tolist()
    if isinstance(value, tuple):
        return list(value)
    return value


class IncrementalDecoder:
    """Decodes ids one step at a time, holding back ids that end inside a multi-byte character. Each step decodes
    the previous step's ids together with the new ones and emits the difference, so decoders that depend on
    neighbouring tokens (byte-level BPE, Metaspace) give the same text as decoding everything at once.

    Text that ends with U+FFFD may be a character still incomplete: the ids are held, but never more than
    `MAX_HELD_IDS` of them, so a long run of ids that decode to U+FFFD still streams, in linear time."""

    def __init__(self, backend: Any):
        self._backend = backend
        self._ids: list[int] = []
        self._prefix = ""  # the text of self._ids[:self._prefix_index], already emitted
        self._prefix_index = 0

    def _decode(self, ids: list[int]) -> str:
        return self._backend.decode(ids, skip_special_tokens=False)

    def step(self, ids: list[int]) -> str | None:
        """The text the new ids settle, or None when it all stays held back."""
        self._ids.extend(ids)
        text = self._decode(self._ids)
        if len(text.encode("utf-8", "surrogatepass")) <= len(self._prefix.encode("utf-8", "surrogatepass")) or (
            text.endswith(REPLACEMENT)
        ):
            if len(self._ids) - self._prefix_index > MAX_HELD_IDS:
                return self._settle(len(self._ids) - MAX_HELD_IDS, text)
            return None
        if not text.startswith(self._prefix):
            raise ValueError("token ids: the decoded text no longer starts with the text decoded before")
        return self._settle(len(self._ids), text)

    def _settle(self, cut: int, text: str) -> str | None:
        """Emit the text of the ids before `cut` (all of `text` when `cut` is the end); the ids from the last
        settled point on stay as context for the next step."""
        settled = text if cut == len(self._ids) else self._decode(self._ids[:cut])
        if not (settled.startswith(self._prefix) and text.startswith(settled)):
            return None  # the cut falls inside a character: wait for more ids
        new_text = settled[len(self._prefix):]
        self._ids = self._ids[self._prefix_index:]
        cut -= self._prefix_index
        self._prefix = self._decode(self._ids[:cut])
        self._prefix_index = cut
        return new_text

    def finish(self) -> str:
        """The text of the ids still held back (decoded with their context), then start afresh."""
        held = self._ids[self._prefix_index:]
        text = self._decode(self._ids) if held else self._prefix
        rest = text[len(self._prefix):] if text.startswith(self._prefix) else self._decode(held)
        self._ids, self._prefix, self._prefix_index = [], "", 0
        return rest


@lru_cache(maxsize=64)
def _template_literals(chat_template: str) -> str:
    """The literal text of a chat template (raw text and string constants), joined by NULs so that no search
    matches across two pieces."""
    try:
        import jinja2
        from jinja2 import nodes
        from jinja2.ext import Extension

        class _Generation(Extension):  # transformers' {% generation %} block tag
            tags = {"generation"}

            def parse(self, parser):
                lineno = next(parser.stream).lineno
                body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
                return nodes.Scope(body, lineno=lineno)

        environment = jinja2.Environment(
            trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols", _Generation]
        )
        tree = environment.parse(chat_template)
    except Exception:  # an unparsable template: its whole text is the best guess
        return chat_template
    pieces = {node.data for node in tree.find_all(nodes.TemplateData)}
    pieces |= {node.value for node in tree.find_all(nodes.Const) if isinstance(node.value, str)}
    return "\0".join(pieces)


def control_tokens(tokenizer: Any) -> tuple[str, ...]:
    """The tokens that count as control tokens: special added tokens, those listed in `chat_control_tokens`, or
    (without that list) the added tokens the chat template writes, except whitespace tokens."""
    added = list(getattr(tokenizer, "added_tokens_decoder", {}).values())
    listed = getattr(tokenizer, "chat_control_tokens", None)
    if listed is not None:
        listed = set(listed)
        return tuple(sorted({t.content for t in added if t.special or t.content in listed}))
    chat_template = getattr(tokenizer, "chat_template", None)
    templates = list(chat_template.values()) if isinstance(chat_template, dict) else [chat_template or ""]
    literal_text = "\0".join(_template_literals(template) for template in templates)
    return tuple(
        sorted({t.content for t in added if t.special or (t.content in literal_text and not t.content.isspace())})
    )


class ProperPrefixes:
    """`text in prefixes`: whether `text` is a proper prefix of one of `words`. Memory linear in the words (a set
    of every prefix would grow with the square of their length): a binary search in the sorted words, where the
    words that start with `text` follow it."""

    def __init__(self, words: Any):
        self._words = sorted(set(words))

    def __contains__(self, text: str) -> bool:
        at = bisect_left(self._words, text)
        while at < len(self._words) and self._words[at].startswith(text):
            if len(self._words[at]) > len(text):
                return True
            at += 1  # `text` itself is a word: a longer one may follow
        return False


class TokenIdDecoder:
    """Incremental decoding of generated ids into parser text, with spelled-out control tokens defused."""

    def __init__(self, tokenizer: Any):
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None:
            raise TypeError(
                f"tokenizer=: {type(tokenizer).__name__} is not a fast tokenizer (no backend_tokenizer); parsing token "
                "ids needs one. Decode the ids yourself and pass text."
            )
        tokens = control_tokens(tokenizer)
        self._spelling_of = {
            token_id: added.content
            for token_id, added in tokenizer.added_tokens_decoder.items()
            if added.content in tokens
        }
        longest_first = sorted(tokens, key=len, reverse=True)
        self._tokens_re = regex.compile("|".join(map(regex.escape, longest_first)) or "(?!)")
        self._prefixes = ProperPrefixes(tokens)
        self._longest = max(map(len, tokens), default=1) - 1
        self._backend = backend
        # ids run from 0 to the vocabulary size (added tokens included), whose ids may lie past it
        self._id_limit = max(backend.get_vocab_size(with_added_tokens=True), max(self._ids_of_added(tokenizer)) + 1)
        self._stream = IncrementalDecoder(backend)
        self._tail = ""  # text that could still be the start of a spelled-out control token

    @staticmethod
    def _ids_of_added(tokenizer: Any) -> list[int]:
        return [token_id for token_id in getattr(tokenizer, "added_tokens_decoder", {}) if isinstance(token_id, int)] or [-1]

    def feed(self, ids: Any) -> str:
        ids = to_python(ids)
        if isinstance(ids, int):
            ids = [ids]
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise TypeError(f"expected token ids (a list of ints, a 1-D array or tensor), got {type(ids).__name__}")
        if ids and (min(ids) < 0 or max(ids) >= self._id_limit):
            for position, token_id in enumerate(ids):
                if not 0 <= token_id < self._id_limit:
                    raise ValueError(
                        f"token ids: {token_id} at position {position} is not an id of this tokenizer (its ids run "
                        f"from 0 to {self._id_limit - 1})"
                    )
        out: list[str] = []
        decoded: str | None
        for is_control, run in groupby(ids, self._spelling_of.__contains__):
            if is_control:
                for token_id in run:
                    spelling = self._spelling_of[token_id]
                    # decoding the control token also releases a character held back before it
                    decoded = self._stream.step([token_id]) or ""
                    out.append(self._defuse(decoded.removesuffix(spelling), final=True) + spelling)
                continue
            decoded = self._stream.step(list(run))
            if decoded:
                out.append(self._defuse(decoded))
        return "".join(out)

    def flush(self) -> str:
        """Release everything held back; the next ids start a new sequence (as `decode` of the generation alone)."""
        return self._defuse(self._stream.finish(), final=True)

    def _defuse(self, text: str, final: bool = False) -> str:
        text, self._tail = self._tail + text, ""
        if not final:
            held = 0
            for size in range(min(self._longest, len(text)), 0, -1):
                if text[-size:] in self._prefixes:
                    held = size
                    break
            cut = len(text) - held
            if held:
                # never cut through a complete spelling: it is defused whole once the tail is decided
                for match in self._tokens_re.finditer(text, max(0, cut - self._longest)):
                    if match.start() < cut < match.end():
                        cut = match.start()
                        break
            text, self._tail = text[:cut], text[cut:]
        return self._tokens_re.sub(lambda match: MARKER.join(match.group()), text)

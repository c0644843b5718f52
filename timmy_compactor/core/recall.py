"""Recall (spec §2a): reopen what a compaction folded, from the raw messages, by ref or by text.

Every collapsed, truncated or folded element names its raw indices (`#12`, `#40–#44`); `lookup`
returns exactly those raw messages, `search` the lines that hold a text with their `#N`. Answers are
redacted like the cold history and bounded: a long answer is cut, and says so.

The bound is exact: `to_json()` is at most `max_chars` characters (or an answer with no items, when
even that is longer); with `render` (how a caller prints one item, e.g. the CLI's text form), the
rendered items together are at most `max_chars`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from timmy_compactor.core.facts import searchable_text
from timmy_compactor.core.redact import redact_text, redact_value
from timmy_compactor.core.text import readable
from timmy_compactor.core.types import Message

DEFAULT_MAX_CHARS = 6_000
"""About 1,500 tokens: room for a few folded steps without crowding a 64k window."""
_REF = re.compile(r"^\s*#?(\d+)\s*(?:(?:-|–|—|\.\.)\s*#?(\d+))?\s*$")
MAX_MATCHES = 50
_CUT = "[...cut: {n:,} more chars]"
Render = Callable[[dict[str, Any]], str]
"""How a caller prints one answer item; its length is what `max_chars` bounds."""


class RefError(ValueError):
    """A ref that is not of the form `#N` / `#N-#M`, or names messages that do not exist."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What recall returns: raw messages or matching lines, and whether the answer was cut."""

    ref: str
    items: tuple[dict[str, Any], ...]
    truncated: bool
    total: int

    def as_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "items": list(self.items), "truncated": self.truncated, "total": self.total}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), ensure_ascii=False)


def parse_ref(ref: str, count: int) -> range:
    """`#12`, `12`, `#40-#44`, `40–44` → the raw indices; a clear error when out of range."""
    match = _REF.match(ref)
    if not match:
        raise RefError(f"{ref!r} is not a ref: use #N or #N-#M (as shown in [tool: …] lines and the index)")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) else first
    if last < first:
        raise RefError(f"ref #{first}-#{last} runs backwards")
    if last >= count:
        raise RefError(f"no message #{last}: this session has #0-#{count - 1}")
    return range(first, last + 1)


def lookup(
    messages: Sequence[Message], ref: str, max_chars: int = DEFAULT_MAX_CHARS, render: Render | None = None
) -> Answer:
    """The raw messages `ref` names, redacted, within `max_chars` (see the module's docstring). A
    message that does not fit whole is cut (its content's beginning and how much is left out) if
    that fits, else left out; either way the answer says it was truncated."""
    indices = parse_ref(ref, len(messages))
    label = _label(indices)
    measure, room = _budget(label, len(indices), max_chars, render)
    items: list[dict[str, Any]] = []
    truncated = False
    for i in indices:
        message = _redacted(messages[i])
        item: dict[str, Any] = {"ref": f"#{i}", "message": message}
        size = measure(item)
        if size > room:
            cut = _cut(f"#{i}", message, room, measure)
            if cut is not None and (not items or room > 200):  # the first message always shows its beginning
                items.append(cut)
            truncated = True
            break
        items.append(item)
        room -= size
    return Answer(ref=label, items=tuple(items), truncated=truncated, total=len(indices))


def search(
    messages: Sequence[Message],
    text: str,
    indices: Sequence[int] | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
    render: Render | None = None,
) -> Answer:
    """The lines of the raw messages (`indices`: default all) that contain `text` (case-insensitive),
    within `max_chars` (see the module's docstring)."""
    needle = text.strip().lower()
    if not needle:
        raise RefError("an empty query finds nothing: give a word, a path or an error text")
    label = f"query {text!r}"
    measure, room = _budget(label, 10**9, max_chars, render)  # the total is not known yet: room for 10 digits
    items: list[dict[str, Any]] = []
    total = 0
    truncated = False
    for i in indices if indices is not None else range(len(messages)):
        message = messages[i]
        body = searchable_text(message) if message.get("role") != "tool" else readable(_text(message))
        for line in body.splitlines():
            if needle not in line.lower():
                continue
            total += 1
            item = {"ref": f"#{i}", "role": message.get("role"), "line": redact_text(line.strip())[:500]}
            size = measure(item)
            if truncated or size > room or len(items) >= MAX_MATCHES:
                truncated = True
                continue
            items.append(item)
            room -= size
    return Answer(ref=label, items=tuple(items), truncated=truncated, total=total)


def _budget(
    label: str, total: int, max_chars: int, render: Render | None
) -> tuple[Callable[[dict[str, Any]], int], int]:
    """How one item is measured, and the room the items have: as JSON inside the answer's envelope
    (each item with its `, ` separator), or as the caller renders it."""
    if render is not None:
        return (lambda item: len(render(item))), max_chars
    empty = Answer(ref=label, items=(), truncated=False, total=total).to_json()
    return (lambda item: len(json.dumps(item, ensure_ascii=False)) + 2), max_chars - len(empty) + 2


def _text(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False) if content is not None else ""


def _redacted(message: Message) -> Message:
    """Content and call arguments redacted; ids, roles and names are structure, kept as they are."""
    out = {**message, "content": redact_value(message.get("content"))} if "content" in message else dict(message)
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = [
            {**c, "function": {**c["function"], "arguments": redact_value(c["function"].get("arguments"))}}
            if isinstance(c, dict) and isinstance(c.get("function"), dict)
            else c
            for c in calls
        ]
    return out


def _cut(ref: str, message: Message, room: int, measure: Callable[[dict[str, Any]], int]) -> dict[str, Any] | None:
    """`message` cut to fit in `room`: its content cut to the longest beginning that fits, followed by
    how many characters were left out; when the rest of the message alone does not fit (long tool
    calls), the whole message (as JSON, after its role) cut the same way. None when not even an empty
    beginning fits."""
    cut = _cut_text(ref, message, _text(message), room, measure)
    if cut is None and set(message) - {"role", "content"}:
        rest = json.dumps({k: v for k, v in message.items() if k != "role"}, ensure_ascii=False)
        cut = _cut_text(ref, {"role": message.get("role")}, rest, room, measure)
    return cut


def _cut_text(
    ref: str, base: Message, text: str, room: int, measure: Callable[[dict[str, Any]], int]
) -> dict[str, Any] | None:
    def item(keep: int) -> dict[str, Any]:
        return {"ref": ref, "message": {**base, "content": text[:keep] + _CUT.format(n=len(text) - keep)}}

    if not text or measure(item(0)) > room:
        return None
    low, high = 0, len(text) - 1  # at least one character is left out: a cut never says "-N more"
    while low < high:  # a long beginning that fits (sizes grow with the kept length, give or take a digit)
        middle = (low + high + 1) // 2
        if measure(item(middle)) <= room:
            low = middle
        else:
            high = middle - 1
    return item(low)


def _label(indices: range) -> str:
    return f"#{indices.start}" if len(indices) == 1 else f"#{indices.start}-#{indices.stop - 1}"

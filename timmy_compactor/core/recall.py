"""Recall (spec §2a): reopen what a compaction folded, from the raw messages, by ref or by text.

Every collapsed, truncated or folded element names its raw indices (`#12`, `#40–#44`); `lookup`
returns exactly those raw messages, `search` the lines that hold a text with their `#N`. Answers are
redacted like the cold history and bounded: a long answer is cut, and says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
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


def lookup(messages: Sequence[Message], ref: str, max_chars: int = DEFAULT_MAX_CHARS) -> Answer:
    """The raw messages `ref` names, redacted, within `max_chars` (JSON characters)."""
    indices = parse_ref(ref, len(messages))
    items: list[dict[str, Any]] = []
    used = 0
    truncated = False
    for i in indices:
        message = _redacted(messages[i])
        item: dict[str, Any] = {"ref": f"#{i}", "message": message}
        size = len(json.dumps(item, ensure_ascii=False))
        if used + size > max_chars:
            room = max(max_chars - used - 200, 100)
            if not items or room > 200:  # the first message always shows its beginning
                items.append({"ref": f"#{i}", "message": _cut(message, room)})
            truncated = True
            break
        items.append(item)
        used += size
    return Answer(ref=_label(indices), items=tuple(items), truncated=truncated, total=len(indices))


def search(
    messages: Sequence[Message],
    text: str,
    indices: Sequence[int] | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> Answer:
    """The lines of the raw messages (`indices`: default all) that contain `text` (case-insensitive)."""
    needle = text.strip().lower()
    if not needle:
        raise RefError("an empty query finds nothing: give a word, a path or an error text")
    items: list[dict[str, Any]] = []
    used = 0
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
            size = len(json.dumps(item, ensure_ascii=False))
            if truncated or used + size > max_chars or len(items) >= MAX_MATCHES:
                truncated = True
                continue
            items.append(item)
            used += size
    return Answer(ref=f"query {text!r}", items=tuple(items), truncated=truncated, total=total)


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


def _cut(message: Message, room: int) -> Message:
    text = _text(message)
    return {**message, "content": text[:room] + f"[...cut: {len(text) - room:,} more chars; ask for a smaller ref]"}


def _label(indices: range) -> str:
    return f"#{indices.start}" if len(indices) == 1 else f"#{indices.start}-#{indices.stop - 1}"

"""A state.db session's full history, once: the copies Hermes re-inserts at each compaction boundary
(the head again, the re-kept tail), its summaries and our own compacted lines left out (`statedb`
reads the rows; this is pure)."""

from __future__ import annotations

import json
from typing import Any

from timmy_compactor.core.engine_lines import ENGINE_LINE_RE
from timmy_compactor.host.names import MERGED_DELIMITER, MERGED_HEADER, SUMMARY_PREFIXES


def _identity(message: dict[str, Any]) -> tuple[Any, ...]:
    calls = message.get("tool_calls") or []
    ids = tuple(c.get("id") for c in calls if isinstance(c, dict))
    if message.get("role") == "tool":
        return ("tool", message.get("tool_call_id"))
    if ids:
        return ("calls", ids)
    return (message.get("role"), json.dumps(message.get("content"), sort_keys=True))


def _is_synthetic(message: dict[str, Any]) -> bool:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    if message.get("role") == "user" and text.startswith(SUMMARY_PREFIXES):
        return True
    return message.get("role") == "assistant" and bool(ENGINE_LINE_RE.search(text))


def _unmerge(message: dict[str, Any]) -> dict[str, Any]:
    """The message as it was before Hermes merged its compaction summary into it."""
    content = message.get("content")
    if not (isinstance(content, str) and content.startswith(MERGED_HEADER) and MERGED_DELIMITER in content):
        return message
    original = content[len(MERGED_HEADER) :].split(MERGED_DELIMITER, 1)[0]
    return {**message, "content": original.strip("\n")}


def deduplicate(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop the copies a compaction re-inserts and the summaries it adds.

    Tool calls and results are identified by their call ids, which are unique per call, so their
    copies are certain. A user message seen before is a copy when what follows it is a copy (the
    re-kept head or tail continues), and a plain assistant message seen before is a copy when it
    follows a copy; a user who really repeats a request gets new answers, which keeps it.
    """
    cleaned = [m for m in map(_unmerge, messages) if not _is_synthetic(m)]
    seen: set[tuple[Any, ...]] = set()
    out = []
    previous_was_copy = False
    for i, message in enumerate(cleaned):
        identity = _identity(message)
        if message.get("role") == "tool" or identity[0] == "calls":
            copy = identity in seen
        elif message.get("role") == "user":
            following = cleaned[i + 1] if i + 1 < len(cleaned) else None
            copy = identity in seen and following is not None and _identity(following) in seen
        else:
            copy = identity in seen and previous_was_copy
        previous_was_copy = copy
        if not copy:
            seen.add(identity)
            out.append(message)
    return out

"""How many tool calls and tool results of a message list go without their pair.

A count of what a reader sees in a view, shared by the evaluation's promise checker
(`compare/promises.py`) and the sidecar's `status`; the engine's own verification (`core.verify`)
keeps its own check and does not use this one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def orphans(messages: Sequence[dict[str, Any]]) -> int:
    """Tool results without their call, and calls not answered before the next message (the calls of
    the last message are none: they may still be waiting for their results)."""
    count, open_ids = 0, set()
    for m in messages:
        if m.get("role") == "tool":
            count += m.get("tool_call_id") not in open_ids
            open_ids.discard(m.get("tool_call_id"))
            continue
        count += len(open_ids)
        open_ids = {c.get("id") for c in m.get("tool_calls") or [] if isinstance(c, dict)}
    return count

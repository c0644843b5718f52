"""The message list in the shape Hermes keeps it: consecutive assistant messages merged as
hermes-agent 0.19's `repair_message_sequence` merges them, and the tool calls and results a list
leaves without their pair. The engine shapes what it returns with these (no Hermes import here)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def unpaired(messages: list[dict[str, Any]]) -> set[tuple[str, Any]]:
    """Tool calls without their result and results without their call, as ("call"|"result", id).

    The calls of the last message are none: Hermes asks for a compaction before it runs them (and
    a snapshot may end before their results are written)."""
    found: set[tuple[str, Any]] = set()
    open_ids: set[Any] = set()
    for message in messages:
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_ids:
                found.add(("result", call_id))
            open_ids.discard(call_id)
            continue
        found |= {("call", call_id) for call_id in open_ids}
        open_ids = {c.get("id") for c in message.get("tool_calls") or [] if isinstance(c, dict)}
    return found


def _interim(message: dict[str, Any]) -> bool:
    return bool(
        message.get("codex_reasoning_items")
        or message.get("codex_message_items")
        or message.get("finish_reason") == "incomplete"
    )


def as_hermes_keeps_it(
    messages: list[dict[str, Any]], sources: Sequence[Sequence[int]] | None = None
) -> tuple[list[dict[str, Any]], list[tuple[int, ...]]]:
    """The list in the shape Hermes gives its history before every request: consecutive assistant
    messages merged (calls in order, texts joined by a newline), as hermes-agent 0.19's
    `repair_message_sequence` does (pass 0), but on copies; and the raw indices behind each message
    (`sources`, merged alike). A compaction can leave a `[tool: …]` summary right before the first
    kept step of a turn; Hermes would merge the two in place, and the next list it passes would no
    longer start with what the engine returned."""
    merged: list[dict[str, Any]] = []
    behind: list[tuple[int, ...]] = []
    for k, message in enumerate(messages):
        raw = tuple(sources[k]) if sources is not None else ()
        previous = merged[-1] if merged else None
        if (
            previous is None
            or message.get("role") != "assistant"
            or previous.get("role") != "assistant"
            or _interim(message)
            or _interim(previous)
        ):
            merged.append(message)
            behind.append(raw)
            continue
        behind[-1] += raw
        if previous.get("finish_reason") in {"verification_required", "verify_hook_continue"}:
            merged[-1] = message
            continue
        joined = dict(previous)
        calls = list(previous.get("tool_calls") or []) + list(message.get("tool_calls") or [])
        if calls:
            joined["tool_calls"] = calls
        before, after = previous.get("content"), message.get("content")
        if isinstance(before, str) and isinstance(after, str):
            joined["content"] = "\n".join(part for part in (before.strip(), after.strip()) if part)
        elif not before and after is not None:
            joined["content"] = after
        if not previous.get("reasoning_content") and message.get("reasoning_content"):
            joined["reasoning_content"] = message["reasoning_content"]
        merged[-1] = joined
    return merged, behind

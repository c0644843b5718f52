"""After the rules: no orphan tool call or tool result is left in the compacted region.

A raw session can hold a tool call that never got its result (an interrupted run) or a result
whose call is missing. Chat APIs reject both. A call without a result becomes a `[tool: … → no
result]` line on its assistant message; a result without a call becomes a note on the assistant
message before it (or a new assistant note), keeping its error line when it failed.
"""

from __future__ import annotations

from timmy_compactor.core.draft import Draft, RuleCounts
from timmy_compactor.core.facts import tool_calls, tool_outcome
from timmy_compactor.core.lines import append, index_label, tool_line
from timmy_compactor.core.types import Entry, Message, Settings

NAME = "sanitize_tool_pairs"


def apply(draft: Draft, settings: Settings) -> tuple[Draft, RuleCounts]:
    out: list[Entry] = []
    fixed = 0
    open_ids: set[object] = set()
    answered: set[object] = set()
    pending: int | None = None  # index in `out` of the assistant whose results may follow

    def close_pending() -> None:
        nonlocal fixed, pending
        if pending is None:
            return
        entry = out[pending]
        calls = tool_calls(entry.message)
        missing = [c for c in calls if c.get("id") not in answered]
        if missing:
            kept = [c for c in calls if c.get("id") in answered]
            message: Message = {k: v for k, v in entry.message.items() if k != "tool_calls"}
            message["content"] = append(
                entry.message.get("content"),
                [tool_line(c, "no result", entry.sources) for c in missing],
            )
            if kept:
                message["tool_calls"] = kept
            out[pending] = Entry(message, entry.sources)
            fixed += len(missing)
        pending = None

    for entry in draft.middle:
        if entry.role == "tool":
            call_id = entry.message.get("tool_call_id")
            if pending is not None and call_id in open_ids and call_id not in answered:
                answered.add(call_id)
                out.append(entry)
                continue
            out.append(_orphan_result_note(entry))
            fixed += 1
            continue
        close_pending()
        out.append(entry)
        if entry.role == "assistant" and tool_calls(entry.message):
            pending = len(out) - 1
            open_ids = {c.get("id") for c in tool_calls(entry.message)}
            answered = set()
    close_pending()
    return draft.with_middle(_merge_notes(out)), {NAME: fixed} if fixed else {}


def _orphan_result_note(entry: Entry) -> Entry:
    outcome = tool_outcome(entry.message.get("content"))
    name = entry.message.get("tool_name") or entry.message.get("name") or "unknown tool"
    status = "failed" if outcome.failed else "ok"
    detail = ": " + " | ".join(map(str, outcome.key_lines)) if outcome.key_lines else ""
    note = f"[tool result {index_label(entry.sources)} without a call: {name} → {status}{detail}]"
    return Entry({"role": "assistant", "content": note, "_orphan_note": True}, entry.sources)


def _merge_notes(entries: list[Entry]) -> list[Entry]:
    """Fold each orphan note into the assistant message before it, when there is one."""
    merged: list[Entry] = []
    for entry in entries:
        if not entry.message.get("_orphan_note"):
            merged.append(entry)
            continue
        note = entry.message["content"]
        prev = merged[-1] if merged else None
        if prev is not None and prev.role == "assistant" and not prev.message.get("tool_calls"):
            message = {
                **prev.message,
                "content": append(prev.message.get("content"), [note]),
            }
            merged[-1] = Entry(message, prev.sources + entry.sources)
        else:
            merged.append(Entry({"role": "assistant", "content": note}, entry.sources))
    return merged

"""`timmy_recall`, the tool the `timmy` engine gives the model inside Hermes: its schema, the size
bound of an answer (what Hermes passes on unchanged for the window), and the answer itself, read from
the engine's raw log by `core.recall`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from timmy_compactor.core.recall import DEFAULT_MAX_CHARS, RECALL_TOOL, RefError, lookup, search
from timmy_compactor.host.budget import hermes_share_chars

MIN_MAX_CHARS = 500
"""The least `max_chars` the recall tool takes: room for a message's beginning and the notes."""
RECALL_SCHEMA: dict[str, Any] = {
    "name": RECALL_TOOL,
    "description": (
        "Reopen conversation history that context compaction folded away. Lines like "
        "`[tool: bash(...) → ok, 812 chars, #40–#41]`, `[folded #12–#80: ...]` and the entries of the "
        '[ANCHOR INDEX] name raw messages by number (#N). Pass `ref` (e.g. "#41", 41 or "#40-#44") to get '
        "those messages exactly as they were (credentials replaced by credential_ref stand-ins), or `query` "
        "(a word, path or error text) to find the lines that contain it, with their #N. Use it when you "
        "need the full output of an earlier step, not just its summary line. Answers are bounded; a cut "
        "answer's notes say how to get the rest (a smaller range, or `offset`)."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "ref": {"type": "string", "description": 'a raw message number or range: "#12" (or 12) or "#40-#44"'},
            "query": {"type": "string", "description": "text to find in the folded history"},
            "offset": {
                "type": "integer",
                "description": "with ref: where the first message's text starts (the offset a cut answer names); "
                "with query: how many matches to skip",
            },
            "max_chars": {
                "type": "integer",
                "description": f"answer size bound (default {DEFAULT_MAX_CHARS}; at most what the tool "
                "result limit of the current context window allows)",
            },
        },
    },
}


def recall_ref(value: Any) -> str | None:
    """The ref a recall call names: a string, or a bare message number (`12` means `"#12"`)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"#{value}"
    return value if isinstance(value, str) and value.strip() else None


def _whole_number(value: Any) -> int | None:
    """An int, an integral float (`8000.0`) or a string of digits as an int; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdecimal():
        return int(value.strip())
    return None


def recall_bound(value: Any, context_length: int, calls_in_turn: int = 1) -> tuple[int, tuple[str, ...]]:
    """The size bound of a recall answer: `max_chars` as given if it lies between MIN_MAX_CHARS and
    what Hermes passes through unchanged for this window (and this many tool calls in the turn), else
    the nearest of the two (the default when none or no number is given), and a note that names a
    value not taken as given."""
    ceiling = max(MIN_MAX_CHARS, hermes_share_chars(context_length, calls_in_turn))
    default = min(DEFAULT_MAX_CHARS, ceiling)
    if value is None:
        return default, ()
    number = _whole_number(value)
    if number is None:
        return default, (f"max_chars {str(value)[:40]!r} is not a whole number: used the default, {default:,}",)
    digits = len(str(abs(number)))
    shown = f"{number:,}" if digits <= 20 else f"{str(number)[:20]}… ({digits} digits)"
    if number > ceiling:
        window = f"{context_length:,}-token window" if context_length > 0 else "unknown window"
        turn = f" and {calls_in_turn} tool calls in this turn" if calls_in_turn > 1 else ""
        return ceiling, (
            f"max_chars {shown} is above {ceiling:,}, the largest tool result Hermes passes on unchanged "
            f"for this {window}{turn} (a larger one reaches the model as a short preview): used {ceiling:,}",
        )
    if number < MIN_MAX_CHARS:
        return MIN_MAX_CHARS, (f"max_chars {shown} is below the least, {MIN_MAX_CHARS:,}: used {MIN_MAX_CHARS:,}",)
    return number, ()


def calls_in_turn(messages: Sequence[dict[str, Any]]) -> int:
    """How many tool calls the assistant message that called recall made (1 when it cannot be told):
    Hermes bounds their results together."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "assistant":
            calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
            names = {(c.get("function") or {}).get("name") for c in calls if isinstance(c.get("function"), dict)}
            return len(calls) if RECALL_TOOL in names else 1
    return 1


def answer(raw: Sequence[dict[str, Any]], args: dict[str, Any], context_length: int, calls: int = 1) -> str:
    """The tool result (JSON) of a `timmy_recall` call with `args` on the raw messages: messages by
    ref, or matching lines by query; never longer than what Hermes hands the model unchanged for this
    window and `calls` tool calls in the turn."""
    max_chars, notes = recall_bound(args.get("max_chars"), context_length, calls)
    offset = _whole_number(args.get("offset") or 0)
    if offset is None:
        return json.dumps({"error": "`offset` is a whole number: 0, or the offset a cut answer named"})
    ref, query = recall_ref(args.get("ref")), args.get("query")
    try:
        if ref is not None:
            return lookup(raw, ref, max_chars=max_chars, offset=offset, notes=notes).to_json()
        if isinstance(query, str):
            return search(raw, query, max_chars=max_chars, offset=offset, notes=notes).to_json()
    except RefError as exc:
        return json.dumps({"error": str(exc)}, ensure_ascii=False)
    return json.dumps({"error": 'give `ref` ("#12", 12, "#40-#44") or `query` (text to find)'})

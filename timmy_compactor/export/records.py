"""The export's records, pure: one `conversations.jsonl` record per session, its `dpo_pairs.jsonl` records.

Messages keep what a trainer reads — `role`, `content`, `tool_calls` (`id`, `type`, `function`),
`tool_call_id`, `name`, and the model's reasoning as `reasoning_content` when there is some — and
drop Hermes' bookkeeping (`_db_persisted`, `timestamp`, `finish_reason`, `reasoning: null`, a
Codex call's `call_id`...): a key a chat template never reads still reaches it once `datasets`
unifies the rows' schema. An integer beyond 64 bits (which JSON tooling reads as a float, or not at
all) is written as its decimal string, and the record lists where (`integers_as_strings`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from timmy_compactor.export.dpo import mine_pairs
from timmy_compactor.sessions.files import Session

Clean = Callable[[Any], Any]

MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
"""The message keys a chat template reads (OpenAI's chat format); `reasoning_content` besides, when set."""
CALL_KEYS = ("id", "type", "function")
INTS_AS_STRINGS = "integers_as_strings"
_INT64 = range(-(2**63), 2**64)  # orjson writes signed and unsigned 64-bit integers


def trainer_message(message: Any) -> Any:
    """`message` with only the keys a trainer reads (a message that is not an object, as it is).

    `content` is always there (None when the message had none), as trainers' format checks expect;
    a tool result's `tool_name` becomes its `name` when it has none."""
    if not isinstance(message, dict):
        return message
    out = {key: message[key] for key in MESSAGE_KEYS if key in message}
    out.setdefault("content", None)
    if "name" not in out and message.get("role") == "tool" and isinstance(message.get("tool_name"), str):
        out["name"] = message["tool_name"]
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning.strip():
        out["reasoning_content"] = reasoning
    calls = out.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = [
            {key: call[key] for key in CALL_KEYS if key in call} if isinstance(call, dict) else call for call in calls
        ]
    elif calls is None:
        out.pop("tool_calls", None)
    return out


def ints_as_strings(value: Any, where: str, found: list[str]) -> Any:
    """`value` with every integer beyond 64 bits as its decimal string; their paths appended to
    `found` (`messages[3].content[1].n`). Containers are copied only where something changed."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value in _INT64:
            return value
        found.append(where)
        return str(value)
    if isinstance(value, dict):
        changed = {}
        for key, item in value.items():
            new = ints_as_strings(item, f"{where}.{key}" if where else str(key), found)
            if new is not item:
                changed[key] = new
        return {**value, **changed} if changed else value
    if isinstance(value, list):
        items = [ints_as_strings(item, f"{where}[{i}]", found) for i, item in enumerate(value)]
        return items if any(new is not old for new, old in zip(items, value, strict=True)) else value
    return value


def keep(value: Any) -> Any:
    return value


def conversation_record(
    session: Session, key: str, size: int, clean: Clean = keep, clean_shared: Clean | None = None
) -> dict[str, Any]:
    """The `conversations.jsonl` record of one raw session; `clean` is applied to the session's data
    (`clean_shared`, if given, to the system prompt and tool schemas, which repeat across sessions)."""
    doc = session.document or {}
    shared = clean_shared or clean
    data: dict[str, Any] = {
        "session_key": key,
        "id": clean(doc.get("session_id") if isinstance(doc.get("session_id"), str) else key),
        "model": clean(doc.get("model")),
        "base_url": clean(doc.get("base_url")),
        "platform": clean(doc.get("platform")),
        "session_start": clean(doc.get("session_start")),
        "last_updated": clean(doc.get("last_updated")),
        "system_prompt": shared(doc.get("system_prompt")),
        "tools": shared(doc.get("tools") or []),
        "message_count": len(session.messages),
        "messages": clean([trainer_message(m) for m in session.messages]),
    }
    found: list[str] = []
    record: dict[str, Any] = ints_as_strings(data, "", found)
    if found:
        record[INTS_AS_STRINGS] = found
    record["source"] = {"file": session.path.name, "sha256": session.sha256, "bytes": size}
    return record


def big_int_note(record: dict[str, Any]) -> str | None:
    """One line for the export's summary when the record wrote integers as strings: how many, and in
    which messages or fields (never a key or value from inside a message)."""
    found = record.get(INTS_AS_STRINGS)
    if not found:
        return None
    where = list(dict.fromkeys(_BIG_INT_PLACE.match(path).group(0) for path in found))  # type: ignore[union-attr]
    shown = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
    return f"{len(found)} integer(s) beyond 64 bits exported as strings, in {shown} (see {INTS_AS_STRINGS})"


_BIG_INT_PLACE = re.compile(r"^[^.\[]*(?:\[\d+\])?")


def pair_records(record: dict[str, Any], raw_messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `dpo_pairs.jsonl` records of one session: mined on the raw messages, built from the
    record's (possibly redacted) messages, which have the same indices.

    `prompt`, `chosen` and `rejected` are in the conversational preference format TRL's DPO trainer
    reads: lists of messages with `role` and `content`, the system prompt (Hermes keeps it outside
    the messages) as the first prompt message. `indices` are raw message indices (without it)."""
    messages = [m if "content" in m else {**m, "content": None} for m in record["messages"]]
    system = [{"role": "system", "content": record["system_prompt"]}] if record["system_prompt"] else []
    out = []
    for pair in mine_pairs(raw_messages):
        out.append(
            {
                "session_key": record["session_key"],
                "session_id": record["id"],
                "rule": pair.rule,
                "prompt": system + messages[: pair.prompt_end + 1],
                "rejected": [messages[i] for i in pair.rejected],
                "chosen": [messages[i] for i in pair.chosen],
                "correction": messages[pair.correction],
                "system": record["system_prompt"],
                "tools": record["tools"],
                "indices": {
                    "prompt_end": pair.prompt_end,
                    "rejected": list(pair.rejected),
                    "correction": pair.correction,
                    "chosen": list(pair.chosen),
                },
                "source": record["source"],
            }
        )
    return out


def dumps(record: dict[str, Any]) -> bytes:
    return orjson.dumps(record, default=str)

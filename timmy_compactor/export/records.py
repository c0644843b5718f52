"""The export's records, pure: one `conversations.jsonl` record per session, its `dpo_pairs.jsonl` records."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from timmy_compactor.export.dpo import mine_pairs
from timmy_compactor.sessions.files import Session

Clean = Callable[[Any], Any]


def keep(value: Any) -> Any:
    return value


def conversation_record(
    session: Session, key: str, size: int, clean: Clean = keep, clean_shared: Clean | None = None
) -> dict[str, Any]:
    """The `conversations.jsonl` record of one raw session; `clean` is applied to the session's data
    (`clean_shared`, if given, to the system prompt and tool schemas, which repeat across sessions)."""
    doc = session.document or {}
    shared = clean_shared or clean
    return {
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
        "messages": clean(session.messages),
        "source": {"file": session.path.name, "sha256": session.sha256, "bytes": size},
    }


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

"""Optional rule (`redact_credentials: true`): credentials in the compacted middle become refs.

Every string of the middle's assistant and tool messages goes through `redact_text` (secrets → stable
`credential_ref:<hash>`, IPv4 → `[REDACTED_IP]`): content (text or a list of parts), tool-call
arguments, `reasoning`, `reasoning_content`, `reasoning_details` and any other field, whatever its key;
only the fields that tie the conversation together (`role`, ids, the tool's name) are kept. User
messages are never touched (rule 5) and the tail stays byte-for-byte, so secrets a user typed stay
where they are: this rule keeps tool output and the assistant's echoes of secrets out of the
long-lived part of the context. Off by default, so paths and URLs survive untouched. (A view made
with it also redacts the session document's other fields: system prompt, `base_url`...)
"""

from __future__ import annotations

from timmy_compactor.core.draft import Draft, RuleCounts
from timmy_compactor.core.redact import MESSAGE_STRUCTURE, redact_text, redact_value
from timmy_compactor.core.types import Entry, Message, Settings

NAME = "redact_credentials"


def apply(draft: Draft, settings: Settings) -> tuple[Draft, RuleCounts]:
    if not settings.redact_credentials:
        return draft, {}
    out: list[Entry] = []
    count = 0
    for entry in draft.middle:
        if entry.role not in ("assistant", "tool"):
            out.append(entry)
            continue
        message = redacted_message(entry.message)
        if message != entry.message:
            count += 1
            out.append(Entry(message, entry.sources))
        else:
            out.append(entry)
    return draft.with_middle(out), {NAME: count} if count else {}


def redacted_message(message: Message) -> Message:
    """`message` with every string redacted but those of `MESSAGE_STRUCTURE` (a call's arguments are)."""
    out = {key: value if key in MESSAGE_STRUCTURE else redact_value(value) for key, value in message.items()}
    if isinstance(message.get("tool_calls"), list):
        out["tool_calls"] = [
            {**c, "function": {**c["function"], "arguments": redact_text(str(c["function"].get("arguments", "")))}}
            if isinstance(c, dict) and isinstance(c.get("function"), dict)
            else c
            for c in message["tool_calls"]
        ]
    return out

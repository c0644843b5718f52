"""Optional rule (`redact_credentials: true`): credentials in the compacted middle become refs.

Assistant and tool content of the middle goes through `redact_text` (secrets → stable
`credential_ref:<hash>`, IPv4 → `[REDACTED_IP]`). User messages are never touched (rule 5) and the
tail stays byte-for-byte, so secrets a user typed stay where they are: this rule keeps tool output and
the assistant's echoes of secrets out of the long-lived part of the context. Off by default, so paths
and URLs survive untouched.
"""

from __future__ import annotations

from timmy_compactor.core.draft import Draft, RuleCounts
from timmy_compactor.core.redact import redact_text, redact_value
from timmy_compactor.core.types import Entry, Settings

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
        message = dict(entry.message)
        message["content"] = redact_value(entry.message.get("content"))
        if "tool_calls" in message:
            message["tool_calls"] = [
                {**c, "function": {**c["function"], "arguments": redact_text(str(c["function"].get("arguments", "")))}}
                if isinstance(c, dict) and isinstance(c.get("function"), dict)
                else c
                for c in message["tool_calls"]
            ]
        if message != entry.message:
            count += 1
            out.append(Entry(message, entry.sources))
        else:
            out.append(entry)
    return draft.with_middle(out), {NAME: count} if count else {}

"""Rule 1: a succeeded tool call and its result become one line on the assistant message.

The call's arguments and the result body go; `[tool: name("arg") → ok, N chars, #i–#j]` stays.
Failed calls are kept whole (rule 2 may still shorten their output).
"""

from __future__ import annotations

from timmy_compactor.core.draft import Draft, RuleCounts
from timmy_compactor.core.facts import tool_calls
from timmy_compactor.core.lines import append, tool_line
from timmy_compactor.core.types import Entry, Settings

NAME = "collapse_tool_pairs"


def apply(draft: Draft, settings: Settings) -> tuple[Draft, RuleCounts]:
    if not settings.keep_tool_summary:
        return draft, {}
    middle = list(draft.middle)
    out: list[Entry] = []
    collapsed = 0
    i = 0
    while i < len(middle):
        entry = middle[i]
        calls = tool_calls(entry.message) if entry.role == "assistant" else []
        if not calls:
            out.append(entry)
            i += 1
            continue
        ids = {c.get("id") for c in calls}
        j = i + 1
        results: dict[object, Entry] = {}
        while j < len(middle) and middle[j].role == "tool" and middle[j].message.get("tool_call_id") in ids:
            results.setdefault(middle[j].message.get("tool_call_id"), middle[j])
            j += 1
        answered = middle[i + 1 : j]
        kept_calls, lines, absorbed = [], [], list(entry.sources)
        for call in calls:
            result = results.get(call.get("id"))
            outcome = None if result is None else draft.facts.outcome_of(result.message, result.sources)
            if result is None or outcome is None or outcome.failed:
                kept_calls.append(call)
                continue
            lines.append(
                tool_line(
                    call,
                    "ok",
                    entry.sources + result.sources,
                    result.message.get("content"),
                    key_lines=outcome.key_lines,
                    redact=settings.redact_credentials,
                )
            )
            absorbed.extend(result.sources)
            collapsed += 1
        if not lines:
            out.extend(middle[i:j])
            i = j
            continue
        message = {k: v for k, v in entry.message.items() if k != "tool_calls"}
        message["content"] = append(entry.message.get("content"), lines)
        if kept_calls:
            message["tool_calls"] = kept_calls
        out.append(Entry(message, tuple(absorbed)))
        # The results of the kept calls, and any second result for a collapsed call (sanitized later).
        absorbed_set = set(absorbed)
        out.extend(r for r in answered if r.sources[0] not in absorbed_set)
        i = j
    return draft.with_middle(out), {NAME: collapsed} if collapsed else {}

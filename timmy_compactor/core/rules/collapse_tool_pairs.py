"""Rule 1: a succeeded tool call and its result become one line on the assistant message.

The call's arguments and the result body go; `[tool: name("arg") → ok, N chars, #i–#j]` stays.
Failed calls are kept whole (rule 2 may still shorten their output). A step of raw messages is
collapsed once per session: the readings keep its entries for the next compaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from timmy_compactor.core.draft import Draft, RuleCounts
from timmy_compactor.core.facts import RawFacts, tool_calls
from timmy_compactor.core.lines import append, tool_line
from timmy_compactor.core.types import Entry, Settings

NAME = "collapse_tool_pairs"


def apply(draft: Draft, settings: Settings) -> tuple[Draft, RuleCounts]:
    if not settings.keep_tool_summary:
        return draft, {}
    middle = draft.middle
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
        while j < len(middle) and middle[j].role == "tool" and middle[j].message.get("tool_call_id") in ids:
            j += 1
        step = middle[i:j]
        if all(len(e.sources) == 1 and draft.facts.messages[e.sources[0]] is e.message for e in step):
            key = (NAME, settings.redact_credentials, *(e.sources[0] for e in step))
            entries, n = draft.facts.read_span(
                key, [e.sources[0] for e in step], partial(_step, step=step, settings=settings)
            )
        else:
            entries, n = _step(draft.facts, step, settings)
        out.extend(entries)
        collapsed += n
        i = j
    return draft.with_middle(out), {NAME: collapsed} if collapsed else {}


def _step(facts: RawFacts, step: Sequence[Entry], settings: Settings) -> tuple[tuple[Entry, ...], int]:
    """The entries one step (an assistant message with tool calls, and the results that follow) becomes."""
    entry, answered = step[0], step[1:]
    calls = tool_calls(entry.message)
    results: dict[object, Entry] = {}
    for answer in answered:
        results.setdefault(answer.message.get("tool_call_id"), answer)
    kept_calls, lines, absorbed = [], [], list(entry.sources)
    for call in calls:
        result = results.get(call.get("id"))
        # judged by the raw output it stands for: a superseded one's header (rule `supersede`) is no success
        outcome = None
        if result is not None:
            judged = facts.messages[result.sources[0]] if len(result.sources) == 1 else result.message
            outcome = facts.outcome_of(judged, result.sources)
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
    if not lines:
        return tuple(step), 0
    message = {k: v for k, v in entry.message.items() if k != "tool_calls"}
    message["content"] = append(entry.message.get("content"), lines)
    if kept_calls:
        message["tool_calls"] = kept_calls
    # The results of the kept calls, and any second result for a collapsed call (sanitized later).
    absorbed_set = set(absorbed)
    rest = tuple(r for r in answered if r.sources[0] not in absorbed_set)
    return (Entry(message, tuple(absorbed)), *rest), len(lines)

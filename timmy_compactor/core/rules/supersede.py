"""Supersession (issue 30, item 3): an output that a later run made stale becomes a header line.

A tool call of the middle whose command was run again later, or whose file was read again (`core.reruns`
says what "the same" is), leaves one line on its assistant message instead of its call and output:
`[tool: terminal("python x.py") → exit 1, run again at #40, 853 chars, printed: KeyError: 'pk', #6–#7]`:
what it was, its outcome and key error lines (the verification promises them), where the newer run's
output is, and its own raw indices (one recall away). A read says `read again at #40`, and
`edited at #31 in between` when the file was written between the two reads.
The first rule: a stale output is not truncated or collapsed first. Only the middle is read (the tail,
user messages and the index are never touched); the newer run may be anywhere later, the tail included.
A header depends only on the messages up to the newer run, so it is the same at every later compaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from timmy_compactor.core.draft import Draft, RuleCounts
from timmy_compactor.core.facts import RawFacts, tool_calls
from timmy_compactor.core.keylines import KEY_LINE_MAX_CHARS, KeyLine, is_key_start
from timmy_compactor.core.lines import append, tool_line
from timmy_compactor.core.reruns import Calls, Newer, calls_after
from timmy_compactor.core.rules.truncate_tool_output import MAX_KEPT_ERROR_LINES
from timmy_compactor.core.text import decode_json, string_leaves, text_of
from timmy_compactor.core.types import Entry, Settings

NAME = "supersede"
RECALL_HINT = "timmy_recall"


def apply(draft: Draft, settings: Settings) -> tuple[Draft, RuleCounts]:
    middle = draft.middle
    raw_steps = [e for e in middle if e.role == "assistant" and _untouched(draft.facts, e) and tool_calls(e.message)]
    if not raw_steps:
        return draft, {}
    calls = calls_after(draft.facts, raw_steps[0].sources[0])
    out: list[Entry] = []
    count = 0
    k = 0
    while k < len(middle):
        entry = middle[k]
        j = k + 1
        while j < len(middle) and middle[j].role == "tool":
            j += 1
        if entry.role == "assistant" and _untouched(draft.facts, entry) and tool_calls(entry.message):
            step, n = _step(draft.facts, calls, list(middle[k:j]), settings)
            out += step
            count += n
        else:
            out += middle[k:j]
        k = j
    return draft.with_middle(out), {NAME: count} if count else {}


def _untouched(facts: RawFacts, entry: Entry) -> bool:
    return len(entry.sources) == 1 and facts.messages[entry.sources[0]] is entry.message


def _step(facts: RawFacts, calls: Calls, step: list[Entry], settings: Settings) -> tuple[list[Entry], int]:
    """The entries of one step (an assistant message and the results after it) with each superseded
    output made a header: a succeeded call and its result fold into a line on the assistant message, a
    failed one keeps its call and its result message, whose content becomes the header and its error lines."""
    entry, answers = step[0], step[1:]
    index = entry.sources[0]
    results = {a.message.get("tool_call_id"): a for a in answers if _untouched(facts, a)}
    kept_calls, lines, absorbed, replaced = [], [], list(entry.sources), {}
    for call in tool_calls(entry.message):
        result = results.pop(call.get("id"), None)
        at = calls.place(index, call)
        newer = calls.newer(at) if at is not None and result is not None else None
        if result is None or newer is None or newer.of != result.sources[0]:
            kept_calls.append(call)
            continue
        outcome = facts.outcome(result.sources[0])
        content = result.message.get("content")
        said = _said(outcome.exit_code, outcome.failed, newer)
        if outcome.failed:  # a failed call is never collapsed: its result stays, as a header
            kept_calls.append(call)
            header = f"[superseded: {said}, {len(text_of(content)):,} chars — {RECALL_HINT} #{result.sources[0]}]"
            body = "\n".join([header, *kept_lines(content, outcome.key_lines)])
            replaced[result.sources[0]] = Entry({**result.message, "content": body}, result.sources)
            continue
        line = tool_line(
            call,
            said,
            entry.sources + result.sources,
            content,
            key_lines=outcome.key_lines,
            redact=settings.redact_credentials,
        )
        lines.append(line)
        absorbed += result.sources
    if not lines and not replaced:
        return step, 0
    message = entry.message
    if lines:
        message = {key: value for key, value in entry.message.items() if key != "tool_calls"}
        message["content"] = append(entry.message.get("content"), lines)
        if kept_calls:
            message["tool_calls"] = kept_calls
    rest = [replaced.get(a.sources[0], a) for a in answers if a.sources[0] not in set(absorbed)]
    return [Entry(message, tuple(absorbed)), *rest], len(lines) + len(replaced)


def kept_lines(content: Any, key_lines: Sequence[KeyLine]) -> list[str]:
    """The lines of an output a header keeps: its key error lines and the lines that start like an error
    (what rule 2 keeps from a cut region), at most `MAX_KEPT_ERROR_LINES`, each cut as a key line is."""
    keep = {line.text for line in key_lines}
    text = text_of(content)
    decoded = decode_json(text)
    body = text if decoded is None else "\n".join(string_leaves(decoded))
    found = (line.strip()[:KEY_LINE_MAX_CHARS] for line in body.splitlines())
    printed = [line for line in found if line in keep or is_key_start(line)]
    ordered = list(dict.fromkeys([*(line.text for line in key_lines), *printed]))  # key lines whatever their shape
    return ordered[: max(MAX_KEPT_ERROR_LINES, len(keep))]


def _said(code: int | None, failed: bool, newer: Newer) -> str:
    """`exit 1, run again at #40` / `ok, read again at #40, edited at #31 in between`."""
    outcome = f"exit {code}" if code else "failed" if failed else "ok"
    again = f"{'read' if newer.read else 'run'} again at #{newer.result}"
    edited = f", edited at #{newer.edited_at} in between" if newer.edited_at is not None else ""
    return f"{outcome}, {again}{edited}"

"""What each task ended with (issue 30, item 4), as the fold line of its folded steps names it.

A task is a user message that opened work (its turn called a tool) up to the next user message, which
closes it. When the fold takes a task's steps and keeps the user message that closes it, the task's fold
line says how it ended, the first of:
- a submitted patch: the last call that submits (`submit` in its name, or `COMPLETE_TASK_AND_SUBMIT` /
  `submit` in its arguments), with the files its diff touches:
  `[folded #1–#262: 131 steps, see index; submitted a patch at #262: django/db/models/sql/compiler.py]`;
- the first line of its closing answer (an assistant message with text and no tool call), and, when it
  speaks of output "above", where that output is (the longest and the last of its turn):
  `answered #42: "The log is above. Summary:" — output above: #35, #41`;
- its last command, when it failed: `last command failed at #8: terminal("make") → exit 2: …`;
  else where it stopped: `stopped after #8: terminal("make") → ok`.
The first task after the head gets such a line too (the index alone stood for its steps). What a line
says is redacted, then cut to `OUTCOME_CHARS`; it reads only the messages of the task, so it is the same
bytes at every later compaction.
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from timmy_compactor.core.draft import user_positions
from timmy_compactor.core.facts import RawFacts, call_arguments, call_name, tool_calls
from timmy_compactor.core.fold.index import first_line
from timmy_compactor.core.lines import call_preview
from timmy_compactor.core.redact import redact_text
from timmy_compactor.core.text import text_of

OUTCOME_CHARS = 240
SHOWN_FILES = 3
_SUBMIT = re.compile(r"\bsubmit\b|COMPLETE_TASK_AND_SUBMIT", re.IGNORECASE)
_DIFF_FILE = re.compile(r"^(?:diff --git a/\S+ b/(\S+)|\+\+\+ b/(\S+))", re.MULTILINE)
_ABOVE = re.compile(r"\b(?:above|previous output|output shown|shown earlier)\b", re.IGNORECASE)


def task_outcome(facts: RawFacts, closing: int) -> str:
    """How the task that the user message at raw `closing` closes ended; "" when no task did work there.
    Read once while the task's messages are the same objects (a compaction late in a long session does
    not read every task again)."""
    opener = _user_before(facts, closing)
    if opener < 0:
        return ""  # no task before it
    task = range(opener + 1, closing)
    said: str = facts.read_span(("task_outcome", closing), range(opener, closing + 1), lambda f: _said(f, task))
    return said


def _user_before(facts: RawFacts, index: int) -> int:
    """The last user message before raw `index` (-1: none), by bisection of the users' positions: each
    fold a late compaction tries asks for every task's opener, and a task can be long."""
    users = facts.once("user_positions", None, lambda: user_positions(facts.messages, facts.readings))
    at = bisect.bisect_left(users, index)
    return users[at - 1] if at else -1


def _said(facts: RawFacts, task: range) -> str:
    if not task or not any(tool_calls(facts.messages[k]) for k in task):
        return ""  # a turn that did no work
    said = redact_text(_ended(facts, task))
    return said if len(said) <= OUTCOME_CHARS else said[: OUTCOME_CHARS - 1] + "…"


def _ended(facts: RawFacts, task: range) -> str:
    messages = facts.messages
    submitted = _submitted(facts, task)
    if submitted:
        return submitted
    last = task[-1]
    message = messages[last]
    if message.get("role") == "assistant" and not tool_calls(message) and text_of(message.get("content")).strip():
        return first_line(last, message, label="answered") + above(facts, last, task.start)
    results = [k for k in task if messages[k].get("role") == "tool"]
    if not results:
        return f"stopped after #{last}"
    result = results[-1]
    outcome = facts.outcome(result)
    call = _call_of(facts, result, task.start)
    shown = call_preview(call) if call else "a tool"
    if outcome.failed:
        printed = outcome.anchored_lines
        return f"last command failed at #{result}: {shown} → {printed[0] if printed else 'failed'}"
    return f"stopped after #{result}: {shown} → ok"


def _submitted(facts: RawFacts, task: range) -> str:
    """`submitted a patch at #k: files`, for the last call of the task that submits; "" for none."""
    messages = facts.messages
    for k in reversed(task):
        for call in tool_calls(messages[k]):
            if _SUBMIT.search(call_name(call)) or _SUBMIT.search(call_arguments(call)[:1_000]):
                result = _result_of(facts, call, k, task.stop)
                if result is None:
                    return f"submitted at #{k}"
                files = list(
                    dict.fromkeys(a or b for a, b in _DIFF_FILE.findall(text_of(messages[result].get("content"))))
                )
                if not files:
                    return f"submitted at #{result}"
                more = f" (+{len(files) - SHOWN_FILES} more)" if len(files) > SHOWN_FILES else ""
                return f"submitted a patch at #{result}: {', '.join(files[:SHOWN_FILES])}{more}"
    return ""


def above(facts: RawFacts, answer: int, since: int) -> str:
    """` — output above: #35, #41` when an answer speaks of output "above": the longest and the last tool
    output of its turn (from raw `since`), which are folded with it; "" otherwise."""
    if not _ABOVE.search(text_of(facts.messages[answer].get("content"))):
        return ""
    outputs = [k for k in range(since, answer) if facts.messages[k].get("role") == "tool"]
    if not outputs:
        return ""
    longest = max(outputs, key=lambda k: len(text_of(facts.messages[k].get("content"))))
    return " — output above: " + ", ".join(f"#{k}" for k in sorted({longest, outputs[-1]}))


def _result_of(facts: RawFacts, call: dict[str, Any], index: int, stop: int) -> int | None:
    for k in range(index + 1, stop):
        message = facts.messages[k]
        if message.get("role") != "tool":
            break
        if message.get("tool_call_id") == call.get("id"):
            return k
    return None


def _call_of(facts: RawFacts, result: int, start: int) -> dict[str, Any] | None:
    call_id = facts.messages[result].get("tool_call_id")
    for k in range(result - 1, start - 1, -1):
        for call in tool_calls(facts.messages[k]):
            if call.get("id") == call_id:
                return call
        if facts.messages[k].get("role") != "tool":
            break
    return None

"""The least the rules can leave of a middle: a lower bound of the rules-only view, found without running them.

The pipeline folds first; when even this bound is no smaller than the fold's view, the rules need not
visit the whole history (spec §2a, tier 1 or 2, whichever leaves less). The bound must never exceed
the view the rules make, or the fold would be chosen where the rules win: what each tool call leaves
is counted only as far as every rule that may take it is sure to leave it.

- Tail and the middle's user messages stay as they are; so does the head, but for a system prompt,
  counted as its marker when that is shorter (rule 3 may drop it).
- A call answered in its own step (its result among the tool messages right after it) leaves either a
  line, `[tool: NAME(…) → ok, N chars, #i–#j]` (collapsed, or superseded), or its call whole in the
  assistant message (failed, or no summaries): the smaller of the two is counted. In the line, only
  what no rule can shorten counts: the fixed text, the tool name (a plain one, at most
  `NAME_CHARS`: a longer one could be redacted into a shorter reference), `N chars` (N the result's
  length when its content is a string, else 0) and the two raw indices.
- Any other call (or one without a name, or with an exact counter) leaves at least `MIN_CALL_LINE_TOKENS`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from timmy_compactor.core.accounting import Accounting
from timmy_compactor.core.draft import Draft, users_of
from timmy_compactor.core.facts import RawFacts, call_name, tool_calls
from timmy_compactor.core.rules import drop_system
from timmy_compactor.core.text import text_of
from timmy_compactor.core.types import Entry, Message

MIN_CALL_LINE_TOKENS = 7
"""The least a tool call of the middle leaves after the rules: its `[tool: x() → ok, 0 chars, #1–#2]` line."""
LINE_FIXED_CHARS = len("[tool: () → ok, , –]")  # the line without its name, `N chars` and indices
KEPT_CALL_CHARS = len("{'function': {'name': ''}}") + len("{'role': 'tool'}")  # a kept call and its result
NAME_CHARS = 12
_PLAIN_NAME = re.compile(r"[\w.-]+")


def rules_beat_by_fold(raw: Draft, acc: Accounting, fold_tokens: int) -> bool:
    """Whether even the lower bound of the rules-only view is no smaller than the fold's view. Stops
    counting the calls as soon as it is: a long middle is not walked to the end. `raw` is Draft.start's:
    one untouched entry per message."""
    start = len(raw.head)
    flags = users_of(raw.facts.messages, raw.facts.readings)[start : start + len(raw.middle)]
    kept = tuple(map(_least_head, raw.head)) + tuple(itertools.compress(raw.middle, flags)) + raw.tail
    floor = acc.view_tokens(kept)
    chars = 0  # what the answered calls leave, in characters (the rough estimate only)
    stop, counted = start + len(raw.middle), acc.counter is None
    for k, entry in enumerate(raw.middle):
        if floor + chars // 4 >= fold_tokens:
            return True
        if entry.role != "assistant":
            continue
        found = raw.facts.read("least_step", start + k, _least_step) if counted else None  # once per message
        if found is None or found[2] > stop:  # its results run past the middle: what the middle holds
            found = _least_of(raw.facts.messages, start + k, stop, counted=counted)
        tokens, least, _ = found
        floor += tokens
        chars += least
    return floor + chars // 4 >= fold_tokens


def _least_step(facts: RawFacts, index: int) -> tuple[int, int, int]:
    return _least_of(facts.messages, index, len(facts.messages), counted=True)


def _least_of(messages: Sequence[Message], index: int, stop: int, *, counted: bool) -> tuple[int, int, int]:
    """What the tool calls of assistant message `index` leave at least, the results that follow it (up
    to `stop`) answering them: tokens (a line each for a call without a result, a name, or `counted`
    false), characters (the others), and where its step ends."""
    answers: dict[object, int] = {}
    end = index + 1
    while end < stop and messages[end].get("role") == "tool":
        answers.setdefault(messages[end].get("tool_call_id"), end)
        end += 1
    tokens = chars = 0
    for call in tool_calls(messages[index]):
        result = answers.pop(call.get("id"), None) if counted and call_name(call) else None
        if result is None:
            tokens += MIN_CALL_LINE_TOKENS
        else:
            chars += _call_chars(call, index, result, messages[result])
    return tokens, chars, end


def _least_head(entry: Entry) -> Entry:
    """A head entry as the least rule 3 may leave of it: a system prompt becomes its marker when shorter."""
    content = entry.message.get("content")
    if entry.role != "system" or not isinstance(content, str | list):
        return entry
    shorter = drop_system.marker(text_of(content))
    return Entry({**entry.message, "content": shorter}, entry.sources) if len(shorter) < len(str(content)) else entry


def _call_chars(call: dict[str, object], at: int, answered_at: int, result: Message) -> int:
    """The least an answered call leaves: its line, or its call kept whole, whichever is shorter."""
    name = call_name(call)
    shown = min(len(name), NAME_CHARS) if _PLAIN_NAME.fullmatch(name) else 0
    content = result.get("content")
    size = len(f"{len(content):,} chars") if isinstance(content, str) else len("0 chars")
    line = LINE_FIXED_CHARS + shown + size + len(str(at)) + len(str(answered_at)) + 2
    return min(line, KEPT_CALL_CHARS + shown)

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
from timmy_compactor.core.facts import call_name, tool_calls
from timmy_compactor.core.rules import drop_system
from timmy_compactor.core.text import text_of
from timmy_compactor.core.types import Entry

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
    for k, entry in enumerate(raw.middle):
        if floor + chars // 4 >= fold_tokens:
            return True
        calls = tool_calls(entry.message) if entry.role == "assistant" else []
        if not calls:
            continue
        answers = _answers(raw.middle, k + 1)
        for call in calls:
            result = answers.pop(call.get("id"), None) if acc.counter is None and call_name(call) else None
            if result is None:
                floor += MIN_CALL_LINE_TOKENS
            else:
                chars += _call_chars(call, entry.sources[0], result)
    return floor + chars // 4 >= fold_tokens


def _least_head(entry: Entry) -> Entry:
    """A head entry as the least rule 3 may leave of it: a system prompt becomes its marker when shorter."""
    content = entry.message.get("content")
    if entry.role != "system" or not isinstance(content, str | list):
        return entry
    shorter = drop_system.marker(text_of(content))
    return Entry({**entry.message, "content": shorter}, entry.sources) if len(shorter) < len(str(content)) else entry


def _answers(middle: Sequence[Entry], start: int) -> dict[object, Entry]:
    """The tool results of the step whose results begin at `middle[start]`, by call id (the first of each)."""
    found: dict[object, Entry] = {}
    k = start
    while k < len(middle) and middle[k].role == "tool":  # indexed, not `middle[start:]`: no copy of the rest
        found.setdefault(middle[k].message.get("tool_call_id"), middle[k])
        k += 1
    return found


def _call_chars(call: dict[str, object], at: int, result: Entry) -> int:
    """The least an answered call leaves: its line, or its call kept whole, whichever is shorter."""
    name = call_name(call)
    shown = min(len(name), NAME_CHARS) if _PLAIN_NAME.fullmatch(name) else 0
    content = result.message.get("content")
    size = len(f"{len(content):,} chars") if isinstance(content, str) else len("0 chars")
    line = LINE_FIXED_CHARS + shown + size + len(str(at)) + len(str(result.sources[0])) + 2
    return min(line, KEPT_CALL_CHARS + shown)

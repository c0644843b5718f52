"""The engine's raw store: every message Hermes has shown it, in order, never compacted.

Hermes calls `compress()` with the list the engine returned last time plus what came after. The
engine keeps the raw messages behind that list, so that (spec §2a) it compacts from the raw messages
each time -- the `#N` refs in `[tool: …]` lines, fold lines and the anchor index are positions in
this log and mean the same message across compactions -- and `timmy_recall` can return any of
them exactly. When Hermes cut the end off what the engine returned (`/retry`, `/undo` of a turn that
was compacted), the log drops the raw messages behind the part cut off and goes on from there. When
the list does not start with what the engine returned at all (a new session, or a list Hermes
changed itself), the log starts again from that list.

A list that went through Hermes' state.db (a resumed session) carries the same messages with a few
keys added or dropped, so "the same message" means the same role, content, tool call id and calls.
Hermes edits the dicts of its history in place (it merges consecutive assistant messages before a
request, marks persisted ones): the log keeps copies of its own, never the dicts Hermes holds.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from timmy_compactor.core.engine_lines import ENGINE_LINE_RE
from timmy_compactor.core.fold.index import is_index
from timmy_compactor.core.types import Message


def _calls(message: Message) -> tuple[Any, ...]:
    found = []
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            found.append((call.get("id"), function.get("name"), function.get("arguments")))
    return tuple(found)


def same_message(a: Message, b: Message) -> bool:
    """What the model sees of a message is equal (keys Hermes adds for its own bookkeeping aside)."""
    if a is b:
        return True
    return (
        a.get("role") == b.get("role")
        and a.get("content") == b.get("content")
        and a.get("tool_call_id") == b.get("tool_call_id")
        and _calls(a) == _calls(b)
    )


def starts_with(messages: Sequence[Message], prefix: Sequence[Message]) -> bool:
    return len(messages) >= len(prefix) and all(map(same_message, messages, prefix))


def _ours(message: Message) -> bool:
    """A message the engine wrote (a summary line, a fold line, the index), not one Hermes had."""
    content = message.get("content")
    return is_index(message) or (isinstance(content, str) and bool(ENGINE_LINE_RE.search(content)))


@dataclass
class RawLog:
    messages: list[Message] = field(default_factory=list)
    returned: list[Message] = field(default_factory=list)
    returned_sources: list[tuple[int, ...]] | None = None  # the raw indices behind each returned message
    restarts: int = 0
    truncations: int = 0
    replaced: int = 0  # how often `messages` was replaced rather than extended (a store rewrites then)

    def absorb(self, current: Sequence[Message]) -> list[Message]:
        """The raw messages behind `current` (what Hermes passed to `compress`)."""
        current = list(current)
        if self.returned and starts_with(current, self.returned):
            self.messages += copy.deepcopy(current[len(self.returned) :])
        elif self.messages and starts_with(current, self.messages):
            self.messages += copy.deepcopy(current[len(self.messages) :])  # nothing compacted since
        elif (cut := self._cut_by_host(current)) is not None:
            kept, raw_end = cut
            self.truncations += 1
            self.replaced += 1
            self.messages = self.messages[:raw_end] + copy.deepcopy(current[kept:])
        else:
            self.restarts += bool(self.messages)
            self.replaced += 1
            self.messages = copy.deepcopy(current)
        return self.messages

    def _cut_by_host(self, current: list[Message]) -> tuple[int, int] | None:
        """(messages of `current` that are what the engine returned, raw messages behind them) when
        Hermes cut the end off the returned list and added new messages; None otherwise."""
        if not self.returned or self.returned_sources is None:
            return None
        kept = 0
        while kept < min(len(current), len(self.returned)) and same_message(current[kept], self.returned[kept]):
            kept += 1
        dropped = [i for sources in self.returned_sources[kept:] for i in sources]
        if kept == 0 or not dropped or any(_ours(m) for m in current[kept:]):
            return None
        return kept, min(dropped)

    def answered(self, returned: Sequence[Message], sources: Sequence[Sequence[int]] | None = None) -> None:
        """What `compress` returned (and the raw indices behind each message, when known): the prefix
        of the next list Hermes passes."""
        self.returned = copy.deepcopy(list(returned))
        self.returned_sources = None if sources is None else [tuple(s) for s in sources]

    def reset(self) -> None:
        self.messages, self.returned, self.returned_sources = [], [], None
        self.replaced += 1

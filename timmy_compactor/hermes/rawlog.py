"""The engine's raw store: every message Hermes has shown it, in order, never compacted.

Hermes calls `compress()` with the list the engine returned last time plus what came after. The
engine keeps the raw messages behind that list, so that (spec §2a) it compacts from the raw messages
each time -- the `#N` refs in `[tool: …]` lines, fold lines and the anchor index are positions in
this log and mean the same message across compactions -- and `timmy_recall` can return any of
them exactly. When the list does not start with what the engine returned (a new session, a resumed
one, or a list Hermes changed itself), the log starts again from that list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Message = dict[str, Any]


@dataclass
class RawLog:
    messages: list[Message] = field(default_factory=list)
    returned: list[Message] = field(default_factory=list)
    restarts: int = 0

    def absorb(self, current: Sequence[Message]) -> list[Message]:
        """The raw messages behind `current` (what Hermes passed to `compress`)."""
        current = list(current)
        if self.returned and current[: len(self.returned)] == self.returned:
            self.messages += current[len(self.returned) :]
        elif self.messages and current[: len(self.messages)] == self.messages:
            self.messages = current  # nothing compacted since: Hermes holds the raw messages
        else:
            self.restarts += bool(self.messages)
            self.messages = current
        return self.messages

    def answered(self, returned: Sequence[Message]) -> None:
        """What `compress` returned: the prefix of the next list Hermes passes."""
        self.returned = list(returned)

    def reset(self) -> None:
        self.messages, self.returned = [], []

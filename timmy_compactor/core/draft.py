"""The view under construction, passed from rule to rule."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.partition import Partition
from timmy_compactor.core.types import Entry, Message


@dataclass(frozen=True, slots=True)
class Draft:
    head: tuple[Entry, ...]
    middle: tuple[Entry, ...]
    tail: tuple[Entry, ...]
    user_turns: int
    facts: RawFacts

    @classmethod
    def start(cls, messages: Sequence[Message], part: Partition, facts: RawFacts | None = None) -> Draft:
        entries = tuple(Entry(m, (i,)) for i, m in enumerate(messages))
        return cls(
            head=entries[: part.head_end],
            middle=entries[part.head_end : part.tail_start],
            tail=entries[part.tail_start :],
            user_turns=sum(1 for m in messages if m.get("role") == "user"),
            facts=facts or RawFacts(messages),
        )

    def with_middle(self, middle: Sequence[Entry]) -> Draft:
        return dataclasses.replace(self, middle=tuple(middle))

    def entries(self) -> tuple[Entry, ...]:
        return self.head + self.middle + self.tail


RuleCounts = dict[str, int]

"""The view under construction, passed from rule to rule."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.index import Index
from timmy_compactor.core.partition import Partition
from timmy_compactor.core.readings import Readings
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
        facts = facts or RawFacts(messages)
        entries = _entries(messages, facts.readings)
        return cls(
            head=entries[: part.head_end],
            middle=entries[part.head_end : part.tail_start],
            tail=entries[part.tail_start :],
            user_turns=sum(users_of(messages, facts.readings)),
            facts=facts,
        )

    def with_middle(self, middle: Sequence[Entry]) -> Draft:
        return dataclasses.replace(self, middle=tuple(middle))

    def entries(self) -> tuple[Entry, ...]:
        return self.head + self.middle + self.tail


def users_of(messages: Sequence[Message], readings: Readings) -> list[bool]:
    """Whether each message is a user's, read once per message."""
    flags: list[bool] = readings.each("is_user", messages, lambda m: m.get("role") == "user")
    return flags


def user_positions(messages: Sequence[Message], readings: Readings) -> list[int]:
    """The indices of the user messages, each message read once in a list that grows."""
    return readings.positions("users", messages, lambda m: m.get("role") == "user")


def _entries(messages: Sequence[Message], readings: Readings) -> tuple[Entry, ...]:
    """One entry per raw message; a list that grew keeps the entries of the messages it had."""

    def read_on(known: tuple[Entry, ...] | None, seen: int) -> tuple[Entry, ...]:
        return (known or ()) + tuple(Entry(m, (i,)) for i, m in enumerate(messages[seen:], seen))

    entries: tuple[Entry, ...] = readings.grown("entries", messages, read_on)
    return entries


RuleCounts = dict[str, int]


@dataclass(frozen=True, slots=True)
class Built:
    """What the tiers made of a draft: the view, and what verification checks it against."""

    view: tuple[Entry, ...]
    part: Partition  # the partition verification checks against (tail relief moves the tail start)
    counts: RuleCounts
    folded: Collection[int] = frozenset()
    folded_users: frozenset[int] = frozenset()
    index: Index | None = None
    note: str | None = None

"""What compactions read of the messages, kept across calls: a list that only grows is read once."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from timmy_compactor.core.types import Message

MAX_OBJECTS = 100_000


class Readings:
    """Per-message readings kept across `compact` calls: the engine's raw log only grows, so a message
    is read once in a session. A reading is reused only for the very same message object at the same
    index (a list that changed is read anew); `chunks` keeps the anchor index's rendered chunks."""

    __slots__ = ("chunks", "lists", "objects", "spans", "tables", "verified_folds")

    def __init__(self) -> None:
        self.tables: dict[str, dict[int, tuple[Message, Any]]] = {}  # `RawFacts.read`: by name, then index
        self.spans: dict[tuple[Any, ...], tuple[tuple[Message, ...], Any]] = {}
        self.lists: dict[str, tuple[tuple[Message, ...], Any]] = {}  # `each`, `grown`: a whole list's readings
        self.objects: dict[tuple[str, int], tuple[Any, Any]] = {}  # readings of messages the rules made
        self.chunks: dict[Any, Any] = {}
        # the last index text verified, and the folded messages found whole in it (core.verify)
        self.verified_folds: tuple[str, dict[int, Message]] = ("", {})

    def each(self, name: str, messages: Sequence[Message], compute: Callable[[Message], Any]) -> list[Any]:
        """`compute(message)` for every message, each computed once per message object at its index.
        A list that starts with the very objects of the last one read (a raw log that grew) costs one
        identity check of that prefix and the new messages, not a lookup per message."""
        seen, values = self.lists.get(name, ((), ()))
        if not all(map(operator.is_, seen, messages)):  # (over the shorter of the two)
            seen, values = (), ()
        if len(seen) < len(messages):
            new = messages[len(seen) :]
            seen, values = (*seen, *new), (*values, *map(compute, new))
            self.lists[name] = (seen, values)
        return list(values[: len(messages)])

    def of_object(self, name: str, obj: Any, compute: Callable[[Any], Any]) -> Any:
        """`compute(obj)`, once per object (kept with it, so an id is never mistaken for another's)."""
        hit = self.objects.get((name, id(obj)))
        if hit is None or hit[0] is not obj:
            if len(self.objects) >= MAX_OBJECTS:  # each compaction makes a few new messages (the index,
                self.objects.clear()  # fold lines): a session of months must not keep them all
            hit = self.objects[(name, id(obj))] = (obj, compute(obj))
        return hit[1]

    def grown(self, name: str, messages: Sequence[Message], extend: Callable[[Any, int], Any]) -> Any:
        """A reading of the whole list: `extend(kept, seen)` reads on from what was kept under `name` for
        the first `seen` messages, when `messages` begins with the very objects of the list read last (a
        raw log that grew: one identity check of that prefix); `kept` None and `seen` 0 for a list read
        anew."""
        read, kept = self.lists.get(name, ((), None))
        if len(read) > len(messages) or not all(map(operator.is_, read, messages)):
            read, kept = (), None
        elif read and len(read) == len(messages):
            return kept  # read from this very list (a compaction asks again)
        value = extend(kept if read else None, len(read))
        self.lists[name] = (tuple(messages), value)
        return value

    def positions(self, name: str, messages: Sequence[Message], wanted: Callable[[Message], bool]) -> list[int]:
        """The indices of the messages `wanted` is true of, each message asked once in a list that grows."""

        def extend(kept: list[int] | None, seen: int) -> list[int]:
            return (kept or []) + [i for i in range(seen, len(messages)) if wanted(messages[i])]

        found: list[int] = self.grown(name, messages, extend)
        return found

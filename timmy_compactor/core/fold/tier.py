"""Tier 2 (spec §2a): fold the oldest part of the middle into the anchor index.

The folded range starts right after the head (after the index of an earlier compaction, which is
never rewritten, only appended to) and ends at a step boundary. Fold points lie on a grid: the first
step start of each quantum of the running token total of the middle, a function of the raw messages
alone. So a later compaction folds what an earlier one left, never the other way round, and the
index's chunks (one per grid interval) are the same bytes each time. User messages inside the range
stay in place, verbatim; the steps after each of them leave one `[folded #a–#b: N steps, see index]`
line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.index import Index, build_index, first_line, fold_line, index_message, is_index
from timmy_compactor.core.partition import steps
from timmy_compactor.core.types import Entry, Message


@dataclass(frozen=True, slots=True)
class Fold:
    head: tuple[Entry, ...]  # the head, its last entry now the (new or extended) index
    placed: tuple[Entry, ...]  # kept user messages and fold lines, in raw order, after the head
    folded: frozenset[int]  # raw indices now stood for by the index or a fold line
    folded_users: frozenset[int]
    steps: int
    index: Index


def fold_grid(messages: Sequence[Message], start: int, stop: int, tokens: Sequence[int], quantum: int) -> list[int]:
    """The grid points in `messages[start:stop]`: the first step start of each quantum of the running token
    total from `start` (a point depends only on the messages before it)."""
    points: list[int] = []
    running, bucket = 0, 0
    for step in steps(messages[start:stop]):
        begin = start + step.start
        if running // max(quantum, 1) > bucket or (not quantum and running):
            points.append(begin)
            bucket = running // max(quantum, 1)
        running += sum(tokens[begin : start + step.stop])
    return points


def fold(
    facts: RawFacts,
    head: tuple[Entry, ...],
    start: int,
    stop: int,
    *,
    grid: Sequence[int] = (),
    index_chars: int,
    users_before: int = 0,
    ledger: bool = False,
) -> Fold:
    """Fold raw messages `start:stop` (start = the end of the head); `grid`: the chunk bounds between.
    User messages before `users_before` are folded too (tier 4), each leaving its first line."""
    messages = facts.messages
    prior_entry = head[-1] if head and is_index(head[-1].message) else None
    folded: list[int] = []
    folded_users: list[int] = []
    placed: list[Entry] = []
    segment: list[int] = []
    first_segment: list[int] | None = None
    step_count = 0
    segment_steps = 0
    segment_users: list[str] = []

    def close() -> None:
        nonlocal first_segment, segment, segment_steps, segment_users
        if first_segment is None:
            first_segment = [] if segment_users else segment  # the index stands for the first segment
        if segment and segment is not first_segment:
            line = fold_line(segment, segment_steps, segment_users)
            placed.append(Entry({"role": "assistant", "content": line}, tuple(segment)))
        segment, segment_steps, segment_users = [], 0, []

    for i in range(start, stop):
        role = messages[i].get("role")
        if role == "user" and i >= users_before:
            close()
            placed.append(Entry(messages[i], (i,)))
            continue
        if role == "user":
            folded_users.append(i)
        if role == "user" and not ledger:  # the ledger's fact sections are its record of the users
            segment_users.append(facts.read("first_line", i, lambda f, k: first_line(k, f.messages[k])))
        if role != "tool":
            step_count += 1
            segment_steps += 1
        segment.append(i)
        folded.append(i)
    close()
    bounds = [start, *(g for g in grid if start < g < stop), stop]
    index = build_index(facts, bounds, index_chars, ledger=ledger)
    message = index_message(index.text, prior_entry.message if prior_entry else None)
    own = tuple(first_segment or ())
    if prior_entry is not None:
        new_head = (*head[:-1], Entry(message, prior_entry.sources + own))
    else:
        new_head = (*head, Entry(message, own))
    return Fold(
        head=new_head,
        placed=tuple(placed),
        folded=frozenset(folded),
        folded_users=frozenset(folded_users),
        steps=step_count,
        index=index,
    )

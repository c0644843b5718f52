"""Tier 2 (spec §2a): fold the oldest part of the middle into the anchor index.

The folded range starts right after the head (after the index of an earlier compaction, which is
never rewritten, only appended to) and ends at a point of a grid: the first step start of each quantum
of the running token total (the points the tail start snaps to), a function of the raw messages
alone. So a later compaction folds what an earlier one left, never the other way round, and the
index's chunks (one per grid interval) are the same bytes each time. User messages inside the range
stay in place, verbatim; the steps after each of them leave one `[folded #a–#b: N steps, see index]`
line, which also names the first line of the answer that closed the turn.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from timmy_compactor.core.accounting import Accounting
from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.index import Index, build_index, first_line, fold_line, index_message, is_index
from timmy_compactor.core.fold.outcomes import above, task_outcome
from timmy_compactor.core.partition import Partition, steps
from timmy_compactor.core.text import text_of
from timmy_compactor.core.tokens import sizes_to_tokens
from timmy_compactor.core.types import Entry, Message

STEP_ROLES = frozenset({"assistant", "tool", "system"})  # what a fold may take (users: only in tier 4)


@dataclass(frozen=True, slots=True)
class Fold:
    head: tuple[Entry, ...]  # the head, its last entry now the (new or extended) index
    placed: tuple[Entry, ...]  # kept user messages and fold lines, in raw order, after the head
    folded: Folded  # raw indices now stood for by the index or a fold line
    folded_users: frozenset[int]
    steps: int
    index: Index


def fold_grid(all_steps: Sequence[range], start: int, stop: int, tokens: Sequence[int], quantum: int) -> list[int]:
    """The grid points in `start:stop + 1` (step starts in `all_steps`, the list's steps): the first step
    start of each quantum of the running token total from the first message -- the points the tail start
    snaps to (`partition`), each a function of the messages before it alone."""
    walk = _walk(_Walk.at(all_steps, start, tokens, quantum), all_steps, tokens, quantum, len(all_steps))
    return walk.points[: bisect.bisect_right(walk.points, stop)]


@dataclass(frozen=True, slots=True)
class _Walk:
    """The grid's walk through the steps, up to the step `next_step` (each point a step start before it)."""

    points: list[int]
    next_step: int
    running: int  # the token total before that step
    bucket: int  # the quantum of the running total the last point started

    @classmethod
    def at(cls, all_steps: Sequence[range], start: int, tokens: Sequence[int], quantum: int) -> _Walk:
        running = sum(tokens[:start])
        return cls([], bisect.bisect_left(all_steps, start, key=lambda s: s.start), running, running // max(quantum, 1))


def _walk(walk: _Walk, all_steps: Sequence[range], tokens: Sequence[int], quantum: int, upto: int) -> _Walk:
    """`walk` on through the steps before `upto`."""
    points, running, bucket = list(walk.points), walk.running, walk.bucket
    for step in itertools.islice(all_steps, walk.next_step, upto):
        if running // max(quantum, 1) > bucket or (not quantum and running):
            points.append(step.start)
            bucket = running // max(quantum, 1)
        running += sum(tokens[step.start : step.stop])
    return _Walk(points, max(upto, walk.next_step), running, bucket)


def grid_of(facts: RawFacts, acc: Accounting, part: Partition, quantum: int) -> list[int]:
    """The fold grid of the middle, the tail start included when it is a point (computed once per call)."""
    return facts.once("grid", (part.head_end, part.tail_start, quantum), lambda: _grid(facts, acc, part, quantum))


def _grid(facts: RawFacts, acc: Accounting, part: Partition, quantum: int) -> list[int]:
    """`grid_of`, the walk through the steps kept across calls up to the last step (which more results may
    join), the messages' tokens too."""
    readings, messages = facts.readings, acc.messages
    unit = "chars" if acc.counter is None else "tokens"

    def tokens_of(kept: list[int] | None, seen: int) -> list[int]:
        return (kept or []) + [sizes_to_tokens(size, 0, acc.counter) for size in acc.raw_sizes[seen:]]

    tokens: list[int] = readings.grown(f"grid_tokens:{unit}", messages, tokens_of)
    all_steps = steps(messages, readings)

    def walked(kept: _Walk | None, seen: int) -> _Walk:
        start = kept or _Walk.at(all_steps, part.head_end, tokens, quantum)
        return _walk(start, all_steps, tokens, quantum, max(len(all_steps) - 1, 0))

    walk = readings.grown(f"grid:{part.head_end}:{quantum}:{unit}", messages, walked)
    last = _walk(walk, all_steps, tokens, quantum, len(all_steps))  # the last step: its start may be a point
    return last.points[: bisect.bisect_right(last.points, part.tail_start)]


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
    users = _in_place(facts, start, stop)
    kept = [i for i in users if i >= users_before or facts.messages[i].get("role") != "user"]
    folded_users = [i for i in users if i < users_before and facts.messages[i].get("role") == "user"]
    steps_in = _step_counter(facts, start, stop)
    placed: list[Entry] = []
    own: tuple[int, ...] = ()
    for a, b in itertools.pairwise([start - 1, *kept, stop]):  # the segments between kept user messages
        segment = range(a + 1, b)
        closes = b if b < stop and not ledger else None  # a kept user message closes the segment's task
        first = segment.start == start
        names, line = _segment(facts, segment, folded_users, steps_in, closes=closes, first=first, ledger=ledger)
        if first and not names:
            own = tuple(segment)  # the index stands for a first segment with nothing to name
        elif line is not None:
            placed.append(line)
        if b < stop:
            placed.append(Entry(messages[b], (b,)))
    chunks = [start, *(g for g in grid if start < g < stop), stop]
    index = build_index(facts, chunks, index_chars, ledger=ledger)
    message = _index_message(facts, index, prior_entry.message if prior_entry else None)
    if prior_entry is not None:
        new_head = (*head[:-1], Entry(message, prior_entry.sources + own))
    else:
        new_head = (*head, Entry(message, own))
    return Fold(
        head=new_head,
        placed=tuple(placed),
        folded=Folded(start, stop, frozenset(kept)),
        folded_users=frozenset(folded_users),
        steps=steps_in(range(start, stop)) - len(kept),
        index=index,
    )


@dataclass(frozen=True, slots=True)
class Folded:
    """The raw indices `start:stop` but the user messages kept in place."""

    start: int
    stop: int
    kept: frozenset[int]

    def __contains__(self, index: object) -> bool:
        return isinstance(index, int) and self.start <= index < self.stop and index not in self.kept

    def __iter__(self) -> Iterator[int]:
        return (i for i in range(self.start, self.stop) if i not in self.kept)

    def __len__(self) -> int:
        return self.stop - self.start - len(self.kept)


EMPTY = Folded(0, 0, frozenset())


def _in_place(facts: RawFacts, start: int, stop: int) -> list[int]:
    """The user messages in `start:stop`, and those of another role (`developer`, `function`), which the
    fold never takes (their positions read once per message of the raw log, which only grows)."""
    every = facts.once("in_place", None, lambda: facts.readings.positions("in_place", facts.messages, _in_place_role))
    return every[bisect.bisect_left(every, start) : bisect.bisect_left(every, stop)]


def _in_place_role(message: Message) -> bool:
    return message.get("role") not in STEP_ROLES


def _step_counter(facts: RawFacts, start: int, stop: int) -> Callable[[range], int]:
    """How many steps (messages that are not tool results) a range holds, by prefix sums read on as the
    raw log grows."""
    messages = facts.messages

    def counted(kept: list[int] | None, seen: int) -> list[int]:
        more = itertools.accumulate((m.get("role") != "tool" for m in messages[seen:]), initial=kept[-1] if kept else 0)
        return (kept[:-1] if kept else []) + list(more)

    prefix: list[int] = facts.once("step_counts", None, lambda: facts.readings.grown("step_counts", messages, counted))
    return lambda r: prefix[r.stop] - prefix[r.start] if r else 0


def _first_line(facts: RawFacts, index: int) -> str:
    line: str = facts.read("first_line", index, lambda f, k: first_line(k, f.messages[k]))
    return line


def _segment(
    facts: RawFacts,
    segment: range,
    folded_users: list[int],
    steps_in: Callable[[range], int],
    *,
    closes: int | None,
    first: bool,
    ledger: bool,
) -> tuple[list[str], Entry | None]:
    """What a segment's fold line names, and the line's entry (None for an empty segment), made once per
    call (the folds tier 4 tries share most segments: each line one message, measured once)."""
    inside = folded_users[
        bisect.bisect_left(folded_users, segment.start) : bisect.bisect_left(folded_users, segment.stop)
    ]

    def make() -> tuple[list[str], Entry | None]:
        names = [] if ledger else _names(facts, segment, inside, closes=closes, first=first)
        if not segment:
            return names, None
        return names, Entry(
            {"role": "assistant", "content": fold_line(segment, steps_in(segment), names)}, tuple(segment)
        )

    return facts.once("segment", (segment.start, segment.stop, closes, first, ledger, tuple(inside)), make)


def _index_message(facts: RawFacts, index: Index, prior: Message | None) -> Message:
    """The index message of `index` after `prior`, made once per call for the same two."""
    # `prior` is kept with its message, so its id names it for the whole call
    return facts.once("index_message", (index, id(prior)), lambda: (prior, index_message(index.text, prior)))[1]


def _names(
    facts: RawFacts, segment: range, folded_users: Sequence[int], *, closes: int | None, first: bool
) -> list[str]:
    """What a segment's fold line names: the first line of each user message folded with it (tier 4:
    `folded_users`, those of the segment); else how the task that a kept user message closes ended
    (`outcomes`); else the answer that closes a turn (the index's own first segment names none)."""
    users = [_first_line(facts, i) for i in folded_users]
    ended = task_outcome(facts, closes) if closes is not None and segment and not users else ""
    if users or ended:
        return users or [ended]
    return [] if first or not segment else _answer(facts, segment[-1], segment.start)


def _answer(facts: RawFacts, index: int, start: int) -> list[str]:
    """The first line of the answer that closes a folded turn (an assistant message with text and no
    tool call), as its fold line names it: what the user was told stays in view; and when it speaks of
    output "above", where that output is (folded with it)."""
    message = facts.messages[index]
    if message.get("role") != "assistant" or message.get("tool_calls") or not text_of(message.get("content")).strip():
        return []
    line: str = facts.read("answer_line", index, lambda f, k: first_line(k, f.messages[k], label="answered"))
    pointer: str = facts.read_span(("above", start, index), range(start, index + 1), lambda f: above(f, index, start))
    return [line + pointer]

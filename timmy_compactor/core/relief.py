"""Tier 3 (spec §2a): tail relief. The tail's tool outputs, except the last step's, cut as little as
brings the request under a number of tokens: the longest outputs first, each to one common length,
as many whole first and last lines as fit and every key error line kept. Only when
even that cannot make the room does rule 2's cut apply; the last step's outputs are cut only when the
request would not fit the window.
"""

from __future__ import annotations

import dataclasses

from timmy_compactor.core.accounting import Accounting
from timmy_compactor.core.draft import Built, Draft
from timmy_compactor.core.facts import persisted_output_paths
from timmy_compactor.core.keylines import KEY_LINE_MAX_CHARS
from timmy_compactor.core.partition import Partition, steps
from timmy_compactor.core.rules import sanitize_pairs, truncate_tool_output
from timmy_compactor.core.text import text_of
from timmy_compactor.core.types import Entry, Settings

Relieved = tuple[tuple[Entry, ...], int, int]
"""The view, the new tail start (the last step's, or the end) and how many outputs were cut."""


def relieve_tail(
    view: tuple[Entry, ...],
    tail_start: int,
    draft: Draft,
    settings: Settings,
    acc: Accounting,
    *,
    room: int,
    last_step: bool = False,
) -> Relieved | None:
    """`view` (whose entries from raw `tail_start` on stand for one message each) with the tail's outputs
    before the last step cut to bring the request to `room` tokens; with `last_step`, the last step's
    outputs too. None: nothing to cut."""
    tail_steps = steps(acc.messages[tail_start:])
    if len(tail_steps) < 2 and not last_step:
        return None
    last_start = len(acc.messages) if last_step else tail_start + tail_steps[-1].start
    before = len(view) - (len(acc.messages) - tail_start)
    relievable = view[before : before + last_start - tail_start]
    keep = view[before + last_start - tail_start :]
    cut = _cut_to_fit(relievable, draft, settings, acc, around=(view[:before], keep), room=room)
    if cut is None:
        return None
    relieved, fired = cut
    # what was tail is middle now: no orphan may stay
    relieved = sanitize_pairs.apply(dataclasses.replace(draft, middle=relieved), settings)[0].middle
    return view[:before] + relieved + keep, last_start, fired


def trigger_rooms(settings: Settings, acc: Accounting) -> tuple[int, int]:
    """The most a request may hold and not trigger; and not be crowded: within a fold quantum of the
    trigger, or of half the way down to the budget when that is nearer (a promise never gives way for the
    budget alone, whatever the tail budget that sets the quantum)."""
    below = min(settings.trigger_tokens, acc.window + 1) - 1
    return below, below - min(settings.quantum_tokens, max(below - (settings.budget_tokens or 0), 0) // 2)


def relieve_above_trigger(built: Built, draft: Draft, settings: Settings, acc: Accounting) -> Built:
    """Tier 3 for a view above the trigger: the tail's outputs cut as far as brings it out of the crowd if
    they can, else just under the trigger."""
    below, crowded = trigger_rooms(settings, acc)
    if acc.view_tokens(built.view) <= below:
        return built
    cut = relieve_built(built, draft, settings, acc, room=crowded)
    if acc.view_tokens(cut.view) <= crowded:
        return cut
    return relieve_built(built, draft, settings, acc, room=below)


def relieve_built(
    built: Built, draft: Draft, settings: Settings, acc: Accounting, *, room: int, last_step: bool = False
) -> Built:
    """`relieve_tail` on a built view: the tail's outputs cut as little as brings the request to `room`."""
    relieved = relieve_tail(built.view, built.part.tail_start, draft, settings, acc, room=room, last_step=last_step)
    if relieved is None:
        return built
    view, last_start, fired = relieved
    counts = built.counts | {"tail_relief": built.counts.get("tail_relief", 0) + fired}
    if last_step:
        counts |= {"last_step_truncated": 1}
    return dataclasses.replace(built, view=view, part=Partition(built.part.head_end, last_start), counts=counts)


def _cut_to_fit(
    entries: tuple[Entry, ...],
    draft: Draft,
    settings: Settings,
    acc: Accounting,
    *,
    around: tuple[tuple[Entry, ...], tuple[Entry, ...]],
    room: int,
) -> tuple[tuple[Entry, ...], int] | None:
    """`entries` with their longest tool outputs cut to one common length, the longest that brings the
    request (`around` them) to `room` tokens (found by bisection: a lower level never makes it larger);
    rule 2's cut when even the rule's own length does not. None: nothing cut."""
    outputs = {k: len(text_of(e.message.get("content"))) for k, e in enumerate(entries) if e.role == "tool"}
    kept = {k: _kept_lines(entries[k], draft) for k in outputs}  # read once, not at every level tried

    def fit(k: int, level: int) -> Entry:  # once per output and level: tier 4 relieves the same tail often
        entry = entries[k]
        fitted: Entry = draft.facts.readings.of_object(
            f"fitted:{level}", entry.message, lambda _: _fit_entry(entry, level, kept[k])
        )
        return fitted

    def cut_at(level: int) -> tuple[tuple[Entry, ...], int]:
        cut = tuple(fit(k, level) if outputs.get(k, 0) > level else e for k, e in enumerate(entries))
        return cut, acc.view_tokens(around[0] + cut + around[1])

    if not outputs or acc.view_tokens(around[0] + entries + around[1]) <= room:
        return None
    low, high = settings.max_tool_output_chars, max(outputs.values())  # fits at `low`; not at `high`
    best, tokens = cut_at(low)
    if tokens > room:
        relieved, fired = truncate_tool_output.apply(dataclasses.replace(draft, middle=entries), settings)
        return (relieved.middle, fired[truncate_tool_output.NAME]) if fired else None
    while high - low > max(LEVEL_STEP, high // 100):
        middle = (low + high) // 2
        cut, tokens = cut_at(middle)
        if tokens <= room:
            best, low = cut, middle
        else:
            high = middle
    return best, sum(1 for size in outputs.values() if size > low)


LEVEL_STEP = 200
"""How close (in characters) the bisection gets to the longest level that fits."""


def _kept_lines(entry: Entry, draft: Draft) -> frozenset[str]:
    """What a cut of the entry's output keeps: its key error lines and the line naming the file Hermes
    saved the whole output to (a `<persisted-output>` block)."""
    content = entry.message.get("content")
    keep = {line.text for line in draft.facts.outcome_of(entry.message, entry.sources).key_lines}
    if paths := persisted_output_paths(content):
        text = text_of(content)
        keep |= {line.strip()[:KEY_LINE_MAX_CHARS] for line in text.splitlines() if any(p in line for p in paths)}
    return frozenset(keep)


def _fit_entry(entry: Entry, chars: int, keep: frozenset[str]) -> Entry:
    content = truncate_tool_output.fit_content(entry.message.get("content"), chars, keep)
    return Entry({**entry.message, "content": content}, entry.sources)

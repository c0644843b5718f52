"""Split a message list into head | middle | tail (spec §2). Only the middle is compacted.

- A *step* is a user message, or one assistant message with the tool results that answer it
  (any other message stands alone).
- A *turn* is a user message and every step after it up to the next user message.
- The *tail* is the last `protect_last_n_turns` turns if they fit the tail budget; otherwise the
  longest run of whole final steps that fits, and never fewer than `min_tail_steps` steps nor than
  the last `min_tail_steps` tool-calling steps (a user message or a text answer is not one) while
  those fit under the trigger: that promise gives way only to the trigger, never to the budget.
- The *head* is the leading system message(s) and the first user message, plus the reply if it
  is a plain answer without tool calls, plus the anchor index an earlier compaction put after it.
- Cache stability (spec §2a): with `fold_quantum`, the tail is first fitted to the budget less one
  quantum, then its start snaps back to the first step in the same quantum bucket of the running
  token total, so between compactions the tail start moves once per quantum, not at every step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from timmy_compactor.core.facts import tool_calls
from timmy_compactor.core.fold.index import is_index
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.tokens import (
    TextCounter,
    count_images,
    message_sizes,
    sizes_to_tokens,
)
from timmy_compactor.core.types import Message, Settings


@dataclass(frozen=True, slots=True)
class Partition:
    head_end: int  # messages[:head_end] is the head
    tail_start: int  # messages[tail_start:] is the tail; head_end <= tail_start

    def middle(self) -> range:
        return range(self.head_end, self.tail_start)


def steps(messages: Sequence[Message], readings: Readings | None = None) -> list[range]:
    """Consecutive index ranges, one per step. Tool results join the call that asked for them.

    With `readings`, a list that grew from one read before is walked from its last step on (tool
    results may still join that one), not from the start: a compaction late in a session costs what
    the new messages cost."""
    if readings is None:
        return _steps_from(messages, [], 0)

    def read_on(known: list[range] | None, seen: int) -> list[range]:
        kept = known[:-1] if known else []  # the last step may gain results
        return _steps_from(messages, kept, kept[-1].stop if kept else 0)

    result: list[range] = readings.grown("steps", messages, read_on)
    return result


def _steps_from(messages: Sequence[Message], result: list[range], i: int) -> list[range]:
    """`result` (the steps before index `i`) and the steps from `i` on."""
    n = len(messages)
    while i < n:
        start = i
        msg = messages[i]
        i += 1
        if msg.get("role") == "assistant" and tool_calls(msg):
            ids = {c.get("id") for c in tool_calls(msg)}
            while i < n and messages[i].get("role") == "tool" and messages[i].get("tool_call_id") in ids:
                i += 1
        result.append(range(start, i))
    return result


def partition(
    messages: Sequence[Message],
    settings: Settings,
    counter: TextCounter | None = None,
    sizes: Sequence[int] | None = None,
    readings: Readings | None = None,
) -> Partition:
    if sizes is None:
        sizes = message_sizes(messages, counter)
    images = readings.each("images", messages, count_images) if readings is not None else map(count_images, messages)
    tokens = [sizes_to_tokens(size, n, counter) for size, n in zip(sizes, images, strict=True)]
    all_steps = steps(messages, readings)
    head_end = _head_end(messages, all_steps)
    if head_end < len(messages) and is_index(messages[head_end]):
        head_end += 1
    tail_start = _tail_start(messages, all_steps, settings, tokens)
    return Partition(head_end=min(head_end, tail_start), tail_start=tail_start)


def _head_end(messages: Sequence[Message], all_steps: list[range]) -> int:
    for k, step in enumerate(all_steps):
        if messages[step.start].get("role") == "user":
            end = step.stop
            if k + 1 < len(all_steps):
                reply = all_steps[k + 1]
                first = messages[reply.start]
                if first.get("role") == "assistant" and not tool_calls(first):
                    end = reply.stop
            return end
        if messages[step.start].get("role") != "system":
            return step.start
    return len(messages)


def _tail_start(
    messages: Sequence[Message],
    all_steps: list[range],
    settings: Settings,
    tokens: list[int],
) -> int:
    if not all_steps:
        return 0
    budget = settings.tail_budget_tokens
    user_starts = [s.start for s in all_steps if messages[s.start].get("role") == "user"]
    if settings.protect_last_n_turns > 0 and user_starts:
        turns_start = user_starts[max(0, len(user_starts) - settings.protect_last_n_turns)]
        if sum(tokens[turns_start:]) <= budget:
            return turns_start
    quantum = settings.quantum_tokens
    start = _fit_tail(messages, all_steps, settings, tokens, budget - quantum)
    if not quantum or sum(tokens[start:]) > budget - quantum:
        return start  # no quantum, or min_tail_steps forced a tail over the budget: nothing to snap
    starts = [s.start for s in all_steps]
    k = starts.index(start) if start in starts else len(starts)
    prefix = sum(tokens[:start])
    bucket = prefix // quantum
    while k > 0 and (prefix - sum(tokens[i] for i in all_steps[k - 1])) // quantum == bucket:
        k -= 1
        prefix -= sum(tokens[i] for i in all_steps[k])
    return min(start, starts[k]) if k < len(starts) else start


def _fit_tail(
    messages: Sequence[Message], all_steps: list[range], settings: Settings, tokens: list[int], budget: int
) -> int:
    """The start of the longest run of final steps that fits `budget`, never fewer than min_tail_steps
    steps, nor than min_tail_steps tool-calling steps while they fit under the trigger."""
    wanted = settings.min_tail_steps
    used = calling = 0
    start = sum(len(s) for s in all_steps)
    for taken, step in enumerate(reversed(all_steps)):
        cost = sum(tokens[i] for i in step)
        promised = calling < wanted and used + cost < settings.trigger_tokens
        if taken >= wanted and used + cost > budget and not promised:
            break
        used += cost
        calling += is_tool_step(messages, step)
        start = step.start
    return start


def is_tool_step(messages: Sequence[Message], step: range) -> bool:
    """Whether a step is an assistant message that calls tools (what "the last steps" promise counts)."""
    first = messages[step.start]
    return first.get("role") == "assistant" and bool(tool_calls(first))


def min_tail_start(messages: Sequence[Message], part: Partition, settings: Settings) -> int:
    """Where the shortest tail the promise allows starts: the last min_tail_steps steps and the last
    min_tail_steps tool-calling steps of the tail."""
    wanted = max(settings.min_tail_steps, 1)
    tail = messages[part.tail_start :]
    tail_steps = steps(tail)
    if len(tail_steps) <= wanted:
        return part.tail_start
    calling = [s for s in tail_steps if is_tool_step(tail, s)]
    start = tail_steps[-wanted].start
    if calling:
        start = min(start, calling[-min(wanted, len(calling))].start)
    return part.tail_start + start

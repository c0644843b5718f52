"""Tier 4 (spec §2a): the last resort. The oldest cold user messages are folded into the index by
pointer (each leaves its first line in its fold line), as few as needed, reported as
`user_messages_folded`: never silent."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from timmy_compactor.core.accounting import Accounting
from timmy_compactor.core.draft import Built
from timmy_compactor.core.fold.index import USER_LINE_CHARS
from timmy_compactor.core.tokens import sizes_to_tokens


def fold_users(
    built: Built, acc: Accounting, *, rooms: tuple[int, ...], cold: list[int], refold: Callable[[int], Built]
) -> Built:
    """Tier 4: the oldest cold user messages folded too (each leaves its first line), as few as bring the
    request to the first of `rooms` that folding them all reaches (the fewest whose view fits, found by
    bisection: folding more never makes the view larger). `refold(n)`: the view with the user messages
    before raw index n folded (the tail relieved only as far as the trigger needs). When no room is
    reached, they stay, unless they alone exceed the last and it is the trigger: then all go."""
    tried: dict[int, Built] = {}

    def fits(k: int, room: int) -> bool:
        if k not in tried:
            tried[k] = refold(cold[k] + 1)
        return acc.view_tokens(tried[k].view) <= room

    # the fewest that fit: a galloping search from an estimate (often 2-3 folds, where a bisection takes 7)
    low, high = 0, len(cold) - 1
    guess = _users_to_fold(built, cold, rooms[0], acc)
    room = rooms[0] if fits(guess, rooms[0]) else next((r for r in rooms if fits(high, r)), None)
    if room is None:  # even all of them do not fit: the users are not what is too big,
        room = rooms[-1]
        users_alone = acc.view_tokens(tuple(e for e in built.view if e.role == "user"))
        if users_alone <= room or len(rooms) < 3:  # so they stay -- unless they alone exceed the trigger
            return built
        low = high
    if fits(guess, room):
        high = min(high, guess)
    else:
        low = max(low, guess + 1)
    probe, step = (guess - 1 if high == guess else guess + 1), 1
    while low < high:
        middle = probe if low <= probe < high else (low + high) // 2
        if fits(middle, room):
            high, probe = middle, middle - step
        else:
            low, probe = middle + 1, middle + step
        step *= 2
    best = tried[high]  # every `high` was tried: the last that fits, or all of them (they alone are too big)
    if acc.view_tokens(best.view) >= acc.view_tokens(built.view):
        return built
    return dataclasses.replace(best, counts=best.counts | {"user_messages_folded": len(best.folded_users)})


def _users_to_fold(built: Built, cold: list[int], room: int, acc: Accounting) -> int:
    """An estimate of the position in `cold` of the last user message to fold: the tokens each frees,
    oldest first, until the view would fit `room` (only where the search starts: what fits decides)."""
    excess = acc.view_tokens(built.view) - room
    for k, i in enumerate(cold):
        excess -= sizes_to_tokens(acc.raw_sizes[i], 0, acc.counter) - USER_LINE_CHARS // 4
        if excess <= 0:
            return k
    return len(cold) - 1

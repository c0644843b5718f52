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

    def view_of(k: int) -> int:
        if k not in tried:
            tried[k] = refold(cold[k] + 1)
        return acc.view_tokens(tried[k].view)

    # the fewest that fit: each probe estimated from the users' sizes and the last probe's excess or slack
    # (often 2-3 folds, where a bisection takes 7); what fits decides
    low, high = 0, len(cold) - 1
    guess = _reach(cold, 0, acc.view_tokens(built.view) - rooms[0], acc)
    room = rooms[0] if view_of(guess) <= rooms[0] else next((r for r in rooms if view_of(high) <= r), None)
    if room is None:  # even all of them do not fit: the users are not what is too big,
        room = rooms[-1]
        users_alone = acc.view_tokens(tuple(e for e in built.view if e.role == "user"))
        if users_alone <= room or len(rooms) < 3:  # so they stay -- unless they alone exceed the trigger
            return built
        low = high
    probe = guess
    while low < high:
        middle = probe if low <= probe < high else (low + high) // 2
        view = view_of(middle)
        if view <= room:
            high = middle
            probe = middle - max(_spare(cold, middle, room - view, acc), 1)
        else:
            low = middle + 1
            probe = _reach(cold, middle + 1, view - room, acc)
    best = tried[high]  # every `high` was tried: the last that fits, or all of them (they alone are too big)
    if acc.view_tokens(best.view) >= acc.view_tokens(built.view):
        return built
    return dataclasses.replace(best, counts=best.counts | {"user_messages_folded": len(best.folded_users)})


def _frees(cold: list[int], k: int, acc: Accounting) -> int:
    """About what folding `cold[k]` frees: its tokens, less the first line it leaves."""
    return sizes_to_tokens(acc.raw_sizes[cold[k]], 0, acc.counter) - USER_LINE_CHARS // 4


def _reach(cold: list[int], start: int, excess: int, acc: Accounting) -> int:
    """The position in `cold`, from `start` on, where folding frees about `excess` tokens (or the last)."""
    for k in range(start, len(cold)):
        excess -= _frees(cold, k, acc)
        if excess <= 0:
            return k
    return len(cold) - 1


def _spare(cold: list[int], last: int, slack: int, acc: Accounting) -> int:
    """How many of `cold[last]`, `cold[last - 1]`, ... would stay within about `slack` tokens if kept."""
    spared = 0
    for k in range(last, -1, -1):
        slack -= _frees(cold, k, acc)
        if slack < 0:
            break
        spared += 1
    return spared

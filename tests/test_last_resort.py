"""Tier 4's search (`last_resort.fold_users`): whatever its estimates, it folds the fewest cold user
messages whose view fits the first room that folding them all reaches, as a plain scan would."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from tests.test_properties import examples
from timmy_compactor.core.draft import Built
from timmy_compactor.core.last_resort import fold_users
from timmy_compactor.core.partition import Partition
from timmy_compactor.core.types import Entry

STEP = Entry({"role": "assistant", "content": "step"}, (0,))


@dataclass
class _Sizes:
    """What fold_users asks of an Accounting: a view's tokens (10 per entry here) and the raw sizes."""

    raw_sizes: list[int]
    counter: None = None
    asked: list[int] = field(default_factory=list)

    def view_tokens(self, entries: tuple[Entry, ...]) -> int:
        return 10 * len(entries)


def _built(entries: int, folded: int = 0) -> Built:
    return Built((STEP,) * entries, Partition(0, 0), {}, folded_users=frozenset(range(folded)))


@examples(300)
@given(
    frees=st.lists(st.integers(0, 40), min_size=1, max_size=30),
    user_chars=st.lists(st.integers(0, 2_000), min_size=30, max_size=30),
    start=st.integers(50, 400),
    rooms=st.lists(st.integers(0, 50).map(lambda r: 10 * r) | st.integers(0, 500), min_size=2, max_size=3).map(sorted),
)
def test_the_fewest_users_that_fit_the_first_reachable_room(
    frees: list[int], user_chars: list[int], start: int, rooms: list[int]
) -> None:
    cold = list(range(len(frees)))
    sizes = _Sizes(raw_sizes=user_chars[: len(frees)])  # what the estimates read: unrelated to the real views
    views = [max(start - sum(frees[: k + 1]), 0) for k in cold]  # entries once users 0..k fold: never growing

    def refold(users_before: int) -> Built:
        k = users_before - 1
        sizes.asked.append(k)
        return _built(views[k], folded=k + 1)

    before = _built(start)
    result = fold_users(before, sizes, rooms=tuple(rooms), cold=cold, refold=refold)  # type: ignore[arg-type]
    reachable = [room for room in rooms if 10 * views[-1] <= room]
    if not reachable:  # all of them do not fit: they stay (the users alone are 0 tokens here)
        assert result is before
        return
    room = reachable[0]
    fewest = next(k for k in cold if 10 * views[k] <= room)
    if views[fewest] >= start:  # folding frees nothing: the view stays as it was
        assert result is before
    else:
        assert result.counts["user_messages_folded"] == fewest + 1
        assert len(result.view) == views[fewest]
    assert len(set(sizes.asked)) == len(sizes.asked)  # no fold tried twice

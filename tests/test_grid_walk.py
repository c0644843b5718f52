"""The fold's readings of the raw log kept across calls (the grid's walk through the steps, the positions
of the users and of the messages the fold never takes, the step counts): read on when the log grew, they
are what reading the whole log afresh gives, also when new results joined the last step read before."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from tests.test_properties import examples
from timmy_compactor.core.accounting import Accounting
from timmy_compactor.core.draft import user_positions
from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.tier import STEP_ROLES, _in_place, _step_counter, fold_grid, grid_of
from timmy_compactor.core.partition import Partition, steps
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.tokens import sizes_to_tokens
from timmy_compactor.core.types import Settings

_CALL_IDS = st.sampled_from(["a", "b", "c"])
_MESSAGE = st.one_of(
    st.builds(
        lambda ids, size: {
            "role": "assistant",
            "content": "x" * size,
            "tool_calls": [{"id": i, "type": "function", "function": {"name": "t", "arguments": "{}"}} for i in ids],
        },
        st.lists(_CALL_IDS, max_size=2),
        st.integers(0, 400),
    ),
    st.builds(
        lambda i, size: {"role": "tool", "tool_call_id": i, "content": "y" * size}, _CALL_IDS, st.integers(0, 900)
    ),
    st.builds(lambda size: {"role": "user", "content": "u" * size}, st.integers(0, 300)),
    st.just({"role": "developer", "content": "d"}),
)


def _read(messages: list[dict[str, Any]], readings: Readings, head_end: int, quantum: int) -> dict[str, Any]:
    """What the fold reads of `messages` with these readings, and what each is by its definition."""
    acc = Accounting.start(
        messages, Settings(), system_prompt=None, tools=None, force=True, counter=None, readings=readings
    )
    facts = RawFacts(messages, readings)
    head_end = min(head_end, len(messages))
    part = Partition(head_end, len(messages))
    tokens = [sizes_to_tokens(size, 0, None) for size in acc.raw_sizes]
    counter = _step_counter(facts, 0, len(messages))
    spans = [range(a, b) for a, b in itertools.combinations(range(len(messages) + 1), 2)]
    return {
        "grid": (
            grid_of(facts, acc, part, quantum),
            fold_grid(steps(messages), head_end, len(messages), tokens, quantum),
        ),
        "in_place": (
            _in_place(facts, 0, len(messages)),
            [i for i, m in enumerate(messages) if m.get("role") not in STEP_ROLES],
        ),
        "users": (user_positions(messages, readings), [i for i, m in enumerate(messages) if m.get("role") == "user"]),
        "steps": ([counter(r) for r in spans], [sum(messages[i]["role"] != "tool" for i in r) for r in spans]),
    }


def _call(*ids: str, size: int = 20) -> dict[str, Any]:
    calls = [{"id": i, "type": "function", "function": {"name": "t", "arguments": "{}"}} for i in ids]
    return {"role": "assistant", "content": "x" * size, "tool_calls": calls}


def _result(call_id: str, size: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "y" * size}


# the log read first ends inside a step whose second result (500 chars) comes with the growth
_SPLIT_STEP = [{"role": "user", "content": "go"}, _call("a", "b"), _result("a", 20), _result("b", 500)]
_SPLIT_STEP += [m for k in range(12) for m in (_call(f"c{k}"), _result(f"c{k}", 80))]


@examples(300)
@example(messages=_SPLIT_STEP, grown_at=3, head_end=1, quantum=200)
@given(st.lists(_MESSAGE, max_size=30), st.integers(0, 30), st.integers(0, 4), st.sampled_from([0, 50, 200]))
def test_readings_kept_across_calls_are_the_readings_of_the_whole_log(
    messages: list[dict[str, Any]], grown_at: int, head_end: int, quantum: int
) -> None:
    readings = Readings()  # the engine's way: a log read, then read on when it grew
    for log in (messages[:grown_at], messages, messages):
        for name, (kept, fresh) in _read(log, readings, head_end, quantum).items():
            assert kept == fresh, name

"""Partition: turns vs steps, the tail budget, the head, and boundaries that never split a step."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import Generated, sessions, settings_strategy
from tests.support import assistant, call, padding_turns, terminal, tool, tool_session, user
from timmy_compactor.core.partition import partition, steps
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.tokens import message_tokens
from timmy_compactor.core.types import Settings

CI = os.environ.get("HYPOTHESIS_PROFILE", "dev") == "ci"


@settings(max_examples=40 if CI else 120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=sessions(), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6))
def test_steps_read_from_a_list_that_grew_are_the_steps_of_the_whole_list(gen: Generated, cuts: list[int]) -> None:
    """With `readings`, a list that grew (cut anywhere: between a call and its results too) is walked
    from its last step on; the steps are those of the whole list read at once, and a list that changed
    is read anew."""
    messages = gen.messages
    readings = Readings()
    for end in [*sorted({min(c, len(messages)) for c in cuts}), len(messages)]:
        assert steps(messages[:end], readings) == steps(messages[:end])
    changed = [dict(m) for m in messages]  # the same content, other objects
    assert steps(changed, readings) == steps(messages)
    assert steps(changed[: len(changed) // 2], readings) == steps(changed[: len(changed) // 2])


def test_steps_group_an_assistant_with_its_results() -> None:
    messages = [
        {"role": "system", "content": "s"},
        user("a"),
        assistant("", call("c1", "t"), call("c2", "t")),
        tool("c2", "x"),
        tool("c1", "y"),
        tool("ghost", "z"),  # answers nothing here: a step of its own
        assistant("plain"),
        user("b"),
    ]
    assert [(s.start, s.stop) for s in steps(messages)] == [(0, 1), (1, 2), (2, 5), (5, 6), (6, 7), (7, 8)]


def test_the_last_turns_are_the_tail_when_they_fit() -> None:
    messages = [user("q0"), assistant("a0"), *padding_turns(8, size=400)]
    part = partition(messages, Settings(context_window=65_536, protect_last_n_turns=5))
    fifth_last_user = [i for i, m in enumerate(messages) if m["role"] == "user"][-5]
    assert part.tail_start == fifth_last_user
    assert part.head_end == 2


def test_when_the_turns_do_not_fit_the_tail_is_the_steps_that_fit() -> None:
    messages = tool_session(40, output_lines=40)
    config = Settings(context_window=20_000, protect_last_n_turns=5, fold_quantum=0)
    part = partition(messages, config)
    tail_tokens = sum(message_tokens(m) for m in messages[part.tail_start :])
    assert tail_tokens <= config.tail_budget_tokens
    # the step before the tail would not have fitted
    before = next(s for s in reversed(steps(messages)) if s.stop == part.tail_start)
    assert tail_tokens + sum(message_tokens(messages[i]) for i in before) > config.tail_budget_tokens
    assert part.tail_start > part.head_end


def test_the_tail_start_moves_once_per_quantum_as_the_session_grows() -> None:
    config = Settings(context_window=20_000, protect_last_n_turns=5)
    grown = tool_session(120, output_lines=12)
    starts = []
    for end in range(60, len(grown) + 1, 2):
        part = partition(grown[:end], config)
        tail = sum(message_tokens(m) for m in grown[part.tail_start : end])
        assert tail <= config.tail_budget_tokens
        starts.append(part.tail_start)
    moves = sum(1 for a, b in itertools.pairwise(starts) if a != b)
    exact = [
        partition(grown[:end], dataclasses.replace(config, fold_quantum=0)).tail_start
        for end in range(60, len(grown) + 1, 2)
    ]
    exact_moves = sum(1 for a, b in itertools.pairwise(exact) if a != b)
    assert moves * 3 <= exact_moves, (moves, exact_moves)


def test_one_user_message_and_hundreds_of_tool_calls_is_still_compacted() -> None:
    messages = [user("fix the bug in /srv/app/main.py")]
    for i in range(300):
        messages.append(assistant(f"step {i}", call(f"c{i}", "bash", command=f"cat /srv/app/f{i}.py")))
        messages.append(tool(f"c{i}", "<returncode>0</returncode>\n<output>\n" + "x = 1\n" * 200 + "</output>", "bash"))
    result = compact(messages, Settings(context_window=65_536), force=True)
    report = result.report
    assert report.verified, report.failure
    assert report.tokens_after < report.tokens_before / 3
    tail = messages[report.tail_start :]
    assert 3 <= sum(1 for m in tail if m["role"] == "assistant") < 60  # a few steps, not the whole turn
    assert sum(message_tokens(m) for m in tail) <= Settings().tail_budget_tokens
    assert result.messages[-len(tail) :] == tail
    text = json.dumps(result.messages)
    assert all(f"/srv/app/f{i}.py" in text for i in range(300))


def test_min_tail_steps_wins_over_the_budget() -> None:
    messages = tool_session(10, output_lines=400)[:-6]  # every step is far over a tiny budget
    for wanted in (1, 3, 5):
        part = partition(messages, Settings(context_window=4_000, protect_last_n_turns=0, min_tail_steps=wanted))
        assert len([s for s in steps(messages) if s.start >= part.tail_start]) == wanted


def test_an_explicit_tail_token_budget_overrides_the_ratio() -> None:
    messages = tool_session(40, output_lines=40)
    small = partition(messages, Settings(context_window=65_536, protect_tail_tokens=500, min_tail_steps=1))
    large = partition(messages, Settings(context_window=65_536, protect_tail_tokens=20_000, min_tail_steps=1))
    assert small.tail_start > large.tail_start
    assert sum(message_tokens(m) for m in messages[large.tail_start :]) <= 20_000


def test_head_is_system_first_user_and_a_plain_reply_only() -> None:
    base = [{"role": "system", "content": "s"}, user("a")]
    plain = [*base, assistant("hello"), *padding_turns(8)]
    tooled = [*base, assistant("", call("c", "t")), tool("c", "x"), *padding_turns(8)]
    config = Settings(context_window=4_000, protect_last_n_turns=1)
    assert partition(plain, config).head_end == 3
    assert partition(tooled, config).head_end == 2


def test_everything_in_the_tail_leaves_nothing_to_compact() -> None:
    messages = [user("a"), assistant("b"), user("c"), assistant("d")]
    result = compact(messages, Settings(context_window=65_536), force=True)
    assert result.report.verified and result.messages == messages
    assert result.report.tail_start == 0 and result.report.tokens_after == result.report.tokens_before


def test_the_tail_is_byte_identical_even_with_odd_keys() -> None:
    tail = [
        user([{"type": "text", "text": "again"}]),
        assistant("", call("z", "terminal", command="ls"), reasoning="r", _db_persisted=True, extra={"k": [1]}),
        tool("z", terminal("x" * 9_000)),
    ]
    messages = [user("a"), assistant("b"), *tool_session(20)[1:], *tail]
    result = compact(messages, Settings(context_window=8_000, protect_last_n_turns=1), force=True)
    assert result.report.verified, result.report.failure
    assert [json.dumps(m) for m in result.messages[-3:]] == [json.dumps(m) for m in tail]
    assert result.sources[-3:] == ((len(messages) - 3,), (len(messages) - 2,), (len(messages) - 1,))


def own_steps(messages: list[dict[str, Any]]) -> list[int]:
    """Start index of every step, computed here without the engine."""
    starts, open_ids = [], set()
    for k, m in enumerate(messages):
        if m["role"] == "tool" and m.get("tool_call_id") in open_ids:
            continue
        starts.append(k)
        open_ids = {c["id"] for c in m.get("tool_calls") or []} if m["role"] == "assistant" else set()
    return starts


@settings(
    max_examples=300 if CI else 30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(gen=sessions(), config=settings_strategy(), protect=st.sampled_from([None, 300, 3_000]))
def test_boundaries_on_generated_sessions(gen: Generated, config: Settings, protect: int | None) -> None:
    import dataclasses

    config = dataclasses.replace(config, protect_tail_tokens=protect)
    messages = gen.messages
    part = partition(messages, config)
    starts = own_steps(messages)
    assert 0 <= part.head_end <= part.tail_start <= len(messages)
    # boundaries never split an assistant tool_calls message from its results
    assert part.tail_start in [*starts, len(messages)]
    assert part.head_end in [*starts, len(messages)]
    tokens = [message_tokens(m) for m in messages]
    budget = config.tail_budget_tokens
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    n = config.protect_last_n_turns
    turns_start = users[max(0, len(users) - n)] if n and users else None
    if turns_start is not None and sum(tokens[turns_start:]) <= budget:
        assert part.tail_start == turns_start  # the last N turns fit: they are the tail
    else:  # the longest run of final steps within the budget, never fewer than min_tail_steps
        tail_steps = [k for k in starts if k >= part.tail_start]
        tail_tokens = sum(tokens[part.tail_start :])
        assert len(tail_steps) >= min(config.min_tail_steps, len(starts))
        calling = [k for k in starts if messages[k]["role"] == "assistant" and messages[k].get("tool_calls")]
        later_calling = [k for k in calling if k > part.tail_start]
        assert (
            tail_tokens <= budget
            or len(tail_steps) <= config.min_tail_steps
            or (len(later_calling) < config.min_tail_steps and tail_tokens < config.trigger_tokens)
        )
        promised = calling[-config.min_tail_steps :] if config.min_tail_steps else []
        if promised and sum(tokens[promised[0] :]) < config.trigger_tokens:
            assert part.tail_start <= promised[0]  # the last tool-calling steps are whole while under the trigger
        if part.tail_start > 0 and len(tail_steps) >= config.min_tail_steps:
            previous = max(k for k in starts if k < part.tail_start)
            # fitted to the budget less one quantum, then snapped back within the quantum
            assert tail_tokens + sum(tokens[previous : part.tail_start]) > budget - config.quantum_tokens
    # the head: leading system messages and the first user message, plus a plain reply
    head = messages[: part.head_end]
    assert all(m["role"] in ("system", "user", "assistant") for m in head)
    assert sum(1 for m in head if m["role"] == "user") <= 1
    assert not any(m.get("tool_calls") for m in head)

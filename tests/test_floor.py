"""The rules' lower bound (`core.floor`): never above the view the rules make, and tight enough that a
long run of answered calls lets the fold win without running the rules over the whole middle."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import Generated, sessions, settings_strategy
from tests.test_properties import examples
from timmy_compactor.core.accounting import Accounting
from timmy_compactor.core.draft import Draft
from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.floor import MIN_CALL_LINE_TOKENS, rules_beat_by_fold
from timmy_compactor.core.partition import partition
from timmy_compactor.core.pipeline import AFTER_FOLD, BEFORE_FOLD
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.types import Settings


def _raw(
    messages: list[dict[str, Any]], settings: Settings, prompt: str | None, readings: Readings | None = None
) -> tuple[Draft, Accounting]:
    acc = Accounting.start(messages, settings, system_prompt=prompt, tools=None, force=True, counter=None)
    part = partition(messages, settings, None, acc.raw_sizes)
    return Draft.start(messages, part, RawFacts(messages, readings)), acc


def _rules_view_tokens(raw: Draft, acc: Accounting, settings: Settings) -> int:
    draft = raw
    for rule in BEFORE_FOLD + AFTER_FOLD:
        draft, _ = rule(draft, settings)
    return acc.view_tokens(draft.entries())


@examples(300)
@given(gen=sessions(max_turns=4, max_steps=10), settings=settings_strategy(), window=st.sampled_from([2_000, 8_000]))
def test_the_bound_never_exceeds_the_rules_view(gen: Generated, settings: Settings, window: int) -> None:
    settings = Settings(**{**settings.__dict__, "context_window": window})
    raw, acc = _raw(gen.messages, settings, gen.system_prompt)
    ruled = _rules_view_tokens(raw, acc, settings)
    assert not rules_beat_by_fold(raw, acc, ruled + 1), "the bound is above what the rules leave"


def _answered_steps(count: int, output: str = "file.py\n" * 150, arguments: str | None = None) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the failing test"}]
    for k in range(count):
        call = {
            "id": f"c{k}",
            "type": "function",
            "function": {
                "name": "terminal",
                "arguments": arguments.format(k=k) if arguments is not None else json.dumps({"command": f"ls dir{k}"}),
            },
        }
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": output})
    messages.append({"role": "user", "content": "thanks"})
    messages.append({"role": "assistant", "content": "done"})
    return messages


def test_answered_calls_count_their_line_not_just_seven_tokens() -> None:
    settings = Settings(context_window=4_000)
    raw, acc = _raw(_answered_steps(120), settings, None)
    calls = sum(1 for e in raw.middle if e.message.get("tool_calls"))
    users = tuple(e for e in raw.middle if e.role == "user")
    floor_of_old = acc.view_tokens(raw.head + users + raw.tail) + MIN_CALL_LINE_TOKENS * calls
    assert calls > 100
    assert rules_beat_by_fold(raw, acc, floor_of_old + calls)  # each line: name, `1,200 chars`, `#i–#j`
    assert not rules_beat_by_fold(raw, acc, _rules_view_tokens(raw, acc, settings) + 1)


def test_the_bound_holds_where_the_lines_are_shortest() -> None:
    """Calls with one-digit arguments (each its own command: none superseded) and empty outputs: each line
    is the fixed text, the name, `0 chars` and the indices -- what the bound counts -- and the preview
    (a bound a few characters higher per call would fail here)."""
    settings = Settings(context_window=4_000)
    raw, acc = _raw(_answered_steps(120, output="", arguments="{k}"), settings, None)
    ruled = _rules_view_tokens(raw, acc, settings)
    assert not rules_beat_by_fold(raw, acc, ruled + 1)
    calls = sum(1 for e in raw.middle if e.message.get("tool_calls"))
    assert rules_beat_by_fold(raw, acc, ruled - 2 * calls)  # tight: within 8 characters per call


def test_a_system_prompt_in_the_head_counts_as_the_marker_rule_3_may_leave() -> None:
    """Found by hypothesis: two user turns drop the head's system prompt to its marker, so the bound may
    not count the prompt whole."""
    prompt = "You are Hermes Agent.\n# SOUL.md\nBe direct.\n" + "Call tools in parallel when you can.\n" * 4
    ask = {"role": "user", "content": "café --config=/etc/webapp/invoice.md deploy server build cache naïve module"}
    messages = [{"role": "system", "content": prompt}, ask, dict(ask)]
    settings = Settings(
        protect_last_n_turns=0, min_tail_steps=0, drop_system_after_turn=1, max_tail_ratio=0.05, context_window=2000
    )
    raw, acc = _raw(messages, settings, None)
    ruled = _rules_view_tokens(raw, acc, settings)
    assert ruled < acc.view_tokens(raw.entries())  # the rules did drop the prompt
    assert not rules_beat_by_fold(raw, acc, ruled + 1)


@examples(100)
@given(gen=sessions(max_turns=4, max_steps=10), cut=st.integers(1, 60), window=st.sampled_from([2_000, 8_000]))
def test_the_bound_read_on_from_an_earlier_call_is_the_bound_read_fresh(gen: Generated, cut: int, window: int) -> None:
    """What each step leaves at least is read once per message and kept with the readings: a call on the
    grown list gives what a fresh reading gives, at every threshold."""
    settings = Settings(context_window=window)
    readings = Readings()
    early, early_acc = _raw(gen.messages[: max(1, len(gen.messages) * cut // 60)], settings, None, readings)
    rules_beat_by_fold(early, early_acc, 10**9)  # what an earlier compaction read, kept in the readings
    kept, acc = _raw(gen.messages, settings, gen.system_prompt, readings)
    rules_beat_by_fold(kept, acc, 10**9)  # reads every step of the middle into the readings
    fresh, _ = _raw(gen.messages, settings, gen.system_prompt)
    for tokens in range(0, acc.view_tokens(fresh.entries()) + 50, 7):
        assert rules_beat_by_fold(kept, acc, tokens) == rules_beat_by_fold(fresh, acc, tokens)

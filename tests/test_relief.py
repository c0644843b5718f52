"""Tier 3, tail relief: promises before depth -- cut the tail's outputs only above the trigger, and as
little as brings the request under it (issue 29)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.support import assistant, call, tool, user
from timmy_compactor.core.accounting import Accounting
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.relief import trigger_rooms
from timmy_compactor.core.rules.truncate_tool_output import fit_text
from timmy_compactor.core.types import Settings

WINDOW = 64_000
SCHEMAS = 10_500  # the tool schemas `hermes chat` sends, as Hermes counts them


def turn_of_big_outputs(chars: int, steps: int = 3) -> list[dict[str, Any]]:
    messages = [user("Turn 1: count with seq and tell me the last number."), assistant("On it.")]
    for k in range(steps):
        body = "\n".join(str(n) for n in range(1, 10**6))[:chars]
        messages.append(assistant("", call(f"c{k}", "terminal", command=f"seq 1 {k}")))
        messages.append(tool(f"c{k}", json.dumps({"output": body, "exit_code": 0, "error": None})))
    return messages


def outputs_of(messages: list[dict[str, Any]]) -> list[str]:
    return [json.loads(m["content"])["output"] for m in messages if m["role"] == "tool"]


def test_the_last_steps_stay_whole_under_the_trigger_though_above_the_target() -> None:
    """The issue's case: 3 outputs of 17.5k characters and 10.5k tokens of schemas are above
    target_after (0.40) but under the trigger (0.60): nothing of them is cut."""
    messages = turn_of_big_outputs(17_500)
    config = Settings(context_window=WINDOW)
    result = compact(messages, config, force=True, fixed_tokens=SCHEMAS)
    assert result.compacted, result.report.failure
    assert config.budget_tokens < result.report.tokens_before < config.trigger_tokens  # type: ignore[operator]
    assert "tail_relief" not in result.report.rules
    assert outputs_of(result.messages) == outputs_of(messages)


def test_above_the_trigger_the_outputs_are_cut_only_as_far_as_needed() -> None:
    messages = turn_of_big_outputs(40_000, steps=4)
    config = Settings(context_window=WINDOW)
    result = compact(messages, config, force=True, fixed_tokens=SCHEMAS)
    assert result.compacted, result.report.failure
    report = result.report
    assert report.rules.get("tail_relief", 0) >= 1 and "last_step_truncated" not in report.rules
    crowded = config.trigger_tokens - config.quantum_tokens  # a request above it would trigger again soon
    assert report.tokens_after < crowded  # out of the trigger's crowd ...
    assert report.tokens_after > crowded - 1_500  # ... but not far under it
    after = outputs_of(result.messages)
    before = outputs_of(messages)[-len(after) :]
    assert len(after) == 3 and after[-1] == before[-1]  # the last 3 tool-calling steps in view, the last whole
    cut = [a for a, b in zip(after, before, strict=True) if a != b]
    assert cut and min(len(a) for a in cut) > 10 * config.max_tool_output_chars  # not rule 2's 500 characters
    assert all(a.startswith("1\n2\n3\n") and "[...truncated" in a for a in cut)


@given(
    lines=st.lists(st.text(alphabet="abc xyz0123456789", max_size=120), min_size=1, max_size=400),
    chars=st.integers(300, 6_000),
    error_at=st.integers(0, 399),
)
def test_fit_text_keeps_both_ends_and_every_key_error_line(lines: list[str], chars: int, error_at: int) -> None:
    error = "ValueError: the invoice total is negative"
    lines.insert(min(error_at, len(lines)), error)
    text = "\n".join(lines)
    fitted = fit_text(text, chars, frozenset({error}))
    assert error in fitted
    if len(text) <= chars:
        assert fitted == text
    else:
        assert len(fitted) <= max(chars, 300) + 260  # a key line and the marker may pass the aim a little
        assert fitted.splitlines()[-1] == text.splitlines()[-1] or "[...truncated" in fitted.splitlines()[-1]


@given(
    window=st.integers(2_000, 1_000_000),
    trigger=st.floats(0.1, 1.0),
    target=st.floats(0.05, 1.0),
    tail=st.one_of(st.none(), st.integers(0, 2_000_000)),
)
def test_the_crowd_under_the_trigger_is_a_quantum_at_most_and_never_reaches_the_budget(
    window: int, trigger: float, target: float, tail: int | None
) -> None:
    settings = Settings(
        context_window=window, trigger_threshold=trigger, target_after=min(target, trigger), protect_tail_tokens=tail
    )
    acc = Accounting.start([], settings, system_prompt=None, tools=None, force=True, counter=None)
    below, crowded = trigger_rooms(settings, acc)
    assert below == min(settings.trigger_tokens, window + 1) - 1
    assert below - settings.quantum_tokens <= crowded <= below
    budget = settings.budget_tokens or 0
    if below - budget >= 2:
        assert crowded > budget  # a view at the budget is never crowded: no promise gives way for the aim

"""Invariants of compact() over generated sessions, checked against the generator's own record."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from strategies import Generated, sessions
from timmy_compactor.core.pipeline import compact, restore
from timmy_compactor.core.types import Settings

SYSTEM = "You are Hermes.\n# Rules\nBe brief."


def run(gen: Generated, window: int) -> Any:
    return compact(gen.messages, Settings(context_window=window), system_prompt=SYSTEM, force=True)


def orphans(messages: list[dict[str, Any]]) -> list[int]:
    bad, open_ids = [], set()
    for k, m in enumerate(messages):
        if m.get("role") == "tool":
            if m.get("tool_call_id") not in open_ids:
                bad.append(k)
            open_ids.discard(m.get("tool_call_id"))
            continue
        if open_ids:
            bad.append(k)
        open_ids = {c["id"] for c in m.get("tool_calls") or []} if m.get("role") == "assistant" else set()
    return bad


@settings(max_examples=700)
@given(gen=sessions(), window=st.sampled_from([4_000, 12_000, 65_536]))
def test_promises_hold(gen: Generated, window: int) -> None:
    raw = copy.deepcopy(gen.messages)
    result = run(gen, window)
    report = result.report
    assert report.verified, report.failure
    view = result.messages
    assert gen.messages == raw, "compact() must not mutate its input"
    # user messages byte-identical and in order
    assert [json.dumps(m) for m in view if m["role"] == "user"] == [json.dumps(m) for m in raw if m["role"] == "user"]
    # tail byte-identical
    tail = raw[report.tail_start :]
    assert [json.dumps(m) for m in view[len(view) - len(tail) :]] == [json.dumps(m) for m in tail]
    # no orphan tool call or result
    assert orphans(view) == []
    # every promised fact is somewhere in the view
    text = json.dumps(view, ensure_ascii=False)
    decoded_text = text.encode().decode("unicode_escape", errors="ignore")
    for ref in gen.refs:
        assert ref in text, ref
    for name in gen.tool_names:
        assert name in text, name
    for error in gen.error_lines:
        assert error in text or error in decoded_text, error
    # restorable, deterministic, never larger
    assert restore(result.sources, raw) == raw
    again = run(Generated(messages=copy.deepcopy(raw)), window)
    assert json.dumps(again.messages) == json.dumps(view)
    assert report.tokens_after <= report.tokens_before


@settings(max_examples=300)
@given(gen=sessions(min_turns=1, max_turns=1, max_steps=40))
def test_single_long_agent_turn_is_still_compacted(gen: Generated) -> None:
    tool_steps = sum(1 for m in gen.messages if m.get("tool_calls"))
    result = run(gen, 8_000)
    assert result.report.verified, result.report.failure
    if tool_steps >= 20 and result.report.tokens_before > 8_000:
        assert result.report.tokens_after < result.report.tokens_before
        assert result.report.tail_start > 1  # the one turn did not swallow the session


def test_hundreds_of_tool_calls_in_one_turn() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug in /srv/app/main.py"}]
    for i in range(300):
        messages.append(
            {
                "role": "assistant",
                "content": f"step {i}",
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": f"cat /srv/app/f{i}.py"})},
                    }
                ],
            }
        )
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"c{i}",
                "content": "<returncode>0</returncode>\n<output>\n" + "x = 1\n" * 200 + "</output>",
            }
        )
    result = compact(messages, Settings(context_window=65_536), force=True)
    report = result.report
    assert report.verified, report.failure
    assert report.tokens_after < report.tokens_before / 3
    assert report.tail_start >= len(messages) - 2 * 40  # the tail is a handful of steps, not the whole turn
    assert len(messages) - report.tail_start >= 2 * 3  # never fewer than min_tail_steps
    text = json.dumps(result.messages)
    assert all(f"/srv/app/f{i}.py" in text for i in range(300))

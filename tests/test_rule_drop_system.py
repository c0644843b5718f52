"""Rule 3: system messages after turn N become a one-line marker; never a late system message."""

from __future__ import annotations

from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.rules import drop_system
from timmy_compactor.core.types import Settings

PROMPT = (
    "You are Hermes.\n# Finishing the job\nDo it, and report what real execution returned.\n"
    "# Parallel tool calls\nBatch independent reads into one response.\nLoad SOUL.md first."
)


def session(turns: int) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": PROMPT}]
    for k in range(turns):
        messages += [{"role": "user", "content": f"question {k}"}, {"role": "assistant", "content": "x" * 4000}]
    return messages


def test_marker_format_says_what_was_there() -> None:
    assert drop_system.marker(PROMPT) == (
        "[system prompt: SOUL.md + 2 sections (Finishing the job, Parallel tool calls) loaded, 42 tokens]"
    )


def test_leading_system_prompt_becomes_the_marker_after_turn_one() -> None:
    result = compact(session(8), Settings(context_window=8_000), force=True)
    assert result.report.verified
    assert result.messages[0] == {"role": "system", "content": drop_system.marker(PROMPT)}
    assert result.report.rules["drop_system"] == 1


def test_not_before_the_turn_and_not_when_disabled() -> None:
    one_turn = compact(session(1), Settings(context_window=2_000), force=True)
    assert one_turn.messages[0]["content"] == PROMPT
    disabled = compact(session(8), Settings(context_window=8_000, drop_system_after_turn=0), force=True)
    assert disabled.messages[0]["content"] == PROMPT


def test_a_system_message_in_the_middle_becomes_an_assistant_note() -> None:
    messages = session(8)
    messages.insert(5, {"role": "system", "content": "Reminder: be careful with /etc/hosts"})
    result = compact(messages, Settings(context_window=8_000), force=True)
    assert result.report.verified, result.report.failure
    roles = [m["role"] for m in result.messages]
    assert roles.count("system") == 1 and roles[0] == "system"
    assert any("[system message #5:" in (m.get("content") or "") for m in result.messages)

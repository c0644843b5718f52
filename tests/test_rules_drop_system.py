"""Rule 3: system messages after turn N become a one-line marker; never a late system message."""

from __future__ import annotations

from tests.support import assistant, middle_draft, user
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.rules import drop_system
from timmy_compactor.core.types import Settings

PROMPT = (
    "You are Hermes.\n## SOUL.md\nBe kind.\n# Skills\n- github: issues\n- terminal: run\n- web: search\n"
    "# MCP servers\nfilesystem, git\n" + "Follow the rules. " * 40
)


def session(turns: int, prompt: str = PROMPT) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": prompt}]
    for k in range(turns):
        messages += [user(f"question {k}"), assistant("x" * 4000)]
    return messages


def test_marker_says_what_was_there_with_the_seed_format() -> None:
    assert drop_system.marker(PROMPT) == (
        "[system prompt: SOUL.md + 3 sections (SOUL.md, Skills, MCP servers) + 3 skills + MCP servers loaded, "
        f"{(len(PROMPT) + 3) // 4} tokens]"
    )
    assert drop_system.marker("x" * 64_816) == "[system prompt: instructions loaded, 16,204 tokens]"


def test_leading_system_prompt_becomes_the_marker_after_turn_one() -> None:
    result = compact(session(8), Settings(target_after=None, context_window=8_000), force=True)
    assert result.report.verified, result.report.failure
    assert result.messages[0] == {"role": "system", "content": drop_system.marker(PROMPT)}
    assert result.sources[0] == (0,)
    assert result.report.rules["drop_system"] == 1


def test_not_up_to_the_turn_and_not_when_disabled() -> None:
    one_turn = compact(session(1), Settings(target_after=None, context_window=2_000), force=True)
    assert one_turn.messages[0]["content"] == PROMPT
    three = compact(session(3), Settings(target_after=None, context_window=4_000, drop_system_after_turn=3), force=True)
    assert three.messages[0]["content"] == PROMPT
    four = compact(session(4), Settings(target_after=None, context_window=4_000, drop_system_after_turn=3), force=True)
    assert four.messages[0]["content"] == drop_system.marker(PROMPT)
    disabled = compact(
        session(8), Settings(target_after=None, context_window=8_000, drop_system_after_turn=0), force=True
    )
    assert disabled.messages[0]["content"] == PROMPT and "drop_system" not in disabled.report.rules


def test_a_prompt_shorter_than_its_marker_stays() -> None:
    result = compact(session(8, prompt="Be brief."), Settings(target_after=None, context_window=8_000), force=True)
    assert result.report.verified
    assert result.messages[0] == {"role": "system", "content": "Be brief."}
    assert "drop_system" not in result.report.rules


def test_a_system_message_in_the_middle_becomes_an_assistant_note() -> None:
    messages = session(8)
    reminder = "Reminder: be careful with /etc/hosts"
    messages.insert(5, {"role": "system", "content": reminder})
    result = compact(messages, Settings(target_after=None, context_window=8_000), force=True)
    assert result.report.verified, result.report.failure
    roles = [m["role"] for m in result.messages]
    assert roles.count("system") == 1 and roles[0] == "system"
    notes = [m["content"] for m in result.messages if "[system message #5:" in str(m.get("content"))]
    assert notes == [f"[system message #5: instructions loaded, {(len(reminder) + 3) // 4} tokens]"]


def test_the_rule_itself_turns_middle_system_messages_into_assistant_notes() -> None:
    messages = [assistant("a"), {"role": "system", "content": "Skills:\n- x: y"}]
    draft, counts = drop_system.apply(middle_draft(messages, user_turns=3), Settings())
    assert counts == {"drop_system": 1}
    assert draft.middle[1].message == {"role": "assistant", "content": "[system message #1: 1 skills loaded, 4 tokens]"}


def test_with_the_rule_off_a_late_raw_system_message_is_left_as_it_was() -> None:
    messages = session(8)
    messages.insert(5, {"role": "system", "content": "Reminder: keep edits small."})
    result = compact(messages, Settings(target_after=None, context_window=8_000, drop_system_after_turn=0), force=True)
    assert result.report.verified, result.report.failure
    assert result.messages[result.sources.index((5,))] is messages[5]


def test_hermes_top_level_system_prompt_is_counted_but_never_a_message() -> None:
    messages = session(8)[1:]
    bare = compact(messages, Settings(target_after=None, context_window=8_000), force=True)
    hermes = compact(messages, Settings(target_after=None, context_window=8_000), system_prompt=PROMPT, force=True)
    assert hermes.messages == bare.messages
    prompt_tokens = (len(PROMPT) + 3) // 4
    assert hermes.report.tokens_before == bare.report.tokens_before + prompt_tokens
    assert hermes.report.tokens_after == bare.report.tokens_after + prompt_tokens

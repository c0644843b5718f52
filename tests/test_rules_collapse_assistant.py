"""Rule 4: a run of assistant messages keeps the last and carries what matters from the others."""

from __future__ import annotations

from tests.support import assistant, call, middle_draft, padding_turns, terminal, tool, user
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.rules import collapse_assistant
from timmy_compactor.core.types import Settings


def test_keeps_the_last_and_carries_tool_lines_paths_urls_and_errors() -> None:
    messages = [
        assistant('[tool: terminal("make") → ok, 12 chars, #3–#4]\nThinking about /srv/app/a.py'),
        assistant("See https://docs.example.org/x — the error was: KeyError: 'port'", reasoning="hmm"),
        assistant("Final answer."),
    ]
    draft, counts = collapse_assistant.apply(middle_draft(messages), Settings())
    (entry,) = draft.middle
    assert counts == {"collapse_consecutive_assistant": 2, "drop_reasoning": 1}
    assert entry.sources == (0, 1, 2)
    assert entry.message == {
        "role": "assistant",
        "content": '[tool: terminal("make") → ok, 12 chars, #3–#4]\n'
        "[said at #0: refs /srv/app/a.py]\n"
        "See https://docs.example.org/x — the error was: KeyError: 'port'\n"  # the URL rides on the error line
        "Final answer.",
    }


def test_a_dropped_message_with_nothing_to_carry_leaves_the_last_unchanged() -> None:
    messages = [assistant("Let me think."), assistant("Done.", finish_reason="stop")]
    draft, counts = collapse_assistant.apply(middle_draft(messages), Settings())
    (entry,) = draft.middle
    assert counts == {"collapse_consecutive_assistant": 1}
    assert entry.message is messages[1] and entry.sources == (0, 1)


def test_a_tool_call_ends_the_run_and_its_results_follow() -> None:
    messages = [
        assistant("looking at ./run.sh"),
        assistant("second", call("c1", "terminal", command="ls")),
        tool("c1", terminal("x", exit_code=1)),
        assistant("after"),
    ]
    draft, _ = collapse_assistant.apply(middle_draft(messages), Settings())
    first, result, last = draft.middle
    assert first.message["tool_calls"][0]["id"] == "c1"
    assert first.message["content"] == "[said at #0: refs ./run.sh]\nsecond"
    assert result.message is messages[2] and last.message is messages[3]


def test_list_content_gets_the_carried_lines_as_a_first_part() -> None:
    messages = [assistant("see ~/notes.md"), assistant([{"type": "text", "text": "ok"}])]
    draft, _ = collapse_assistant.apply(middle_draft(messages), Settings())
    assert draft.middle[0].message["content"] == [
        {"type": "text", "text": "[said at #0: refs ~/notes.md]"},
        {"type": "text", "text": "ok"},
    ]


def test_disabled_keeps_runs_and_reasoning() -> None:
    messages = [assistant("a", reasoning="r"), assistant("b")]
    draft, counts = collapse_assistant.apply(middle_draft(messages), Settings(collapse_consecutive_assistant=False))
    assert counts == {} and [e.message for e in draft.middle] == messages


def test_reasoning_is_dropped_in_the_middle_only() -> None:
    def reasoned(text: str) -> dict:
        return assistant(text, reasoning=f"why {text}", reasoning_content="more", finish_reason="stop")

    messages = [user("first"), reasoned("head reply")]
    messages += [user("middle"), reasoned("middle reply"), *padding_turns(6)]
    messages += [user("last"), reasoned("tail reply")]
    result = compact(messages, Settings(target_after=None, context_window=8_000, protect_last_n_turns=1), force=True)
    assert result.report.verified, result.report.failure
    by_text = {m["content"]: m for m in result.messages if m["role"] == "assistant"}
    assert by_text["head reply"] is messages[1]
    assert by_text["tail reply"] is messages[-1]
    assert by_text["middle reply"] == {"role": "assistant", "content": "middle reply", "finish_reason": "stop"}
    assert result.report.rules["drop_reasoning"] >= 1


def test_in_a_session_the_run_collapses_and_every_fact_is_still_in_the_view() -> None:
    messages = [user("go"), assistant("ok")]
    messages += [
        assistant("Plan: edit /srv/app/x.py per https://example.org/guide"),
        assistant("Error: I misread it; the stack said `ZeroDivisionError: division by zero`"),
        assistant("Now editing."),
    ]
    messages += padding_turns(6)
    result = compact(messages, Settings(target_after=None, context_window=8_000, protect_last_n_turns=2), force=True)
    assert result.report.verified, result.report.failure
    merged = result.messages[2]
    assert result.sources[2] == (2, 3, 4)
    for fact in ("/srv/app/x.py", "https://example.org/guide", "ZeroDivisionError: division by zero", "Now editing."):
        assert fact in merged["content"]
    assert result.messages[3]["role"] == "user"

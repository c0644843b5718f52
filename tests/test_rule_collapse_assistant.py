"""Rule 4: a run of assistant messages keeps the last and carries what matters from the others."""

from __future__ import annotations

from helpers_core import assistant, call, middle_draft
from timmy_compactor.core.rules import collapse_assistant
from timmy_compactor.core.types import Settings


def test_keeps_the_last_and_carries_lines_paths_urls_errors() -> None:
    messages = [
        assistant('[tool: terminal("make") → ok, 12 chars, #3–#4]\nThinking about /srv/app/a.py'),
        assistant("See https://docs.example.org/x — the error was: KeyError: 'port'", reasoning="hmm"),
        assistant("Final answer."),
    ]
    draft, counts = collapse_assistant.apply(middle_draft(messages), Settings())
    (entry,) = draft.middle
    assert counts == {"collapse_consecutive_assistant": 2, "drop_reasoning": 1}
    content = entry.message["content"]
    assert content.endswith("Final answer.")
    assert '[tool: terminal("make") → ok, 12 chars, #3–#4]' in content
    for fact in ("/srv/app/a.py", "https://docs.example.org/x", "KeyError: 'port'"):
        assert fact in content
    assert entry.sources == (0, 1, 2)
    assert "reasoning" not in entry.message


def test_a_tool_call_ends_the_run() -> None:
    messages = [assistant("first"), assistant("second", call("c1", "terminal", command="ls"))]
    draft, _ = collapse_assistant.apply(middle_draft(messages), Settings())
    (entry,) = draft.middle
    assert entry.message["tool_calls"][0]["id"] == "c1"
    assert entry.message["content"] == "second"  # "first" had nothing that must be carried


def test_disabled() -> None:
    messages = [assistant("a"), assistant("b")]
    draft, counts = collapse_assistant.apply(middle_draft(messages), Settings(collapse_consecutive_assistant=False))
    assert counts == {} and len(draft.middle) == 2

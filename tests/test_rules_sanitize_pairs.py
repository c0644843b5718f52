"""After the rules, no orphan tool call or tool result is left in the compacted part."""

from __future__ import annotations

import json

from tests.support import assistant, call, middle_draft, padding_turns, terminal, tool, user
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.rules import sanitize_pairs
from timmy_compactor.core.types import Settings


def apply(messages: list[dict]) -> tuple[list[dict], list[tuple[int, ...]], dict[str, int]]:
    draft, counts = sanitize_pairs.apply(middle_draft(messages), Settings())
    return [e.message for e in draft.middle], [e.sources for e in draft.middle], counts


def test_a_call_without_result_becomes_a_line() -> None:
    messages = [assistant("trying", call("c1", "terminal", command="cat /srv/x.log")), user("?")]
    view, sources, counts = apply(messages)
    assert counts == {"sanitize_tool_pairs": 1}
    assert view[0] == {"role": "assistant", "content": 'trying\n[tool: terminal("cat /srv/x.log") → no result, #0]'}
    assert view[1] is messages[1] and sources == [(0,), (1,)]


def test_of_parallel_calls_only_the_unanswered_one_is_removed() -> None:
    messages = [
        assistant(None, call("a", "terminal", command="ls"), call("b", "read_file", path="/etc/hosts")),
        tool("a", terminal("x", exit_code=1)),
    ]
    view, _, counts = apply(messages)
    assert counts == {"sanitize_tool_pairs": 1}
    assert [c["id"] for c in view[0]["tool_calls"]] == ["a"]
    assert view[0]["content"] == '[tool: read_file("/etc/hosts") → no result, #0]'
    assert view[1] is messages[1]


def test_a_result_without_call_becomes_a_note_keeping_its_error() -> None:
    messages = [assistant("done"), tool("ghost", terminal("Permission denied: /root/x", exit_code=1))]
    view, sources, counts = apply(messages)
    assert counts == {"sanitize_tool_pairs": 1}
    assert sources == [(0, 1)]
    assert view == [
        {
            "role": "assistant",
            "content": "done\n[tool result #1 without a call: terminal → failed: Permission denied: /root/x]",
        }
    ]


def test_an_orphan_with_no_assistant_before_it_becomes_its_own_note() -> None:
    messages = [user("hi"), {"role": "tool", "tool_call_id": "x", "content": json.dumps({"output": "fine"})}]
    view, sources, _ = apply(messages)
    assert view[1] == {"role": "assistant", "content": "[tool result #1 without a call: unknown tool → ok]"}
    assert sources == [(0,), (1,)]


def test_a_result_separated_from_its_call_by_a_user_message() -> None:
    messages = [assistant("", call("c1", "terminal", command="make")), user("wait"), tool("c1", terminal("ok"))]
    view, _, counts = apply(messages)
    assert counts == {"sanitize_tool_pairs": 2}
    assert "tool_calls" not in view[0] and view[0]["content"] == '[tool: terminal("make") → no result, #0]'
    assert view[2] == {"role": "assistant", "content": "[tool result #2 without a call: terminal → ok]"}


def test_interrupted_and_orphan_messages_in_a_session_give_a_valid_verified_view() -> None:
    messages = [user("go"), assistant("ok")]
    messages += [assistant("", call("c1", "terminal", command="sleep 9")), user("stop that")]
    messages += [tool("ghost", "Traceback (most recent call last):\nOSError: disk full")]
    messages += padding_turns(6)
    result = compact(messages, Settings(target_after=None, context_window=8_000, protect_last_n_turns=2), force=True)
    assert result.report.verified, result.report.failure
    assert result.report.rules["sanitize_tool_pairs"] == 2
    assert not any(m["role"] == "tool" or m.get("tool_calls") for m in result.messages)
    text = json.dumps(result.messages)
    assert 'terminal(\\"sleep 9\\") \\u2192 no result' in text and "OSError: disk full" in text  # its key line


def test_repairing_a_broken_raw_costs_at_most_a_few_tokens() -> None:
    messages = [user("a"), {"role": "tool", "tool_call_id": "g", "content": "Error: x"}, *padding_turns(2, size=10)]
    result = compact(messages, Settings(protect_last_n_turns=2), force=True)
    assert result.report.verified and result.report.rules == {"sanitize_tool_pairs": 1}
    assert result.messages[1] == {
        "role": "assistant",
        "content": "[tool result #1 without a call: unknown tool → failed: Error: x]",
    }
    assert 0 < result.report.tokens_after - result.report.tokens_before <= 20  # validity first: an orphan is rejected

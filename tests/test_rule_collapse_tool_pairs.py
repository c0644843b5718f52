"""Rule 1: a succeeded call + result becomes `[tool: name("arg") → ok, N chars, #i–#j]`."""

from __future__ import annotations

import json

from helpers_core import assistant, call, middle_draft, terminal, tool
from timmy_compactor.core.rules import collapse_tool_pairs
from timmy_compactor.core.types import Settings


def test_succeeded_pair_becomes_one_line_with_the_seed_format() -> None:
    result = json.dumps({"content": "1|a: 1\n" * 50})
    messages = [assistant("Reading.", call("c1", "read_file", path="config.yaml")), tool("c1", result, "read_file")]
    draft, counts = collapse_tool_pairs.apply(middle_draft(messages), Settings())
    (entry,) = draft.middle
    assert counts == {"collapse_tool_pairs": 1}
    assert "tool_calls" not in entry.message
    assert entry.sources == (0, 1)
    assert entry.message["content"] == f'Reading.\n[tool: read_file("config.yaml") → ok, {len(result):,} chars, #0–#1]'


def test_failed_calls_are_kept_whole() -> None:
    failures = [
        terminal("ls: cannot access 'x': No such file or directory", exit_code=2),
        json.dumps({"content": "", "error": "File not found: a.yml"}),
        json.dumps({"success": False, "diff": ""}),
        "<returncode>1</returncode>\n<output>\nboom\n</output>",
        "Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'x'",
        json.dumps({"status_code": 503, "body": "unavailable"}),
    ]
    for body in failures:
        messages = [assistant("", call("c1", "terminal", command="ls x")), tool("c1", body)]
        draft, counts = collapse_tool_pairs.apply(middle_draft(messages), Settings())
        assert counts == {}, body
        assert [e.message for e in draft.middle] == messages


def test_mixed_parallel_calls_keep_only_the_failed_one() -> None:
    messages = [
        assistant(
            "",
            call("a", "terminal", command="true"),
            call("b", "terminal", command="false"),
            call("c", "read_file", path="/etc/hosts"),
        ),
        tool("a", terminal("")),
        tool("b", terminal("", exit_code=1)),
        tool("c", json.dumps({"content": "1|127.0.0.1 localhost"}), "read_file"),
    ]
    draft, counts = collapse_tool_pairs.apply(middle_draft(messages), Settings())
    assert counts == {"collapse_tool_pairs": 2}
    first, second = draft.middle
    assert [c["id"] for c in first.message["tool_calls"]] == ["b"]
    assert '[tool: terminal("true") → ok' in first.message["content"]
    assert '[tool: read_file("/etc/hosts") → ok' in first.message["content"]
    assert second.message["tool_call_id"] == "b"
    assert sorted(first.sources + second.sources) == [0, 1, 2, 3]


def test_paths_and_urls_of_long_arguments_stay_in_the_line() -> None:
    command = "cat > /srv/app/settings.py <<'EOF'\n" + "x = 1\n" * 100 + "EOF\ncurl https://example.org/health"
    messages = [assistant("", call("c1", "terminal", command=command)), tool("c1", terminal("ok"))]
    draft, _ = collapse_tool_pairs.apply(middle_draft(messages), Settings())
    line = draft.middle[0].message["content"]
    assert "/srv/app/settings.py" in line and "https://example.org/health" in line
    assert len(line) < 400


def test_persisted_output_file_is_named() -> None:
    body = "<persisted-output>\nOutput too large; saved to /tmp/hermes-results/call_9.txt\n</persisted-output>"
    messages = [assistant("", call("c9", "terminal", command="cat big.log")), tool("c9", body)]
    draft, _ = collapse_tool_pairs.apply(middle_draft(messages), Settings())
    assert "full output in /tmp/hermes-results/call_9.txt" in draft.middle[0].message["content"]


def test_disabled_by_keep_tool_summary_false() -> None:
    messages = [assistant("", call("c1", "terminal", command="true")), tool("c1", terminal(""))]
    draft, counts = collapse_tool_pairs.apply(middle_draft(messages), Settings(keep_tool_summary=False))
    assert counts == {} and [e.message for e in draft.middle] == messages

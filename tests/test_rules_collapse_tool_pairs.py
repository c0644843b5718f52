"""Rule 1: a succeeded call + result becomes `[tool: name("arg") → ok, N chars, #i–#j]`."""

from __future__ import annotations

import json

import pytest

from tests.support import assistant, call, middle_draft, padding_turns, terminal, tool, user
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.rules import collapse_tool_pairs
from timmy_compactor.core.types import Settings


def apply(messages: list[dict], **settings: object) -> tuple[list[dict], list[tuple[int, ...]], dict[str, int]]:
    draft, counts = collapse_tool_pairs.apply(middle_draft(messages), Settings(**settings))  # type: ignore[arg-type]
    return [e.message for e in draft.middle], [e.sources for e in draft.middle], counts


def test_the_seed_format_for_one_succeeded_pair() -> None:
    body = json.dumps({"content": "1|" + "a" * 300})
    body += " " * (347 - len(body))  # exactly 347 characters, as in the spec's example
    messages = [assistant("", call("c1", "read_file", path="config.yaml")), tool("c1", body, "read_file")]
    view, sources, counts = apply(messages)
    assert counts == {"collapse_tool_pairs": 1}
    assert view == [{"role": "assistant", "content": '[tool: read_file("config.yaml") → ok, 347 chars, #0–#1]'}]
    assert sources == [(0, 1)]


def test_the_line_follows_the_assistant_text_and_keeps_its_other_keys() -> None:
    result = terminal("x" * 1500)
    messages = [
        assistant("Reading.", call("c1", "terminal", command="make test"), finish_reason="tool_calls"),
        tool("c1", result),
    ]
    (message,), _, _ = apply(messages)
    assert message["content"] == f'Reading.\n[tool: terminal("make test") → ok, {len(result):,} chars, #0–#1]'
    assert message["finish_reason"] == "tool_calls"
    assert "tool_calls" not in message


def test_line_names_raw_indices_in_a_whole_session() -> None:
    messages = [user("start"), assistant("ok")]
    messages += [assistant("", call("c1", "terminal", command="ls /srv")), tool("c1", terminal("a\nb"))]
    messages += padding_turns(6)
    result = compact(messages, Settings(target_after=None, context_window=8_000, protect_last_n_turns=2), force=True)
    assert result.report.verified, result.report.failure
    chars = len(terminal("a\nb"))
    assert result.messages[2]["content"] == f'[tool: terminal("ls /srv") → ok, {chars} chars, #2–#3]'
    assert result.sources[2] == (2, 3)


FAILED = {
    "exit code, error null": terminal("ls: cannot access 'x': No such file or directory", exit_code=2),
    "exit code 127": terminal("/usr/bin/bash: line 3: nginx: command not found", exit_code=127),
    "exit code, silent": terminal("--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y", exit_code=1),
    "error field": json.dumps({"content": "", "error": "File not found: a.yml", "similar_files": ["a.yaml"]}),
    "success false": json.dumps({"success": False, "diff": ""}),
    "returncode 1": "<returncode>1</returncode>\n<output>\nboom\n</output>",
    "returncode -9": "<returncode>-9</returncode>\n<output>\n</output>",
    "plain traceback": "Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'x'",
    "traceback in JSON": terminal('Traceback (most recent call last):\n  File "a.py"\nValueError: v'),
    "http status": json.dumps({"status_code": 503, "body": "unavailable"}),
    "Error prefix": "Error: connection refused",
    "error: prefix": "error: pathspec 'x' did not match any file(s) known to git",
}


@pytest.mark.parametrize("body", FAILED.values(), ids=FAILED.keys())
def test_failed_calls_are_not_collapsed(body: str) -> None:
    messages = [assistant("", call("c1", "terminal", command="ls x")), tool("c1", body)]
    view, sources, counts = apply(messages)
    assert counts == {}
    assert view == messages and sources == [(0,), (1,)]


SUCCEEDED = {
    "exit 0": terminal("ok"),
    "returncode 0": "<returncode>0</returncode>\n<output>\nall good\n</output>",
    "error words later": terminal("3 tests\n1 line mentions error handling\ndone"),
    "success true": json.dumps({"success": True, "diff": "--- a\n+++ b"}),
    "http 200": json.dumps({"status_code": 200, "body": "fine"}),
    "empty": "",
    "read_file": json.dumps({"content": "1|host: 127.0.0.1\n2|port: 5173", "total_lines": 2}),
}


@pytest.mark.parametrize("body", SUCCEEDED.values(), ids=SUCCEEDED.keys())
def test_succeeded_calls_are_collapsed(body: str) -> None:
    messages = [assistant("", call("c1", "terminal", command="ls x")), tool("c1", body)]
    view, sources, counts = apply(messages)
    assert counts == {"collapse_tool_pairs": 1}
    assert [m["role"] for m in view] == ["assistant"] and sources == [(0, 1)]
    # a line that only mentions an error is not a key error line (spec §2a): nothing is "printed"
    assert view[0]["content"] == f'[tool: terminal("ls x") → ok, {len(body):,} chars, #0–#1]'


EXIT_ZERO_ERRORS = {
    "repro script": (
        terminal("Reproducing...\nError: 'NoneType' object has no attribute 'x'\ndone"),
        "Error: 'NoneType' object has no attribute 'x'",
    ),
    "pip resolver": (
        terminal("Collecting a\nERROR: pip's dependency resolver does not currently take into account"),
        "ERROR: pip's dependency resolver does not currently take into account",
    ),
    "returncode 0": (
        "<returncode>0</returncode>\n<output>\nValueError: bad literal\n</output>",
        "ValueError: bad literal",
    ),
}


@pytest.mark.parametrize(("body", "error_line"), EXIT_ZERO_ERRORS.values(), ids=EXIT_ZERO_ERRORS.keys())
def test_an_error_printed_by_a_call_that_exits_0_survives_the_collapse(body: str, error_line: str) -> None:
    messages = [assistant("", call("c1", "terminal", command="python repro.py")), tool("c1", body)]
    view, _sources, counts = apply(messages)
    assert counts == {"collapse_tool_pairs": 1}
    assert f"→ ok, {len(body):,} chars, printed: {error_line}, #0–#1]" in view[0]["content"]


def test_parallel_calls_keep_only_the_failed_one_whatever_the_result_order() -> None:
    messages = [
        assistant(
            "",
            call("a", "terminal", command="true"),
            call("b", "terminal", command="false"),
            call("c", "read_file", path="/etc/hosts"),
        ),
        tool("c", json.dumps({"content": "1|127.0.0.1 localhost"}), "read_file"),
        tool("b", terminal("", exit_code=1)),
        tool("a", terminal("")),
    ]
    view, sources, counts = apply(messages)
    assert counts == {"collapse_tool_pairs": 2}
    first, second = view
    assert [c["id"] for c in first["tool_calls"]] == ["b"]
    lines = first["content"].splitlines()
    assert lines[0].startswith('[tool: terminal("true") → ok, ') and lines[0].endswith(", #0, #3]")
    assert lines[1].startswith('[tool: read_file("/etc/hosts") → ok, ') and lines[1].endswith(", #0–#1]")
    assert second == messages[2]
    assert sorted(sources[0] + sources[1]) == [0, 1, 2, 3]


def test_paths_and_urls_of_long_arguments_stay_in_the_line() -> None:
    command = "cat > /srv/app/settings.py <<'EOF'\n" + "x = 1\n" * 100 + "EOF\ncurl https://example.org/health"
    messages = [assistant("", call("c1", "terminal", command=command)), tool("c1", terminal("ok"))]
    ((message,), _, _) = apply(messages)
    line = message["content"]
    assert "/srv/app/settings.py" in line and "https://example.org/health" in line
    assert "(refs: https://example.org/health)" in line  # beyond the 80-character preview
    assert len(line) < 300


def test_arguments_with_several_keys_are_previewed_as_key_value_pairs() -> None:
    messages = [
        assistant("", call("c1", "read_file", path="src/app.py", offset=10, limit=200)),
        tool("c1", json.dumps({"content": "10|x"}), "read_file"),
    ]
    ((message,), _, _) = apply(messages)
    assert message["content"].startswith('[tool: read_file(path="src/app.py", offset=10, limit=200) → ok, ')


def test_persisted_output_file_is_named() -> None:
    body = "<persisted-output>\nFull output saved to: /tmp/hermes-results/call_9.txt\n</persisted-output>"
    messages = [assistant("", call("c9", "terminal", command="cat big.log")), tool("c9", body)]
    ((message,), _, _) = apply(messages)
    assert "full output in /tmp/hermes-results/call_9.txt" in message["content"]


def test_a_call_without_its_result_is_left_for_the_sanitizer() -> None:
    messages = [assistant("", call("c1", "terminal", command="sleep 1000")), user("stop")]
    view, _, counts = apply(messages)
    assert counts == {} and view == messages


def test_a_second_result_for_a_collapsed_call_is_kept_not_lost() -> None:
    messages = [
        assistant("", call("c1", "terminal", command="true")),
        tool("c1", terminal("first")),
        tool("c1", terminal("written twice")),
    ]
    view, sources, counts = apply(messages)
    assert counts == {"collapse_tool_pairs": 1}
    assert sources == [(0, 1), (2,)] and view[1] == messages[2]
    # end to end the duplicate becomes a note and the view still verifies
    session = [user("go"), assistant("ok"), *messages, *padding_turns(6)]
    result = compact(session, Settings(target_after=None, context_window=8_000, protect_last_n_turns=2), force=True)
    assert result.report.verified, result.report.failure
    assert result.report.rules["sanitize_tool_pairs"] == 1 and result.sources[2] == (2, 3, 4)
    assert result.messages[2]["content"].endswith("\n[tool result #4 without a call: terminal → ok]")


def test_list_content_gets_the_line_as_a_text_part() -> None:
    messages = [assistant([{"type": "text", "text": "look"}], call("c1", "terminal", command="ls")), tool("c1", "ok")]
    ((message,), _, _) = apply(messages)
    assert message["content"] == [
        {"type": "text", "text": "look"},
        {"type": "text", "text": '[tool: terminal("ls") → ok, 2 chars, #0–#1]'},
    ]


def test_disabled_by_keep_tool_summary_false() -> None:
    messages = [assistant("", call("c1", "terminal", command="true")), tool("c1", terminal(""))]
    view, _, counts = apply(messages, keep_tool_summary=False)
    assert counts == {} and view == messages

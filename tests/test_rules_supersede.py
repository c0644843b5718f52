"""Supersession (issue 30, item 3): an output run or read again later becomes a header line naming the newer."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import assistant, call, middle_draft, terminal, tool, user
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.reruns import covers, run_of
from timmy_compactor.core.rules import supersede
from timmy_compactor.core.types import Settings

TRACEBACK = "Traceback (most recent call last):\n  File \"repro.py\", line 3, in <module>\nKeyError: 'pk'\n"


def apply(messages: list[dict]) -> tuple[list[dict], list[tuple[int, ...]], dict[str, int]]:
    draft, counts = supersede.apply(middle_draft(messages), Settings())
    return [e.message for e in draft.middle], [e.sources for e in draft.middle], counts


def shell(call_id: str, command: str, output: str, code: int = 0) -> list[dict]:
    return [assistant("", call(call_id, "terminal", command=command)), tool(call_id, terminal(output, code))]


def test_a_failed_command_run_again_keeps_its_call_and_a_header_with_its_error_lines() -> None:
    failed = TRACEBACK + "noise\n" * 200 + "ERROR: 3 tests failed\n"
    messages = shell("a", "python  repro.py", failed, 1) + shell("b", "ls", "x") + shell("c", "python repro.py", "ok")
    view, sources, counts = apply(messages)
    assert counts == {"supersede": 1}
    chars = len(terminal(failed, 1))
    assert view[0] == messages[0]  # a failed call is never collapsed
    assert view[1] == {
        **messages[1],
        "content": f"[superseded: exit 1, run again at #5, {chars:,} chars — timmy_recall #1]\n"
        "KeyError: 'pk'\nERROR: 3 tests failed",
    }
    assert sources[:2] == [(0,), (1,)]
    assert view[2:] == messages[2:]  # the newer run and the other command stay as they were


def test_a_succeeded_command_run_again_leaves_one_line_naming_the_newer_run() -> None:
    messages = shell("a", "ls  /srv", "a\nb") + shell("b", "ls /srv", "a\nb\nc")
    view, sources, counts = apply(messages)
    assert counts == {"supersede": 1}
    chars = len(terminal("a\nb"))
    assert view[0] == {
        "role": "assistant",
        "content": f'[tool: terminal("ls /srv") → ok, run again at #3, {chars} chars, #0–#1]',
    }
    assert sources[0] == (0, 1) and view[1:] == messages[2:]


def test_a_file_read_again_after_an_edit_says_so() -> None:
    messages = [
        assistant("", call("r1", "read_file", path="/srv/app/x.py")),
        tool("r1", json.dumps({"content": "1|a = 1\n" * 50}), "read_file"),
        assistant("", call("w", "patch", path="/srv/app/x.py", old_string="a = 1", new_string="a = 2")),
        tool("w", json.dumps({"success": True, "diff": "-a = 1\n+a = 2"}), "patch"),
        *shell("r2", "cd /srv && cat app/x.py", "a = 2\n" * 50),
    ]
    view, _, counts = apply(messages)
    assert counts == {"supersede": 1}
    assert "→ ok, read again at #5, edited at #2 in between," in view[0]["content"]
    assert view[1:] == messages[2:]


@pytest.mark.parametrize(
    ("earlier", "later", "superseded"),
    [
        ("sed -n '10,20p' a/b.py", "cat a/b.py", True),  # a whole read covers a range
        ("sed -n '10,20p' a/b.py", "sed -n '5,40p' a/b.py", True),
        ("head -n 5 a/b.py", "sed -n '1,5p' a/b.py", True),
        ("cat a/b.py", "sed -n '1,5p' a/b.py", False),  # a range does not cover the whole file
        ("sed -n '10,20p' a/b.py", "sed -n '30,40p' a/b.py", False),
        ("cat a/b.py", "cat a/c.py", False),
        ("cat a/b.py | grep x", "cat a/b.py", False),  # a pipeline is no read of the file
        ("cat a/b.py", "cd a && cat b.py", True),  # a relative path is read against the `cd`
    ],
)
def test_what_counts_as_the_same_read(earlier: str, later: str, superseded: bool) -> None:
    messages = shell("a", earlier, "text\n" * 40) + shell("b", later, "text\n" * 40)
    _, _, counts = apply(messages)
    assert counts == ({"supersede": 1} if superseded else {})


def test_the_write_of_a_copy_or_a_diff_of_the_file_is_no_edit() -> None:
    messages = [
        *shell("a", "cat django/db/x.py", "text\n" * 40),
        *shell("b", "git diff -- django/db/x.py > patch.txt", ""),
        *shell("c", "cp django/db/x.py django/db/x.py.backup", ""),
        *shell("d", "cat django/db/x.py", "text\n" * 40),
    ]
    view, _, _ = apply(messages)
    assert "read again at #7," in view[0]["content"] and "edited" not in view[0]["content"]
    messages[4:4] = shell("e", "sed -i 's/a/b/' django/db/x.py", "")
    view, _, _ = apply(messages)
    assert "read again at #9, edited at #4 in between," in view[0]["content"]


def test_the_header_names_the_first_newer_run_so_a_longer_session_leaves_it_unchanged() -> None:
    first = shell("a", "make test", "FAILED tests/x.py::t\n" + "x\n" * 100, 2) + shell("b", "make test", "ok")
    view, _, _ = apply(first)
    longer, _, _ = apply(first + shell("c", "make test", "ok again"))
    assert longer[:2] == view[:2] and "run again at #3," in view[1]["content"]
    assert "run again at #5," in longer[2]["content"]  # the second run is superseded by the third


def test_a_rerun_in_the_tail_supersedes_but_the_tail_and_user_messages_stay_whole() -> None:
    messages = [user("fix the build")]
    messages += shell("a", "make", TRACEBACK + "noise\n" * 300, 2)
    for k in range(8):
        messages += shell(f"p{k}", f"echo {k}", str(k))
    messages += [user("try again"), *shell("z", "make", "built")]
    config = Settings(context_window=8_000, target_after=None, protect_last_n_turns=1)
    result = compact(messages, config, force=True)
    assert result.compacted, result.report.failure
    assert result.report.rules["supersede"] == 1
    text = json.dumps(result.messages, ensure_ascii=False)
    assert "[superseded: exit 2, run again at #21," in text and "noise" not in text
    assert result.messages[-3:] == messages[-3:] and [m for m in result.messages if m["role"] == "user"] == [
        m for m in messages if m["role"] == "user"
    ]


def test_a_secret_in_the_command_is_redacted_in_the_header() -> None:
    secret = "sk-" + "Q7wX" * 10
    messages = [user("go"), *shell("a", f"curl -H 'Authorization: Bearer {secret}' api", "x\n" * 300, 7)]
    messages += shell("b", f"curl -H 'Authorization: Bearer {secret}' api", "ok")
    messages += [user("and now"), *shell("c", "echo 1", "1"), *shell("d", "echo 2", "2"), *shell("e", "echo 3", "3")]
    config = Settings(context_window=8_000, target_after=None, redact_credentials=True, protect_last_n_turns=1)
    result = compact(messages, config, force=True)
    assert result.compacted, result.report.failure
    assert result.report.rules["supersede"] == 1
    assert secret not in json.dumps(result.messages[:-3])


def test_run_keys_and_spans() -> None:
    assert run_of(call("a", "terminal", command="cd /t && sed -n '3,9p' x/y.py")).read == "/t/x/y.py"
    assert run_of(call("a", "terminal", command="head -20 y.py")).span == (1, 20)
    assert run_of(call("a", "read_file", path="y.py", offset=10, limit=5)).span == (10, 14)
    assert run_of(call("a", "terminal", command="cat y.py > z.py")).read is None
    assert covers(None, (1, 2)) and not covers((1, 2), None) and covers((1, 9), (2, 3))


def test_a_succeeded_output_that_printed_an_error_keeps_its_key_line_in_the_header() -> None:
    messages = shell("a", "python check.py", "x\n" * 50 + "Error: quota exceeded") + shell("b", "python check.py", "")
    view, _, _ = apply(messages)
    assert "→ ok, run again at #3," in view[0]["content"] and "printed: Error: quota exceeded" in view[0]["content"]


def test_a_heredoc_writes_its_target_and_its_body_writes_nothing() -> None:
    heredoc = "cat > django/db/x.py << 'EOF'\nimport shutil\ncp a django/db/y.py\nEOF\necho done"
    assert run_of(call("a", "terminal", command=heredoc)).writes == ("django/db/x.py",)
    messages = [*shell("a", "cat /t/django/db/x.py", "v1\n" * 40), *shell("b", heredoc, "done")]
    view, _, _ = apply([*messages, *shell("c", "cat /t/django/db/x.py", "v2\n" * 40)])
    assert "read again at #5, edited at #2 in between," in view[0]["content"]


COMMANDS = ["make", "make  test", "make test", "cat a/b.py", "sed -n '1,5p' a/b.py", "sed -i 's/x/y/' a/b.py"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(COMMANDS), st.integers(0, 2)), min_size=1, max_size=14))
def test_what_a_header_says_never_changes_as_the_session_grows(runs: list[tuple[str, int]]) -> None:
    """A header is a function of the messages up to the newer run: every entry the rule rewrote in a
    prefix of the session is the same in the whole session (the fold and the cache rely on it)."""
    messages: list[dict] = []
    for k, (command, code) in enumerate(runs):
        messages += shell(f"c{k}", command, f"out {k}\nERROR: e{k}\n" + "x\n" * 30, code)
    for cut in range(2, len(messages), 2):
        short, short_sources, _ = apply(messages[:cut])
        whole, whole_sources, _ = apply(messages)
        rewritten = [(m, s) for m, s in zip(short, short_sources, strict=True) if m not in messages]
        assert all(pair in zip(whole, whole_sources, strict=True) for pair in rewritten)

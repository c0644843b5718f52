"""What each task ended with (issue 30, item 4): the fold line of a task's steps says how it ended, the
same bytes at every later compaction; an answer that speaks of output "above" says where that output is."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support import CORPUS, assistant, call, terminal, tool, user
from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.index import INDEX_HEADER
from timmy_compactor.core.fold.outcomes import OUTCOME_CHARS, task_outcome
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Settings

SECRET = "sk-" + "Q7wX" * 10
PATCH = (
    "diff --git a/src/billing.py b/src/billing.py\n--- a/src/billing.py\n+++ b/src/billing.py\n@@ -1 +1 @@\n-a\n+b\n"
)


def work(tag: str, steps: int = 12) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(steps):
        out += [
            assistant(f"step {k}", call(f"{tag}{k}", "terminal", command=f"python probe_{tag}_{k}.py")),
            tool(f"{tag}{k}", terminal("\n".join(f"row {n} of {tag}" for n in range(120)))),
        ]
    return out


def tasks() -> list[dict[str, Any]]:
    """Five tasks: a submitted patch, an answer pointing "above", a failing last command, a plain stop,
    and the open one."""
    messages = [user("Task A: fix the billing rounding"), *work("a")]
    messages += [
        assistant("", call("sub", "terminal", command="echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt")),
        tool("sub", PATCH),
    ]
    messages += [user("Task B: show me the log"), *work("b")]
    messages += [assistant(f"The log is above (token {SECRET}).\nSummary: fine.")]
    messages += [user("Task C: run the tests"), *work("c")]
    messages += [
        assistant("", call("t", "terminal", command="make test")),
        tool("t", terminal("collected 3 items\nFAILED tests/test_x.py::test_round - AssertionError", 2)),
    ]
    messages += [user("Task D: tidy up"), *work("d"), user("thanks, just chatting"), assistant("you are welcome")]
    messages += [user("Task E: one more thing"), *work("e", 3)]
    return messages


def outcomes(messages: list[dict[str, Any]]) -> list[str]:
    facts = RawFacts(messages)
    return [task_outcome(facts, k) for k, m in enumerate(messages) if m["role"] == "user"]


def test_each_closed_task_that_did_work_says_how_it_ended() -> None:
    messages = tasks()
    _, b, c, d, chat, _ = (k for k, m in enumerate(messages) if m["role"] == "user")
    said = outcomes(messages)
    ref = said[2].split("credential_ref:")[1].split(")")[0]
    assert said == [
        "",  # the first user message closes nothing
        f"submitted a patch at #{b - 1}: src/billing.py",
        f'answered #{c - 1}: "The log is above (token credential_ref:{ref})." — output above: #{b + 2}, #{c - 2}',
        f'last command failed at #{d - 1}: terminal("make test") → exit 2: FAILED tests/test_x.py::test_round - '
        "AssertionError",
        f'stopped after #{chat - 1}: terminal("python probe_d_11.py") → ok',
        "",  # the chat turn did no work (and task E, still open, is closed by nothing)
    ]
    assert all(SECRET not in line for line in said)


def test_what_a_line_says_is_cut_to_its_cap() -> None:
    failing = [assistant("", call("f", "terminal", command="make")), tool("f", terminal("ERROR: " + "y" * 300, 2))]
    said = outcomes([user("go"), *failing, user("next")])[1]
    assert len(said) == OUTCOME_CHARS and said.endswith("…")


def test_the_fold_lines_say_how_the_folded_tasks_ended_the_first_one_too() -> None:
    messages = tasks()
    result = compact(messages, Settings(context_window=16_000), force=True)
    assert result.compacted, result.report.failure
    lines = [str(m["content"]) for m in result.messages if str(m.get("content")).startswith("[folded #")]
    b = next(k for k, m in enumerate(messages) if m["role"] == "user" and k)
    assert lines[0] == f"[folded #1–#{b - 1}: {b // 2} steps, see index; submitted a patch at #{b - 1}: src/billing.py]"
    assert any("; last command failed at #" in line for line in lines)
    assert SECRET not in json.dumps(result.messages)


def test_outcome_lines_are_the_same_bytes_when_the_session_has_grown() -> None:
    messages = tasks()
    config = Settings(context_window=16_000)
    cut = [k for k, m in enumerate(messages) if m["role"] == "user"][-2]  # before the chat turn
    earlier = compact(messages[: cut + 3], config, force=True).messages
    later = compact(messages, config, force=True).messages
    ended = [str(m["content"]) for m in earlier if "; submitted a patch" in str(m.get("content"))]
    ended += [str(m["content"]) for m in earlier if "; last command failed" in str(m.get("content"))]
    assert len(ended) == 2
    assert all(m in later for m in earlier if m["content"] in ended)
    assert _index(later).startswith(_index(earlier).rsplit("\n### ", 1)[0])  # the index only appends


def test_a_fold_line_says_where_the_output_an_answer_calls_above_is() -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"}, user("first")]
    for turn in range(1, 9):
        messages.append(user(f"Turn {turn}: show the log"))
        for step in range(3):  # the second output is the longest
            lines = 2_500 + 500 * (step == 1)
            messages += [
                assistant("", call(f"c{turn}{step}", "terminal", command=f"tail -{lines} log{turn}{step}.txt")),
                tool(f"c{turn}{step}", "\n".join(f"line {n}" for n in range(lines))),
            ]
        messages.append(assistant("The log is above; it has 3000 lines.\n" + "A detail. " * 300))
    result = compact(messages, Settings(context_window=64_000), force=True)
    assert result.compacted, result.report.failure
    fold_lines = [str(m["content"]) for m in result.messages if str(m.get("content")).startswith("[folded #")]
    pointed = [line for line in fold_lines if "answered #" in line]
    assert pointed
    for line in pointed:
        answer = int(line.split("answered #")[1].split(":")[0])
        assert line.endswith(f"— output above: #{answer - 3}, #{answer - 1}]"), line  # the longest and the last


def _index(messages: list[dict[str, Any]]) -> str:
    return next(str(m["content"]) for m in messages if str(m.get("content")).startswith(INDEX_HEADER))


MULTITASK = CORPUS / "session_multitask_django_12470_14580.json"


@pytest.mark.skipif(not MULTITASK.exists(), reason="the corpus in ../shared is not here")
def test_the_real_multitask_run_says_task_one_submitted_its_patch_and_keeps_saying_it() -> None:
    doc = json.loads(MULTITASK.read_text(encoding="utf-8"))
    messages = doc["messages"]
    line = "[folded #1–#262: 131 steps, see index; submitted a patch at #262: django/db/models/sql/compiler.py]"
    indexes = []
    for n in (340, 400, len(messages)):
        result = compact(messages[:n], Settings(), system_prompt=doc.get("system_prompt"), force=True)
        assert result.compacted, result.report.failure
        assert [m["content"] for m in result.messages[1:4]] == [_index(result.messages), line, messages[263]["content"]]
        indexes.append(_index(result.messages))
    assert indexes[2].startswith(indexes[1].rsplit("\n### ", 1)[0])

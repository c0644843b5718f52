"""DPO pair mining: every correction rule with a positive and a negative example, and the pairing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support import corpus_files, load_sample
from timmy_compactor.export.dpo import correction_rule, is_retry, mine_pairs

REQUEST = "Which port does the dev server use?"
ANSWER = "The dev server listens on port 8080."


@pytest.mark.parametrize(
    ("rule", "positive", "negative"),
    [
        ("thats_wrong", "Hmm, that is incorrect: the port is 5173", "that's right, thanks"),
        ("thats_wrong", "You're wrong, read the config", "is that wrong? just curious"),
        ("not_what_i_asked", "This is not what I asked for.", "exactly what I wanted"),
        ("try_again", "That didn't work, still failing", "works now, thanks"),
        ("try_again", "Try again, and read the file this time", "Let's try Redis next"),
        ("negation", "No, read config/dev.yaml", "no worries, thanks"),
        ("negation", "nope. use the other file", "No, thanks."),
        ("negation", "No.", "no need, I'll do it"),
        ("actually", "Actually, use port 8080.", "actually, great job"),
        ("actually", "Actually the file is config/dev.yaml", "I know"),
        ("instead", "Use /etc/hosts instead.", "Explain why Go uses tabs instead of spaces"),
        ("instead", "read config/dev.yaml instead of guessing", "Great, now use Redis instead."),
        ("retry", "which port does the dev server use??", "Which port does the prod server use?"),
    ],
)
def test_each_rule_has_a_positive_and_a_negative(rule: str, positive: str, negative: str) -> None:
    assert correction_rule(positive, REQUEST, ANSWER) == rule
    assert correction_rule(negative, REQUEST, ANSWER) is None


def test_strong_rules_fire_even_after_thanks_soft_ones_do_not() -> None:
    assert correction_rule("Thanks, but that's wrong: it is 5173", REQUEST, ANSWER) == "thats_wrong"
    assert correction_rule("Thanks! Actually, now deploy it", REQUEST, ANSWER) is None
    assert correction_rule("Perfect. No more changes for today", REQUEST, ANSWER) is None


def test_an_answer_that_asks_the_user_is_not_corrected_by_a_plain_no() -> None:
    question = "I found two log files. Should I delete the old one?"
    assert correction_rule("No.", REQUEST, question) is None
    assert correction_rule("No.", REQUEST, ANSWER) == "negation"
    with_think = "<think>maybe ask</think>Do you want me to use /etc/hosts?\n"
    assert correction_rule("No, use /etc/hostname instead", REQUEST, with_think) is None
    assert correction_rule("No, that's wrong", REQUEST, question) == "thats_wrong"  # strong: still a correction


def test_only_the_head_of_a_long_message_is_looked_at() -> None:
    task = "Here is the next task: add a CSV export to the billing module. " * 10 + "Use tabs instead."
    assert correction_rule(task, REQUEST, ANSWER) is None
    assert correction_rule("Use tabs instead. " + task, REQUEST, ANSWER) == "instead"


def test_hermes_compaction_markers_are_not_corrections() -> None:
    marker = "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted. No, that's wrong was said."
    assert correction_rule(marker, REQUEST, ANSWER) is None


def test_retry_needs_three_words_and_the_same_request() -> None:
    assert is_retry("Fix the failing test in app.py please", "fix the failing test in app.py, please")
    assert is_retry("fix the failng test in app.py again", "Fix the failing test in app.py.")  # a typo
    assert not is_retry("Now deploy it to staging", "fix the failing test in app.py, please")
    assert not is_retry("Fix the failing lint in app.py", "Fix the failing test in app.py")
    assert not is_retry("test the failing fix", "fix the failing test")
    assert not is_retry("continue", "continue")
    assert not is_retry("Fix it", None)
    long = "x " * 3000
    assert is_retry(long, long)
    assert not is_retry(long + "y", long + "z")  # over the difflib limit: equality only


def conversation(*turns: tuple[str, str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for user, answer in turns:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    return messages


def test_a_pair_needs_an_answer_the_user_accepted() -> None:
    messages = conversation(("port?", "8000"), ("no, that's wrong", "8080"), ("thanks", "welcome"))
    (pair,) = mine_pairs(messages)
    assert (pair.rule, pair.prompt_end, pair.rejected, pair.correction, pair.chosen) == (
        "thats_wrong",
        0,
        (1,),
        2,
        (3,),
    )
    assert mine_pairs(conversation(("port?", "8000"), ("no, that's wrong", "8080")))  # the session ends: accepted


def test_a_corrected_correction_yields_only_the_last_pair() -> None:
    messages = conversation(("port?", "8000"), ("no, wrong", "8081"), ("no, still wrong", "8080"), ("ok", "bye"))
    assert [(p.prompt_end, p.rejected, p.correction, p.chosen) for p in mine_pairs(messages)] == [(2, (3,), 4, (5,))]


def test_the_same_answer_again_is_no_pair() -> None:
    assert mine_pairs(conversation(("port?", "8080"), ("no, that's wrong", "8080."))) == []


def test_answers_are_the_trailing_assistant_messages_after_the_tools() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
    messages = [
        {"role": "user", "content": "port?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "port: 8000"},
        {"role": "assistant", "content": "It is 8000."},
        {"role": "assistant", "content": "Anything else?"},
        {"role": "user", "content": "Actually, read dev.yaml"},
        {"role": "assistant", "content": "It is 5173.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "port: 5173"},
        {"role": "assistant", "content": "Dev uses 5173."},
    ]
    assert mine_pairs(messages) == []  # the answer ended with a question: "Actually" answers it
    messages[4]["content"] = "Done."
    (pair,) = mine_pairs(messages)
    assert (pair.rejected, pair.chosen, pair.rule) == ((3, 4), (8,), "actually")
    interrupted = messages[:7]  # the correction's turn ends on a tool call: no answer to choose
    assert mine_pairs(interrupted) == []


def test_no_pair_spans_a_hermes_compaction_marker() -> None:
    messages = conversation(("port?", "8000"), ("no, that's wrong", "8080"))
    marker = {"role": "user", "content": "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted."}
    assert mine_pairs([*messages[:2], marker, *messages[2:]]) == []


def test_the_real_samples_yield_their_corrections() -> None:
    sample = load_sample()
    (pair,) = mine_pairs(sample["messages"])
    messages = sample["messages"]
    assert "use /etc/hosts instead" in messages[pair.correction]["content"]
    assert "/etc/hostname" in messages[pair.rejected[-1]]["content"]
    assert messages[pair.prompt_end]["role"] == "user" and pair.prompt_end < pair.rejected[0] < pair.correction
    billing = load_sample("session_20261122_billing_debug.json")
    (pair,) = mine_pairs(billing["messages"])
    messages = billing["messages"]
    assert messages[pair.correction]["content"].startswith("No, that's wrong — read config/dev.yaml")
    assert "8080" in messages[pair.rejected[0]]["content"] and "5173" in messages[pair.chosen[0]]["content"]
    assert messages[pair.prompt_end]["content"] == "Which port does the dev server use?"


def test_no_false_pairs_in_the_agent_corpus() -> None:
    files = corpus_files()
    assert files
    for path in files:
        assert mine_pairs(json.loads(path.read_text())["messages"]) == [], path.name

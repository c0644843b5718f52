"""The ledger strategy: extraction per section, supersession, redaction, fail closed, smoke-eval."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timmy_compactor.cli import main
from timmy_compactor.core.fold import index as anchor_index
from timmy_compactor.core.fold import ledger as semantic_ledger
from timmy_compactor.core.fold.index import INDEX_HEADER
from timmy_compactor.core.fold.ledger import extract
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Settings

LEDGER = Settings(strategy="ledger", protect_last_n_turns=1, context_window=4000)


def users(*texts: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for text in texts:
        out += [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]
    return out


def ledger_of(*texts: str) -> semantic_ledger.Ledger:
    messages = users(*texts)
    return extract(messages, range(len(messages)))


def block(messages: list[dict[str, Any]]) -> str:
    result = compact(messages, LEDGER, force=True)
    assert result.report.verified, result.report.failure
    return next(m["content"] for m in result.messages if str(m["content"]).startswith(INDEX_HEADER))


def test_supersession_chain_keeps_the_last_value_active_and_the_others_superseded() -> None:
    ledger = ledger_of("The server is alpha.", "The server is beta.", "the server is gamma", "The port is 8080.")
    assert ledger.facts["server"] == [("alpha", 0), ("beta", 2), ("gamma", 4)]
    # the first exchange is the head, kept as is: the facts come after it
    text = block(users("hello", "The server is alpha.", "The server is beta.", "the server is gamma", "hi", "bye"))
    active = text.split("## Active facts")[1].split("##")[0]
    superseded = text.split("## Superseded facts")[1].split("##")[0]
    assert "server: gamma (#6)" in active and "alpha" not in active and "beta" not in active
    assert "server: alpha (#2) → superseded by gamma (#6)" in superseded
    assert "server: beta (#4) → superseded by gamma (#6)" in superseded


@pytest.mark.parametrize(
    ("section", "positive", "negative"),
    [
        ("decisions", "We decided to use Redis for the cache.", "Redis is one option for the cache."),
        ("decisions", "Let's go with the blue theme.", "The blue theme looks nice."),
        ("obligations", "TODO: renew the certificate.", "The certificate was renewed."),
        ("obligations", "Remind me to call Ana on Monday.", "I called Ana on Monday."),
        ("obligations", "Нужно обновить сервер.", "Сервер обновлён."),
        ("obligations", "Ich muss das Backup prüfen.", "Das Backup ist geprüft."),
    ],
)
def test_sections_positive_and_negative(section: str, positive: str, negative: str) -> None:
    assert getattr(ledger_of(positive), section), positive
    assert not getattr(ledger_of(negative), section), negative


def test_unresolved_question_only_when_nobody_answered() -> None:
    unanswered = [{"role": "user", "content": "Which port?"}, {"role": "user", "content": "Also, deploy it."}]
    answered = [{"role": "user", "content": "Which port?"}, {"role": "assistant", "content": "8080."}]
    assert extract(unanswered, range(2)).questions == [("Which port?", 0)]
    assert extract(answered, range(2)).questions == []


def test_facts_skip_pronouns_and_questions() -> None:
    assert ledger_of("It is late.", "Is the server alpha?").facts == {}


@pytest.mark.parametrize(
    ("said", "key", "value"),
    [
        ("The api url is https://docs.example.com/v2. Use it.", "api url", "https://docs.example.com/v2"),
        (
            "The endpoint is https://docs.python.org/3.12/library/json.html",
            "endpoint",
            "https://docs.python.org/3.12/library/json.html",
        ),
        ("Our python is 3.12.1!", "python", "3.12.1"),
        ("The mirror is mirror.example.org.", "mirror", "mirror.example.org"),
    ],
)
def test_a_value_with_dots_is_stored_whole_never_cut_at_a_dot(said: str, key: str, value: str) -> None:
    assert ledger_of(said).facts[key] == [(value, 0)]


@settings(max_examples=200)
@given(
    host=st.from_regex(r"[a-z]{2,8}(\.[a-z]{2,8}){1,3}", fullmatch=True),
    path=st.from_regex(r"(/[a-z0-9]{1,6}){0,3}(\.[a-z]{2,4})?", fullmatch=True),
    tail=st.sampled_from(["", ".", "!", ". Next sentence.", "\nmore"]),
)
def test_every_fact_value_ends_where_a_word_of_what_was_said_ends(host: str, path: str, tail: str) -> None:
    url = f"https://{host}{path}"
    said = f"The docs url is {url}{tail}"
    facts = ledger_of(said).facts
    assert facts["docs url"] == [(url, 0)]
    for values in facts.values():
        for value, _ in values:
            rest = said[said.index(value) + len(value) :]
            assert rest.lstrip(".!?")[:1] in {"", " ", "\n"}, (value, rest)  # ends at a word's end


@settings(max_examples=150)
@given(
    secret=st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=24, max_size=40),
    form=st.sampled_from(["api_key={}", "token: {}", "Authorization: Bearer {}", "sk-{}"]),
)
def test_no_cold_secret_reaches_the_view(secret: str, form: str) -> None:
    messages = users("hello", f"use {form.format(secret)} on 192.168.7.7", "The db is main.", "later", "bye")
    result = compact(messages, LEDGER, force=True)
    assert result.report.verified, result.report.failure
    text = json.dumps(result.messages)
    assert secret not in text and "192.168.7.7" not in text
    assert "credential_ref:" in text


def test_deterministic_and_tail_byte_for_byte() -> None:
    messages = users("The server is alpha.", "We decided to use Go.", "TODO: tests", "last question here")
    a, b = compact(messages, LEDGER, force=True), compact(json.loads(json.dumps(messages)), LEDGER, force=True)
    assert json.dumps(a.messages) == json.dumps(b.messages)
    tail = messages[a.report.tail_start :]
    assert a.messages[-len(tail) :] == tail
    assert sorted(i for s in a.sources for i in s) == list(range(len(messages)))


def test_fails_closed_when_extraction_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: object) -> None:
        raise ValueError("extractor broke")

    monkeypatch.setattr(anchor_index, "extract", boom)
    messages = users("The server is alpha.", "b", "c", "d")
    result = compact(messages, LEDGER, force=True)
    assert result.messages == messages and not result.report.verified
    assert "ValueError" in (result.report.failure or "")
    assert "extractor broke" not in (result.report.failure or "")  # failure reasons never quote content


CORRECTIONS = [
    ("The server is alpha.", "Actually, the server is gamma.", "gamma"),
    ("The server is alpha.", "Change the server to delta.", "delta"),
    ("The server is alpha.", "The server should be epsilon.", "epsilon"),
    ("The server is alpha.", "Use zeta as the server instead.", "zeta"),
    ("The server is alpha.", "server -> eta", "eta"),
    ("The deploy branch is main.", "Switch the deploy branch to release.", "release"),
    ("The deploy branch is main.", "The deploy branch has been changed to hotfix.", "hotfix"),
    ("The port is 8080.", "Scratch that: the port is 9090.", "9090"),
    ("The server is alpha.", "The server is no longer alpha, it is kappa.", "kappa"),
]


@pytest.mark.parametrize(("first", "correction", "current"), CORRECTIONS)
def test_corrections_phrased_in_other_ways_supersede(first: str, correction: str, current: str) -> None:
    text = block(users("hello", first, "something else", correction, "later", "bye"))
    active = text.split("## Active facts")[1].split("##")[0]
    superseded = text.split("## Superseded facts")[1].split("##")[0]
    old = first.rstrip(".").split()[-1]
    assert f": {current} (#" in active and f": {old} (#" not in active
    assert f": {old} (#2) → superseded by {current}" in superseded


def test_eval_ledger_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval-ledger", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert results["semantic_ledger"]["passed"] == results["semantic_ledger"]["total"] == 12
    assert results["hot_tail_only_baseline"]["passed"] < 12
    assert results["semantic_ledger"]["checks"]["hot tail byte-for-byte"] is True


def test_rules_strategy_can_redact_the_middle() -> None:
    secret = "sk-" + "Q7w" * 10
    messages = [{"role": "user", "content": "go"}]
    for i in range(8):
        messages += [
            {
                "role": "assistant",
                "content": f"step {i}",
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        # a distinct command each time: the same one run again is superseded by its rerun
                        "function": {"name": "terminal", "arguments": json.dumps({"command": f"env # {i}"})},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": f"c{i}",
                "content": json.dumps(
                    {"output": f"OPENAI_API_KEY={secret}\n" + "x\n" * 300, "exit_code": 1, "error": None}
                ),
            },
        ]
    rules = Settings(context_window=8000, target_after=None)  # the rule itself (a fold redacts everything it folds)
    plain = compact(messages, rules, force=True)
    redacted = compact(messages, dataclasses.replace(rules, redact_credentials=True), force=True)
    assert plain.report.verified and redacted.report.verified, redacted.report.failure
    middle = slice(1, len(redacted.messages) - (len(messages) - redacted.report.tail_start))
    assert secret in json.dumps(plain.messages[middle])
    assert secret not in json.dumps(redacted.messages[middle])
    assert redacted.report.rules.get("redact_credentials", 0) > 0


@pytest.mark.parametrize(
    ("earlier", "correction"),
    [
        ("The database is postgres.", "The database is now mysql."),
        ("The database is postgres.", "We switched to mysql."),
        ("The database is postgres.", "Use mysql instead."),
        ("The database is postgres.", "Use mysql instead of postgres."),
        ("The database is postgres.", "No longer postgres: use mysql."),
        ("The database is postgres.", "We switched from postgres to mysql."),
        ("The database is postgres.", "The database is no longer postgres, it's mysql."),
    ],
)
def test_a_correction_in_other_words_supersedes_the_fact(earlier: str, correction: str) -> None:
    messages = [
        {"role": "user", "content": "The server is alpha. " + earlier},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": correction},
    ]
    ledger = semantic_ledger.extract(messages, range(len(messages)))
    assert ledger.facts["database"] == [("postgres", 0), ("mysql", 2)]
    assert ledger.facts["server"] == [("alpha", 0)]  # the other fact is untouched

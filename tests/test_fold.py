"""The bounded engine (spec §2a): budget, fold into the anchor index, tail relief; replayed as Hermes drives it."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import Generated, agent_run, sessions
from tests.support import assistant, call, tool, tool_session, user
from timmy_compactor.compare.cycles import replay
from timmy_compactor.compare.promises import check, condensed_ranges
from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.index import INDEX_HEADER
from timmy_compactor.core.pairs import orphans
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.tokens import request_tokens
from timmy_compactor.core.types import Settings
from timmy_compactor.sessions.rawlog import RawLog

CI = os.environ.get("HYPOTHESIS_PROFILE", "dev") == "ci"
WINDOW = 16_000


def index_of(messages: list[dict[str, Any]]) -> str:
    return next((m["content"] for m in messages if str(m.get("content")).startswith(INDEX_HEADER)), "")


def run_with_facts(steps: int) -> list[dict[str, Any]]:
    """An agent run whose early steps print facts the index must keep."""
    messages = [user("fix the flaky billing job")]
    for i in range(steps):
        command = f"python scripts/repro_{i}.py --port 80{i % 90 + 10}"
        output = f"step {i}\n" + "\n".join(f"line {k} of step {i}" for k in range(60))
        if i == 2:
            output += "\nError: 'NoneType' object has no attribute 'total'"  # printed, yet exit code 0
        text = f"Step {i}: trying DATABASE_URL_POOL=20 with v2.14.{i}" + (" per PR #4521" if i == 4 else "")
        if i == 3:  # identifiers are read from what the agent says and does, not from every output line
            text += ", on commit 3f9a2c17be0d, run id 1c9e6f0a-2b7d-4e8f-9a01-23456789abcd"
        messages.append(assistant(text, call(f"c{i}", "terminal", command=command)))
        messages.append(tool(f"c{i}", json.dumps({"output": output, "exit_code": 0, "error": None})))
    messages.append(assistant("done"))
    return messages


def test_the_fold_keeps_every_anchor_in_the_index() -> None:
    messages = run_with_facts(250)
    # a budget the index never reaches here: every anchor is listed (below, the default budget condenses)
    result = compact(messages, Settings(context_window=WINDOW, index_max_ratio=0.5), force=True)
    report = result.report
    assert result.compacted, report.failure
    assert report.rules["fold_steps"] > 0 and report.usage_after <= 0.40
    index = index_of(result.messages)
    assert "(condensed)" not in index
    for anchor in (
        "Error: 'NoneType' object has no attribute 'total'",  # from an exit-0 output
        "3f9a2c17be0d",
        "1c9e6f0a-2b7d-4e8f-9a01-23456789abcd",
        "PR #4521",
        "DATABASE_URL_POOL=20",
        "v2.14.0",
        "scripts/repro_0.py",
        "terminal ×",
    ):
        assert anchor in index, anchor
    assert index.count("scripts/repro_0.py (") == 1  # deduplicated
    assert "(#" in index  # every entry names its raw indices
    assert "raise" not in index and "Step 3" not in index  # no code, no prose


def test_the_index_stays_within_its_budget_and_names_what_it_condensed() -> None:
    messages = run_with_facts(400)
    config = Settings(context_window=WINDOW)
    result = compact(messages, config, force=True)
    assert result.compacted, result.report.failure
    index = index_of(result.messages)
    assert len(index) <= config.index_max_chars
    condensed = condensed_ranges(index)
    assert condensed and 2 in condensed  # the exit-0 error of step 2 left the index: one recall away
    assert "Error: 'NoneType' object has no attribute 'total'" not in index
    assert check(messages, result.messages).all_kept  # the independent checker agrees (recall included)


def test_user_messages_stay_in_place_and_each_folded_range_leaves_one_line() -> None:
    messages = run_with_facts(100)
    messages.insert(101, user("also check the invoice export"))
    messages += run_with_facts(200)[1:]
    result = compact(messages, Settings(context_window=WINDOW), force=True)
    assert result.compacted, result.report.failure
    users = [m for m in result.messages if m["role"] == "user"]
    assert users == [m for m in messages if m["role"] == "user"]
    fold_lines = [m for m in result.messages if str(m.get("content")).startswith("[folded #")]
    assert len(fold_lines) == 2 and {m["role"] for m in fold_lines} == {"assistant"}
    # the first task's steps leave a line that says how it ended (issue 30); the next follows its user message
    assert fold_lines[0]["content"].endswith(
        '; stopped after #100: terminal("python scripts/repro_49.py --port 8059") → ok]'
    )
    where = result.messages.index(fold_lines[1])
    assert result.messages[where - 1]["content"] == "also check the invoice export"


def test_secrets_never_reach_the_index() -> None:
    messages = run_with_facts(250)
    messages[3]["content"] = (
        "use api_key=sk-proj-Zx81kQ2vLm93NpR7tW4yB6cD and token: ghp_Q7w8E9r0T1y2U3i4O5p6A7s8D9f0G1h2J3k4"
    )
    result = compact(messages, Settings(context_window=WINDOW, index_max_ratio=0.5), force=True)
    assert result.compacted, result.report.failure
    index = index_of(result.messages)
    assert "sk-proj-Zx81kQ2vLm93NpR7tW4yB6cD" not in index and "ghp_Q7w8E9r0T1y2U3i4O5p6A7s8D9f0G1h2J3k4" not in index
    assert "credential_ref:" in index


def test_huge_outputs_in_the_last_steps_never_make_a_request_larger_than_the_window() -> None:
    """Three steps with ~35k-character results made a real Hermes turn fail with 'Context length exceeded'."""
    messages = run_with_facts(10)[:-1]
    for i in range(3):
        messages.append(assistant("", call(f"big{i}", "terminal", command=f"cat dump_{i}.log")))
        body = "\n".join(f"{i}:{k} " + "x" * 60 for k in range(550))
        messages.append(tool(f"big{i}", json.dumps({"output": body, "exit_code": 0, "error": None})))
    window = 24_000
    result = compact(messages, Settings(context_window=window), force=True)
    assert result.compacted, result.report.failure
    assert result.report.tokens_after <= window and result.report.rules.get("tail_relief", 0) >= 1
    assert result.messages[-1] == messages[-1]  # the last step's output is whole


def test_compacting_the_output_again_changes_nothing_when_it_is_within_budget() -> None:
    messages = run_with_facts(250)
    config = Settings(context_window=WINDOW)
    first = compact(messages, config, force=True)
    assert first.compacted and first.report.usage_after <= config.target_after  # type: ignore[operator]
    again = compact(copy.deepcopy(first.messages), config)  # not forced: below the trigger, untouched
    assert again.messages == first.messages and not again.report.triggered


def hermes_replay(gen: Generated, config: Settings) -> None:
    """Feed the run as the `timmy` engine sees it (compacting from its raw log); after every compaction:
    within budget (when the last step fits), a valid transcript, every user message kept or reported folded."""
    budget = config.budget_tokens or 0
    log = RawLog()
    users_folded = []

    def compress(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        raw = log.absorb(messages)
        result = compact(raw, config, system_prompt=gen.system_prompt, force=True)
        users_folded.append(result.report.rules.get("user_messages_folded", 0))
        assert result.report.verified, result.report.failure
        assert orphans(result.messages) <= orphans(raw)  # the raw tail may hold its own (a result twice)
        last_step = [m for m in messages[-4:] if m["role"] in ("assistant", "tool")]
        fits = request_tokens(last_step, gen.system_prompt) * 2 < budget
        assert result.report.tokens_after <= budget or not fits or result.report.note, result.report.as_dict()
        log.answered(result.messages)
        return result.messages

    report = replay(
        gen.messages,
        compress,
        window=config.context_window,
        trigger=config.trigger_threshold,
        system_prompt=gen.system_prompt,
    )
    assert log.restarts == 0
    assert report.above_window == 0
    assert report.breaks_between == 0  # between compactions the request only grows at its end
    # user messages stay verbatim, unless tier 4 folded the oldest to meet the budget (reported, never silent)
    assert any(users_folded) or not [item for item in report.lost if "user messages" in item], report.lost


def test_compacting_its_own_output_appends_to_the_index() -> None:
    """Fed its own output plus what came after (no raw log), a fold appends to the index, never rewrites it."""
    raw = run_with_facts(400)
    config = Settings(context_window=WINDOW)
    first = compact(raw[:401], config, force=True)
    second = compact(first.messages + raw[401:], config, force=True)
    assert first.compacted and second.compacted, (first.report.failure, second.report.failure)
    before, after = index_of(first.messages), index_of(second.messages)
    assert before and after.startswith(before) and len(after) > len(before)


@settings(
    max_examples=8 if CI else 3,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(gen=agent_run(min_steps=80, max_steps=200), window=st.sampled_from([32_000, 65_536]))
def test_long_agent_runs_replayed_as_hermes_stay_bounded(gen: Generated, window: int) -> None:
    hermes_replay(gen, Settings(context_window=window))


@settings(
    max_examples=60 if CI else 10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(gen=sessions(max_turns=8, max_steps=12, anomalies=False))
def test_multi_turn_sessions_replayed_as_hermes_stay_bounded(gen: Generated) -> None:
    hermes_replay(gen, Settings(context_window=16_000))


def test_the_rules_alone_ratchet_and_the_tiers_do_not() -> None:
    """What the tiers are for: replayed, the rules alone end most compactions above the trigger."""
    messages = tool_session(400, output_lines=40, failing=tuple(range(0, 400, 3)))  # failed calls stay whole

    def engine(config: Settings) -> Any:
        return replay(
            messages,
            lambda m: compact(m, config, force=True).messages,
            window=config.context_window,
            trigger=config.trigger_threshold,
        )

    bounded = engine(Settings(context_window=32_000))
    ratchet = engine(Settings(context_window=32_000, target_after=None))
    assert bounded.stuck == 0 and max(bounded.usage_after) <= 0.40
    assert ratchet.stuck > ratchet.compactions // 2 and ratchet.compactions > 3 * bounded.compactions
    assert bounded.reuse > ratchet.reuse


def test_the_checker_catches_a_lost_exit_zero_error_line() -> None:
    raw = run_with_facts(6)
    view = copy.deepcopy(raw)
    view[6]["content"] = json.dumps({"output": "(gone)", "exit_code": 0, "error": None})
    verdict = check(raw, view)
    assert not verdict.all_kept and any("NoneType" in item for item in verdict.lost)


def test_replayed_the_index_stays_in_budget_and_only_grows_at_its_end_but_when_it_condenses() -> None:
    messages = run_with_facts(900)
    config = Settings(context_window=WINDOW)
    log, readings = RawLog(), Readings()
    indexes: list[str] = []

    def compress(held: list[dict[str, Any]]) -> list[dict[str, Any]]:
        raw = log.absorb(held)
        result = compact(raw, config, force=True, readings=readings)
        assert result.compacted, result.report.failure
        # what the engine kept from earlier compactions changes nothing: the same result read afresh
        assert compact(raw, config, force=True).messages == result.messages
        log.answered(result.messages)
        indexes.append(index_of(result.messages))
        return result.messages

    report = replay(messages, compress, window=WINDOW, trigger=config.trigger_threshold)
    assert report.compactions >= 20 and report.stuck == 0 and max(report.usage_after) <= 0.40
    assert all(len(index) <= config.index_max_chars for index in indexes)
    condensed = [index.count("(condensed)") for index in indexes]
    assert condensed[-1] >= 1  # the budget was reached, and the oldest chunks condensed
    rewrites = 0
    for before, after in itertools.pairwise(indexes):
        if before and not after.startswith(before):  # every chunk whole: none is rewritten (issue 29)
            rewrites += 1
            assert "(condensed)" in after  # the only rewrite is a condensation
    assert 1 <= rewrites <= len(indexes) // 3  # and it is rare, even with an index of 1,600 tokens


def tasks_of(details: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for k in range(12):
        messages.append(user(f"Task {k}: handle the invoices of region {k}\n" + "details " * details))
        messages += run_with_facts(3)[1:]
    return messages


def test_tier_four_folds_the_oldest_user_messages_only_as_far_as_needed() -> None:
    """User messages alone above the trigger (spec §2a, tier 4): the oldest go, each leaving its first
    line, as few as bring the request to the budget."""
    messages = tasks_of(details=600)
    config = Settings(context_window=WINDOW)
    result = compact(messages, config, force=True)
    assert result.compacted, result.report.failure
    folded = result.report.rules["user_messages_folded"]
    kept = [m for m in result.messages if m["role"] == "user"]
    users = [m for m in messages if m["role"] == "user"]
    assert 0 < folded < 11 and len(kept) == 12 - folded
    assert kept == [users[0], *users[1 + folded :]]  # the head's stays; of the cold ones, the oldest went
    second = messages.index(users[1])
    assert f'user #{second}: \\"Task 1: handle the invoices of region 1\\"' in json.dumps(result.messages)
    assert result.report.tokens_after <= config.budget_tokens  # type: ignore[operator]
    one_fewer = compact(messages, dataclasses.replace(config, target_after=0.5), force=True)
    assert 0 < one_fewer.report.rules.get("user_messages_folded", 0) < folded  # only as far as the budget needs


def test_user_messages_above_the_target_but_out_of_the_crowd_stay_verbatim() -> None:
    """Promises before depth: target_after is an aim, never a reason to fold a user message."""
    messages = tasks_of(details=250)
    config = Settings(context_window=WINDOW)
    result = compact(messages, config, force=True)
    assert result.compacted, result.report.failure
    assert [m for m in result.messages if m["role"] == "user"] == [m for m in messages if m["role"] == "user"]
    crowded = config.trigger_tokens - config.quantum_tokens
    assert config.budget_tokens < result.report.tokens_after < crowded  # type: ignore[operator]
    assert "above the budget" in (result.report.note or "")


def test_user_messages_that_leave_the_request_within_a_quantum_of_the_trigger_fold_to_the_budget() -> None:
    """Under the trigger but within a fold quantum of it, the next steps would trigger again (a ratchet on
    a multi-task session): the oldest user messages fold, as few as bring the request to the budget."""
    messages = tasks_of(details=300)
    config = Settings(context_window=WINDOW)
    verbatim = compact(messages, dataclasses.replace(config, trigger_threshold=0.7), force=True)  # out of its crowd
    assert "user_messages_folded" not in verbatim.report.rules
    crowded = config.trigger_tokens - config.quantum_tokens
    assert crowded < verbatim.report.tokens_after < config.trigger_tokens  # in the crowd of the 0.6 trigger
    result = compact(messages, config, force=True)
    assert result.compacted, result.report.failure
    folded = result.report.rules["user_messages_folded"]
    users = [m for m in messages if m["role"] == "user"]
    assert [m for m in result.messages if m["role"] == "user"] == [users[0], *users[1 + folded :]]
    assert result.report.tokens_after <= config.budget_tokens  # type: ignore[operator]
    assert "tail_relief" not in result.report.rules  # the last steps fit under the trigger: they stay whole


def test_a_big_output_in_the_last_steps_stays_whole_when_those_steps_fit_the_budget() -> None:
    """Issue 22: a 34k-character output one step back was cut to ~4k though the last steps fit the budget."""
    messages = run_with_facts(120)[:-1]
    body = "\n".join(f"row {k} " + "v" * 40 for k in range(700))  # ~34k characters, ~8.5k tokens
    messages.append(assistant("", call("big", "terminal", command="cat report.csv")))
    messages.append(tool("big", json.dumps({"output": body, "exit_code": 0, "error": None})))
    messages.append(assistant("", call("last", "terminal", command="wc -l report.csv")))
    messages.append(tool("last", json.dumps({"output": "700 report.csv", "exit_code": 0, "error": None})))
    config = Settings(context_window=24_000)  # the output alone is over a third of the window
    result = compact(messages, config, force=True)
    assert result.compacted, result.report.failure
    assert messages[-3] in result.messages  # whole, byte for byte
    assert "tail_relief" not in result.report.rules
    assert result.report.tokens_after < config.trigger_threshold * config.context_window  # not stuck


def test_a_folded_turn_keeps_the_first_line_of_its_closing_answer_in_its_fold_line() -> None:
    """What the user was told stays in view: each fold line names the answer that closed the turn (first
    line, redacted), the first turn's too (issue 30: the index alone said nothing of how it ended)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    secret = "sk-" + "Q7wX" * 10
    for turn in range(1, 9):
        messages.append(user(f"Turn {turn}: count"))
        for step in range(3):
            messages.append(assistant("", call(f"c{turn}{step}", "terminal", command=f"seq {turn}{step}")))
            messages.append(tool(f"c{turn}{step}", "\n".join(str(k) for k in range(2_500))))
        messages.append(
            assistant(f"Turn {turn} done: the last number was {2500 + turn} (key {secret}).\nDetails follow.")
        )
    result = compact(messages, Settings(context_window=64_000), force=True)
    assert result.compacted, result.report.failure
    view = result.messages
    closing = [
        str(m["content"])
        for m, after in itertools.pairwise(view)
        if str(m.get("content", "")).startswith("[folded #") and after["role"] == "user"
    ]
    assert len(closing) >= 4
    for line in closing:  # a fold line right before a kept user message folded a whole turn
        turn = int(line.split('"Turn ')[1].split(" ")[0])
        assert f'answered #{8 * turn}: "Turn {turn} done: the last number was {2500 + turn}' in line, line
        assert secret not in line and "Details follow" not in line
    index_at = next(k for k, m in enumerate(view) if str(m.get("content", "")).startswith(INDEX_HEADER))
    assert view[index_at + 1]["content"] == closing[0] and 'answered #8: "Turn 1 done' in closing[0]


def test_readings_of_a_whole_list_are_computed_once_per_message_object_as_the_list_grows() -> None:
    calls: list[str] = []

    def read(message: dict[str, Any]) -> int:
        calls.append(message["content"])
        return len(message["content"])

    readings = Readings()
    log = [user("a"), user("bb")]
    assert readings.each("len", log, read) == [1, 2]
    log.append(user("ccc"))
    assert readings.each("len", log, read) == [1, 2, 3]
    assert calls == ["a", "bb", "ccc"]  # the grown list: only the new message read
    assert readings.each("len", log[:2], read) == [1, 2]  # a shorter view of it: nothing read
    log[1] = user("xxxx")  # another object at an index: read anew, from there
    assert readings.each("len", log, read) == [1, 4, 3]
    assert calls[3:] == ["a", "xxxx", "ccc"]


def test_a_fact_is_read_once_per_message_object_and_anew_for_another_at_its_index() -> None:
    """`RawFacts.read` computes a reading once per message object at its index, kept in the `Readings`
    a later call shares."""
    calls: list[int] = []

    def content(facts: RawFacts, index: int) -> str:
        calls.append(index)
        return str(facts.messages[index]["content"])

    readings = Readings()
    log = [user("a"), user("bb")]
    facts = RawFacts(log, readings)
    assert [facts.read("content", i, content) for i in (0, 1, 0, 1)] == ["a", "bb", "a", "bb"]
    assert calls == [0, 1]
    log[1] = user("cc")  # another object at an index: read anew
    again = RawFacts(log, readings)  # a later call with the same readings
    assert [again.read("content", i, content) for i in (0, 1, 1)] == ["a", "cc", "cc"]
    assert calls == [0, 1, 1]


def test_min_free_ratio_skips_a_compaction_that_frees_too_little() -> None:
    """Below `min_free_ratio` of the window freed, the raw messages come back unchanged (no cache
    break for a few tokens), with the reason; at or under it, the view; `force` compacts regardless."""
    messages = tool_session(40)
    base = Settings(context_window=WINDOW, trigger_threshold=0.3)
    compacted = compact(messages, base)
    assert compacted.compacted, compacted.report.failure
    freed = compacted.report.tokens_before - compacted.report.tokens_after
    assert freed > 0
    just_above = freed / WINDOW + 0.01
    skipped = compact(messages, dataclasses.replace(base, min_free_ratio=just_above))
    assert skipped.report.skipped and skipped.report.verified and not skipped.compacted
    assert skipped.messages == messages and "min_free_ratio" in (skipped.report.note or "")
    assert skipped.report.tokens_after == skipped.report.tokens_before
    kept = compact(messages, dataclasses.replace(base, min_free_ratio=freed / WINDOW - 0.01))
    assert kept.compacted and kept.messages == compacted.messages
    forced = compact(messages, dataclasses.replace(base, min_free_ratio=just_above), force=True)
    assert forced.compacted and not forced.report.skipped


def test_a_fold_line_of_one_step_says_step() -> None:
    """Issue 33: `[folded #4: 1 steps, see index]`."""
    from timmy_compactor.core.fold.index import fold_line

    assert fold_line([4], 1) == "[folded #4: 1 step, see index]"
    assert fold_line([4, 5, 6], 2) == "[folded #4–#6: 2 steps, see index]"
    assert fold_line([4], 1, ['user #4: "go"']) == '[folded #4: 1 step, see index; user #4: "go"]'

"""Real hermes-agent 0.19.0 against a scripted local server: our engine vs Hermes' own compressor."""

from __future__ import annotations

import itertools
import json
import os
import re
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fake_llm import FakeLLM, scripted_turn, turn_and_step
from tests.hermes_scenario import (
    RECALL_TOOL,
    WINDOW,
    Arm,
    Prices,
    conversation_turns,
    hermes_home,
    is_conversation,
    measure,
    orphans,
    run_arm,
    run_hermes,
)
from timmy_compactor.core.tokens import request_tokens
from timmy_compactor.hermes.setup import probe

pytest.importorskip("run_agent", reason="hermes-agent is not installed (pip install -e '.[hermes]')")
pytestmark = [pytest.mark.hermes, pytest.mark.slow]

TURNS = conversation_turns(6)


def script(body: dict[str, Any]) -> Any:
    turn, step = scripted_turn(body)
    if step < 3:
        return [("terminal", {"command": f"seq 1 {2500 + 10 * turn + step}"})]
    return f"Turn {turn} done: the last number was {2500 + 10 * turn + 2}."


def test_timmy_engine_compacts_without_any_llm_summary(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    with FakeLLM(script) as llm:
        home = hermes_home(tmp_path, llm.base_url, timmy=True)
        assert probe(home)["active"] is True
        result = run_hermes(home, workdir, llm, "timmy_e2e")
        main = llm.main_requests()
        summaries = llm.summary_requests()
    assert result["engine"] == "timmy"
    assert summaries == [], "the timmy engine must never ask the model for a summary"
    assert result["compression_count"] >= 1, result["status"]
    assert result["status"]["last_failure"] is None
    assert result["status"]["llm_calls"] == 0
    # the conversation went on past the threshold to the last turn
    assert max(turn_and_step(r)[0] for r in main) == len(TURNS)
    # what the model received after each compaction keeps the promises
    shrunk = [b for a, b in itertools.pairwise(main) if len(b["messages"]) < len(a["messages"])]
    assert shrunk, "no request after a compaction"
    for body in shrunk:
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        assert users == TURNS[: len(users)], "user messages must stay verbatim and in order"
        assert orphans([m for m in body["messages"] if m["role"] != "system"]) == []
        text = json.dumps(body["messages"])
        # what was folded is named by the index (its tool counts) or by a collapsed call line
        assert "terminal \\u00d7" in text or "[tool: terminal(" in text
        assert "ANCHOR INDEX" in text or "[tool: terminal(" in text
        # bounded: the request after a compaction (schemas included) is under Hermes' trigger
        sent = request_tokens([m for m in body["messages"] if m["role"] != "system"], None, body["tools"])
        system = sum(len(str(m.get("content"))) for m in body["messages"] if m["role"] == "system") // 4
        assert sent + system < 0.60 * 64_000, (sent, system)
    # Hermes archived the pre-compaction rows in state.db under the same session id
    db = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)
    archived = db.execute("SELECT COUNT(*) FROM messages WHERE active = 0 AND compacted = 1").fetchone()[0]
    assert archived > 0


def test_hermes_default_compressor_asks_the_model_for_a_summary(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    with FakeLLM(script) as llm:
        home = hermes_home(tmp_path, llm.base_url, timmy=False)
        result = run_hermes(home, workdir, llm, "compressor_e2e")
        summaries = llm.summary_requests()
    assert result["engine"] != "timmy"
    assert len(summaries) >= 1, "Hermes' own compressor summarises with an LLM call"


REF_IN_TOOL_LINE = re.compile(r"\[tool: terminal\([^\n]*?→ ok, [\d,]+ chars(?:, [^\n]*?)?, #(\d+)–#(\d+)\]")
WARNING = "Error: quota probe printed a warning"
NOT_SHOWN = "#99999"  # what the scripted model asks for when the context shows no ref
REF_IN_INDEX = re.compile(re.escape(WARNING) + r" \(#(\d+)")  # the index lists the key line with its ref


def recall_script(body: dict[str, Any]) -> Any:
    """Turns 1-5 print long outputs (one prints an error and exits 0); in turn 6 the model reopens a
    collapsed step by the ref it sees, then searches the folded history for the error."""
    turn, step = scripted_turn(body)
    if turn < len(TURNS):
        if step < 3:
            prefix = f"echo '{WARNING}'; " if (turn, step) == (1, 0) else ""
            return [("terminal", {"command": f"{prefix}seq 1 {2500 + 10 * turn + step}"})]
        return f"Turn {turn} done."
    text = json.dumps(body["messages"], ensure_ascii=False)
    if step == 0:
        match = REF_IN_TOOL_LINE.search(text) or REF_IN_INDEX.search(text)
        ref = f"#{match.group(match.lastindex or 1)}" if match else NOT_SHOWN
        return [("timmy_recall", {"ref": ref, "max_chars": 20_000})]
    if step == 1:
        return [("timmy_recall", {"query": "quota probe"})]
    return "Turn 6 done: recalled."


def test_the_model_reopens_a_compacted_step_with_timmy_recall(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    with FakeLLM(recall_script) as llm:
        home = hermes_home(tmp_path, llm.base_url, timmy=True)
        result = run_hermes(home, workdir, llm, "recall_e2e", toolsets=("terminal", "file", "context_engine"))
        main = llm.main_requests()
    assert result["compression_count"] >= 1, result["status"]
    assert any(t["function"]["name"] == "timmy_recall" for t in main[-1]["tools"]), "the tool is offered"
    answers = [
        json.loads(m["content"])
        for m in main[-1]["messages"]
        if m.get("role") == "tool" and '"items"' in str(m.get("content"))
    ]
    assert len(answers) == 2, [m.get("content", "")[:200] for m in main[-1]["messages"] if m.get("role") == "tool"]
    by_ref, by_query = answers
    # the ref came from a compacted [tool: ...] line or the index, and returns that step's raw output, exactly
    recalled = by_ref["items"][0]["message"]
    assert recalled["role"] == "tool" and "\\n2500\\n" in recalled["content"] and not by_ref["truncated"], by_ref
    assert by_ref["ref"] != NOT_SHOWN, "the ref was taken from the compacted context"
    # the error line printed with exit code 0 in turn 1 is found by text
    assert any(WARNING in item["line"] for item in by_query["items"]), by_query
    assert result["status"]["recalls"] == 2
    assert main[-1]["messages"][-1]["role"] == "tool"  # and the conversation went on to its last answer
    assert result["messages"][-1]["content"] == "Turn 6 done: recalled."


def test_a_resumed_hermes_process_recalls_the_refs_the_model_was_shown(tmp_path: Path) -> None:
    """Hermes runs one process per CLI call: `hermes --resume` loads the compacted list from state.db.
    The engine's raw log on disk keeps `#N` meaning the message it meant before the restart."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    tools = ("terminal", "file", "context_engine")
    with FakeLLM(recall_script) as llm:
        home = hermes_home(tmp_path, llm.base_url, timmy=True)
        first = run_hermes(home, workdir, llm, "resume_e2e", TURNS[:-1], toolsets=tools)
        assert first["compression_count"] >= 1, first["status"]
        second = run_hermes(home, workdir, llm, "resume_e2e", TURNS[-1:], toolsets=tools, resume=True)
        main = llm.main_requests()
    assert second["status"]["raw_log_resumed"] is True, second["status"]
    assert second["status"]["raw_log_restarts"] == 0
    answers = [
        json.loads(m["content"])
        for m in main[-1]["messages"]
        if m.get("role") == "tool" and '"items"' in str(m.get("content"))
    ]
    assert len(answers) == 2, second["status"]
    by_ref, by_query = answers
    assert by_ref["ref"] != NOT_SHOWN, "the ref was taken from the compacted context the resumed process sent"
    ref = by_ref["ref"].strip("#")
    shown = json.dumps(main[-1]["messages"], ensure_ascii=False)
    command = re.search(r"seq 1 (\d+)[^\]]*?→ ok, [\d,]+ chars(?:, [^\]]*?)?, #\d+–#" + ref + r"\]", shown)
    indexed = f"{WARNING} (#{ref}" in shown
    assert command or indexed, "the ref is one the resumed context shows, on a [tool: …] line or in the index"
    recalled = by_ref["items"][0]["message"]
    assert recalled["role"] == "tool" and by_ref["items"][0]["ref"] == f"#{ref}"
    output = json.loads(recalled["content"])["output"]
    assert output.split()[-1] == command.group(1) if command else WARNING in output, by_ref
    assert any(WARNING in item["line"] for item in by_query["items"]), by_query
    assert second["messages"][-1]["content"] == "Turn 6 done: recalled."
    # `timmy-compactor show SESSION --engine` answers with the same numbering, from the same log
    from timmy_compactor.compactor import recall_source
    from timmy_compactor.config import Config, HueySection
    from timmy_compactor.core.recall import lookup

    config = Config(huey=HueySection(state_dir=str(tmp_path / "timmy-state")))
    session = recall_source("resume_e2e", config, engine=True)
    assert lookup(session.messages, by_ref["ref"], max_chars=20_000).items[0]["message"] == recalled


def test_status_counts_the_request_hermes_sends(tmp_path: Path) -> None:
    """Snapshots off, as Hermes ships: the sidecar reads the session from state.db, which records no
    tool schemas. `status` must still count what Hermes sends: Hermes' own estimate of the request (as
    sent, and as its compaction trigger counts it), with the schemas of the toolsets its CLI enables."""
    from agent.model_metadata import estimate_messages_tokens_rough, estimate_request_tokens_rough

    workdir = tmp_path / "work"
    workdir.mkdir()
    with FakeLLM(script) as llm:
        home = hermes_home(tmp_path, llm.base_url, timmy=False, snapshots=False)
        result = run_hermes(home, workdir, llm, "numbers_e2e", TURNS[:2], toolsets="cli")
        last = llm.main_requests()[-1]
    assert result["compression_count"] == 0
    assert not list((home / "sessions").glob("session_*.json")), "no snapshot: the sidecar must use state.db"
    system, *messages = last["messages"]
    assert system["role"] == "system"
    hermes_says = estimate_request_tokens_rough(messages, system_prompt=system["content"], tools=last["tools"])
    hermes_says += estimate_messages_tokens_rough(result["messages"][len(messages) :])  # the answer after it
    config = tmp_path / "compaction.yaml"
    config.write_text(json.dumps({"sessions": {"dir": str(home / "sessions"), "hermes_home": str(home)}}))
    out = subprocess.run(
        [str(Path(sys.executable).parent / "timmy-compactor"), "status", "--json", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env={**os.environ, "HERMES_HOME": str(home)},
    ).stdout
    (session,) = [s for s in json.loads(out)["per_session"] if s["session"] == "numbers_e2e"]
    assert len(last["tools"]) > 10, "Hermes' CLI toolsets, not a hand-picked pair"
    # Hermes decides to compact on its estimate of the list it holds (a few bookkeeping keys more than
    # it sends): that is the number the trigger compares, and the one status must agree with
    hermes_trigger = estimate_request_tokens_rough(
        result["messages"], system_prompt=system["content"], tools=last["tools"]
    )
    assert abs(session["tokens"] - hermes_trigger) <= 0.005 * hermes_trigger, (session["tokens"], hermes_trigger)
    assert abs(session["tokens"] - hermes_says) <= 0.01 * hermes_says, (session["tokens"], hermes_says)


def test_refs_stay_one_numbering_across_compactions_with_hermes_cli_toolsets(tmp_path: Path) -> None:
    """With the CLI's toolsets (schemas of ~9k tokens) the budget cuts turns in the middle, so a
    `[tool: …]` summary sits right before a kept assistant step; Hermes merges such neighbours in
    place before every request. The list it passes back must still continue the engine's raw log:
    one numbering for the whole session (before: the log restarted, and refs mixed two numberings)."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    with FakeLLM(script) as llm:
        home = hermes_home(tmp_path, llm.base_url, timmy=True)
        result = run_hermes(home, workdir, llm, "cli_toolsets", TURNS, toolsets="cli")
        main = llm.main_requests()
    status = result["status"]
    assert result["compression_count"] >= 2, status
    assert status["raw_log_restarts"] == 0, status
    assert status["last_failure"] is None, status
    refs = [int(n) for n in re.findall(r"#(\d+)–#\d+\]", json.dumps(main[-1]["messages"], ensure_ascii=False))]
    assert refs == sorted(refs), refs  # summaries of earlier steps name earlier raw messages


def test_one_user_turn_with_a_hundred_tool_calls_stays_under_the_trigger(tmp_path: Path) -> None:
    """An agent run can be one user turn with hundreds of tool calls: the engine compacts inside the
    turn, again and again; every request after a compaction is below the trigger (Hermes compacts once
    a request has crossed it) and none is above the window."""
    calls = itertools.count()

    def one_long_turn(body: dict[str, Any]) -> Any:
        k = next(calls)
        return [("terminal", {"command": f"seq 1 {1500 + k}"})] if k < 100 else "All 100 runs done."

    workdir = tmp_path / "work"
    workdir.mkdir()
    with FakeLLM(one_long_turn) as llm:
        home = hermes_home(tmp_path, llm.base_url, timmy=True)
        result = run_hermes(
            home, workdir, llm, "one_turn", ["Turn 1: run seq a hundred times."], toolsets="cli", max_iterations=200
        )
        main = llm.main_requests()
    status = result["status"]
    assert result["compression_count"] >= 5, status
    assert status["raw_log_restarts"] == 0 and status["compactions_failed"] == 0, status
    assert result["messages"][-1]["content"] == "All 100 runs done."
    trigger = int(64_000 * 0.85)  # Hermes' own threshold for a 64,000-token window, the engine's default
    sizes = [request_tokens(r["messages"][1:], r["messages"][0]["content"], r["tools"]) for r in main]
    assert max(sizes) < 64_000, max(sizes)  # Hermes' background review fork included
    conversation = [r for r in main if r["messages"][-1]["role"] != "user" or "Turn 1" in r["messages"][-1]["content"]]
    sizes = [request_tokens(r["messages"][1:], r["messages"][0]["content"], r["tools"]) for r in conversation]
    assert len(sizes) == 101, len(sizes)
    after = [b for a, b in itertools.pairwise(sizes) if b < a]  # the first request after each compaction
    assert len(after) >= result["compression_count"] and max(after) < trigger, (after, trigger)
    last = conversation[-1]["messages"]
    assert [m["content"] for m in last if m["role"] == "user"] == ["Turn 1: run seq a hundred times."]
    assert orphans(last[1:]) == []


def test_a_session_id_hermes_rotates_at_each_compaction_keeps_one_raw_log(tmp_path: Path) -> None:
    """`compression.in_place: false`: Hermes ends the session at each compaction and goes on under a
    new id. The engine's raw log follows the conversation, not the id: one log, one numbering."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    with FakeLLM(script) as llm:
        home = hermes_home(tmp_path, llm.base_url, timmy=True)
        config = yaml.safe_load((home / "config.yaml").read_text())
        config.setdefault("compression", {})["in_place"] = False
        (home / "config.yaml").write_text(yaml.safe_dump(config))
        result = run_hermes(home, workdir, llm, "rotating", TURNS, toolsets="cli")
    status = result["status"]
    assert result["compression_count"] >= 2 and result["session_id"] != "rotating", status
    assert status["raw_log_restarts"] == 0 and status["last_failure"] is None, status
    logs = sorted(p.name for p in (tmp_path / "timmy-state" / "hermes-engine").iterdir())
    assert logs == [result["session_id"]]


def test_a_retried_turn_that_was_compacted_keeps_one_numbering(tmp_path: Path) -> None:
    """`/retry` cuts Hermes' history at the last user message, inside what the engine returned when
    the turn was compacted while it ran. The next compaction drops the abandoned attempt from the raw
    log and numbers on from what came before: no restart, and the view holds no abandoned step."""
    calls = itertools.count()

    def attempt_then_retry(body: dict[str, Any]) -> Any:
        users = [m.get("content") for m in body["messages"] if m.get("role") == "user"]
        if users[-1] != "Turn 2: run seq many times.":  # turn 1, or Hermes' background review
            return "Noted."
        k = next(calls)
        if k < 40:
            return [("terminal", {"command": f"seq 1 {1500 + k}"})]
        if k == 40:
            return "First attempt done."
        if k < 71:
            return [("terminal", {"command": f"seq 1 {3000 + k}"})]
        return "Retried and done."

    workdir = tmp_path / "work"
    workdir.mkdir()
    with FakeLLM(attempt_then_retry) as llm:
        home = hermes_home(tmp_path, llm.base_url, timmy=True)
        turns = ["Turn 1: a short one.", "Turn 2: run seq many times."]
        result = run_hermes(home, workdir, llm, "retried", turns, toolsets="cli", max_iterations=200, retry=True)
        main = llm.main_requests()
    status = result["status"]
    assert result["messages"][-1]["content"] == "Retried and done."
    assert status["raw_log_restarts"] == 0 and status["raw_log_truncations"] >= 1, status
    last = [r for r in main if r["messages"][-1]["role"] == "tool"][-1]["messages"]
    shown = json.dumps(last, ensure_ascii=False)
    assert "seq 1 1539" not in shown and "seq 1 3070" in shown  # the abandoned attempt is gone
    assert [m["content"] for m in last if m["role"] == "user"] == turns


@dataclass
class AsUsersRunIt:
    figures: dict[str, Any]
    requests: list[dict[str, Any]]  # the conversation's, as the scripted server received them


def hermes_as_users_run_it(tmp: Path, **size: int) -> AsUsersRunIt:
    """timmy (packaged defaults) with the CLI's toolsets and scripted error lines: the figures read
    from what the scripted server received (tests/hermes_scenario.py, as bench/bench_hermes.py)."""
    outcome = run_arm(Arm("timmy"), tmp, **size)
    requests = [b for b in outcome.run.requests if is_conversation(b, outcome.run.users)]
    assert all(RECALL_TOOL in {t["function"]["name"] for t in b["tools"]} for b in requests), "recall is offered"
    assert len(requests[-1]["tools"]) >= 18, "the CLI's toolsets, not a hand-picked few"
    assert len(outcome.run.key_lines) >= 6, "the script printed its error lines"
    figures = measure(outcome.run, Prices())
    assert figures["compactions"] >= 2, outcome.result["status"]
    assert outcome.result["status"]["last_failure"] is None, outcome.result["status"]
    return AsUsersRunIt(figures, requests)


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory) -> AsUsersRunIt:
    """The bench's 14 turns of three large outputs, four kinds of error lines among them."""
    return hermes_as_users_run_it(tmp_path_factory.mktemp("conversation"), turns=14)


@pytest.fixture(scope="module")
def long_turn(tmp_path_factory: pytest.TempPathFactory) -> AsUsersRunIt:
    """One user message whose 60 tool outputs total over 3× the window."""
    return hermes_as_users_run_it(tmp_path_factory.mktemp("long_turn"), long_calls=60)


def test_as_users_run_it_no_orphan_and_every_error_line_in_the_request_or_one_recall_away(
    conversation: AsUsersRunIt,
) -> None:
    figures = conversation.figures
    assert figures["requests_with_orphans"] == 0, figures["where"]
    assert figures["key_lines_never_sent"] == 0 and figures["key_line_misses_not_one_recall_away"] == 0, figures


def test_as_users_run_it_every_user_message_stays_verbatim_in_every_request(conversation: AsUsersRunIt) -> None:
    assert conversation.figures["missing_user_message"] == 0, conversation.figures["where"]


def test_as_users_run_it_the_last_3_tool_calling_steps_stay_whole_where_they_fit(conversation: AsUsersRunIt) -> None:
    assert conversation.figures["last3_not_whole_would_fit"] == 0, conversation.figures["where"]


def test_one_long_user_turn_as_users_run_it_stays_in_the_window(long_turn: AsUsersRunIt) -> None:
    """Never above the window, never a compaction on two requests in a row, the user message verbatim
    throughout, no orphan."""
    figures, requests = long_turn.figures, long_turn.requests
    first_sent = reversed(requests)  # the earliest request holding an output has the last word: it is whole there
    outputs = {m["tool_call_id"]: m["content"] for b in first_sent for m in b["messages"] if m["role"] == "tool"}
    assert figures["requests"] == 61 and sum(map(len, outputs.values())) / 4 > 3 * WINDOW, figures
    assert figures["requests_over_window"] == 0, (figures["max_request_tokens"], figures["where"])
    assert figures["compactions_back_to_back"] == 0, figures["where"]["compactions"]
    assert figures["missing_user_message"] == 0 and figures["requests_with_orphans"] == 0, figures["where"]
    assert figures["key_line_misses_not_one_recall_away"] == 0, figures

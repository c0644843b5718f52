"""Hermes' state.db as a source: full history across compressions, live view, export, bad input."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import FakeLLM, scripted_turn
from timmy_compactor.compactor import restore_file
from timmy_compactor.config import Config, HueySection, ModelSection, SessionsSection
from timmy_compactor.export import export_sessions
from timmy_compactor.sessions.statedb import StateDB, StateDBError
from timmy_compactor.sidecar import dblook, sweep
from timmy_compactor.sidecar import work as sidecar
from timmy_compactor.sidecar.records import Records

TURNS = [f"Turn {k}: print 3000 numbers three times with seq, then say the last one." for k in range(1, 11)]


def script(body: dict[str, Any]) -> Any:
    turn, step = scripted_turn(body)
    if step < 3:
        return [("terminal", {"command": f"seq 1 {3000 + 10 * turn + step}"})]
    return f"Turn {turn} done: {3000 + 10 * turn + 2}."


def digest(*paths: Path) -> str:
    """Content of the database files; a missing WAL counts as empty (a WAL-mode reader, ours or
    Hermes', creates the empty -wal/-shm coordination files when they are absent)."""
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes() if p.exists() else b"")
    return h.hexdigest()


@pytest.fixture(scope="module")
def hermes_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("run_agent", reason="hermes-agent is not installed")
    from tests.test_hermes_e2e import hermes_home, run_hermes

    tmp = tmp_path_factory.mktemp("statedb")
    workdir = tmp / "work"
    workdir.mkdir()
    with FakeLLM(script) as llm:
        home = hermes_home(tmp, llm.base_url, timmy=False)
        result = run_hermes(home, workdir, llm, "compressed_twice", TURNS)
        summaries = len(llm.summary_requests())
    return {"home": home, "session_id": result["session_id"], "summaries": summaries}


pytestmark = [pytest.mark.hermes, pytest.mark.slow]


def config_for(home: Path, tmp: Path) -> Config:
    return Config(
        model=ModelSection(context_window=20_000),
        sessions=SessionsSection(dir=str(home / "sessions"), hermes_home=str(home)),
        huey=HueySection(state_dir=str(tmp / "state")),
    )


def test_full_history_across_two_compressions(hermes_run: dict[str, Any]) -> None:
    home, sid = hermes_run["home"], hermes_run["session_id"]
    db_files = [home / "state.db", home / "state.db-wal"]  # not -shm: every WAL reader updates that index
    before = digest(*db_files)
    while True:  # Hermes' background work (title, review fork) may still be writing: wait until it is quiet
        time.sleep(1.0)
        if digest(*db_files) == before:
            break
        before = digest(*db_files)
    db = StateDB(home / "state.db")
    db.check_schema()
    raw = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)
    all_call_ids = {
        r[0] for r in raw.execute("SELECT tool_call_id FROM messages WHERE session_id = ? AND role = 'tool'", (sid,))
    }
    raw.close()
    assert hermes_run["summaries"] >= 2, "Hermes should have compressed at least twice"
    history = db.full_history(sid)
    users = [m["content"] for m in history.messages if m["role"] == "user"]
    assert users == TURNS, "every user message exactly once, in order"
    tool_ids = [m["tool_call_id"] for m in history.messages if m["role"] == "tool"]
    assert len(tool_ids) == len(set(tool_ids)) and set(tool_ids) == all_call_ids
    live = db.live(sid)
    assert len(live.messages) < len(history.messages)
    assert digest(*db_files) == before, "reading must never change Hermes' database"


def test_sidecar_compacts_from_the_database_while_the_snapshot_is_frozen(
    hermes_run: dict[str, Any], tmp_path: Path
) -> None:
    home, sid = hermes_run["home"], hermes_run["session_id"]
    config = config_for(home, tmp_path)
    snapshot = home / "sessions" / f"session_{sid}.json"
    frozen = json.loads(snapshot.read_text())["messages"]
    live = StateDB(home / "state.db").live(sid).messages
    assert frozen != live, "after a compression the snapshot no longer follows the conversation"
    records = Records(config.state_dir)
    assert sweep.sweep_sources(config, records).stale == [sid]
    result = sidecar.process_path(snapshot, config, records, final_attempt=True)
    assert (result.path, result.action) == (f"state.db#{sid}", "written"), result
    view_path = home / "sessions" / f"compacted_session_{sid}.json"
    view = json.loads(view_path.read_text())
    assert view["timmy_compaction"]["source"] == "state.db"
    assert [m["content"] for m in view["messages"] if m["role"] == "user"][-1] == TURNS[-1]
    assert TURNS[-1] not in json.dumps(frozen)  # the frozen snapshot never saw the last turn
    restored, _ = restore_file(view_path, config)
    assert restored["messages"] == live
    assert sweep.sweep_sources(config, records).stale == []


def test_unknown_schema_truncated_file_missing_session_and_a_busy_writer(
    hermes_run: dict[str, Any], tmp_path: Path
) -> None:
    home = hermes_run["home"]
    copy = tmp_path / "state.db"
    source = sqlite3.connect(home / "state.db")
    source.execute(f"VACUUM INTO '{copy}'")
    source.close()
    writer = sqlite3.connect(copy)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("UPDATE schema_version SET version = 99")
    writer.commit()
    with pytest.raises(StateDBError, match="unknown Hermes schema version 99"):
        StateDB(copy).check_schema()
    cfg = config_for(tmp_path, tmp_path)
    assert dblook.look_at_state_db(cfg, marks=False).db is None  # unavailable, no crash
    writer.execute("UPDATE schema_version SET version = 22")
    writer.commit()
    writer.execute("BEGIN EXCLUSIVE")  # Hermes in the middle of a write
    start = time.monotonic()
    assert StateDB(copy).high_water_marks()
    assert time.monotonic() - start < 2
    writer.rollback()
    writer.close()
    with pytest.raises(StateDBError, match="no session"):
        StateDB(copy).live("deleted-meanwhile")
    truncated = tmp_path / "truncated" / "state.db"
    truncated.parent.mkdir()
    truncated.write_bytes(copy.read_bytes()[:5000])
    with pytest.raises(StateDBError):
        StateDB(truncated).check_schema()
    shutil.rmtree(truncated.parent)


def test_status_reports_sources_and_frozen_snapshots(hermes_run: dict[str, Any], tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "HERMES_HOME": str(hermes_run["home"]), "TIMMY_STATE_DIR": str(tmp_path / "state")}
    env.pop("TIMMY_COMPACTOR_CONFIG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "timmy_compactor.cli", "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(proc.stdout)
    source = data["sources"]["state_db"]
    assert source["usable"] is True and source["sessions"] == 1
    assert source["snapshots_of_these"] == {"current": 0, "frozen": 1, "absent": 0}
    assert data["sources"]["snapshots"]["enabled_in_hermes"] is True


def test_export_reads_the_whole_conversation_from_state_db(hermes_run: dict[str, Any], tmp_path: Path) -> None:
    home, sid = hermes_run["home"], hermes_run["session_id"]
    summary = export_sessions(home / "sessions", tmp_path / "out", hermes_home=home)
    assert summary.failed == ()
    records = [json.loads(line) for line in (tmp_path / "out" / "conversations.jsonl").read_text().splitlines()]
    (record,) = [r for r in records if r["id"] == sid]
    assert [m["content"] for m in record["messages"] if m["role"] == "user"] == TURNS
    assert sum(1 for m in record["messages"] if m["role"] == "tool") == 3 * len(TURNS)
    assert record["source"]["file"] == f"state.db#{sid}"
    again = export_sessions(home / "sessions", tmp_path / "out", hermes_home=home)
    assert again.exported == 0 and again.unchanged == summary.seen


@pytest.fixture(scope="module")
def timmy_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("run_agent", reason="hermes-agent is not installed")
    from tests.test_hermes_e2e import hermes_home, run_hermes

    tmp = tmp_path_factory.mktemp("statedb_timmy")
    (tmp / "work").mkdir()
    with FakeLLM(script) as llm:
        home = hermes_home(tmp, llm.base_url, timmy=True)
        result = run_hermes(home, tmp / "work", llm, "timmy_compacted", TURNS)
    return {"home": home, "session_id": result["session_id"], "compactions": result["compression_count"]}


def test_the_export_of_a_session_our_engine_compacted_is_the_raw_conversation(
    timmy_run: dict[str, Any], tmp_path: Path
) -> None:
    """Hermes keeps what the `timmy` engine returned as live rows (the older ones archived): the
    training data must be the conversation as it happened, with none of the engine's stand-ins."""
    home, sid = timmy_run["home"], timmy_run["session_id"]
    assert timmy_run["compactions"] >= 2
    summary = export_sessions(home / "sessions", tmp_path / "out", hermes_home=home)
    assert summary.failed == ()
    records = [json.loads(line) for line in (tmp_path / "out" / "conversations.jsonl").read_text().splitlines()]
    (record,) = [r for r in records if r["id"] == sid]
    messages = record["messages"]
    assert [m["content"] for m in messages if m["role"] == "user"] == TURNS
    calls = {
        c["id"]: json.loads(c["function"]["arguments"])["command"] for m in messages for c in m.get("tool_calls") or []
    }
    results = [m for m in messages if m["role"] == "tool"]
    assert len(results) == len(calls) == 3 * len(TURNS)
    for result in results:  # each whole output, as the command printed it (not a truncated stand-in)
        last = calls[result["tool_call_id"]].split()[-1]
        assert json.loads(result["content"])["output"].split()[-1] == last
    text = json.dumps(messages, ensure_ascii=False)
    for stand_in in ("[tool: ", "[folded #", "ANCHOR INDEX", " chars, #"):
        assert stand_in not in text

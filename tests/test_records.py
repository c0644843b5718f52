"""sidecar/records.py (sidecar.db): a record is (source, key, mark); older sidecar.db files migrated in place."""

from __future__ import annotations

import sqlite3
import traceback
from pathlib import Path
from typing import Any

from tests.support import make_state_db, tool_session
from tests.support_homes import sidecar_config
from timmy_compactor.sidecar import sweep, work
from timmy_compactor.sidecar.records import Records


def test_a_db_record_holds_its_source_key_and_mark(tmp_path: Path) -> None:
    sessions, home = tmp_path / "hermes" / "sessions", tmp_path / "hermes"
    sessions.mkdir(parents=True)
    messages = tool_session(12)
    make_state_db(home / "state.db", "s1", messages)
    config = sidecar_config(tmp_path, sessions, home)
    records = Records(config.state_dir)
    work.process("s1", config, records)
    record = records.get("state.db", "s1")
    assert record is not None and record.name == "state.db#s1"
    high_water_mark, tool_tokens = record.mark
    assert high_water_mark == len(messages) and tool_tokens > 0
    assert records.get("file", "s1") is None
    assert sweep.sweep_sources(config, records).stale == []


def _old_sidecar_db(path: Path, create: str, *rows: str) -> None:
    db = sqlite3.connect(path)
    db.execute(create)
    for row in rows:
        db.execute(row)
    db.commit()
    db.close()


def test_an_old_sidecar_db_is_migrated_value_by_value(tmp_path: Path) -> None:
    _old_sidecar_db(
        tmp_path / "sidecar.db",
        "CREATE TABLE sessions (path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, sha256 TEXT, "
        "action TEXT NOT NULL, reason TEXT, tokens_before INTEGER, tokens_after INTEGER, at REAL NOT NULL)",
        "INSERT INTO sessions VALUES ('/s/session_a.json', 111, 222, 'h1', 'written', NULL, 9, 3, 1.0)",
        "INSERT INTO sessions VALUES ('db:b', 77, 12, 'h2', 'written', NULL, 9, 3, 2.0)",
    )
    records = Records(tmp_path)
    a, b = records.get("file", "a"), records.get("state.db", "b")
    assert a is not None and (a.mark, a.name, a.sha256, a.tokens_before) == ([111, 222], "/s/session_a.json", "h1", 9)
    assert b is not None and (b.mark, b.name, b.at) == ([77, None], "state.db#b", 2.0)
    assert Records(tmp_path).all().keys() == {("file", "a"), ("state.db", "b")}  # idempotent
    tables = sqlite3.connect(tmp_path / "sidecar.db").execute("SELECT name FROM sqlite_master WHERE type='table'")
    assert {row[0] for row in tables} == {"seen", "meta", "queued"}


def test_a_records_table_of_the_last_layout_is_migrated_in_place(tmp_path: Path) -> None:
    """`records` (a path or `db:<id>` per row, one column per source's mark, with or without
    `hermes_tool_tokens`): each row under its source and key; its tool tokens are part of the mark
    (NULL: each state.db session is checked once more against Hermes' current tool schemas)."""
    _old_sidecar_db(
        tmp_path / "sidecar.db",
        "CREATE TABLE records (path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER, high_water_mark INTEGER, "
        "messages INTEGER, sha256 TEXT, action TEXT NOT NULL, reason TEXT, tokens_before INTEGER, "
        "tokens_after INTEGER, at REAL NOT NULL)",
        "INSERT INTO records VALUES ('db:b', NULL, NULL, 77, 12, 'h2', 'written', NULL, 9, 3, 2.0)",
        "INSERT INTO records VALUES ('db:x/../y', NULL, NULL, 5, 1, 'h3', 'bad_input', 'r', NULL, NULL, 3.0)",
        "INSERT INTO records VALUES ('/s/session_c.json', 1, 2, NULL, NULL, 'h4', 'failed', 'why', 9, 9, 4.0)",
    )
    records = Records(tmp_path)
    b = records.get("state.db", "b")
    assert b is not None and (b.mark, b.action, b.tokens_after) == ([77, None], "written", 3)
    c = records.get("file", "c")
    assert c is not None and (c.mark, c.action, c.reason) == ([1, 2], "failed", "why")
    hashed = [key for source, key in records.all() if source == "state.db" and key.startswith("x_")]
    assert len(hashed) == 1  # `x/../y` under its file id
    assert records.failing() == 2
    records.put("state.db", "b", mark=[78, 11_500], name="state.db#b", sha256="h5", action="written")
    b = Records(tmp_path).get("state.db", "b")
    assert b is not None and b.mark == [78, 11_500]


def _open_records(state_dir: str, barrier: Any, failures: Any) -> None:
    barrier.wait()
    try:
        Records(Path(state_dir))
    except Exception:  # noqa: BLE001 -- reported to the test, which shows where it was raised
        failures.put(traceback.format_exc()[-600:])


def test_processes_opening_new_records_together_all_succeed(tmp_path: Path) -> None:
    """Two consumers starting at once on one state dir (their workers open the records as their first
    task starts): each reads the schema and adds what is missing; the second ALTER used to fail with
    `duplicate column name`, a traceback in the log of a task that then never ran."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    for round_ in range(5):
        state = tmp_path / f"state{round_}"
        barrier, failures = context.Barrier(8), context.Queue()
        procs = [context.Process(target=_open_records, args=(str(state), barrier, failures)) for _ in range(8)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(timeout=60)
        found = [failures.get(timeout=1) for _ in range(failures.qsize())]
        assert not found, found

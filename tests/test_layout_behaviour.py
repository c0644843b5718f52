"""What the layout changed on purpose: one naming rule, restore from the configured Hermes home,
schedules that mean what they say, honest sidecar records, named log lines, one-line errors."""

from __future__ import annotations

import io
import itertools
import json
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import structlog

from tests.support import (
    dead_writers_temp,
    load_sample,
    make_state_db,
    session_variant,
    tool_session,
    write_like_hermes,
)
from timmy_compactor import logs
from timmy_compactor.cli import main
from timmy_compactor.compactor import restore_file
from timmy_compactor.config import Config, HueySection, ModelSection, SessionsSection
from timmy_compactor.export import export_sessions
from timmy_compactor.sessions.names import is_session_name, session_id_of, session_name
from timmy_compactor.sessions.statedb import StateDB
from timmy_compactor.sidecar import folder, sweep, work
from timmy_compactor.sidecar.app import every
from timmy_compactor.sidecar.records import Records
from timmy_compactor.sidecar.watcher import Debouncer, SessionEventHandler


def sidecar_config(tmp_path: Path, sessions: Path, hermes_home: Path) -> Config:
    return Config(
        sessions=SessionsSection(dir=str(sessions), hermes_home=str(hermes_home)),
        model=ModelSection(context_window=8_000),
        huey=HueySection(state_dir=str(tmp_path / "state")),
    )


# ---------------------------------------------------------------- one naming rule


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("session_abc.json", True),
        ("session_.json", False),
        ("compacted_session_abc.json", False),
        (".session_abc_x1y2.tmp", False),
        ("session_abc.json.tmp", False),
        ("sessions.json", False),
        ("request_dump_1.json", False),
        ("session_abc.jsonl", False),
    ],
)
def test_the_naming_rule(name: str, expected: bool) -> None:
    assert is_session_name(name) is expected


def test_ids_and_names_round_trip() -> None:
    assert session_id_of(Path("/x/session_20261122_ab.c.json")) == "20261122_ab.c"
    assert session_name("20261122_ab") == "session_20261122_ab.json"
    assert session_id_of(session_name("20261122_ab")) == "20261122_ab"
    # issue 21: an id that is not plain gets the name Hermes' snapshot writer gives it (names.file_id)
    assert session_name("20261122_ab.c") == "session_20261122_ab_c_8e7cba72c9e1.json"
    assert session_id_of("chat.json") == "chat"  # any other file: its stem


def test_session_dot_json_without_an_id_is_no_session_anywhere(tmp_path: Path) -> None:
    sessions = tmp_path / "hermes" / "sessions"
    sessions.mkdir(parents=True)
    write_like_hermes(sessions / "session_.json", session_variant(load_sample(), "empty-id"))
    write_like_hermes(sessions / "session_ok.json", session_variant(load_sample(), "ok"))
    config = sidecar_config(tmp_path, sessions, tmp_path / "hermes")
    records = Records(config.state_dir)
    # the sidecar
    assert work.process_session(sessions / "session_.json", config, records).action == "refused"
    assert [p.name for p in folder.session_files(sessions)] == ["session_ok.json"]
    assert [p.name for p in sweep.stale_sessions(config, records)] == ["session_ok.json"]
    # the watcher
    touched: list[str] = []
    debouncer = Debouncer(0.01, touched.append)
    handler = SessionEventHandler(debouncer)

    class Moved:
        is_directory = False
        event_type = "moved"

        def __init__(self, dest: Path) -> None:
            self.dest_path = str(dest)

    handler.on_any_event(Moved(sessions / "session_.json"))  # type: ignore[arg-type]
    handler.on_any_event(Moved(sessions / "session_ok.json"))  # type: ignore[arg-type]
    assert debouncer.pending() == 1
    # the export
    summary = export_sessions(sessions, tmp_path / "out")
    assert (summary.seen, summary.exported) == (1, 1)
    # the evaluation
    from timmy_compactor.compare.cli import _session_paths

    assert [p.name for p in _session_paths([str(sessions)], sessions)] == ["session_ok.json"]


# ---------------------------------------------------------------- restore uses sessions.hermes_home


def test_restore_reads_state_db_from_the_configured_hermes_home(tmp_path: Path) -> None:
    """The sessions dir is not `<hermes_home>/sessions` here: guessing the view's grandparent fails."""
    sessions, home = tmp_path / "snapshots", tmp_path / "elsewhere" / "hermes"
    sessions.mkdir()
    home.mkdir(parents=True)
    messages = tool_session(12)
    make_state_db(home / "state.db", "s1", messages)
    config = sidecar_config(tmp_path, sessions, home)
    result = work.process_db_session("s1", config, Records(config.state_dir))
    assert result.action == "written", result
    view = sessions / "compacted_session_s1.json"
    restored, _ = restore_file(view, config)
    assert restored["messages"] == StateDB(home / "state.db").live("s1").messages
    assert [m["content"] for m in restored["messages"]] == [m["content"] for m in messages]
    assert main(["restore", str(view), "--config", str(write_config(tmp_path, config))]) == 0


def write_config(tmp_path: Path, config: Config) -> Path:
    path = tmp_path / "compaction.yaml"
    path.write_text(
        json.dumps(
            {
                "sessions": {"dir": config.sessions.dir, "hermes_home": config.sessions.hermes_home},
                "model": {"context_window": config.model.context_window},
            }
        )
    )
    return path


# ---------------------------------------------------------------- honest records for state.db sessions


def test_db_records_hold_a_high_water_mark_and_a_message_count(tmp_path: Path) -> None:
    sessions, home = tmp_path / "hermes" / "sessions", tmp_path / "hermes"
    sessions.mkdir(parents=True)
    messages = tool_session(12)
    make_state_db(home / "state.db", "s1", messages)
    config = sidecar_config(tmp_path, sessions, home)
    records = Records(config.state_dir)
    work.process_db_session("s1", config, records)
    record = records.get("db:s1")
    assert record is not None
    assert (record.high_water_mark, record.messages) == (len(messages), len(messages))
    assert (record.mtime_ns, record.size) == (None, None)
    assert sweep.stale_db_sessions(config, records) == []


def test_an_old_sidecar_db_is_migrated_value_by_value(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "sidecar.db")
    db.execute(
        "CREATE TABLE sessions (path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, "
        "sha256 TEXT, action TEXT NOT NULL, reason TEXT, tokens_before INTEGER, tokens_after INTEGER, at REAL NOT NULL)"
    )
    db.execute("INSERT INTO sessions VALUES ('/s/session_a.json', 111, 222, 'h1', 'written', NULL, 9, 3, 1.0)")
    db.execute("INSERT INTO sessions VALUES ('db:b', 77, 12, 'h2', 'written', NULL, 9, 3, 2.0)")
    db.commit()
    db.close()
    records = Records(tmp_path)
    a, b = records.get("/s/session_a.json"), records.get("db:b")
    assert a is not None and (a.mtime_ns, a.size, a.high_water_mark, a.messages) == (111, 222, None, None)
    assert b is not None and (b.mtime_ns, b.size, b.high_water_mark, b.messages) == (None, None, 77, 12)
    assert Records(tmp_path).all().keys() == {"/s/session_a.json", "db:b"}  # idempotent


def test_a_sidecar_db_without_hermes_tool_tokens_gets_the_column(tmp_path: Path) -> None:
    """A `records` table from before `hermes_tool_tokens`: the column is added, the rows kept (NULL:
    each state.db session is checked once more against Hermes' current tool schemas)."""
    db = sqlite3.connect(tmp_path / "sidecar.db")
    db.execute(
        "CREATE TABLE records (path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER, high_water_mark INTEGER, "
        "messages INTEGER, sha256 TEXT, action TEXT NOT NULL, reason TEXT, tokens_before INTEGER, "
        "tokens_after INTEGER, at REAL NOT NULL)"
    )
    db.execute("INSERT INTO records VALUES ('db:b', NULL, NULL, 77, 12, 'h2', 'written', NULL, 9, 3, 2.0)")
    db.commit()
    db.close()
    records = Records(tmp_path)
    b = records.get("db:b")
    assert b is not None and (b.high_water_mark, b.messages, b.hermes_tool_tokens) == (77, 12, None)
    records.put("db:b", high_water_mark=78, sha256="h3", action="written", hermes_tool_tokens=11_500)
    b = Records(tmp_path).get("db:b")
    assert b is not None and (b.high_water_mark, b.hermes_tool_tokens) == (78, 11_500)


# ---------------------------------------------------------------- schedules


def test_every_90_minutes_is_every_90_minutes_not_hourly() -> None:
    due = every(90)
    start = datetime(2026, 11, 22, 0, 0)
    fired = [start + timedelta(minutes=m) for m in range(0, 24 * 60) if due(start + timedelta(minutes=m))]
    assert len(fired) == 16
    assert all((b - a) == timedelta(minutes=90) for a, b in itertools.pairwise(fired))
    assert [f.strftime("%H:%M") for f in fired[:3]] == ["00:00", "01:30", "03:00"]


def test_every_5_minutes_matches_the_crontab_it_replaces() -> None:
    due = every(5)
    start = datetime(2026, 11, 22, 10, 0)
    assert [m for m in range(60) if due(start + timedelta(minutes=m))] == list(range(0, 60, 5))


def test_a_schedule_of_zero_minutes_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "compaction.yaml"
    path.write_text("huey:\n  sweep_every_minutes: 0\n")
    assert main(["config", "--config", str(path)]) == 2
    assert "huey.sweep_every_minutes must be >= 1" in capsys.readouterr().err


# ---------------------------------------------------------------- logs and errors


def test_log_lines_carry_their_logger_name() -> None:
    stream = io.StringIO()
    logs.configure("json", "info", stream)
    try:
        logs.get_logger("timmy_compactor.sidecar.work").info("hello", n=1)
    finally:
        structlog.reset_defaults()
    line = json.loads(stream.getvalue())
    assert (line["logger"], line["event"], line["n"]) == ("timmy_compactor.sidecar.work", "hello", 1)


def test_status_on_a_damaged_state_db_says_unavailable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sessions, home = tmp_path / "hermes" / "sessions", tmp_path / "hermes"
    sessions.mkdir(parents=True)
    make_state_db(home / "state.db", "s1", tool_session(2))
    config = sidecar_config(tmp_path, sessions, home)
    db = sqlite3.connect(home / "state.db")
    db.execute("DROP TABLE messages")  # the schema version is fine, a table is gone
    db.commit()
    db.close()
    # issue 21: an unreadable state.db is unavailable, not an error: status reports it and the rest
    assert main(["status", "--config", str(write_config(tmp_path, config))]) == 0
    out, err = capsys.readouterr()
    assert "state.db UNAVAILABLE (schema:" in out and "views kept" in out, out
    assert "Traceback" not in err


def test_hermes_enable_on_a_config_that_is_not_a_mapping_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.yaml").write_text("- just\n- a list\n")
    assert main(["hermes", "enable", "--hermes-home", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("timmy-compactor: error: ") and err.count("\n") == 1 and "not a mapping" in err


def test_a_killed_writers_temp_file_is_removed_by_the_next_sweep_not_by_each_task(tmp_path: Path) -> None:
    """Issue 21, item 4: a task lists nothing (with 10^5 sessions, two listings per task were most of
    its time); every full sweep (and the startup) removes what killed writers left, under each view's lock."""
    sessions = tmp_path / "hermes" / "sessions"
    sessions.mkdir(parents=True)
    raw = sessions / "session_k.json"
    write_like_hermes(raw, session_variant(load_sample(), "k"))
    leftover = dead_writers_temp(sessions / "compacted_session_k.json")  # what a SIGKILL mid-write leaves
    leftover.write_text("{")
    other = dead_writers_temp(sessions / "compacted_session_other.json")  # another session's
    other.write_text("{")
    config = sidecar_config(tmp_path, sessions, tmp_path / "hermes")
    assert work.process_session(raw, config, Records(config.state_dir)).action == "written"
    assert leftover.exists() and other.exists()  # the task did not list the folder
    config_file = tmp_path / "compaction.json"
    config_file.write_text(
        json.dumps(
            {
                "sessions": {"dir": str(sessions), "hermes_home": str(tmp_path / "hermes")},
                "model": {"context_window": 8_000},
                "huey": {"state_dir": str(tmp_path / "state")},
            }
        )
    )
    assert main(["sweep", "--now", "--config", str(config_file)]) == 0  # what the periodic sweep does too
    assert not leftover.exists() and not other.exists()
    assert (sessions / "compacted_session_k.json").exists()

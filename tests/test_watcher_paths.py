"""The watcher's paths: a symlinked sessions folder gets real watchdog events, and the sidecar's own
reads of state.db do not trigger it."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from tests.support import big_session, wait_for, write_json
from timmy_compactor.sessions.statedb import StateDB


def _watch_in_thread(sessions: Path, hermes_home: Path | None, submit: Any) -> threading.Event:
    from timmy_compactor.sessions.sources import Places, watched
    from timmy_compactor.sidecar.watcher import watch

    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=watch,
        args=(watched(Places(sessions_dir=sessions, hermes_home=hermes_home)), submit),
        kwargs={"stop": stop, "debounce_ms": 50, "ready": ready},
    )
    thread.start()
    stop.thread = thread  # type: ignore[attr-defined]
    assert ready.wait(30), "the watcher never started watching"
    return stop


def _stop(stop: threading.Event) -> None:
    stop.set()
    stop.thread.join(timeout=10)  # type: ignore[attr-defined]


def test_a_symlinked_sessions_dir_gets_watcher_events(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "hermes" / "sessions"
    link.parent.mkdir()
    link.symlink_to(elsewhere)
    seen: list[str] = []
    stop = _watch_in_thread(link, None, seen.append)
    try:
        write_json(link / "session_a.json", big_session("a"))
        assert wait_for(lambda: any(p.endswith("session_a.json") for p in seen), timeout=30)
    finally:
        _stop(stop)


def test_the_sidecars_own_state_db_reads_do_not_trigger_it(tmp_path: Path) -> None:
    home = tmp_path / "hermes"
    (home / "sessions").mkdir(parents=True)
    db = sqlite3.connect(home / "state.db")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (x)")
    db.execute("INSERT INTO t VALUES (1)")
    db.commit()
    db.close()
    reader = StateDB(home / "state.db")
    submitted: list[str] = []

    def submit(path: str) -> None:  # what a sweep does: read state.db, read-only
        submitted.append(path)
        with reader.connect() as conn:
            conn.execute("SELECT * FROM t").fetchall()

    stop = _watch_in_thread(home / "sessions", home, submit)
    try:
        with reader.connect() as conn:  # the startup sweep's read
            conn.execute("SELECT * FROM t").fetchall()
        time.sleep(3)
        assert submitted == []  # idle: no sweep loop
        writer = sqlite3.connect(home / "state.db")
        writer.execute("INSERT INTO t VALUES (2)")
        writer.commit()
        assert wait_for(lambda: len(submitted) >= 1, timeout=30)  # a real write still triggers
        writer.close()
        time.sleep(1.5)
        count = len(submitted)
        time.sleep(2)
        assert len(submitted) == count, "the reads triggered more sweeps"
    finally:
        _stop(stop)


def test_the_sidecar_waits_for_a_sessions_folder_hermes_has_not_made(tmp_path: Path) -> None:
    """Issue 33 item 9: on a home where Hermes never ran the sidecar creates nothing in it (neither
    ~/.hermes nor its sessions folder); it says once that it waits, watches the folder once Hermes
    makes it, and catches up on what was written before that."""
    from tests.support import Sidecar, load_sample, session_variant, write_like_hermes

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    car.sessions.rmdir()
    car.sessions.parent.rmdir()  # no Hermes home at all
    try:
        car.start("consumer")
        car.start("watcher")
        log = car.logs["watcher"]
        assert wait_for(lambda: '"waiting_for_sessions_dir"' in log.read_text(), timeout=60), car.log_text()
        assert wait_for((car.state / "sidecar.db").exists, timeout=60), car.log_text()  # swept
        assert not car.sessions.parent.exists()  # nothing created in Hermes' place
        car.sessions.mkdir(parents=True)  # Hermes' first run
        write_like_hermes(car.sessions / "session_first.json", session_variant(load_sample(), "first"))
        view = car.sessions / "compacted_session_first.json"
        assert wait_for(view.exists, timeout=60), car.log_text()  # the consumer's startup sweep may make it first
        assert wait_for(lambda: '"watching"' in log.read_text(), timeout=30), car.log_text()
    finally:
        car.stop_all()
    text = log.read_text()
    assert text.count('"waiting_for_sessions_dir"') == 1 and "Traceback" not in car.log_text(), text

"""sidecar/sweep.py: full and commit sweeps (orphan views, state.db sessions, one per start, dead writers' temps)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    Sidecar,
    append_row,
    big_session,
    dead_writers_temp,
    load_sample,
    make_state_db,
    session_variant,
    three_db_sessions,
    tool_session,
    wait_for,
    write_json,
    write_like_hermes,
)
from tests.support_homes import sidecar_config
from timmy_compactor.atomic import temp_tag
from timmy_compactor.cli import main
from timmy_compactor.config import load_config
from timmy_compactor.sessions.names import session_id_of, view_path, view_path_for
from timmy_compactor.sidecar import sweep, work
from timmy_compactor.sidecar.records import Records


def test_a_deleted_sessions_view_is_removed_while_the_sidecar_runs(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    car.start("consumer")
    car.start("watcher")
    try:
        assert car.wait_watching(), car.log_text()
        raw = write_json(car.sessions / "session_gone.json", big_session("gone"))
        assert wait_for(view_path_for(raw).exists, timeout=30), car.log_text()
        raw.unlink()
        assert wait_for(lambda: not view_path_for(raw).exists(), timeout=30), car.log_text()
    finally:
        car.stop_all()


def test_the_sweep_removes_views_whose_raw_session_is_gone(tmp_path: Path) -> None:
    from timmy_compactor.sidecar import work
    from timmy_compactor.sidecar.records import Records

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    records = Records(config.state_dir)
    kept = write_json(car.sessions / "session_kept.json", big_session("kept"))
    gone = write_json(car.sessions / "session_gone.json", big_session("gone"))
    for raw in (kept, gone):
        assert work.process_path(raw, config, records).action == "written"
    gone.unlink()
    assert sweep.sweep_sources(config, records).removed == 1
    assert view_path_for(kept).exists() and not view_path_for(gone).exists()


@pytest.mark.parametrize("now", [True, False])
def test_the_cli_sweep_removes_views_whose_raw_session_is_gone_and_says_how_many(
    tmp_path: Path, now: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """`timmy-compactor sweep` (with or without --now) removes orphan views as the periodic sweep does."""
    from timmy_compactor.cli import main
    from timmy_compactor.sidecar import work
    from timmy_compactor.sidecar.records import Records

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    records = Records(config.state_dir)
    kept = write_json(car.sessions / "session_kept.json", big_session("kept"))
    gone = [write_json(car.sessions / f"session_gone{i}.json", big_session(f"gone{i}")) for i in range(2)]
    for raw in (kept, *gone):
        assert work.process_path(raw, config, records).action == "written"
    for raw in gone:
        raw.unlink()
    capsys.readouterr()  # what the set-up logged
    flags = ["--now"] if now else []
    assert main(["sweep", *flags, "--json", "--config", str(car.config_path)]) == 0
    assert json.loads(capsys.readouterr().out) == {"sessions": 0, "orphan_views_removed": 2}
    assert view_path_for(kept).exists()
    assert not any(view_path_for(raw).exists() for raw in gone)
    assert all(records.get("file", session_id_of(raw)) is None for raw in gone)
    for raw in gone:  # once more, in words
        write_json(view_path_for(raw), {"messages": []})
    assert main(["sweep", *flags, "--config", str(car.config_path)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.endswith("orphan view(s) removed 2"), line
    assert not any(view_path_for(raw).exists() for raw in gone)


def test_the_cli_sweep_covers_state_db_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Hermes ships with JSON snapshots off: `sweep --now` must compact sessions that live in state.db only."""
    from tests.support import make_state_db
    from timmy_compactor.cli import main

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    make_state_db(config.hermes_home / "state.db", "dbonly", tool_session(40))
    argv = ["sweep", "--now", "--json", "--config", str(car.config_path)]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == {"sessions": 1, "written": 1}
    assert view_path(config.sessions_dir, "dbonly").exists()
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == {"sessions": 0}  # nothing changed since
    assert main([*argv, "--all"]) == 0
    assert json.loads(capsys.readouterr().out) == {"sessions": 1, "unchanged": 1}


def test_one_startup_sweep_and_stale_temp_files_cleaned(tmp_path: Path) -> None:

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    leftover = dead_writers_temp(car.sessions / "compacted_session_a.json")  # a killed writer of this host
    leftover.write_bytes(b"x" * 1000)
    # issue 21.7: another machine's writer (one sessions folder, several hosts) may be mid-write
    elsewhere = car.sessions / ".compacted_session_b.json.other-host-4242-k3j5h2_a.tmp"
    elsewhere.write_bytes(b"x" * 1000)
    live = car.sessions / f".compacted_session_c.json.{temp_tag()}q1w2e3r4.tmp"  # this very process's
    live.write_bytes(b"x")
    ancient = car.sessions / ".compacted_session_d.json.abc123.tmp"  # untagged, a day old: whoever wrote it died
    ancient.write_bytes(b"x")
    os.utime(ancient, (time.time() - 86_400, time.time() - 86_400))
    assert sweep.startup_sweep_due(config)
    assert not leftover.exists() and not ancient.exists()
    assert elsewhere.exists() and live.exists()
    assert not sweep.startup_sweep_due(config)  # the second worker's, the watcher's


def test_a_consumer_restarted_seconds_after_the_first_start_still_removes_a_dead_writers_temp(tmp_path: Path) -> None:
    """Starts within STARTUP_SWEEP_SECONDS share one sweep; the temp files a killed predecessor's
    workers were writing go at every start all the same (a fresh-clone run kept one)."""
    car = Sidecar(tmp_path, "sqlite")
    try:
        car.start("consumer")
        assert wait_for((car.state / "startup_sweep").exists, timeout=30), car.log_text()
        car.stop("consumer", signal.SIGKILL)
        leftover = dead_writers_temp(car.sessions / "compacted_session_a.json")
        leftover.write_bytes(b"x" * 1000)
        car.start("consumer")  # inside the window: no second startup sweep
        assert wait_for(lambda: not leftover.exists(), timeout=30), car.log_text()
    finally:
        car.stop_all()


# ---------------------------------------------------------------- a task lists nothing; the sweep cleans up


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc (Linux)")
def test_a_task_a_killed_worker_took_off_the_queue_is_run_by_the_worker_huey_starts_in_its_place(
    tmp_path: Path,
) -> None:
    """A worker killed between taking a task off the queue and leasing its session leaves the task in no
    queue and no in-flight record: the worker huey starts in its place sweeps, though it starts seconds
    after the consumer (no periodic sweep in this test: it would run at midnight UTC)."""
    from timmy_compactor.sidecar.app import make_app

    car = Sidecar(tmp_path, "sqlite")
    document = json.loads(car.config_path.read_text())
    document["huey"]["sweep_every_minutes"] = 1440
    car.config_path.write_text(json.dumps(document))
    config = load_config(car.config_path)
    consumer = car.start("consumer", workers=1)
    try:
        assert wait_for((car.state / "startup_sweep").exists, timeout=30), car.log_text()
        raw = car.sessions / "session_lost.json"
        write_like_hermes(raw, big_session("lost"))
        app = make_app(config)
        worker = max(_children_of(consumer.pid))  # huey forks its scheduler, then its worker
        os.kill(worker, signal.SIGKILL)
        app.compact(session_id_of(raw))
        assert app.huey.dequeue() is not None  # what the killed worker had taken: lost with it
        assert wait_for(view_path_for(raw).exists, timeout=60), car.log_text()
        assert '"startup_sweep_again"' in car.log_text()
    finally:
        car.stop_all()


def _children_of(pid: int) -> list[int]:
    """The PIDs whose parent is `pid` (Linux's /proc)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


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
    assert work.process_path(raw, config, Records(config.state_dir)).action == "written"
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


# ---------------------------------------------------------------- a commit's sweep: what changed, once


def test_a_commit_enqueues_only_changed_sessions_and_never_one_already_waiting(tmp_path: Path) -> None:
    """The real app on its real SQLite queue, with no consumer: what each sweep puts in the queue."""
    from timmy_compactor.sidecar.app import make_app

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    path = three_db_sessions(car)
    app = make_app(load_config(car.config_path))
    sweep = app.sweep_sessions.call_local
    assert sweep(db_only=True) == 3 and app.huey.pending_count() == 3
    for k in range(5):  # Hermes goes on writing while the tasks wait: nothing more is enqueued
        append_row(path, "s1", f"write {k}")
        assert sweep(db_only=True) == 0
    assert app.huey.pending_count() == 3
    while (task := app.huey.dequeue()) is not None:  # a consumer runs the three tasks
        app.huey.execute(task)
    assert app.records().waiting() == set()
    assert sweep(db_only=True) == 0, "nothing changed since the tasks read the rows"
    append_row(path, "s2", "after the task ran")
    assert sweep(db_only=True) == 1 and app.huey.pending_count() == 1  # s2 alone, s1 and s3 unchanged
    assert app.records().waiting() == {"s2"}
    assert app.records().waiting(ttl=0) == set(), "a task waiting too long (a flushed queue) no longer blocks"


def test_a_commit_sweep_removes_the_views_of_deleted_sessions_without_listing_the_folder(tmp_path: Path) -> None:
    from timmy_compactor.sidecar.app import make_app

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    path = three_db_sessions(car)
    config = load_config(car.config_path)
    app = make_app(config)
    for session_id in ("s1", "s2", "s3"):
        assert work.process(session_id, config, app.records()).action == "written"
    orphan = car.sessions / "compacted_session_gone.json"  # a snapshot's view whose raw went: the full sweep's
    orphan.write_text("{}")
    db = sqlite3.connect(path)  # `hermes sessions delete s2`
    db.execute("DELETE FROM messages WHERE session_id = 's2'")
    db.execute("DELETE FROM sessions WHERE id = 's2'")
    db.commit()
    db.close()
    assert app.sweep_sessions.call_local(db_only=True) == 0
    assert sorted(p.name for p in car.sessions.glob("compacted_*")) == [
        "compacted_session_gone.json",
        "compacted_session_s1.json",
        "compacted_session_s3.json",
    ]
    assert app.records().get("state.db", "s2") is None
    app.sweep_sessions.call_local()
    assert not orphan.exists()


# ---------------------------------------------------------------- no task lists the folder


def test_no_task_and_no_commit_sweep_lists_the_sessions_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With 10^5 sessions a listing per task was most of its time: the compaction tasks (a snapshot, a
    state.db session) and the sweep a state.db commit runs never list the sessions folder."""
    import sqlite3

    from tests.support import add_db_session
    from timmy_compactor.sidecar import work
    from timmy_compactor.sidecar.app import make_app

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    path = car.root / "hermes" / "state.db"
    make_state_db(path, "s1", tool_session(40))
    add_db_session(path, "s2", tool_session(40))
    raw = car.sessions / "session_snap.json"
    write_like_hermes(raw, session_variant(load_sample(), "snap"))
    app = make_app(load_config(car.config_path))
    listed: list[str] = []
    real_scandir, real_listdir = os.scandir, os.listdir
    real_glob, real_iterdir = Path.glob, Path.iterdir

    def spy(real: Any) -> Any:
        def call(where: Any = ".", *rest: Any) -> Any:
            if not isinstance(where, int) and Path(os.fspath(where)).resolve() == car.sessions.resolve():
                listed.append(real.__name__)
            return real(where, *rest)

        return call

    monkeypatch.setattr(os, "scandir", spy(real_scandir))
    monkeypatch.setattr(os, "listdir", spy(real_listdir))
    monkeypatch.setattr(Path, "glob", spy(real_glob))
    monkeypatch.setattr(Path, "iterdir", spy(real_iterdir))
    assert app.sweep_sessions.call_local(db_only=True) == 2  # the commit's sweep: s1 and s2
    while (task := app.huey.dequeue()) is not None:
        app.huey.execute(task)
    assert work.process_path(raw, app.config, app.records()).action == "written"
    db = sqlite3.connect(path)
    db.execute("INSERT INTO messages (session_id, role, content) VALUES ('s1', 'user', 'one more')")
    db.commit()
    db.close()
    assert app.sweep_sessions.call_local(db_only=True) == 1
    while (task := app.huey.dequeue()) is not None:
        app.huey.execute(task)
    assert listed == []
    assert len(list(car.sessions.glob("compacted_*"))) == 3
    assert "glob" in listed  # the spy does see a listing


def test_sweep_and_enqueue_say_when_no_sidecar_runs_and_an_unreadable_folder_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 33: with no sidecar on this home, `sweep` and `enqueue` printed "enqueued" and nothing else."""
    from tests.support_homes import write_default_config
    from timmy_compactor.cli import main

    config, sessions = write_default_config(tmp_path)
    (sessions / "session_one.json").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    assert main(["--config", str(config), "sweep", "--all"]) == 0
    err = capsys.readouterr().err
    assert "no sidecar runs on this home" in err and "./huey_consumer.sh" in err and "sweep --now" in err
    assert main(["--config", str(config), "enqueue", "one"]) == 0
    assert "no sidecar runs on this home" in capsys.readouterr().err
    # an unreadable sessions folder: test_folder.py (as a user a chmod 000 folder stops; root reads it)

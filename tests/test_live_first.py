"""Live first (issue 32.6) and no session marked queued without a task behind it (32.5): the real app
on its real queues (SQLite, and Redis started by the tests), the real watcher, real processes killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support import (
    Sidecar,
    append_row,
    big_session,
    three_db_sessions,
    wait_for,
    write_like_hermes,
)
from timmy_compactor.config import load_config
from timmy_compactor.sessions.sources import STATE_DB
from timmy_compactor.sidecar.app import App, make_app
from timmy_compactor.sidecar.live import LIVE


def app_of(car: Sidecar) -> App:
    return make_app(load_config(car.config_path))


def queued_args(app: App) -> list[tuple[Any, ...]]:
    return [tuple(task.args) for task in app.huey.pending()]


def run_next(app: App) -> Any:
    task = app.huey.dequeue()
    assert task is not None
    app.huey.execute(task)
    return task


def test_a_session_written_during_a_startup_sweep_goes_ahead_of_it(sidecar: Sidecar) -> None:
    """The real watcher: its start's catch-up sweep queues 30 sessions; one Hermes writes meanwhile is
    taken off the queue first (both backends honour the priority)."""
    for n in range(30):
        write_like_hermes(sidecar.sessions / f"session_old{n}.json", big_session(f"old{n}"))
    app = app_of(sidecar)
    try:
        sidecar.start("watcher")
        assert sidecar.wait_watching(), sidecar.log_text()
        assert wait_for(lambda: app.huey.pending_count() == 1, timeout=30)  # the start's catch-up sweep
        assert run_next(app).name == "sweep_sessions"
        assert app.huey.pending_count() == 30
        write_like_hermes(sidecar.sessions / "session_now.json", big_session("now"))
        assert wait_for(lambda: app.huey.pending_count() == 31, timeout=30), sidecar.log_text()
        first = run_next(app)
        assert first.args == ("now",) and first.priority == LIVE
        assert (sidecar.sessions / "compacted_session_now.json").exists()
        assert run_next(app).args[0].startswith("old")
    finally:
        sidecar.stop_all()


def test_a_redis_queue_of_an_older_version_is_moved_into_priorities_in_order(sidecar: Sidecar, tmp_path: Path) -> None:
    if sidecar.redis is None:  # type: ignore[attr-defined]
        return
    app = app_of(sidecar)
    storage = app.huey.storage
    for key in ("a", "b", "c"):  # as an older version enqueued them: LPUSH onto a list
        storage.conn.lpush(storage.queue_key, app.huey.serialize_task(app.compact.s(key)))
    app.compact("live", priority=LIVE)
    assert [run_next(app).args[0] for _ in range(4)] == ["live", "a", "b", "c"]


def test_a_commit_during_a_waiting_sweep_enqueues_the_changed_session_live_once(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    path = three_db_sessions(car)
    app = app_of(car)
    assert app.sweep_sessions.call_local() == 3  # sweep work: s1, s2, s3 wait behind everything live
    assert app.sweep_live(STATE_DB) == 0, "nothing changed since they were enqueued"
    append_row(path, "s2", "Hermes goes on")
    assert app.sweep_live(STATE_DB) == 1
    for k in range(3):  # the live one waits: it reads the rows when it starts
        append_row(path, "s2", f"and on {k}")
        assert app.sweep_live(STATE_DB) == 0
    assert queued_args(app)[0] == ("s2",) and len(queued_args(app)) == 4
    assert app.sweep_sessions.call_local() == 0, "a sweep finds every session waiting"


def test_a_session_marked_by_an_enqueuer_killed_before_its_task_went_in_is_enqueued_again(tmp_path: Path) -> None:
    """A sweep's process killed between marking a session queued and enqueueing its task: no task, and
    the next commit's sweep enqueues the session (it did not wait for the mark to expire)."""
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    three_db_sessions(car)
    app = app_of(car)
    app.records()
    marker = (
        "import os, signal, sys; from pathlib import Path; from timmy_compactor.sidecar.records import Records\n"
        "Records(Path(sys.argv[1])).queue({'s1': None, 's2': None}); os.kill(os.getpid(), signal.SIGKILL)"
    )
    killed = subprocess.run([sys.executable, "-c", marker, str(car.state)], check=False, env=car.env)
    assert killed.returncode == -signal.SIGKILL
    assert app.records().waiting() == set()
    assert app.sweep_live(STATE_DB) == 3
    assert sorted(queued_args(app)) == [("s1",), ("s2",), ("s3",)]


def test_a_task_taken_off_the_queue_by_a_worker_killed_before_it_started_is_enqueued_by_the_next_sweep(
    sidecar: Sidecar,
) -> None:
    for name in ("a", "b", "c"):
        write_like_hermes(sidecar.sessions / f"session_{name}.json", big_session(name))
    app = app_of(sidecar)
    assert app.sweep_sessions.call_local() == 3
    lost = app.huey.dequeue()  # a worker took it, and was killed before the task began
    assert lost is not None
    assert app.sweep_sessions.call_local() == 1, "the sweep re-checks its marks against the queue"
    assert sorted(queued_args(app)) == sorted([("a",), ("b",), ("c",)])
    while app.huey.pending_count():
        run_next(app)
    assert app.records().waiting() == set()
    assert all((sidecar.sessions / f"compacted_session_{n}.json").exists() for n in "abc")


def test_a_task_unmarks_its_session_as_it_is_taken_off_the_queue(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    write_like_hermes(car.sessions / "session_a.json", big_session("a"))
    app = app_of(car)
    assert app.sweep_sessions.call_local() == 1 and app.records().waiting() == {"a"}
    task = app.huey.dequeue()
    seen: list[set[str]] = []
    app.huey.pre_execute("after_unmark")(lambda task: seen.append(app.records().waiting()))
    app.huey.execute(task)
    assert seen == [set()]
    assert os.path.exists(car.sessions / "compacted_session_a.json")


def test_a_process_that_replaces_a_dead_one_of_its_start_sweeps_again(tmp_path: Path, monkeypatch: Any) -> None:
    """huey replaces a killed worker within the same start: the replacement sweeps (the task the dead
    one had taken off the queue is in no queue), once; while every starter lives, no other does."""
    import multiprocessing

    from timmy_compactor.sidecar.processes import SUPERVISOR_ENV
    from timmy_compactor.sidecar.sweep import startup_sweep_due

    config = load_config(Sidecar(tmp_path, "sqlite").config_path)
    monkeypatch.setenv(SUPERVISOR_ENV, "1001")
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:  # a live starter of this start, then ours: one sweep between them
        assert pool.apply(startup_sweep_due, (config,)) is True
        assert startup_sweep_due(config) is False
    worker = context.Process(target=startup_sweep_due, args=(config,))  # a worker that starts, then dies
    worker.start()
    worker.join()
    assert startup_sweep_due(config) is True  # its replacement
    assert startup_sweep_due(config) is False


def test_a_restart_sweeps_however_soon_it_follows_a_killed_start(tmp_path: Path, monkeypatch: Any) -> None:
    """One sweep per start: the processes of one start (the same supervisor) sweep once; a restart of
    the script (another supervisor) a second after a kill -9 sweeps again (its predecessor's may have
    died with it)."""
    from timmy_compactor.sidecar.processes import SUPERVISOR_ENV
    from timmy_compactor.sidecar.sweep import startup_sweep_due

    config = load_config(Sidecar(tmp_path, "sqlite").config_path)
    monkeypatch.setenv(SUPERVISOR_ENV, "1001")
    assert startup_sweep_due(config) and not startup_sweep_due(config)
    monkeypatch.setenv(SUPERVISOR_ENV, "1002")
    assert startup_sweep_due(config) and not startup_sweep_due(config)

"""sidecar/watcher.py: real watchdog events, state.db commits, one warning per interval while the queue is down."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tests.support import (
    Sidecar,
    free_port,
    load_sample,
    make_state_db,
    session_variant,
    tool_session,
    wait_for,
    write_like_hermes,
)
from tests.support_homes import strict_events as events
from timmy_compactor.config import load_config
from timmy_compactor.sessions.sources import Places, watched
from timmy_compactor.sidecar.watcher import Debouncer, watch


class Recorder:
    def __init__(self, fail_first: int = 0) -> None:
        self.calls: list[str] = []
        self.fail_first = fail_first
        self.attempts = 0
        self.lock = threading.Lock()

    def __call__(self, path: str) -> None:
        with self.lock:
            self.attempts += 1
            if self.attempts <= self.fail_first:
                raise ConnectionError("backend down")
            self.calls.append(path)


def run_watcher(directory: Path, submit: Recorder, debounce_ms: int = 100, **kw: object) -> threading.Event:
    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=watch,
        args=(watched(Places(sessions_dir=directory, hermes_home=kw.pop("hermes_home", None))), submit),  # type: ignore[arg-type]
        kwargs={"debounce_ms": debounce_ms, "stop": stop, "ready": ready, **kw},
        daemon=True,
    )
    thread.start()
    assert ready.wait(30), "the watcher never started watching"
    return stop


def test_hermes_style_replace_is_seen_and_noise_is_ignored(tmp_path: Path) -> None:
    recorder = Recorder()
    stop = run_watcher(tmp_path, recorder)
    try:
        write_like_hermes(tmp_path / "session_one.json", {"messages": []})
        (tmp_path / "compacted_session_one.json").write_text("{}")  # our own view
        (tmp_path / "sessions.json").write_text("{}")
        (tmp_path / "request_dump_1.json").write_text("{}")
        (tmp_path / "session_one.jsonl").write_text("{}\n")
        (tmp_path / ".session_two_abcd1234.tmp").write_text("{}")
        assert wait_for(lambda: recorder.calls, timeout=30)
        time.sleep(0.4)
    finally:
        stop.set()
    assert set(recorder.calls) == {str(tmp_path / "session_one.json")}


def test_bursts_collapse_per_session(tmp_path: Path) -> None:
    recorder = Recorder()
    stop = run_watcher(tmp_path, recorder, debounce_ms=300)
    try:
        for i in range(20):
            write_like_hermes(tmp_path / "session_a.json", {"messages": [], "n": i})
            write_like_hermes(tmp_path / "session_b.json", {"messages": [], "n": i})
        assert wait_for(lambda: len(set(recorder.calls)) == 2, timeout=30)
        time.sleep(0.8)
    finally:
        stop.set()
    # a leading and a trailing submit per throttle window and session, not one per event (20 writes each;
    # on a loaded machine the burst may span a second window)
    for name in ("session_a.json", "session_b.json"):
        assert 2 <= recorder.calls.count(str(tmp_path / name)) <= 4, recorder.calls


def test_a_plain_in_place_write_is_seen_too(tmp_path: Path) -> None:
    recorder = Recorder()
    stop = run_watcher(tmp_path, recorder)
    try:
        (tmp_path / "session_plain.json").write_text('{"messages": []}')
        assert wait_for(lambda: recorder.calls, timeout=30)
    finally:
        stop.set()
    assert recorder.calls[0] == str(tmp_path / "session_plain.json")


def test_failed_submits_are_kept_and_retried_then_catch_up_runs() -> None:
    recorder = Recorder(fail_first=3)
    recovered = threading.Event()
    debouncer = Debouncer(0.05, recorder, on_recovered=recovered.set)
    debouncer.start()
    try:
        debouncer.touch("/s/session_a.json")
        debouncer.touch("/s/session_b.json")
        assert wait_for(lambda: len(set(recorder.calls)) == 2, timeout=30)
        assert recovered.wait(5)
    finally:
        debouncer.stop()
    assert set(recorder.calls) == {"/s/session_a.json", "/s/session_b.json"}
    assert recorder.attempts >= 4
    assert debouncer.pending() == 0


# ---------------------------------------------------------------- the queue down; a burst of state.db commits


def test_the_watchers_queue_down_warning_is_one_line_per_interval_with_a_count(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "redis", f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    try:
        car.start("watcher")
        assert car.wait_watching(), car.log_text()
        base = session_variant(load_sample(), "x")
        for k in range(40):  # 40 sessions written over ~4 s: 40 failed enqueues
            write_like_hermes(car.sessions / f"session_w{k}.json", base)
            time.sleep(0.1)
        assert wait_for(lambda: '"enqueue_failed"' in car.logs["watcher"].read_text(), timeout=10)
        time.sleep(2)
        said = [e for e in events(car.logs["watcher"].read_text()) if e["event"] == "enqueue_failed"]
        assert len(said) == 1, said
        assert said[0]["failed_attempts"] >= 1 and said[0]["next_warning_in_s"] == 30.0
        assert "Traceback" not in car.log_text()
    finally:
        car.stop_all()


def test_the_debouncer_counts_the_failed_attempts_it_did_not_say() -> None:
    from structlog.testing import capture_logs

    from timmy_compactor.sidecar import watcher

    failing = threading.Event()
    failing.set()

    def submit(path: str) -> None:
        if failing.is_set():
            raise ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")

    debouncer = watcher.Debouncer(0.01, submit)
    with capture_logs() as logs:
        debouncer.start()
        try:
            for k in range(20):
                debouncer.touch(f"/s/session_{k}.json")
                time.sleep(0.02)
            time.sleep(0.3)
            debouncer._warned_at -= watcher.WARN_EVERY_SECONDS  # the interval has passed
            debouncer.touch("/s/session_last.json")
            assert wait_for(lambda: sum(e["event"] == "enqueue_failed" for e in logs) == 2, timeout=5), logs
            failing.clear()
            assert wait_for(lambda: any(e["event"] == "queue_backend_recovered" for e in logs), timeout=20), logs
        finally:
            debouncer.stop()
    said = [e for e in logs if e["event"] == "enqueue_failed"]
    assert said[0]["failed_attempts"] == 1 and said[1]["failed_attempts"] > 1
    assert debouncer.pending() == 0


def test_the_watchers_retries_wait_no_longer_than_the_consumers(tmp_path: Path) -> None:
    """Issue 33 item 7: while Redis is down the watcher's backlog is retried at most every 5 s, the
    consumers' cap (it was 10 s: after a Redis restart a missed view came 7.5 s late). Enqueues to a
    real Redis URL where nothing listens; the warning line says the wait."""
    from structlog.testing import capture_logs

    from timmy_compactor.sidecar import watcher
    from timmy_compactor.sidecar.app import make_app
    from timmy_compactor.sidecar.queue import QUEUE_MAX_BACKOFF_SECONDS

    car = Sidecar(tmp_path, "redis", f"redis://127.0.0.1:{free_port()}/0")
    app = make_app(load_config(car.config_path))
    debouncer = watcher.Debouncer(0.01, lambda path: app.compact(Path(path).stem))
    with capture_logs() as logs:
        for _ in range(12):  # twelve tries in a row fail: the longest wait is reached
            debouncer._warned_at -= watcher.WARN_EVERY_SECONDS  # each try may say its wait
            debouncer._submit_all(["/s/session_a.json"])
    waits = [e["retry_in_s"] for e in logs if e["event"] == "enqueue_failed"]
    assert len(waits) == 12 and waits[:3] == [0.5, 1.0, 2.0], waits
    assert max(waits) == QUEUE_MAX_BACKOFF_SECONDS == waits[-1] == 5.0, waits


def test_a_burst_of_commits_leaves_one_sweep_waiting_in_the_queue(tmp_path: Path) -> None:
    """The real watcher, no consumer: 20 commits, each its own event, enqueue one commit sweep (the
    one waiting reads the database when it starts, so it sees them all), not one per commit."""
    import sqlite3

    from timmy_compactor.sidecar.app import make_app

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    path = car.root / "hermes" / "state.db"
    make_state_db(path, "s1", tool_session(10))
    try:
        car.start("watcher")
        assert car.wait_watching(), car.log_text()
        app = make_app(load_config(car.config_path))
        assert wait_for(lambda: app.huey.pending_count() == 1, timeout=30)  # the start's catch-up sweep
        for k in range(20):
            db = sqlite3.connect(path)
            db.execute("INSERT INTO messages (session_id, role, content) VALUES ('s1', 'user', ?)", (f"w{k}",))
            db.commit()
            db.close()
            time.sleep(0.25)  # past the watcher's 100 ms window: each commit is an event of its own
        time.sleep(1)
        names = [task.name for task in app.huey.pending()]
        assert names == ["sweep_sessions", "sweep_sessions"], names
        while (task := app.huey.dequeue()) is not None:  # a consumer runs them: s1 is compacted once
            app.huey.execute(task)
        assert (car.sessions / "compacted_session_s1.json").exists()
        assert not app.records().is_waiting("sweep:state.db")
    finally:
        car.stop_all()

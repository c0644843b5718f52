"""The watcher with real watchdog (inotify) events on a real directory."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tests.support import wait_for, write_like_hermes
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
        args=(directory, submit),
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

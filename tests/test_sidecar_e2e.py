"""End to end: real huey_consumer and watcher processes, SQLite and Redis backends, faults."""

from __future__ import annotations

import hashlib
import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import Sidecar, load_sample, session_variant, wait_for, write_like_hermes

pytestmark = pytest.mark.slow


def view_of(raw: Path) -> Path:
    return raw.with_name("compacted_" + raw.name)


def view_sha(raw: Path) -> str | None:
    try:
        return json.loads(view_of(raw).read_bytes())["timmy_compaction"]["raw_sha256"]
    except (OSError, ValueError, KeyError):
        return None


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class ViewMonitor:
    """Samples every view while the test runs: each must parse and never go back in version."""

    def __init__(self, sessions: Path) -> None:
        self.sessions = sessions
        self.order: dict[str, list[str]] = {}  # session file -> raw sha256 in the order written
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._last: dict[str, int] = {}

    def wrote(self, raw: Path) -> None:
        self.order.setdefault(raw.name, []).append(sha(raw))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            for view in self.sessions.glob("compacted_session_*.json"):
                raw_name = view.name.removeprefix("compacted_")
                try:
                    doc = json.loads(view.read_bytes())
                except FileNotFoundError:
                    continue
                except ValueError as exc:
                    self.problems.append(f"{view.name} unparseable: {exc}")
                    continue
                meta = doc.get("timmy_compaction", {})
                if not meta.get("report", {}).get("verified"):
                    self.problems.append(f"{view.name} not verified")
                versions = self.order.get(raw_name, [])
                if meta.get("raw_sha256") not in versions:
                    continue  # written by a version the test has not registered yet
                index = versions.index(meta["raw_sha256"])
                if index < self._last.get(raw_name, -1):
                    self.problems.append(f"{view.name} went back from version {self._last[raw_name]} to {index}")
                self._last[raw_name] = max(index, self._last.get(raw_name, -1))


@pytest.fixture
def sample() -> dict[str, Any]:
    return load_sample()


def test_write_produces_view_and_newer_write_a_newer_view(sidecar: Sidecar, sample: dict[str, Any]) -> None:
    sidecar.start("consumer")
    sidecar.start("watcher")
    assert sidecar.wait_watching(), sidecar.log_text()
    raw = sidecar.sessions / "session_e2e.json"
    write_like_hermes(raw, session_variant(sample, "e2e", n_messages=30))
    first = raw.read_bytes()
    assert wait_for(lambda: view_sha(raw) == hashlib.sha256(first).hexdigest(), timeout=30), sidecar.log_text()
    assert raw.read_bytes() == first
    write_like_hermes(raw, session_variant(sample, "e2e"))
    second = sha(raw)
    assert wait_for(lambda: view_sha(raw) == second, timeout=30), sidecar.log_text()
    view = json.loads(view_of(raw).read_bytes())
    assert view["message_count"] < len(sample["messages"])
    assert view["timmy_compaction"]["report"]["verified"] is True


def test_faults_bursts_half_written_deleted_and_killed_consumer(sidecar: Sidecar, sample: dict[str, Any]) -> None:
    monitor = ViewMonitor(sidecar.sessions)
    monitor.start()
    sidecar.start("consumer")
    sidecar.start("watcher")
    assert sidecar.wait_watching(), sidecar.log_text()
    raws = [sidecar.sessions / f"session_{i:02d}.json" for i in range(50)]

    # 50 sessions written concurrently, in bursts of growing versions
    def writer(chunk: list[Path]) -> None:
        for n in (20, 40, None):
            for raw in chunk:
                write_like_hermes(raw, session_variant(sample, raw.stem, n_messages=n))
                monitor.wrote(raw)

    threads = [threading.Thread(target=writer, args=(raws[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    # a half-written file (a non-atomic writer), completed a moment later
    half = sidecar.sessions / "session_half.json"
    full_bytes = json.dumps(session_variant(sample, "half"), indent=2).encode()
    half.write_bytes(full_bytes[: len(full_bytes) // 2])
    time.sleep(0.3)
    half.write_bytes(full_bytes)
    monitor.wrote(half)

    # a file deleted before its task can run
    doomed = sidecar.sessions / "session_doomed.json"
    write_like_hermes(doomed, session_variant(sample, "doomed"))
    doomed.unlink()

    # kill the consumer hard in the middle of the work, then start a new one
    time.sleep(0.5)
    sidecar.stop("consumer", signal.SIGKILL)
    write_like_hermes(raws[0], session_variant(sample, "session_00-after-kill"))
    monitor.wrote(raws[0])
    sidecar.start("consumer")

    def all_fresh() -> bool:
        return all(view_sha(raw) == sha(raw) for raw in [*raws, half])

    # tasks lost with the killed consumer are found by the sweep the new consumer runs as it starts
    # (the periodic sweep is every 5 minutes: too late for this test)
    ok = wait_for(all_fresh, timeout=30)
    monitor.stop()
    stale = [raw.name for raw in [*raws, half] if view_sha(raw) != sha(raw)]
    assert ok, f"stale views: {stale}\n{sidecar.log_text()}"
    assert monitor.problems == []
    assert not view_of(doomed).exists()
    assert sorted(p.name for p in sidecar.sessions.iterdir() if p.name.startswith(".")) == []


def test_redis_restart_mid_run_loses_nothing(redis_server: Any, tmp_path: Path, sample: dict[str, Any]) -> None:
    redis_server.flush()
    car = Sidecar(tmp_path, "redis", redis_server.url)
    try:
        car.start("consumer")
        car.start("watcher")
        assert car.wait_watching(), car.log_text()
        first = car.sessions / "session_r1.json"
        write_like_hermes(first, session_variant(sample, "r1"))
        assert wait_for(lambda: view_sha(first) == sha(first), timeout=30), car.log_text()
        redis_server.stop()
        written_while_down = [car.sessions / f"session_down{i}.json" for i in range(5)]
        for raw in written_while_down:
            write_like_hermes(raw, session_variant(sample, raw.stem))
        time.sleep(1.0)
        redis_server.start()
        ok = wait_for(lambda: all(view_sha(r) == sha(r) for r in written_while_down), timeout=30)
        assert ok, car.log_text()
        assert car.procs["watcher"].poll() is None, "the watcher must survive a Redis outage"
    finally:
        car.stop_all()
        if redis_server.proc is None:
            redis_server.start()

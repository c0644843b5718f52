"""A session written during a fresh sidecar's startup sweep of N sessions: how soon its view comes
(issue 32.6). Run through `bench/bench_startup.py --sidecar N` (its docstring says what is measured)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench_sidecar import write_like_hermes  # noqa: E402

from tests.support import CONSUMER_FLAGS, RedisServer, add_db_session, make_state_db, tool_session  # noqa: E402

BIN = Path(sys.executable).parent
SMALL = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def write_sessions(sessions: Path, n: int) -> None:
    """N small snapshot sessions, written directly (no sidecar runs yet)."""
    for k in range(n):
        (sessions / f"session_old{k}.json").write_text(json.dumps({"session_id": f"old{k}", "messages": SMALL}))


Procs = list[subprocess.Popen[bytes]]


def start(root: Path, backend: str) -> tuple[Procs, dict[str, str], RedisServer | None]:
    huey: dict[str, Any] = {"backend": backend, "state_dir": str(root / "state")}
    redis = None
    if backend == "redis":
        redis = RedisServer(root)
        redis.start()
        huey["redis_url"] = redis.url
    config = root / "c.json"
    settings = {
        "sessions": {"dir": str(root / "hermes" / "sessions"), "hermes_home": str(root / "hermes")},
        "model": {"context_window": 20000},
        "huey": huey,
        "logging": {"format": "json", "level": "info"},
    }
    config.write_text(json.dumps(settings))
    env = {**os.environ, "TIMMY_COMPACTOR_CONFIG": str(config)}
    log = open(root / "sidecar.log", "ab")  # noqa: SIM115
    procs = [
        subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=log, start_new_session=True)
        for cmd in (
            [str(BIN / "huey_consumer"), "tasks.huey", *CONSUMER_FLAGS],
            [str(BIN / "timmy-compactor"), "watch"],
        )
    ]
    return procs, env, redis


def queue_depth(env: dict[str, str]) -> int:
    from timmy_compactor.config import load_config
    from timmy_compactor.sidecar.queue import make_huey

    return int(make_huey(load_config(Path(env["TIMMY_COMPACTOR_CONFIG"]))).pending_count())


def wait_view(view: Path, started: float, limit: float = 600) -> float:
    while not view.exists():
        if time.perf_counter() - started > limit:
            return float("inf")
        time.sleep(0.005)
    return time.perf_counter() - started


def one_backend(backend: str, n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sessions = root / "hermes" / "sessions"
        sessions.mkdir(parents=True)
        write_sessions(sessions, n)
        db = make_state_db(root / "hermes" / "state.db", "db_old", SMALL)
        procs, env, redis = start(root, backend)
        began = time.perf_counter()
        try:
            while '"watching"' not in (root / "sidecar.log").read_text(errors="replace"):
                time.sleep(0.05)  # every write from here on is seen
            while (depth := queue_depth(env)) < min(n // 10, 5000) and n:  # the startup sweep fills the queue
                time.sleep(0.2)
            sweep_at = time.perf_counter() - began
            started = time.perf_counter()
            write_like_hermes(sessions / "session_live.json", json.dumps({"messages": tool_session(40)}).encode())
            snapshot = wait_view(sessions / "compacted_session_live.json", started)
            started = time.perf_counter()
            add_db_session(db, "live_db", tool_session(40))
            commit = wait_view(sessions / "compacted_session_live_db.json", started)
            if os.environ.get("BENCH_KEEP_LOG"):
                print((root / "sidecar.log").read_text()[-int(os.environ["BENCH_KEEP_LOG"]) :])
            return {"sweep_filling_after_s": sweep_at, "depth": depth, "snapshot_s": snapshot, "commit_s": commit}
        finally:
            for proc in procs:
                os.killpg(proc.pid, signal.SIGINT)
            for proc in procs:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
            if redis is not None:
                redis.stop()


def live_first(n: int, backends: list[str]) -> None:
    print(f"{n} sessions, fresh start (no records), 2 process workers; a write during the startup sweep:")
    print(f"{'backend':8} {'sweep filling at s':>19} {'queue depth':>12} {'snapshot→view s':>16} {'commit→view s':>14}")
    for backend in backends:
        r = one_backend(backend, n)
        head = f"{backend:8} {r['sweep_filling_after_s']:19.1f} {r['depth']:12.0f}"
        print(f"{head} {r['snapshot_s']:16.2f} {r['commit_s']:14.2f}")
    print(f"(target: each view within 5 s; load average {os.getloadavg()[0]:.2f})")

"""Benchmark a write storm on Hermes' state.db (issue 21, item 4): K commits → how many tasks, how fast.

    .venv/bin/python bench/bench_statedb_storm.py [--writes 300] [--sessions 50] [--steps 150] [--gap 0.02]
    .venv/bin/python bench/bench_statedb_storm.py --mode load [--files 200] [--sessions 50] [--rounds 4]
    .venv/bin/python bench/bench_statedb_storm.py --mode many [--idle 100000] [--writes 40] [--gap 0.5]

`--mode load` (bench_load.py): snapshot files and state.db sessions growing at once; `--mode many`:
a live session among 10^5 idle ones (bench_load.py too). Both print one JSON object.

Starts a real `huey_consumer tasks.huey` (SQLite queue, the flags huey_consumer.sh passes) and
`timmy-compactor watch` on a throwaway home whose state.db holds `--sessions` sessions of `--steps`
tool steps, waits for their views, then commits `--writes` rows round-robin over the sessions,
`--gap` seconds apart, the way Hermes appends messages. Reports the compaction tasks the consumer
executed (from its log), the sweeps, and write→view latency p50/p95/max: a write counts as seen when
a view of its session holds it (or a later write to it).
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.support import Sidecar, add_db_session, make_state_db, tool_session, wait_for  # noqa: E402

WRITE = re.compile(r"storm write (\d+)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--gap", type=float, default=0.02)
    parser.add_argument("--mode", choices=("storm", "load", "many"), default="storm")
    parser.add_argument("--files", type=int, default=200, help="load: snapshot sessions")
    parser.add_argument("--rounds", type=int, default=4, help="load: writes per session")
    parser.add_argument("--idle", type=int, default=100_000, help="many: idle sessions, half files, half state.db")
    args = parser.parse_args()
    if args.mode != "storm":
        from bench_load import run_load, run_many  # type: ignore[import-not-found]

        with tempfile.TemporaryDirectory(prefix=f"{args.mode}-") as tmp:
            if args.mode == "load":
                result = run_load(Path(tmp), args.files, args.sessions, args.rounds, args.gap)
            else:
                result = run_many(Path(tmp), args.idle, args.writes, args.gap)
        print(json.dumps(result))
        return 0
    with tempfile.TemporaryDirectory(prefix="storm-") as tmp:
        print(json.dumps(run(Path(tmp), args.writes, args.sessions, args.steps, args.gap)))
    return 0


def run(root: Path, writes: int, sessions: int, steps: int, gap: float) -> dict[str, object]:
    from bench_load import debug_sidecar  # huey's `Executing …` lines (debug) count the tasks

    car = debug_sidecar(root)
    path = car.root / "hermes" / "state.db"
    ids = [f"s{i}" for i in range(sessions)]
    make_state_db(path, ids[0], tool_session(steps))
    for session_id in ids[1:]:
        add_db_session(path, session_id, tool_session(steps))
    writer = sqlite3.connect(path)
    writer.execute("PRAGMA journal_mode=WAL")  # as Hermes opens it
    try:
        car.start("consumer")
        car.start("watcher")
        if not car.wait_watching() or not wait_for(
            lambda: len(list(car.sessions.glob("compacted_*"))) == sessions, timeout=600
        ):
            raise RuntimeError("the sidecar did not start:\n" + car.log_text())
        tasks_before = _executed(car)
        written_at: dict[int, float] = {}
        seen_at: dict[int, float] = {}
        stop = threading.Event()
        poller = threading.Thread(target=_poll, args=(car, ids, written_at, seen_at, stop), daemon=True)
        poller.start()
        for k in range(writes):
            session_id = ids[k % sessions]
            writer.execute(
                "INSERT INTO messages (session_id, role, content) VALUES (?, 'user', ?)",
                (session_id, f"storm write {k}"),
            )
            writer.commit()
            written_at[k] = time.monotonic()
            time.sleep(gap)
        complete = wait_for(lambda: len(seen_at) == writes, timeout=600, interval=0.1)
        stop.set()
        poller.join()
        time.sleep(2)  # tasks still in flight are counted too
        compact, sweeps = (after - before for after, before in zip(_executed(car), tasks_before, strict=True))
    finally:
        writer.close()
        car.stop_all()
    latencies = sorted(seen_at[k] - written_at[k] for k in seen_at)
    return {
        "writes": writes,
        "sessions": sessions,
        "gap_s": gap,
        "all_writes_seen": complete,
        "compaction_tasks": compact,
        "tasks_per_write": round(compact / writes, 2),
        "sweep_tasks": sweeps,
        "write_to_view_s": {
            "p50": round(statistics.median(latencies), 3) if latencies else None,
            "p95": round(latencies[int(0.95 * (len(latencies) - 1))], 3) if latencies else None,
            "max": round(latencies[-1], 3) if latencies else None,
        },
    }


def _executed(car: Sidecar) -> tuple[int, int]:
    text = car.logs["consumer"].read_text(errors="replace")
    return (
        len(re.findall(r"Executing timmy_compactor\.sidecar\.app\.compact(?:_db_session)?:", text)),
        text.count("Executing timmy_compactor.sidecar.app.sweep_sessions"),
    )


def _poll(
    car: Sidecar, ids: list[str], written_at: dict[int, float], seen_at: dict[int, float], stop: threading.Event
) -> None:
    """Every 20 ms: the newest storm write each view holds; every write up to it (of that session) is seen."""
    n = len(ids)
    while not stop.is_set():
        now = time.monotonic()
        for index, session_id in enumerate(ids):
            try:
                text = (car.sessions / f"compacted_session_{session_id}.json").read_text(errors="replace")
            except OSError:
                continue
            newest = max((int(m) for m in WRITE.findall(text)), default=-1)
            for k in list(written_at):
                if k % n == index and k <= newest and k not in seen_at:
                    seen_at[k] = now
        stop.wait(0.02)


if __name__ == "__main__":
    sys.exit(main())

"""The load targets of issue 21 (item 4 and its Targets), with the real consumer and watcher.

`run_load`: `files` snapshot sessions and `db_sessions` state.db sessions growing at once (`rounds`
user messages each, interleaved, `gap` seconds apart). Nothing may be lost (every write reaches its
session's view), every final view must equal a fresh compaction of the final raw, and the
compaction tasks must stay ≤ 1.2 × writes; write→view p50/p95.

`run_many`: `idle` sessions (half snapshot files, half state.db sessions, already seen by the
sidecar: its records say so, as after a first sweep) and two live sessions (one file, one state.db)
written `writes` times each, `gap` seconds apart: write→view p50/p95 (target: within 5 s).

Run through bench_statedb_storm.py (`--mode load`, `--mode many`).
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.support import (  # noqa: E402
    CONSUMER_FLAGS,
    VENV_BIN,
    Sidecar,
    add_db_session,
    make_state_db,
    tool_session,
    wait_for,
    write_like_hermes,
)

MARK = re.compile(r"load write (\d+)")
VIEW = re.compile(r"compacted_session_(.+)\.json\Z")


class Seen(FileSystemEventHandler):
    """Write→view times: each view written (inotify) is read once; every write of its session up to
    the newest one it holds counts as seen then."""

    def __init__(self, sessions: Path) -> None:
        self.sessions = sessions
        self.lock = threading.Lock()
        self.written: dict[int, tuple[str, float]] = {}  # write k → (session, when)
        self.seen: dict[int, float] = {}

    def wrote(self, k: int, session: str) -> None:
        with self.lock:
            self.written[k] = (session, time.monotonic())

    def on_any_event(self, event: FileSystemEvent) -> None:
        target = getattr(event, "dest_path", "") or event.src_path
        name = Path(target if isinstance(target, str) else target.decode()).name
        match = VIEW.match(name)
        if match and event.event_type in ("moved", "created", "modified", "closed"):
            self.look(match.group(1))

    def look(self, session: str) -> None:
        now = time.monotonic()
        try:
            text = (self.sessions / f"compacted_session_{session}.json").read_text(errors="replace")
        except OSError:
            return
        newest = max((int(m) for m in MARK.findall(text)), default=-1)
        with self.lock:
            for k, (owner, _) in self.written.items():
                if owner == session and k <= newest and k not in self.seen:
                    self.seen[k] = now

    def latencies(self) -> list[float]:
        with self.lock:
            return sorted(self.seen[k] - self.written[k][1] for k in self.seen)


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None, "max": None}
    return {
        "p50": round(statistics.median(values), 3),
        "p95": round(values[int(0.95 * (len(values) - 1))], 3),
        "max": round(values[-1], 3),
    }


def executed(car: Sidecar) -> dict[str, int]:
    text = car.logs["consumer"].read_text(errors="replace")
    names = ("compact", "compact_session", "compact_db_session", "sweep_sessions")
    return {name: text.count(f"Executing timmy_compactor.sidecar.app.{name}:") for name in names}


class DebugSidecar(Sidecar):
    """A Sidecar whose consumer runs with `-v`: huey's `Executing …` lines (debug) count the tasks."""

    def start(self, name: str) -> subprocess.Popen[bytes]:
        if name != "consumer":
            return super().start(name)
        log = self.root / f"{name}.log"
        self.logs[name] = log
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [str(VENV_BIN / "huey_consumer"), "tasks.huey", *CONSUMER_FLAGS, "-v"],
                cwd=REPO,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs[name] = proc
        return proc


def debug_sidecar(root: Path, window: int = 8_000) -> Sidecar:
    return DebugSidecar(root, "sqlite", window=window)


def start(car: Sidecar, views: int) -> None:
    car.start("consumer")
    car.start("watcher")
    ok = car.wait_watching() and wait_for(
        lambda: len(list(car.sessions.glob("compacted_session_*"))) >= views, timeout=900, interval=0.5
    )
    if not ok:
        raise RuntimeError("the sidecar did not start:\n" + car.log_text())


def settle(car: Sidecar, seconds: float = 3.0, timeout: float = 300.0) -> None:
    """Until no task started or ended for `seconds` (the queue drained)."""
    deadline = time.monotonic() + timeout
    count, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        text = car.logs["consumer"].read_text(errors="replace")
        now = text.count("Executing ") + text.count(" executed in ")
        if now != count:
            count, since = now, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return
        time.sleep(0.5)


@contextlib.contextmanager
def watching(car: Sidecar, db_path: Path) -> Iterator[tuple[sqlite3.Connection, Seen]]:
    """A writer on state.db (WAL, as Hermes), an observer of the views; the sidecar stopped after."""
    writer = sqlite3.connect(db_path)
    writer.execute("PRAGMA journal_mode=WAL")
    seen = Seen(car.sessions)
    observer = Observer()
    observer.schedule(seen, str(car.sessions), recursive=False)
    observer.start()
    try:
        yield writer, seen
    finally:
        writer.close()
        observer.stop()
        observer.join()
        car.stop_all()


def run_load(root: Path, files: int, db_sessions: int, rounds: int, gap: float) -> dict[str, Any]:
    car = debug_sidecar(root)
    base = tool_session(40)
    docs = {
        f"f{i}": {"session_id": f"f{i}", "model": "test-model", "messages": json.loads(json.dumps(base))}
        for i in range(files)
    }
    for sid, doc in docs.items():
        write_like_hermes(car.sessions / f"session_{sid}.json", doc)
    db_path = car.root / "hermes" / "state.db"
    db_ids = [f"d{i}" for i in range(db_sessions)]
    make_state_db(db_path, db_ids[0], base)
    for sid in db_ids[1:]:
        add_db_session(db_path, sid, base)
    with watching(car, db_path) as (writer, seen):
        start(car, files + db_sessions)
        settle(car)
        before = executed(car)
        order = [*docs, *db_ids]
        k = 0
        began = time.monotonic()
        for r in range(rounds):
            for i in range(len(order)):  # interleaved: files and state.db sessions grow at once
                sid = order[(i * 7 + r) % len(order)]
                message = {"role": "user", "content": f"load write {k}"}
                if sid in docs:
                    docs[sid]["messages"].append(message)
                    write_like_hermes(car.sessions / f"session_{sid}.json", docs[sid])
                else:
                    writer.execute(
                        "INSERT INTO messages (session_id, role, content) VALUES (?, 'user', ?)",
                        (sid, message["content"]),
                    )
                    writer.commit()
                seen.wrote(k, sid)
                k += 1
                time.sleep(gap)
        writing_s = time.monotonic() - began
        complete = wait_for(lambda: len(seen.seen) == k, timeout=600, interval=0.2)
        settle(car)
        after = executed(car)
    tasks = {name: after[name] - before[name] for name in after}
    compactions = tasks["compact"] + tasks["compact_session"] + tasks["compact_db_session"]
    mismatched = final_views_differ(car, list(docs), db_ids)
    return {
        "mode": "load",
        "snapshot_sessions": files,
        "state_db_sessions": db_sessions,
        "writes": k,
        "writing_s": round(writing_s, 1),
        "all_writes_seen": complete,
        "lost_writes": k - len(seen.seen),
        "compaction_tasks": compactions,
        "tasks_per_write": round(compactions / k, 3),
        "sweep_tasks": tasks["sweep_sessions"],
        "final_views_equal_fresh_compaction": not mismatched,
        "mismatched_views": mismatched[:10],
        "write_to_view_s": percentiles(seen.latencies()),
    }


def final_views_differ(car: Sidecar, files: list[str], db_ids: list[str]) -> list[str]:
    """The sessions whose view differs from a fresh compaction of their final raw (file or rows)."""
    from timmy_compactor.compactor import compact_to_view
    from timmy_compactor.config import load_config
    from timmy_compactor.sessions.files import parse_session
    from timmy_compactor.sessions.names import snapshot_path
    from timmy_compactor.sessions.statedb import StateDB, db_session

    config = load_config(car.config_path)
    db = StateDB(config.hermes_home / "state.db")
    fresh = car.root / "fresh"
    fresh.mkdir()
    differ = []
    for sid in [*files, *db_ids]:
        if sid in db_ids:
            session = db_session(db, sid, snapshot_path(config.sessions_dir, sid))
        else:
            raw = car.sessions / f"session_{sid}.json"
            session = parse_session(raw, raw.read_bytes())
        out = fresh / f"compacted_session_{sid}.json"
        compact_to_view(session, config, out=out)
        view = car.sessions / f"compacted_session_{sid}.json"
        if not view.exists() or not out.exists() or view.read_bytes() != out.read_bytes():
            differ.append(sid)
    return differ


def seed_idle(car: Sidecar, idle: int) -> None:
    """`idle` small sessions, half snapshot files and half state.db sessions, each below the threshold,
    and the sidecar's records of them as a first sweep leaves them (so its start does not compact them
    all again: that is `sweep --now`'s job, not this benchmark's)."""
    from timmy_compactor.config import load_config
    from timmy_compactor.sidecar.records import Records, mark_text

    config = load_config(car.config_path)
    files, rows = idle // 2, idle - idle // 2
    small = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    now = time.time()
    records: list[tuple[Any, ...]] = []
    real = car.sessions.resolve()
    for i in range(files):
        path = real / f"session_idle{i}.json"
        path.write_text(json.dumps({"session_id": f"idle{i}", "messages": small}))
        st = path.stat()
        mark = mark_text((st.st_mtime_ns, st.st_size))
        records.append(("file", f"idle{i}", mark, path.name, None, "below_threshold", None, 0, 0, now))
    db_path = car.root / "hermes" / "state.db"
    db = sqlite3.connect(db_path)
    db.executemany(
        "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?)",
        [(f"dbidle{i}", "test-model", "You are terse.", 1.7e9, None, "cli") for i in range(rows)],
    )
    db.executemany(
        "INSERT INTO messages (session_id, role, content) VALUES (?, ?, ?)",
        [(f"dbidle{i}", m["role"], m["content"]) for i in range(rows) for m in small],
    )
    db.commit()
    marks = dict(db.execute("SELECT session_id, MAX(id) FROM messages GROUP BY session_id").fetchall())
    db.close()
    for i in range(rows):
        sid = f"dbidle{i}"
        records.append(
            ("state.db", sid, mark_text(marks[sid]), f"state.db#{sid}", None, "below_threshold", None, 0, 0, now)
        )
    Records(config.state_dir)  # its schema
    with sqlite3.connect(config.state_dir / "sidecar.db") as state:  # as Records.put writes them, in one go
        state.executemany(f"INSERT OR REPLACE INTO seen VALUES ({', '.join('?' * 10)})", records)


def run_many(root: Path, idle: int, writes: int, gap: float) -> dict[str, Any]:
    car = debug_sidecar(root)
    base = tool_session(40)
    db_path = car.root / "hermes" / "state.db"
    make_state_db(db_path, "livedb", base)
    live = {"session_id": "livefile", "model": "test-model", "messages": json.loads(json.dumps(base))}
    write_like_hermes(car.sessions / "session_livefile.json", live)
    made = time.monotonic()
    seed_idle(car, idle)
    seeding_s = time.monotonic() - made
    with watching(car, db_path) as (writer, seen):
        start(car, 2)
        settle(car)
        before = executed(car)
        for k in range(writes):
            content = f"load write {k}"
            if k % 2:
                writer.execute(
                    "INSERT INTO messages (session_id, role, content) VALUES ('livedb', 'user', ?)", (content,)
                )
                writer.commit()
                seen.wrote(k, "livedb")
            else:
                live["messages"].append({"role": "user", "content": content})
                write_like_hermes(car.sessions / "session_livefile.json", live)
                seen.wrote(k, "livefile")
            time.sleep(gap)
        complete = wait_for(lambda: len(seen.seen) == writes, timeout=900, interval=0.2)
        settle(car)
        after = executed(car)
    latencies = seen.latencies()
    tasks = {name: after[name] - before[name] for name in after}
    return {
        "mode": "many",
        "idle_sessions": idle,
        "seeding_s": round(seeding_s, 1),
        "writes": writes,
        "gap_s": gap,
        "all_writes_seen": complete,
        "compaction_tasks": tasks["compact"] + tasks["compact_session"] + tasks["compact_db_session"],
        "sweep_tasks": tasks["sweep_sessions"],
        "write_to_view_s": percentiles(latencies),
        "within_5_s": sum(1 for v in latencies if v <= 5.0),
    }

"""The sidecar's own memory, in `<state_dir>/sidecar.db` (never in Hermes' directory).

One row per session the sidecar compacted, keyed by (its source, its key): the mark of the input the
last run read (the source's "changed since" mark, with what else went into the view: Hermes' tool
schemas for a session that records none), what it did, and how the session is named in logs. The
sweep compares the sources' marks with these to find sessions that changed without opening them;
permanent errors are logged once per mark because the row remembers the mark that failed; `status`
shows the last errors. A sidecar.db of an older layout is migrated in place as it opens.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final

from timmy_compactor.atomic import pid_is_dead, private_dir, private_file
from timmy_compactor.errors import TimmyError
from timmy_compactor.sessions.names import UnsafeIdError, file_id, session_id_of

_SCHEMA = """
CREATE TABLE IF NOT EXISTS seen (
    source TEXT NOT NULL,
    key TEXT NOT NULL,
    mark TEXT,
    name TEXT NOT NULL,
    sha256 TEXT,
    action TEXT NOT NULL,
    reason TEXT,
    tokens_before INTEGER,
    tokens_after INTEGER,
    at REAL NOT NULL,
    PRIMARY KEY (source, key)
)
"""
_META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
# Sessions with a task in the queue that has not started yet (path as in `records`, when enqueued):
# a sweep does not enqueue them again; the task takes its row off as it starts. `owner`: the batch
# (host, PID, token) still enqueueing it, NULL once its task is in the queue: a row of a batch whose
# process died before that is no task (`waiting` ignores it). `mark`: the input's mark when enqueued;
# `live`: enqueued ahead of sweep work (`sidecar.live`).
_QUEUED = "CREATE TABLE IF NOT EXISTS queued (path TEXT PRIMARY KEY, at REAL NOT NULL)"
_QUEUED_COLUMNS = {"owner": "TEXT", "mark": "TEXT", "live": "INTEGER NOT NULL DEFAULT 0"}
QUEUED_TTL_SECONDS = 600.0
"""A queued row older than this no longer counts for a commit's sweep (a flushed queue, a task lost
with its consumer); a full sweep re-checks every row against the queue itself, whatever its age."""
COMMIT_SWEEP = "sweep:state.db"
"""The `queued` row an older version's watcher left for a commit's sweep task (`app.commit_sweep_key`):
taken off when such a task runs. Commits now enqueue their compactions from the watcher."""
SKIPPED_UNTIL_CHANGED = ("failed", "bad_input", "nothing_to_cut")
"""The input is at fault: trying the same bytes again gives the same error."""
WRITE_FAILED: Final = "write_failed"
"""The machine is at fault (a full or read-only disk): every sweep tries again, until it works."""
ERROR_ACTIONS = (*SKIPPED_UNTIL_CHANGED, WRITE_FAILED)


@dataclass(frozen=True, kw_only=True)
class Record:
    source: str  # the name of the session's source (`sessions.sources.SOURCES`)
    key: str  # the session's key (its file id)
    mark: Any  # the input's mark (JSON: a list where the source's is a tuple)
    name: str  # how logs and `status` name the session (a snapshot's path, `state.db#<key>`)
    sha256: str | None
    action: str
    reason: str | None
    tokens_before: int | None
    tokens_after: int | None
    at: float


_COLUMNS = tuple(f.name for f in fields(Record))


class StateNotWritableError(TimmyError, RuntimeError):
    """The sidecar cannot write its own state (sidecar.db, a lock file, the queue's SQLite db):
    a full disk, a read-only or unwritable state dir. Raw sessions are never written, so none is at
    risk; the work is skipped and retried by a later sweep."""

    def __init__(self, path: Path, reason: str, hint: str) -> None:
        self.path, self.reason, self.hint = path, reason, hint
        super().__init__(f"{path}: cannot record the sidecar's state ({reason}); {hint}")


_SQLITE_WRITE_FAILURES = ("full", "readonly", "read-only", "unable to open", "disk i/o", "locking protocol")


@contextmanager
def recording(path: Path) -> Iterator[None]:
    """Turn a failure to write the sidecar's state at `path` (OSError; sqlite3's "database or disk is
    full", "attempt to write a readonly database", "unable to open database file") into one
    StateNotWritableError naming the file and what to do, not a traceback."""
    try:
        yield
    except StateNotWritableError:
        raise
    except sqlite3.OperationalError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if not any(word in reason.lower() for word in _SQLITE_WRITE_FAILURES):
            raise  # e.g. "database is locked": not a state that needs a person
        raise StateNotWritableError(path, reason, _hint(path, full="full" in reason.lower())) from None
    except OSError as exc:
        where = Path(exc.filename) if isinstance(exc.filename, str) else path
        reason = exc.strerror or type(exc).__name__
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        raise StateNotWritableError(where, reason, _hint(where, full=full)) from None


def _hint(path: Path, *, full: bool) -> str:
    if full:
        return "free disk space; the sidecar retries at its next sweep"
    return f"make {path.parent} a writable directory (or set huey.state_dir); the sidecar retries at its next sweep"


def warn_not_writable(log: Any, exc: StateNotWritableError, **fields: object) -> None:
    """The one warning line for a state the sidecar cannot write (structured: path, error, hint)."""
    log.warning("state_not_writable", path=str(exc.path), error=exc.reason, hint=exc.hint, **fields)


def _use_wal(db: sqlite3.Connection, tries: int = 200) -> None:
    """The database in WAL mode. Switching takes an exclusive lock and SQLite does not wait for it (the
    busy timeout does not apply): processes opening a new database together retry for up to ~10 s."""
    for attempt in range(tries):
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == tries - 1:
                raise
            time.sleep(0.05)


class Records:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "sidecar.db"
        with recording(self.path):
            private_dir(state_dir)
            if not self.path.exists():  # sqlite creates it (and its -wal, -shm) with the file's mode
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            private_file(self.path)
        with self._connect() as db:
            _use_wal(db)
            # one process at a time reads and sets the schema: two starting together both saw a column
            # missing, and the second ALTER failed (duplicate column name)
            db.execute("BEGIN IMMEDIATE")
            db.execute(_SCHEMA)
            db.execute(_META)
            db.execute(_QUEUED)
            have = {row[1] for row in db.execute("PRAGMA table_info(queued)")}
            for column, kind in _QUEUED_COLUMNS.items():
                if column not in have:
                    db.execute(f"ALTER TABLE queued ADD COLUMN {column} {kind}")
            migrate_old_layouts(db)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with recording(self.path):  # a full disk or a read-only state dir: one error naming the file
            db = sqlite3.connect(self.path, timeout=10)
            try:
                with db:
                    yield db
            finally:
                db.close()

    def get(self, source: str, key: str) -> Record | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM seen WHERE source = ? AND key = ?", (source, key)).fetchone()
        return _record(row) if row else None

    def all(self) -> dict[tuple[str, str], Record]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM seen").fetchall()
        return {(row[0], row[1]): _record(row) for row in rows}

    def marks(self) -> dict[tuple[str, str], tuple[str | None, str]]:
        """Per session the sidecar knows, (source, key) → (its mark as stored, its last action), with
        no Record per row: a commit's sweep reads this for every session (10^5 of them)."""
        with self._connect() as db:
            rows = db.execute("SELECT source, key, mark, action FROM seen").fetchall()
        return {(row[0], row[1]): (row[2], row[3]) for row in rows}

    def put(
        self,
        source: str,
        key: str,
        *,
        mark: object,
        name: str,
        sha256: str | None,
        action: str,
        reason: str | None = None,
        tokens_before: int | None = None,
        tokens_after: int | None = None,
    ) -> None:
        values = (source, key, mark_text(mark), name, sha256, action, reason, tokens_before, tokens_after, time.time())
        with self._connect() as db:
            db.execute(f"INSERT OR REPLACE INTO seen VALUES ({', '.join('?' * len(values))})", values)

    def forget(self, key: str) -> None:
        """The session of this key is gone (from every source): its rows go."""
        with self._connect() as db:
            db.execute("DELETE FROM seen WHERE key = ?", (key,))

    def queue(self, marks: Mapping[str, str | None], *, live: bool = False) -> str:
        """These paths' tasks are about to be enqueued (path → its input's mark): sweeps leave them alone
        until they start. The rows belong to the batch returned until `enqueued(batch)`: if this process
        dies before, they stand for no task and no sweep trusts them."""
        batch = f"{socket.gethostname()} {os.getpid()} {uuid.uuid4().hex}"
        rows = [(path, time.time(), batch, mark, int(live)) for path, mark in marks.items()]
        with self._connect() as db:
            db.executemany("INSERT OR REPLACE INTO queued (path, at, owner, mark, live) VALUES (?, ?, ?, ?, ?)", rows)
        return batch

    def enqueued(self, batch: str, not_enqueued: Iterable[str] = ()) -> None:
        """The tasks of `batch` are in the queue, but for `not_enqueued` (their rows go)."""
        with self._connect() as db:
            db.executemany("DELETE FROM queued WHERE path = ? AND owner = ?", ((p, batch) for p in not_enqueued))
            db.execute("UPDATE queued SET owner = NULL WHERE owner = ?", (batch,))

    def taken(self, path: str) -> None:
        """`path`'s task starts (or could not be enqueued): a later change needs a new task."""
        with self._connect() as db:
            db.execute("DELETE FROM queued WHERE path = ?", (path,))

    def waiting_tasks(self, ttl: float = QUEUED_TTL_SECONDS) -> dict[str, Waiting]:
        """Per path with a task in the queue that has not started, enqueued less than `ttl` ago: its
        mark and whether it is live. Not the rows of a batch whose process died while enqueueing."""
        with self._connect() as db:
            rows = db.execute("SELECT path, owner, mark, live FROM queued WHERE at > ?", (time.time() - ttl,))
            found = rows.fetchall()
        alive: dict[str, bool] = {}
        waiting = {}
        for path, owner, mark, live in found:
            if owner is not None and owner not in alive:
                alive[owner] = _enqueuer_alive(owner)
            if owner is None or alive[owner]:
                waiting[path] = Waiting(mark=mark, live=bool(live), enqueueing=owner is not None)
        return waiting

    def waiting(self, ttl: float = QUEUED_TTL_SECONDS) -> set[str]:
        """The paths with a task in the queue that has not started, enqueued less than `ttl` ago."""
        return set(self.waiting_tasks(ttl))

    def is_waiting(self, path: str, ttl: float = QUEUED_TTL_SECONDS) -> bool:
        """Whether `path`'s task waits in the queue (enqueued less than `ttl` ago, not started)."""
        return path in self.waiting_tasks(ttl)

    def note(self, key: str, value: dict[str, object]) -> None:
        """Remember a small fact about the sidecar itself (e.g. `last_sweep`), as JSON."""
        with self._connect() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def note_unless(
        self, key: str, value: dict[str, object], same: Callable[[dict[str, object] | None], bool]
    ) -> dict[str, object] | None:
        """Note `value` unless what is noted counts as the same already (`same(noted)`), in one
        transaction: of several processes noting at once, exactly one changes it. What was noted
        before, when this call changed it; else None."""
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            previous = json.loads(row[0]) if row else None
            if same(previous):
                return None
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))
        return previous if previous is not None else {}

    def notes(self, prefix: str) -> dict[str, dict[str, Any]]:
        """The facts noted under keys that start with `prefix`."""
        with self._connect() as db:
            rows = db.execute("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?", (len(prefix), prefix))
            return {row[0]: json.loads(row[1]) for row in rows.fetchall()}

    def forget_notes(self, keys: Iterable[str]) -> None:
        with self._connect() as db:
            db.executemany("DELETE FROM meta WHERE key = ?", ((key,) for key in keys))

    def last_run(self, key: str) -> float | None:
        """When the session of `key` last had an outcome recorded (from any source)."""
        with self._connect() as db:
            row = db.execute("SELECT MAX(at) FROM seen WHERE key = ?", (key,)).fetchone()
        return float(row[0]) if row and row[0] is not None else None

    def noted(self, key: str) -> dict[str, object] | None:
        with self._connect() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def failing(self) -> int:
        """How many sessions' last run ended in an error (`ERROR_ACTIONS`)."""
        marks = ",".join("?" * len(ERROR_ACTIONS))
        with self._connect() as db:
            row = db.execute(f"SELECT COUNT(*) FROM seen WHERE action IN ({marks})", ERROR_ACTIONS).fetchone()
        return int(row[0])

    def last_errors(self, limit: int = 5) -> list[Record]:
        marks = ",".join("?" * len(ERROR_ACTIONS))
        with self._connect() as db:
            rows = db.execute(
                f"SELECT * FROM seen WHERE action IN ({marks}) ORDER BY at DESC LIMIT ?",
                (*ERROR_ACTIONS, limit),
            ).fetchall()
        return [_record(row) for row in rows]


@dataclass(frozen=True)
class Waiting:
    """A task in the queue that has not started: the mark of the input when it was enqueued, whether
    it goes ahead of sweep work, and whether its enqueuer is still at it (its task may not be in yet)."""

    mark: str | None
    live: bool
    enqueueing: bool = False


def _enqueuer_alive(owner: str) -> bool:
    """Whether the process of a batch still enqueueing lives (another host's: assumed, until the TTL)."""
    host, _, rest = owner.partition(" ")
    pid = rest.split(" ", 1)[0]
    return host != socket.gethostname() or not pid.isdecimal() or not pid_is_dead(int(pid))


def mark_text(mark: object) -> str | None:
    """A mark as stored and compared: JSON (a tuple and a list are the same mark)."""
    return None if mark is None else json.dumps(mark, separators=(",", ":"))


def _record(row: tuple[object, ...]) -> Record:
    values = dict(zip(_COLUMNS, row, strict=True))
    values["mark"] = json.loads(values["mark"]) if isinstance(values["mark"], str) else None
    return Record(**values)  # type: ignore[arg-type]


_RECORDS_BEFORE_TOOL_TOKENS = "ALTER TABLE records ADD COLUMN hermes_tool_tokens INTEGER"
_OLDEST = """
SELECT path,
       CASE WHEN path LIKE 'db:%' THEN NULL ELSE mtime_ns END, CASE WHEN path LIKE 'db:%' THEN NULL ELSE size END,
       CASE WHEN path LIKE 'db:%' THEN mtime_ns END, NULL, sha256, action, reason, tokens_before, tokens_after, at
FROM sessions
"""


def migrate_old_layouts(db: sqlite3.Connection) -> None:
    """Move the rows of an older sidecar.db into `seen`, once, each under its source and key:
    `sessions` (a state.db session's row id and message count in mtime_ns/size), then `records`
    (a path or `db:<id>` per row, one column per source's mark)."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    rows: list[tuple[Any, ...]] = []
    if "sessions" in tables:
        rows += [(*row, None) for row in db.execute(_OLDEST)]
    if "records" in tables:
        if "hermes_tool_tokens" not in {row[1] for row in db.execute("PRAGMA table_info(records)")}:
            db.execute(_RECORDS_BEFORE_TOOL_TOKENS)
        rows += db.execute(
            "SELECT path, mtime_ns, size, high_water_mark, messages, sha256, action, reason, tokens_before,"
            " tokens_after, at, hermes_tool_tokens FROM records"
        ).fetchall()
    for row in rows:
        moved = _moved(row)
        if moved is not None:
            db.execute(f"INSERT OR IGNORE INTO seen VALUES ({', '.join('?' * len(moved))})", moved)
    for table in tables & {"sessions", "records"}:
        db.execute(f"DROP TABLE {table}")


def _moved(row: tuple[Any, ...]) -> tuple[Any, ...] | None:
    path, mtime_ns, size, high_water_mark, _messages, sha256, action, reason, before, after, at, tools = row
    rest = (sha256, action, reason, before, after, at)
    if not path.startswith("db:"):
        key = session_id_of(path)
        return ("file", key, mark_text([mtime_ns, size]), path, *rest)
    try:
        key = file_id(path.removeprefix("db:"))
    except UnsafeIdError:
        return None  # no file could be named after it: its next run decides
    return ("state.db", key, mark_text([high_water_mark, tools]), f"state.db#{key}", *rest)

"""The sidecar's own memory, in `<state_dir>/sidecar.db` (never in Hermes' directory).

One row per session the sidecar compacted: what the last run saw and did. A snapshot file
(`path` = its real path) is known by its `mtime_ns` and `size`; a session in Hermes' state.db
(`path` = `db:<id>`) by its `high_water_mark` (the newest message row id) and its number of live
`messages`. The sweep uses these to find sessions that changed without opening them; permanent
errors are logged once per content hash because the row remembers the hash that failed; `status`
shows the last errors.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final

from timmy_compactor.atomic import private_dir, private_file
from timmy_compactor.errors import TimmyError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    path TEXT PRIMARY KEY,
    mtime_ns INTEGER,
    size INTEGER,
    high_water_mark INTEGER,
    messages INTEGER,
    sha256 TEXT,
    action TEXT NOT NULL,
    reason TEXT,
    tokens_before INTEGER,
    tokens_after INTEGER,
    at REAL NOT NULL,
    hermes_tool_tokens INTEGER
)
"""
# sidecar.db before `hermes_tool_tokens`: the column is added (NULL: unknown, so each state.db session is
# re-checked once).
_ADD_TOOL_TOKENS = "ALTER TABLE records ADD COLUMN hermes_tool_tokens INTEGER"
# sidecar.db before `records`: one table whose mtime_ns/size held a row id and a message count
# for state.db sessions. Its rows are moved over once, each value into its honest column.
_MIGRATE = """
INSERT OR IGNORE INTO records
    (path, mtime_ns, size, high_water_mark, messages, sha256, action, reason, tokens_before, tokens_after, at)
SELECT path,
       CASE WHEN path LIKE 'db:%' THEN NULL ELSE mtime_ns END,
       CASE WHEN path LIKE 'db:%' THEN NULL ELSE size END,
       CASE WHEN path LIKE 'db:%' THEN mtime_ns END,
       CASE WHEN path LIKE 'db:%' THEN size END,
       sha256, action, reason, tokens_before, tokens_after, at
FROM sessions
"""
_META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
# Sessions with a task in the queue that has not started yet (path as in `records`, when enqueued):
# a sweep does not enqueue them again; the task takes its row off as it starts.
_QUEUED = "CREATE TABLE IF NOT EXISTS queued (path TEXT PRIMARY KEY, at REAL NOT NULL)"
QUEUED_TTL_SECONDS = 600.0
"""A queued row older than this no longer counts (a flushed queue, a task lost with its consumer):
the next sweep enqueues the session again."""
COMMIT_SWEEP = "sweep:state.db"
"""The `queued` row of a commit's sweep: while one waits, a new commit enqueues no other (the waiting
one reads the database when it starts, so it sees that commit too)."""
COMMIT_SWEEP_TTL_SECONDS = 30.0
"""A commit's sweep waiting longer than this (a lost task, a long queue) no longer holds the next back."""
SKIPPED_UNTIL_CHANGED = ("failed", "bad_input", "nothing_to_cut")
"""The input is at fault: trying the same bytes again gives the same error."""
WRITE_FAILED: Final = "write_failed"
"""The machine is at fault (a full or read-only disk): every sweep tries again, until it works."""
ERROR_ACTIONS = (*SKIPPED_UNTIL_CHANGED, WRITE_FAILED)


@dataclass(frozen=True, kw_only=True)
class Record:
    path: str
    mtime_ns: int | None  # snapshot files
    size: int | None  # snapshot files: bytes
    high_water_mark: int | None  # state.db sessions: newest message row id
    messages: int | None  # state.db sessions: live messages compacted
    sha256: str | None
    action: str
    reason: str | None
    tokens_before: int | None
    tokens_after: int | None
    at: float
    hermes_tool_tokens: int | None = None  # state.db sessions: tokens of Hermes' enabled tool schemas then


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


class Records:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "sidecar.db"
        with recording(self.path):
            private_dir(state_dir)
            if not self.path.exists():  # sqlite creates it (and its -wal, -shm) with the file's mode
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            private_file(self.path)
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(_SCHEMA)
            db.execute(_META)
            db.execute(_QUEUED)
            columns = {row[1] for row in db.execute("PRAGMA table_info(records)")}
            if "hermes_tool_tokens" not in columns:
                db.execute(_ADD_TOOL_TOKENS)
            old = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sessions'").fetchone()
            if old:
                db.execute(_MIGRATE)
                db.execute("DROP TABLE sessions")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with recording(self.path):  # a full disk or a read-only state dir: one error naming the file
            db = sqlite3.connect(self.path, timeout=10)
            try:
                with db:
                    yield db
            finally:
                db.close()

    def get(self, path: str) -> Record | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM records WHERE path = ?", (path,)).fetchone()
        return _record(row) if row else None

    def all(self) -> dict[str, Record]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM records").fetchall()
        return {row[0]: _record(row) for row in rows}

    def db_marks(self) -> dict[str, tuple[int | None, str, int | None]]:
        """Per state.db session the sidecar knows (by its id): (high-water mark, last action, Hermes'
        tool tokens then). One range scan of the primary key, no Record per row: a commit's sweep
        reads this for every session (10^5 of them)."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT substr(path, 4), high_water_mark, action, hermes_tool_tokens FROM records"
                " WHERE path >= 'db:' AND path < 'db;'"
            ).fetchall()
        return {row[0]: (row[1], row[2], row[3]) for row in rows}

    def put(
        self,
        path: str,
        *,
        sha256: str | None,
        action: str,
        mtime_ns: int | None = None,
        size: int | None = None,
        high_water_mark: int | None = None,
        messages: int | None = None,
        reason: str | None = None,
        tokens_before: int | None = None,
        tokens_after: int | None = None,
        hermes_tool_tokens: int | None = None,
    ) -> None:
        values = (
            path,
            mtime_ns,
            size,
            high_water_mark,
            messages,
            sha256,
            action,
            reason,
            tokens_before,
            tokens_after,
            time.time(),
            hermes_tool_tokens,
        )
        with self._connect() as db:
            db.execute(f"INSERT OR REPLACE INTO records VALUES ({', '.join('?' * len(values))})", values)

    def forget(self, path: str) -> None:
        with self._connect() as db:
            db.execute("DELETE FROM records WHERE path = ?", (path,))

    def queue(self, path: str) -> None:
        """`path`'s task is about to be enqueued: sweeps leave it alone until it starts."""
        with self._connect() as db:
            db.execute("INSERT OR REPLACE INTO queued VALUES (?, ?)", (path, time.time()))

    def taken(self, path: str) -> None:
        """`path`'s task starts (or could not be enqueued): a later change needs a new task."""
        with self._connect() as db:
            db.execute("DELETE FROM queued WHERE path = ?", (path,))

    def waiting(self, ttl: float = QUEUED_TTL_SECONDS) -> set[str]:
        """The paths with a task in the queue that has not started, enqueued less than `ttl` ago."""
        with self._connect() as db:
            rows = db.execute("SELECT path FROM queued WHERE at > ?", (time.time() - ttl,)).fetchall()
        return {row[0] for row in rows}

    def is_waiting(self, path: str, ttl: float = QUEUED_TTL_SECONDS) -> bool:
        """Whether `path`'s task waits in the queue (enqueued less than `ttl` ago, not started)."""
        with self._connect() as db:
            row = db.execute("SELECT 1 FROM queued WHERE path = ? AND at > ?", (path, time.time() - ttl)).fetchone()
        return row is not None

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

    def noted(self, key: str) -> dict[str, object] | None:
        with self._connect() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def failing(self) -> int:
        """How many sessions' last run ended in an error (`ERROR_ACTIONS`)."""
        marks = ",".join("?" * len(ERROR_ACTIONS))
        with self._connect() as db:
            row = db.execute(f"SELECT COUNT(*) FROM records WHERE action IN ({marks})", ERROR_ACTIONS).fetchone()
        return int(row[0])

    def last_errors(self, limit: int = 5) -> list[Record]:
        marks = ",".join("?" * len(ERROR_ACTIONS))
        with self._connect() as db:
            rows = db.execute(
                f"SELECT * FROM records WHERE action IN ({marks}) ORDER BY at DESC LIMIT ?",
                (*ERROR_ACTIONS, limit),
            ).fetchall()
        return [_record(row) for row in rows]


def _record(row: tuple[object, ...]) -> Record:
    return Record(**dict(zip(_COLUMNS, row, strict=True)))  # type: ignore[arg-type]

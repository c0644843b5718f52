"""The sidecar's own memory, in `<state_dir>/sidecar.db` (never in Hermes' directory).

One row per raw session: what the last run saw (mtime, size, sha256) and did. The sweep uses it
to find sessions that changed without opening them; permanent errors are logged once per
content hash because the row remembers the hash that failed; `status` shows the last errors.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    path TEXT PRIMARY KEY,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT,
    action TEXT NOT NULL,
    reason TEXT,
    tokens_before INTEGER,
    tokens_after INTEGER,
    at REAL NOT NULL
)
"""
ERROR_ACTIONS = ("failed", "bad_input", "refused")


@dataclass(frozen=True, kw_only=True)
class Record:
    path: str
    mtime_ns: int
    size: int
    sha256: str | None
    action: str
    reason: str | None
    tokens_before: int | None
    tokens_after: int | None
    at: float


class Records:
    def __init__(self, state_dir: Path) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.path = state_dir / "sidecar.db"
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(_SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=10)
        try:
            with db:
                yield db
        finally:
            db.close()

    def get(self, path: str) -> Record | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM sessions WHERE path = ?", (path,)).fetchone()
        return Record(**dict(zip(_COLUMNS, row, strict=True))) if row else None

    def all(self) -> dict[str, Record]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM sessions").fetchall()
        return {row[0]: Record(**dict(zip(_COLUMNS, row, strict=True))) for row in rows}

    def put(
        self,
        path: str,
        *,
        mtime_ns: int,
        size: int,
        sha256: str | None,
        action: str,
        reason: str | None = None,
        tokens_before: int | None = None,
        tokens_after: int | None = None,
    ) -> None:
        with self._connect() as db:
            db.execute(
                "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (path, mtime_ns, size, sha256, action, reason, tokens_before, tokens_after, time.time()),
            )

    def forget(self, path: str) -> None:
        with self._connect() as db:
            db.execute("DELETE FROM sessions WHERE path = ?", (path,))

    def last_errors(self, limit: int = 5) -> list[Record]:
        marks = ",".join("?" * len(ERROR_ACTIONS))
        with self._connect() as db:
            rows = db.execute(
                f"SELECT * FROM sessions WHERE action IN ({marks}) ORDER BY at DESC LIMIT ?",
                (*ERROR_ACTIONS, limit),
            ).fetchall()
        return [Record(**dict(zip(_COLUMNS, row, strict=True))) for row in rows]


_COLUMNS = ("path", "mtime_ns", "size", "sha256", "action", "reason", "tokens_before", "tokens_after", "at")

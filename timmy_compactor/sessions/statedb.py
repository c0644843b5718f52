"""Hermes' canonical store, `$HERMES_HOME/state.db`, read-only.

Hermes 0.19 keeps every message there (JSON snapshots are opt-in and freeze after a compression).
This reader opens the database with `mode=ro` and a busy timeout — it never writes and never
holds a lock that could stall Hermes — checks the schema version, and yields:

- the **live** context of a session (its `active = 1` rows), which is what the sidecar compacts;
- the **full** history (every generation, for the export): the archived `compacted = 1` rows and
  the active ones in insertion order, without the copies Hermes re-inserts at each compaction
  boundary (the head again, the re-kept tail), without Hermes' `[CONTEXT COMPACTION — REFERENCE
  ONLY]` summary and without our own compacted lines. Rewound rows (`active = 0, compacted = 0`:
  the user took them back) are left out.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from timmy_compactor.sessions import files
from timmy_compactor.sessions.dbhistory import deduplicate
from timmy_compactor.sessions.files import Session, SessionError, encode_json, parse_session, sha256_bytes
from timmy_compactor.sessions.names import id_problem, shown_id
from timmy_compactor.sessions.source import StateDBError, StateDBNotReadyError, UnusableSessionError

KNOWN_SCHEMA_VERSIONS = frozenset({22})
CONTENT_JSON_PREFIX = "\x00json:"
MAX_JSON_DEPTH = 100
"""JSON in a row (content, tool calls) nested deeper than this is not used: no chat message nests
that deep, and every later walk (ours, the stdlib codec's) stays far from the recursion limit."""
READ_COLUMNS = {
    "sessions": frozenset({"id", "model", "system_prompt", "started_at", "title"}),
    "messages": frozenset(
        {"id", "session_id", "role", "content", "tool_call_id", "tool_name", "finish_reason", "reasoning",
         "reasoning_content", "tool_calls", "timestamp", "active", "compacted"}
    ),
}  # fmt: skip
"""The columns the reader reads: a table without one of them is a schema this reader does not know,
whatever its version number says (a renamed `content`)."""


def schema_changed(path: Path, what: str) -> StateDBError:
    """The one line for a schema this reader does not know (the whole database, never a row)."""
    return StateDBError(
        f"{path}: unavailable: schema changed ({what}); its sessions' views are kept as they are and the JSON "
        "snapshots still served — upgrade timmy-compactor to a version that reads this schema",
        "schema",
    )


def _text_of(data: bytes) -> str:
    """A TEXT value as str; one that is not valid UTF-8 keeps its bytes as surrogates (`_undecodable`
    finds them) instead of failing the whole query, so that one damaged row costs its own session."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape")


def _undecodable(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


def _cause(path: Path, exc: sqlite3.Error) -> str:
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return "locked"
    if "not a database" in text or "malformed" in text or "disk image" in text:
        return "corrupt"
    if "no such table" in text or "no such column" in text:
        return "schema"
    if "unable to open" in text or "readonly" in text or "authoriz" in text:
        readable = os.access(path, os.R_OK) and os.access(path.parent, os.R_OK | os.X_OK)
        return "unreadable" if readable else "permission"
    return "unreadable"


@dataclass(frozen=True, kw_only=True)
class DbSession:
    session_id: str
    model: str | None
    system_prompt: str | None
    started_at: float | None
    title: str | None
    messages: list[dict[str, Any]]
    platform: str | None = None  # Hermes' `sessions.source`: cli, telegram, …; it decides the toolsets

    def document(self) -> dict[str, Any]:
        """The session as a Hermes snapshot document (what the snapshot reader yields)."""
        stamps = [m["timestamp"] for m in self.messages if isinstance(m.get("timestamp"), int | float)]
        return {
            "session_id": self.session_id,
            "model": self.model,
            "platform": "state.db",
            "session_start": _iso(self.started_at),
            "last_updated": _iso(max(stamps)) if stamps else _iso(self.started_at),
            "system_prompt": self.system_prompt,
            "tools": [],
            "message_count": len(self.messages),
            "messages": self.messages,
        }


class StateDB:
    def __init__(self, path: Path, timeout: float = 5.0) -> None:
        self.path = path
        self.timeout = timeout

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        if not self.path.is_file():
            raise StateDBError(f"{self.path}: no such database")
        try:
            db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=self.timeout)
        except sqlite3.Error as exc:
            cause = _cause(self.path, exc)
            raise StateDBError(f"{self.path}: cannot open read-only ({exc})", cause) from None
        db.row_factory = sqlite3.Row
        db.text_factory = _text_of
        try:
            db.execute("PRAGMA query_only = ON")
            db.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            yield db
        except sqlite3.Error as exc:  # every sqlite3 failure (OperationalError, DatabaseError...)
            cause = _cause(self.path, exc)
            if cause == "schema":
                raise schema_changed(self.path, str(exc)) from None
            raise StateDBError(f"{self.path}: {exc} ({cause}; retried at the next change or sweep)", cause) from None
        finally:
            db.close()

    def schema_version(self) -> int:
        """Hermes' schema version; 0 for a database Hermes has only just created (no version yet).
        A version that is not a whole number, or a table without a column the reader reads, is a
        schema changed (StateDBError, cause `schema`)."""
        with self.connect() as db:
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_version'").fetchone() is None:
                return 0
            found = [r[0] for r in db.execute("SELECT version FROM schema_version") if r[0] is not None]
            if any(type(v) is not int for v in found):
                raise schema_changed(self.path, "its schema_version is not a whole number")
            if not found:
                return 0
            for table, needed in READ_COLUMNS.items():
                have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
                if not have:
                    raise schema_changed(self.path, f"no table {table}")
                missing = needed - have
                if missing:
                    raise schema_changed(self.path, f"table {table} has no column {', '.join(sorted(missing))}")
        return int(max(found))

    def check_schema(self) -> None:
        version = self.schema_version()
        if version == 0:
            raise StateDBNotReadyError(
                f"{self.path}: Hermes has not written its schema yet (a new database)", "not_ready"
            )
        if version not in KNOWN_SCHEMA_VERSIONS:
            known = ", ".join(map(str, sorted(KNOWN_SCHEMA_VERSIONS)))
            raise StateDBError(
                f"{self.path}: unknown Hermes schema version {version} (known: {known}); "
                "its sessions' views are kept as they are — upgrade timmy-compactor",
                "schema",
            )

    def high_water_marks(self) -> dict[str, int]:
        """Per session, the newest message row id: it grows whenever Hermes writes to the session.
        Sessions whose id is not text (a damaged row) are left out: no file can be named after them."""
        with self.connect() as db:
            rows = db.execute("SELECT session_id, MAX(id) FROM messages GROUP BY session_id").fetchall()
        return {sid: int(mark) for sid, mark in rows if isinstance(sid, str) and isinstance(mark, int)}

    def high_water_mark(self, session_id: str) -> int | None:
        """The newest message row id of one session (None: it has no rows, or no row can hold this id)."""
        if _undecodable(session_id):
            return None
        with self.connect() as db:
            row = db.execute("SELECT MAX(id) FROM messages WHERE session_id = ?", (session_id,)).fetchone()
        return int(row[0]) if row and isinstance(row[0], int) else None

    def session_ids(self) -> list[str]:
        """The ids in the sessions table (one row per session: no scan of the messages). Ids that are
        not text (a damaged row) are left out."""
        with self.connect() as db:
            rows = db.execute("SELECT id FROM sessions").fetchall()
        return [r[0] for r in rows if isinstance(r[0], str)]

    def platforms(self) -> dict[str, str | None]:
        """Per session, the platform Hermes ran it on (`sessions.source`; None if not recorded)."""
        with self.connect() as db:
            columns = {r[1] for r in db.execute("PRAGMA table_info(sessions)")}
            if "source" not in columns:
                return {str(r[0]): None for r in db.execute("SELECT id FROM sessions")}
            rows = db.execute("SELECT id, source FROM sessions").fetchall()
            return {r[0]: r[1] if isinstance(r[1], str) else None for r in rows}

    def _session_row(self, db: sqlite3.Connection, session_id: str) -> sqlite3.Row:
        row = db.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise StateDBError(f"{self.path}: no session {shown_id(session_id)} (deleted?)")
        return row  # type: ignore[no-any-return]

    def live(self, session_id: str) -> DbSession:
        """The session's live context: its active rows. UnusableSessionError if a row cannot be used."""
        return self._read(session_id, "active = 1", dedup=False)

    def full_history(self, session_id: str) -> DbSession:
        """Every message the session ever had, once each, in order (see the module docstring)."""
        return self._read(session_id, "(active = 1 OR compacted = 1)", dedup=True)

    def _read(self, session_id: str, which: str, *, dedup: bool) -> DbSession:
        problem = id_problem(session_id)
        if problem is not None:  # an id no file name stands for (or no query can bind): nothing to read
            raise UnusableSessionError(session_id, problem)
        with self.connect() as db:
            row = self._session_row(db, session_id)
            rows = db.execute(
                f"SELECT * FROM messages WHERE session_id = ? AND {which} ORDER BY id", (session_id,)
            ).fetchall()
        try:
            messages = [_message(session_id, r) for r in rows]
            return _session(row, deduplicate(messages) if dedup else messages)
        except IndexError:  # sqlite3.Row: no such column (the schema changed since it was checked)
            raise schema_changed(self.path, "a column the reader reads is gone") from None


def _iso(stamp: float | None) -> str | None:
    return datetime.fromtimestamp(stamp).isoformat() if stamp else None


def _session(row: sqlite3.Row, messages: list[dict[str, Any]]) -> DbSession:
    session_id = row["id"]
    problem = id_problem(session_id)  # an id no file name can stand for: the session cannot be used
    if problem is not None:
        raise UnusableSessionError(session_id, problem)
    started = row["started_at"]
    return DbSession(
        session_id=session_id,
        model=_text(session_id, row, "model", "its sessions row"),
        system_prompt=_text(session_id, row, "system_prompt", "its sessions row"),
        started_at=started if isinstance(started, int | float) else None,
        title=_text(session_id, row, "title", "its sessions row"),
        platform=_text(session_id, row, "source", "its sessions row") if "source" in row.keys() else None,  # noqa: SIM118
        messages=messages,
    )


def _text(session_id: str, row: sqlite3.Row, column: str, where: str) -> str | None:
    """A text column, or None; binary data (a BLOB) or text that is not UTF-8 makes the session unusable."""
    value = row[column]
    if isinstance(value, str) and _undecodable(value):
        raise UnusableSessionError(session_id, f"{where}: {column} is not valid UTF-8")
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        raise UnusableSessionError(session_id, f"{where}: {column} holds binary data (a BLOB)")
    return str(value)  # a number where text belongs: its text


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_depth(text: str) -> int:
    """How deep the arrays and objects of a JSON text nest (brackets inside strings do not count);
    iterative, so any depth is measured without recursion."""
    depth = deepest = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


def _json(session_id: str, row: sqlite3.Row, column: str, text: str) -> Any:
    """A JSON text of a row, parsed; nested deeper than MAX_JSON_DEPTH makes the session unusable."""
    few = text.count("[") + text.count("{") <= MAX_JSON_DEPTH  # then it cannot nest deeper: no scan
    if not few and json_depth(text) > MAX_JSON_DEPTH:
        raise UnusableSessionError(
            session_id, f"message row {row['id']}: {column} is JSON nested over {MAX_JSON_DEPTH} levels deep"
        )
    return json.loads(text)


def _decode(session_id: str, row: sqlite3.Row) -> Any:
    content = _text(session_id, row, "content", f"message row {row['id']}")
    if isinstance(content, str) and content.startswith(CONTENT_JSON_PREFIX):
        try:
            return _json(session_id, row, "content", content[len(CONTENT_JSON_PREFIX) :])
        except ValueError:
            return content
    return content


def _message(session_id: str, row: sqlite3.Row) -> dict[str, Any]:
    """One message row as a chat message; UnusableSessionError (naming the row, never its content)
    if it cannot be one."""
    where = f"message row {row['id']}"
    role = _text(session_id, row, "role", where)
    if not role:
        raise UnusableSessionError(session_id, f"{where}: has no role")
    message: dict[str, Any] = {"role": role, "content": _decode(session_id, row)}
    for key in ("tool_call_id", "tool_name", "finish_reason", "reasoning", "reasoning_content"):
        value = _text(session_id, row, key, where)
        if value is not None and value != "":
            message[key] = value
    calls = _text(session_id, row, "tool_calls", where)
    if calls:
        try:
            message["tool_calls"] = _json(session_id, row, "tool_calls", calls)
        except ValueError:
            message["tool_calls"] = []
    stamp = row["timestamp"]
    if stamp and isinstance(stamp, int | float):
        message["timestamp"] = stamp
    return message


def db_session(db: StateDB, session_id: str, snapshot: Path) -> Session:
    """The live context of a session from state.db, as the snapshot reader would give it.

    `snapshot` is where its `session_<id>.json` is (or would be): tool schemas are not in the
    database, so they are taken from the snapshot when there is one.
    """
    live = db.live(session_id)
    document = live.document()
    try:
        tools = parse_session(snapshot, files.read_regular(snapshot)).tools  # never a FIFO's or a device's
    except (OSError, SessionError):
        tools = None
    if tools:
        document["tools"] = tools
    return Session(
        path=snapshot,
        shape="object",
        document=document,
        messages=live.messages,
        sha256=sha256_bytes(encode_json(document)),
        source="state.db",
        platform=live.platform,
    )

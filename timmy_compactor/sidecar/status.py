"""`status`: how each session stands — its usage, and whether its view is fresh, stale or missing."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from timmy_compactor.compactor import Usage, measure, view_is_current
from timmy_compactor.compare.promises import orphans
from timmy_compactor.config import Config
from timmy_compactor.sessions.files import Session, SessionError, parse_session, read_provenance
from timmy_compactor.sessions.names import UnsafeIdError, shown_id, view_path_for
from timmy_compactor.sessions.statedb import StateDB, StateDBError, db_session, snapshot_path
from timmy_compactor.sidecar.work import db_view_path


@dataclass(frozen=True, kw_only=True)
class SessionStatus:
    path: Path
    tokens: int | None
    usage: float | None
    above_threshold: bool
    view: str  # fresh | stale | missing | none (below threshold) | unreadable
    error: str | None = None
    orphans: int = 0  # orphan tool calls/results in the view (a call still awaiting its result at the end is none)


def view_orphans(view: Path) -> int:
    try:
        document, _ = read_provenance(view)
    except (SessionError, OSError, ValueError):
        return 0
    messages = document.get("messages") if isinstance(document, dict) else document
    return orphans([m for m in messages if isinstance(m, dict)]) if isinstance(messages, list) else 0


def _status(session: Session, view: Path, config: Config) -> SessionStatus:
    usage: Usage = measure(session, config)
    found = 0
    error = None
    try:
        if view.exists():
            state = "fresh" if view_is_current(view, session, config) else "stale"
            found = view_orphans(view)
        else:
            state = "missing" if usage.above_threshold else "none"
    except OSError as exc:  # its folder cannot be read: said once by `status`, the view counted unreadable
        state, error = "unreadable", f"{view.name}: {exc.strerror or type(exc).__name__}"
    return SessionStatus(
        path=session.path,
        tokens=usage.tokens,
        usage=usage.usage,
        above_threshold=usage.above_threshold,
        view=state,
        error=error,
        orphans=found,
    )


def session_status(path: Path, config: Config) -> SessionStatus:
    try:
        session = parse_session(path, path.read_bytes())
    except (SessionError, OSError) as exc:
        return SessionStatus(
            path=path, tokens=None, usage=None, above_threshold=False, view="unreadable", error=str(exc)
        )
    return _status(session, view_path_for(path), config)


def db_session_status(db: StateDB, session_id: str, config: Config) -> tuple[SessionStatus, str]:
    """The view state of a state.db session, and its snapshot's: current, frozen or absent. A session
    that cannot be read (an unusable row, an id no file can be named after, the database locked
    meanwhile) is `unreadable`, with the reason (never the content)."""
    try:
        session = db_session(db, session_id, snapshot_path(config.sessions_dir, session_id))
    except (StateDBError, UnsafeIdError) as exc:
        where = config.sessions_dir / f"session_{shown_id(session_id)}.json"
        unreadable = SessionStatus(
            path=where, tokens=None, usage=None, above_threshold=False, view="unreadable", error=str(exc)
        )
        return unreadable, "absent"
    status = _status(session, db_view_path(config, session_id), config)
    try:
        snapshot = parse_session(session.path, session.path.read_bytes())
        snap = "current" if same_conversation(snapshot.messages, session.messages) else "frozen"
    except (OSError, SessionError, RecursionError):  # nested too deep to compare: no usable snapshot
        snap = "absent"
    return status, snap


def _essence(message: dict[str, Any]) -> tuple[Any, ...]:
    """What a message says, without the bookkeeping either store adds (a snapshot's `_db_persisted`
    and `name`, a row's `timestamp`, a call's `call_id`/`response_item_id`)."""
    calls = [
        (c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
        for c in message.get("tool_calls") or []
        if isinstance(c, dict)
    ]
    content = json.dumps(message.get("content"), sort_keys=True, ensure_ascii=False)
    return message.get("role"), content, calls, message.get("tool_call_id")


def same_conversation(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    """The snapshot and the database rows hold the same messages (role, content, tool calls, call id)."""
    return len(a) == len(b) and all(_essence(x) == _essence(y) for x, y in zip(a, b, strict=True))


def snapshots_enabled(config: Config) -> bool | None:
    """Hermes' `sessions.write_json_snapshots` (None when its config cannot be read)."""
    import yaml

    try:
        data = yaml.safe_load((config.hermes_home / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    sessions = data.get("sessions") if isinstance(data, dict) else None
    return bool(sessions.get("write_json_snapshots")) if isinstance(sessions, dict) else False

"""`status`: how each session stands — its usage, and whether its view is fresh, stale or missing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from timmy_compactor.compactor import Usage, measure, view_is_current
from timmy_compactor.config import Config
from timmy_compactor.sessions.files import Session, SessionError, parse_session
from timmy_compactor.sessions.names import view_path_for
from timmy_compactor.sessions.statedb import StateDB, db_session, snapshot_path
from timmy_compactor.sidecar.work import db_view_path


@dataclass(frozen=True, kw_only=True)
class SessionStatus:
    path: Path
    tokens: int | None
    usage: float | None
    above_threshold: bool
    view: str  # fresh | stale | missing | none (below threshold) | unreadable
    error: str | None = None


def _status(session: Session, view: Path, config: Config) -> SessionStatus:
    usage: Usage = measure(session, config)
    if view.exists():
        state = "fresh" if view_is_current(view, session, config) else "stale"
    else:
        state = "missing" if usage.above_threshold else "none"
    return SessionStatus(
        path=session.path, tokens=usage.tokens, usage=usage.usage, above_threshold=usage.above_threshold, view=state
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
    """The view state of a state.db session, and its snapshot's: current, frozen or absent."""
    session = db_session(db, session_id, snapshot_path(config.sessions_dir, session_id))
    status = _status(session, db_view_path(config, session_id), config)
    try:
        snapshot = parse_session(session.path, session.path.read_bytes())
        snap = "current" if snapshot.messages == session.messages else "frozen"
    except (OSError, SessionError):
        snap = "absent"
    return status, snap


def snapshots_enabled(config: Config) -> bool | None:
    """Hermes' `sessions.write_json_snapshots` (None when its config cannot be read)."""
    import yaml

    try:
        data = yaml.safe_load((config.hermes_home / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    sessions = data.get("sessions") if isinstance(data, dict) else None
    return bool(sessions.get("write_json_snapshots")) if isinstance(sessions, dict) else False

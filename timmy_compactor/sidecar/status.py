"""`status`: what it says, gathered here (the CLI prints it): how each session stands (its usage, and
whether its view is fresh, stale or missing), the sidecar, its queue and sources; and `status --check`."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from timmy_compactor.compactor import Usage, measure, view_is_current
from timmy_compactor.config import Config, engine_trigger, resolve_context_window
from timmy_compactor.core.pairs import orphans
from timmy_compactor.host import home as host_home
from timmy_compactor.logs import progress
from timmy_compactor.sessions.files import Session, SessionError, parse_session, read_provenance
from timmy_compactor.sessions.names import UnsafeIdError, session_id_of, shown_id, view_path_for
from timmy_compactor.sessions.rawstore import KEEP_DAYS, RawStore
from timmy_compactor.sessions.source import StateDBError
from timmy_compactor.sessions.sources import Picker, SessionRef, SourceUnavailableError
from timmy_compactor.sidecar import dblook, folder
from timmy_compactor.sidecar.records import Records, StateNotWritableError
from timmy_compactor.sidecar.running import running


@dataclass(frozen=True, kw_only=True)
class SessionStatus:
    path: Path
    tokens: int | None
    usage: float | None
    above_threshold: bool
    view: str  # fresh | stale | missing | none (below threshold) | unreadable
    error: str | None = None
    orphans: int = 0  # orphan tool calls/results in the view (a call still awaiting its result at the end is none)
    above_budget: bool = False  # the view is larger than target_after allows (its report's note says why)


def view_orphans(view: Path) -> int:
    return _view_facts(view)[0]


def _view_facts(view: Path) -> tuple[int, bool]:
    """The view's orphan tool calls/results, and whether its own report says it is above the budget."""
    try:
        document, _ = read_provenance(view)
    except (SessionError, OSError, ValueError):
        return 0, False
    messages = document.get("messages") if isinstance(document, dict) else document
    found = orphans([m for m in messages if isinstance(m, dict)]) if isinstance(messages, list) else 0
    meta = document.get("timmy_compaction") if isinstance(document, dict) else None
    report = meta.get("report") if isinstance(meta, dict) else None
    after, budget = (report.get("tokens_after"), report.get("budget_tokens")) if isinstance(report, dict) else (0, 0)
    over = isinstance(after, int) and isinstance(budget, int) and budget > 0 and after > budget
    return found, over


def _status(session: Session, view: Path, config: Config) -> SessionStatus:
    usage: Usage = measure(session, config)
    found, over = 0, False
    error = None
    try:
        if view.exists():
            state = "fresh" if view_is_current(view, session, config) else "stale"
            found, over = _view_facts(view)
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
        above_budget=over,
    )


def session_status(path: Path, config: Config) -> SessionStatus:
    try:
        session = parse_session(path, path.read_bytes())
    except (SessionError, OSError) as exc:
        return SessionStatus(
            path=path, tokens=None, usage=None, above_threshold=False, view="unreadable", error=str(exc)
        )
    return _status(session, view_path_for(path), config)


def db_session_status(picker: Picker, ref: SessionRef, config: Config) -> tuple[SessionStatus, str]:
    """The view state of a state.db session (read through its source), and its snapshot's: current,
    frozen or absent. A session that cannot be read (an unusable row, an id no file can be named
    after, the database locked meanwhile) is `unreadable`, with the reason (never the content)."""
    session_id = ref.session_id
    try:
        session = picker.read(ref)
    except (StateDBError, UnsafeIdError, SourceUnavailableError) as exc:
        where = config.sessions_dir / f"session_{shown_id(session_id)}.json"
        unreadable = SessionStatus(
            path=where, tokens=None, usage=None, above_threshold=False, view="unreadable", error=str(exc)
        )
        return unreadable, "absent"
    status = _status(session, view_path_for(session.path), config)  # named after its snapshot, as every view
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
    return host_home.snapshots_enabled(config.hermes_home)


STATUS_HEALTHY, STATUS_NOT_RUNNING, STATUS_QUEUE_UNREACHABLE, STATUS_SESSIONS_FAILING = 0, 3, 4, 5
"""`status --check` exit codes: healthy; no sidecar runs on this home; the queue does not answer;
sessions fail (recorded errors, the sessions folder or state.db unreadable, the sidecar's state unreadable).
With several problems, the first of these."""


def check(config: Config) -> tuple[int, list[str]]:
    """`status --check`, for a health check: the exit code of the first problem and one line per
    problem (or the one healthy line); cheap (the sidecar's lock, the queue, its records, a listing of
    the folder; no session is read)."""
    problems: list[tuple[int, str]] = []
    state_error: str | None = None
    failing = 0
    try:
        records = Records(config.state_dir) if config.state_dir.exists() else None
        failing = records.failing() if records else 0
        last_sweep = records.noted("last_sweep") if records else None
    except StateNotWritableError as exc:
        last_sweep, state_error = None, str(exc)
    car = sidecar_state(config, last_sweep)
    if not car["running"]:
        problems.append((STATUS_NOT_RUNNING, "no sidecar runs on this home (start ./huey_consumer.sh)"))
    if car["queue_error"] is not None:
        problems.append((STATUS_QUEUE_UNREACHABLE, f"queue ({config.huey.backend}) unreachable: {car['queue_error']}"))
    if failing:
        problems.append((STATUS_SESSIONS_FAILING, f"{failing} session(s) failed (see `timmy-compactor status`)"))
    if state_error:
        problems.append((STATUS_SESSIONS_FAILING, f"sidecar state unreadable: {state_error}"))
    look = dblook.look_at_state_db(config, quiet=True, marks=False)
    if look.unavailable is not None and look.unavailable.cause != "not_ready":
        problems.append((STATUS_SESSIONS_FAILING, f"state.db unavailable ({look.unavailable.cause})"))
    unreadable = sessions_dir_error(config)
    if unreadable is not None:
        problems.append((STATUS_SESSIONS_FAILING, str(unreadable)))
    if not problems:
        return STATUS_HEALTHY, [f"healthy: sidecar running, queue depth {car['queue_depth']}, no failing session"]
    return min(code for code, _ in problems), [f"unhealthy: {line}" for _, line in problems]


def gather(config: Config) -> tuple[dict[str, Any], list[SessionStatus]]:
    """Everything `status` says, as its JSON object, and each session's state."""
    look = dblook.look_at_state_db(config, quiet=True)  # said below, not logged
    db = look.db
    picker = dblook.picker(config, look)
    db_refs, paths, unreadable = dblook.every_session(config, look, picker)  # each session once: state.db wins
    states = [session_status(p, config) for p in progress(paths, "status")]
    snapshot_states: Counter[str] = Counter()
    unusable = 0
    if db is not None:
        for ref in progress(db_refs, "status (state.db)"):
            state, snapshot = db_session_status(picker, ref, config)
            states.append(state)
            snapshot_states[snapshot] += 1
            unusable += state.error is not None
    views = Counter(s.view for s in states)
    state_error: str | None = None
    try:  # a damaged or unreadable sidecar.db is one line of the status, not the end of it
        records = Records(config.state_dir) if config.state_dir.exists() else None
        errors = records.last_errors() if records else []
        last_sweep = records.noted("last_sweep") if records else None
    except StateNotWritableError as exc:
        errors, last_sweep, state_error = [], None, str(exc)
    data: dict[str, Any] = {
        "sidecar": sidecar_state(config, last_sweep),
        "state_error": state_error,
        "sessions_dir": str(config.sessions_dir),
        "sessions_dir_error": None if unreadable is None else str(unreadable),
        "sessions": len(states),
        "above_threshold": sum(1 for s in states if s.above_threshold),
        "views": {k: views.get(k, 0) for k in ("fresh", "stale", "missing", "none", "unreadable")},
        "views_with_orphans": sum(1 for s in states if s.orphans),
        "views_above_budget": sum(1 for s in states if s.above_budget),
        "backend": config.huey.backend,
        "triggers": _triggers(config),
        "hermes_engine_raw_logs": _engine_raw_logs(config),
        "sources": {
            "state_db": {
                "path": str(config.hermes_home / "state.db"),
                "usable": db is not None,
                "unavailable": None
                if look.unavailable is None
                else {"cause": look.unavailable.cause, "error": str(look.unavailable), "hint": look.unavailable.hint},
                "sessions": len(db_refs),
                "unusable_sessions": unusable,
                "snapshots_of_these": {k: snapshot_states.get(k, 0) for k in ("current", "frozen", "absent")},
            },
            "snapshots": {"enabled_in_hermes": snapshots_enabled(config), "files_without_db_rows": len(paths)},
        },
        "per_session": [_session_entry(s) for s in states],
        "last_errors": [_error_entry(e) for e in errors],
    }
    return data, states


def _triggers(config: Config) -> dict[str, dict[str, Any]]:
    """Which trigger applies and why: to the sidecar's views, and to the engine inside Hermes (for the
    window of Hermes' configured model)."""
    ratio = config.compaction.trigger_threshold
    views = {"ratio": ratio, "reason": f"compaction.trigger_threshold {ratio:g} ({config.source})"}
    engine = engine_trigger(config, resolve_context_window(config, None))
    return {"views": views, "inside_hermes": dataclasses.asdict(engine)}


def _session_entry(s: SessionStatus) -> dict[str, Any]:
    return {
        "session": session_id_of(s.path),
        "path": str(s.path),
        "tokens": s.tokens,
        "usage": None if s.usage is None else round(s.usage, 4),
        "above_threshold": s.above_threshold,
        "view": s.view,
        "orphans": s.orphans,
        "above_budget": s.above_budget,
    }


def _error_entry(e: Any) -> dict[str, Any]:
    return {"path": e.name, "session": Path(e.name).name, "action": e.action, "reason": one_line(e.reason), "at": e.at}


def sessions_dir_error(config: Config) -> folder.SessionsDirUnreadableError | None:
    """Why the sessions folder cannot be listed, if it cannot (`status --check`: no file is read)."""
    try:
        folder.list_sessions_dir(config.sessions_dir)
    except folder.SessionsDirUnreadableError as exc:
        return exc
    return None


def one_line(reason: str | None, limit: int = 200) -> str | None:
    """An error reason as one short line: the reason, never the session's content."""
    if reason is None:
        return None
    line = reason.strip().splitlines()[0] if reason.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _engine_raw_logs(config: Config) -> dict[str, Any]:
    """The raw logs the `timmy` engine keeps inside Hermes (sessions/rawstore.py): how many, how big."""
    sessions, size = RawStore(config.engine_raw_dir).usage()
    return {"dir": str(config.engine_raw_dir), "sessions": sessions, "bytes": size, "keep_days": KEEP_DAYS}


def sidecar_state(config: Config, last_sweep: dict[str, object] | None) -> dict[str, Any]:
    """Is a sidecar running on this home (its PID), how deep is the queue, when was the last sweep."""
    from timmy_compactor.sidecar.queue import make_huey  # (huey and redis: only when asked)

    depth: int | None = None
    error: str | None = None
    try:
        no_queue_yet = config.huey.backend == "sqlite" and not config.huey_sqlite_path.exists()
        depth = 0 if no_queue_yet else int(make_huey(config).pending_count())  # checking creates nothing
    except Exception as exc:  # noqa: BLE001 -- a backend that is down is a status, not a crash
        error = f"{config.huey.redis_url_shown if config.huey.backend == 'redis' else config.huey_sqlite_path}: {exc}"
    return {
        "running": running(config.state_dir),
        "queue_depth": depth,
        "queue_error": one_line(error),
        "last_sweep": last_sweep,
    }

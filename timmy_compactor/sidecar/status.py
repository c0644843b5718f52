"""`status`: what it says, gathered here (the CLI prints it): how each session stands (its usage, and
whether its view is fresh, stale or missing), the sidecar, its queue and sources; and `status --check`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from timmy_compactor.compactor import Usage, measure, view_is_current
from timmy_compactor.config import Config, engine_trigger, resolve_context_window
from timmy_compactor.core.pairs import orphans
from timmy_compactor.errors import TimmyError
from timmy_compactor.host import home as host_home
from timmy_compactor.host.trigger import Trigger
from timmy_compactor.logs import progress
from timmy_compactor.sessions.files import Session, SessionError, read_provenance
from timmy_compactor.sessions.names import UnsafeIdError, file_id, shown_id, view_path
from timmy_compactor.sessions.rawstore import KEEP_DAYS, RawStore
from timmy_compactor.sessions.source import StateDBError
from timmy_compactor.sessions.sources import Picker, SessionRef, SessionsDirUnreadableError, SourceUnavailableError
from timmy_compactor.sidecar import dblook, folder
from timmy_compactor.sidecar.records import Records, StateNotWritableError
from timmy_compactor.sidecar.report import (
    ErrorEntry,
    RawLogs,
    SessionStatus,
    SidecarState,
    SourceReport,
    StatusReport,
    Unavailable,
)
from timmy_compactor.sidecar.running import running


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


def _status(session: Session, ref: SessionRef, view: Path, config: Config) -> SessionStatus:
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
        **_named(ref),
        tokens=usage.tokens,
        usage=usage.usage,
        above_threshold=usage.above_threshold,
        view=state,
        error=error,
        orphans=found,
        above_budget=over,
    )


def _named(ref: SessionRef) -> dict[str, Any]:
    return {"source": ref.source, "key": ref.key or shown_id(ref.session_id), "name": ref.name, "path": ref.path}


def session_status(picker: Picker, ref: SessionRef, config: Config) -> tuple[SessionStatus, str]:
    """How a session stands (read through its source), and the copy a source below it holds: current,
    frozen or absent. A session that cannot be read (an unusable row, an id no file can be named after,
    a source locked meanwhile) is `unreadable`, with the reason (never the content)."""
    try:
        if ref.key is None:
            file_id(ref.session_id)  # raises: why no file can be named after it
        session = picker.read(ref)
        view = view_path(config.sessions_dir, ref.key or "")
    except (SessionError, StateDBError, UnsafeIdError, SourceUnavailableError, OSError) as exc:
        unreadable = SessionStatus(
            **_named(ref), tokens=None, usage=None, above_threshold=False, view="unreadable", error=str(exc)
        )
        return unreadable, "absent"
    return _status(session, ref, view, config), _copy_below(picker, ref, session)


def _copy_below(picker: Picker, ref: SessionRef, session: Session) -> str:
    """How the first source below the winner that holds this key holds it: `current` (the same
    conversation), `frozen` (an older one: a snapshot after a compression), or `absent`."""
    below = picker.sources[[s.name for s in picker.sources].index(ref.source) + 1 :]
    for source in below:
        try:
            copy = source.find(ref.key) if ref.key is not None else None
            if copy is not None:
                messages = source.read(copy).messages
                return "current" if same_conversation(messages, session.messages) else "frozen"
        except (TimmyError, OSError, RecursionError):  # nested too deep to compare: no usable copy
            return "absent"
    return "absent"


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
    if not car.running:
        problems.append((STATUS_NOT_RUNNING, "no sidecar runs on this home (start ./huey_consumer.sh)"))
    if car.queue_error is not None:
        problems.append((STATUS_QUEUE_UNREACHABLE, f"queue ({config.huey.backend}) {queue_problem(car.queue_error)}"))
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
        return STATUS_HEALTHY, [f"healthy: sidecar running, queue depth {car.queue_depth}, no failing session"]
    return min(code for code, _ in problems), [f"unhealthy: {line}" for _, line in problems]


def gather(config: Config) -> StatusReport:
    """Everything `status` says, from the sources (each session once, from the source that wins it)."""
    look = dblook.look_at_state_db(config, quiet=True)  # said below, not logged
    picker = dblook.picker(config, look)
    picked = picker.pick()
    states: list[SessionStatus] = []
    copies: dict[str, Counter[str]] = {source.name: Counter() for source in picker.sources}
    for ref in progress(list(picked.sessions), "status"):
        state, copy = session_status(picker, ref, config)
        states.append(state)
        copies.setdefault(ref.source, Counter())[copy] += 1
    state_error: str | None = None
    try:  # a damaged or unreadable sidecar.db is one line of the status, not the end of it
        records = Records(config.state_dir) if config.state_dir.exists() else None
        errors = records.last_errors() if records else []
        last_sweep = records.noted("last_sweep") if records else None
    except StateNotWritableError as exc:
        errors, last_sweep, state_error = [], None, str(exc)
    folder_error = next((e for e in picked.unavailable.values() if isinstance(e, SessionsDirUnreadableError)), None)
    ratio = config.compaction.trigger_threshold
    return StatusReport(
        sidecar=sidecar_state(config, last_sweep),
        state_error=state_error,
        sessions_dir=config.sessions_dir,
        sessions_dir_error=None if folder_error is None else str(folder_error),
        sessions_dir_exists=config.sessions_dir.is_dir(),
        sessions=tuple(states),
        sources=tuple(_source_report(name, states, copies[name], picked.unavailable.get(name)) for name in copies),
        backend=config.huey.backend,
        views_trigger=Trigger(ratio, f"compaction.trigger_threshold {ratio:g} ({config.source})"),
        hermes_trigger=engine_trigger(config, resolve_context_window(config, None)),
        engine_raw_logs=_engine_raw_logs(config),
        last_errors=tuple(ErrorEntry(name=e.name, action=e.action, reason=one_line(e.reason), at=e.at) for e in errors),
        state_db_path=config.hermes_home / "state.db",
        state_db_usable=look.db is not None,
        snapshots_enabled=snapshots_enabled(config),
    )


def _source_report(
    name: str, states: list[SessionStatus], copies: Counter[str], error: TimmyError | None
) -> SourceReport:
    mine = [s for s in states if s.source == name]
    unavailable = None
    if error is not None:
        cause, hint = getattr(error, "cause", None), getattr(error, "hint", None)
        unavailable = Unavailable(cause=cause, error=str(error), hint=hint)
    return SourceReport(
        name=name,
        sessions=len(mine),
        unusable=sum(s.error is not None for s in mine),
        unavailable=unavailable,
        copies=dict(copies),
    )


def queue_problem(error: str) -> str:
    """How `status` says the queue's error: `unreachable: …`, or a refused password as it is."""
    from timmy_compactor.sidecar.queue import AUTH_FAILED

    return error if error.startswith(AUTH_FAILED) else f"unreachable: {error}"


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


def _engine_raw_logs(config: Config) -> RawLogs:
    """The raw logs the `timmy` engine keeps inside Hermes (sessions/rawstore.py): how many, how big."""
    store = RawStore(config.engine_raw_dir)
    sessions, size = store.usage()
    totals = store.usage_totals()
    prompt = totals["prompt_tokens"]
    share = round(totals["cache_read_tokens"] / prompt, 4) if prompt else None
    return RawLogs(
        dir=config.engine_raw_dir,
        sessions=sessions,
        bytes=size,
        keep_days=KEEP_DAYS,
        prompt_tokens=prompt,
        cache_read_share=share,
    )


def sidecar_state(config: Config, last_sweep: dict[str, object] | None) -> SidecarState:
    """Is a sidecar running on this home (its PID), how deep is the queue, when was the last sweep."""
    from timmy_compactor.sidecar.queue import auth_failure, make_huey  # (huey and redis: only when asked)

    depth: int | None = None
    error: str | None = None
    try:
        no_queue_yet = config.huey.backend == "sqlite" and not config.huey_sqlite_path.exists()
        depth = 0 if no_queue_yet else int(make_huey(config).pending_count())  # checking creates nothing
    except Exception as exc:  # noqa: BLE001 -- a backend that is down is a status, not a crash
        where = config.huey.redis_url_shown if config.huey.backend == "redis" else config.huey_sqlite_path
        refused = auth_failure(exc, config)
        error = f"{where}: {exc}" if refused is None else refused
    return SidecarState(
        running=running(config.state_dir), queue_depth=depth, queue_error=one_line(error), last_sweep=last_sweep
    )

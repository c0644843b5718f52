"""What the sidecar's tasks do, independent of Huey: check a path, compact under a lock, sweep.

`sidecar.app` wires these to Huey; the watcher and the CLI enqueue through it. Everything here logs
through structlog and records its outcome in `Records` (the sidecar's own database).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from timmy_compactor.atomic import file_lock, private_dir
from timmy_compactor.compactor import Outcome, compact_to_view, tool_schema_tokens
from timmy_compactor.config import Config
from timmy_compactor.errors import TimmyError
from timmy_compactor.logs import get_logger
from timmy_compactor.sessions.files import (
    SessionError,
    parse_session,
    remove_leftover_temp_files,
    remove_view,
    sha256_bytes,
)
from timmy_compactor.sessions.names import (
    VIEW_PREFIX,
    is_session_name,
    is_view_name,
    session_id_of,
    view_path_for,
)
from timmy_compactor.sessions.statedb import StateDB, StateDBError, StateDBNotReadyError, db_session, snapshot_path
from timmy_compactor.sidecar.records import SKIPPED_UNTIL_CHANGED, WRITE_FAILED, Record, Records, recording

log = get_logger(__name__)

RECENT_WRITE_SECONDS = 5.0
"""A file changed this recently may still be being written: bad JSON is retried, not reported."""


class RefusedPathError(TimmyError, ValueError):
    """A path the sidecar will not touch (outside the sessions dir, not a session file...)."""


class StillWritingError(TimmyError, RuntimeError):
    """The session file looks half-written; the task is retried with backoff."""


def resolve_session_path(path: str | Path, sessions_dir: Path) -> Path:
    """The real path of a raw session inside `sessions_dir`, or RefusedPathError with the reason."""
    candidate = Path(path).expanduser()
    if not candidate.is_absolute():
        candidate = sessions_dir / candidate
    if not is_session_name(candidate.name):
        raise RefusedPathError(f"{candidate}: not a session file (expected session_<id>.json)")
    base = sessions_dir.expanduser().resolve()
    real = candidate.resolve()
    if real.parent != base:
        raise RefusedPathError(f"{candidate}: resolves to {real}, outside the sessions directory {base}")
    if not is_session_name(real.name):
        raise RefusedPathError(f"{candidate}: points at {real.name}, which is not a session file")
    return real


@contextlib.contextmanager
def session_lock(state_dir: Path, key: str, timeout: float = 30.0) -> Iterator[None]:
    """An exclusive per-session lock (flock: released by the kernel if a worker dies)."""
    locks = state_dir / "locks"
    path = locks / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.lock"
    with contextlib.ExitStack() as stack:
        with recording(path):  # an unwritable state dir: one error naming the file, not a traceback
            private_dir(locks)
            held = stack.enter_context(file_lock(path, wait=timeout))
        if not held:
            raise TimeoutError(f"session lock for {key} held for over {timeout:.0f}s")
        yield


@contextlib.contextmanager
def view_lock(config: Config, view: Path) -> Iterator[None]:
    """The lock of the session whose view this is. Holding it, no other sidecar worker writes the
    view, so a temp file of it left behind is a killed worker's: it is removed."""
    with session_lock(config.state_dir, str(view)):
        if remove_leftover_temp_files(view):
            log.info("leftover_temp_files_removed", view=str(view))
        yield


@dataclass(frozen=True, kw_only=True)
class TaskResult:
    path: str
    action: str
    reason: str | None = None
    report: dict[str, Any] | None = None


def process_session(path: str | Path, config: Config, records: Records, *, final_attempt: bool = True) -> TaskResult:
    """The body of the `compact_session` task."""
    try:
        raw = resolve_session_path(path, config.sessions_dir)
    except RefusedPathError as exc:
        log.warning("session_refused", path=str(path), reason=str(exc))
        return TaskResult(path=str(path), action="refused", reason=str(exc))
    session_id = session_id_of(raw)
    db = state_db(config)
    if db is not None and session_id in db.high_water_marks():
        return process_db_session(session_id, config, records, db=db)  # the database wins
    with view_lock(config, view_path_for(raw)):
        return _process_locked(raw, config, records, final_attempt=final_attempt)


def _process_locked(raw: Path, config: Config, records: Records, *, final_attempt: bool) -> TaskResult:
    key = str(raw)
    try:
        stat = raw.stat()
        data = raw.read_bytes()
    except FileNotFoundError:
        if remove_view(view_path_for(raw)):
            log.info("view_removed", path=key, reason="raw session was deleted")
        records.forget(key)
        return TaskResult(path=key, action="gone")
    except OSError as exc:  # a directory named session_x.json, no permission: one line, not a traceback
        reason = _one_line(exc)
        log.error("session_unreadable", path=key, error=reason)
        return TaskResult(path=key, action="refused", reason=reason)
    sha = sha256_bytes(data)
    previous = records.get(key)
    if previous and previous.sha256 == sha and previous.action in SKIPPED_UNTIL_CHANGED:
        return TaskResult(path=key, action="known_bad", reason=previous.reason)
    try:
        session = parse_session(raw, data)
    except SessionError as exc:
        if not final_attempt and time.time() - stat.st_mtime < RECENT_WRITE_SECONDS:
            raise StillWritingError(str(exc)) from None
        records.put(key, mtime_ns=stat.st_mtime_ns, size=stat.st_size, sha256=sha, action="bad_input", reason=str(exc))
        log.error(
            "session_unreadable",
            path=key,
            error=str(exc),
            hint="fix or remove the file; it is skipped until it changes",
        )
        return TaskResult(path=key, action="bad_input", reason=str(exc))
    try:
        outcome = compact_to_view(session, config, skip_if_current=True)
    except SessionError as exc:  # a view that cannot be written for this session (nested too deep to encode)
        reason = _one_line(exc)
        records.put(key, mtime_ns=stat.st_mtime_ns, size=stat.st_size, sha256=sha, action="failed", reason=reason)
        log.error("view_not_written", path=key, error=reason, hint="retried when the session changes")
        return TaskResult(path=key, action="failed", reason=reason)
    except OSError as exc:  # a full or read-only disk: not the session's fault
        reason = _one_line(exc)
        _log_write_failed(key, reason, previous)
        records.put(key, mtime_ns=stat.st_mtime_ns, size=stat.st_size, sha256=sha, action=WRITE_FAILED, reason=reason)
        return TaskResult(path=key, action=WRITE_FAILED, reason=reason)
    _log_outcome(session.session_id, outcome)
    report = outcome.report
    records.put(
        key,
        mtime_ns=stat.st_mtime_ns,
        size=stat.st_size,
        sha256=sha,
        action=outcome.action,
        reason=outcome.reason,
        tokens_before=report.tokens_before if report else None,
        tokens_after=report.tokens_after if report else None,
    )
    return TaskResult(path=key, action=outcome.action, reason=outcome.reason, report=outcome.as_dict())


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        target = exc.filename2 or exc.filename  # a rename: the file it was for, not the temp file
        where = f"{target}: " if target else ""
        return f"{where}{exc.strerror}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _log_outcome(session_id: str, outcome: Outcome) -> None:
    report = outcome.report
    if report is None:
        log.debug("view_current", session_id=session_id, path=str(outcome.path))
        return
    fields = {
        "session_id": session_id,
        "action": outcome.action,
        "tokens_before": report.tokens_before,
        "tokens_after": report.tokens_after,
        "ratio": round(report.ratio, 4),
        "usage": round(report.usage_before, 4),
        "pressure_level": report.pressure_level,
        "rules": dict(report.rules),
        "verified": report.verified,
        "elapsed_ms": round(outcome.elapsed_ms, 2),
    }
    if outcome.action == "failed":
        log.error("compaction_failed_closed", reason=outcome.reason, **fields)
    elif outcome.action == "written":
        log.info("view_written", view=str(outcome.view_path), **fields)
    else:
        log.info("below_threshold", **fields)


STARTUP_SWEEP_SECONDS = 30.0
"""Startup sweeps this close together (each consumer worker's, the watcher's) are one sweep."""


def startup_sweep_due(config: Config) -> bool:
    """True for the first startup sweep of a start; the others within STARTUP_SWEEP_SECONDS skip."""
    marker = config.state_dir / "startup_sweep"
    with recording(marker), file_lock(private_dir(config.state_dir) / "startup_sweep.lock", wait=10.0):
        with contextlib.suppress(FileNotFoundError):
            if time.time() - marker.stat().st_mtime < STARTUP_SWEEP_SECONDS:
                return False
        marker.touch(mode=0o600)
        os.utime(marker)
    remove_stale_temp_files(config)
    return True


def startup_sweep_not_done(config: Config) -> None:
    """Give a start's sweep back (its enqueue failed): the next starter within the window sweeps."""
    with contextlib.suppress(FileNotFoundError):
        (config.state_dir / "startup_sweep").unlink()


def remove_stale_temp_files(config: Config) -> int:
    """Temp files of views whose writer was killed mid-write (each removed under its view's lock)."""
    removed = 0
    if not config.sessions_dir.is_dir():
        return 0
    views = set()
    for tmp in config.sessions_dir.glob(f".{VIEW_PREFIX}*.tmp"):
        target = tmp.name[1:].rsplit(".", 2)[0]  # .<target>.<random>.tmp
        if target.endswith(".meta.json"):
            target = target.removesuffix(".meta.json") + ".json"
        views.add(config.sessions_dir / target)
    for view in sorted(views):
        with view_lock(config, view):  # the lock's holder removes what a dead writer left
            removed += 1
    return removed


def remove_orphan_views(config: Config, records: Records) -> int:
    """Remove the views whose raw session is gone (deleted while nothing watched, or while the
    sidecar ran): a view keeps what the session said, and must not outlive it."""
    sessions_dir = config.sessions_dir
    if not sessions_dir.is_dir():
        return 0
    db = state_db(config)
    try:
        in_db = set(db.high_water_marks()) if db is not None else set()
    except StateDBError:
        return 0  # cannot tell which views state.db stands behind: remove nothing
    removed = 0
    for view in sorted(sessions_dir.glob(f"{VIEW_PREFIX}*.json")):
        raw = view.with_name(view.name[len(VIEW_PREFIX) :])
        if not is_view_name(view.name) or not is_session_name(raw.name) or raw.name.endswith(".meta.json"):
            continue  # a bare-array view's .meta.json goes with its view
        if raw.exists() or session_id_of(raw) in in_db:
            continue
        with view_lock(config, view):
            if not raw.exists() and remove_view(view):
                removed += 1
                records.forget(str(raw.resolve()))
                log.info("view_removed", path=str(raw), reason="raw session was deleted")
    return removed


def session_files(sessions_dir: Path) -> list[Path]:
    """Raw session files directly in `sessions_dir` (views, temp files and symlinks out excluded)."""
    if not sessions_dir.is_dir():
        return []
    found = []
    for entry in os.scandir(sessions_dir):
        if not is_session_name(entry.name):
            continue
        path = Path(entry.path)
        with contextlib.suppress(RefusedPathError, OSError):
            if path.is_file():
                found.append(resolve_session_path(path, sessions_dir))
    return sorted(set(found))


def stale_sessions(config: Config, records: Records) -> list[Path]:
    """Sessions whose raw file changed since the sidecar last looked, or whose view went missing."""
    known = records.all()
    stale = []
    db = state_db(config)
    in_db = set(db.high_water_marks()) if db is not None else set()
    for path in session_files(config.sessions_dir):
        if session_id_of(path) in in_db:
            continue  # the database wins; stale_db_sessions covers it
        try:
            stat = path.stat()
        except OSError:
            continue
        record = known.get(str(path))
        changed = record is None or (record.mtime_ns, record.size) != (stat.st_mtime_ns, stat.st_size)
        if changed or (record is not None and view_is_lost(record.action, view_path_for(path))):
            stale.append(path)
    return stale


VIEW_ACTIONS = ("written", "unchanged")
"""Outcomes after which a view should exist: the sweep trusts the files, not its records."""


WRITE_HINT = "free disk space or make the sessions dir writable; every sweep tries again"


def _log_write_failed(key: str, reason: str, previous: Record | None) -> None:
    """One error line when a view first cannot be written; the retries of every sweep that fail the
    same way are debug lines (a read-only dir must not flood the log), and a success says so."""
    if previous is not None and previous.action == WRITE_FAILED and previous.reason == reason:
        log.debug("view_not_written", path=key, error=reason, hint=WRITE_HINT)
    else:
        log.error("view_not_written", path=key, error=reason, hint=WRITE_HINT)


def view_is_lost(action: str, view: Path) -> bool:
    """The last run left a view (`written`, or a re-check that found it `unchanged`) and it is gone,
    or could not write it for a reason of the machine's (a full disk), which may be gone by now.
    (A raw file that changed since is work anyway: its mtime/size differ from the record.)"""
    return action == WRITE_FAILED or (action in VIEW_ACTIONS and not view.exists())


_schema_warned: set[str] = set()


def state_db(config: Config) -> StateDB | None:
    """Hermes' state.db when it exists and has a schema we know; otherwise None (snapshots only)."""
    db = StateDB(config.hermes_home / "state.db")
    if not db.path.is_file():
        return None
    try:
        db.check_schema()
    except StateDBNotReadyError as exc:
        log.debug("state_db_not_ready", error=str(exc))  # Hermes is creating it: nothing to read yet
        return None
    except StateDBError as exc:
        if str(exc) not in _schema_warned:
            _schema_warned.add(str(exc))
            log.warning("state_db_unusable", error=str(exc))
        return None
    return db


def db_view_path(config: Config, session_id: str) -> Path:
    return view_path_for(snapshot_path(config.sessions_dir, session_id))


def process_db_session(session_id: str, config: Config, records: Records, *, db: StateDB | None = None) -> TaskResult:
    """Compact a session's live rows from state.db into `compacted_session_<id>.json`."""
    db = db or state_db(config)
    key = f"db:{session_id}"
    if db is None:
        return TaskResult(path=key, action="refused", reason="no usable state.db")
    with view_lock(config, db_view_path(config, session_id)):
        try:
            mark = db.high_water_marks().get(session_id)
            session = db_session(db, session_id, snapshot_path(config.sessions_dir, session_id))
        except StateDBError as exc:
            log.warning("state_db_read_failed", session_id=session_id, error=str(exc))
            return TaskResult(path=key, action="bad_input", reason=str(exc))
        if mark is None:
            return TaskResult(path=key, action="gone")
        try:
            outcome = compact_to_view(session, config, skip_if_current=True)
        except OSError as exc:  # a view that cannot be written (full or read-only disk): one line
            reason = _one_line(exc)
            _log_write_failed(key, reason, records.get(key))
            records.put(
                key,
                high_water_mark=mark,
                sha256=session.sha256,
                action=WRITE_FAILED,
                reason=reason,
                hermes_tool_tokens=hermes_tool_tokens(config, session.platform),
            )
            return TaskResult(path=key, action=WRITE_FAILED, reason=reason)
        _log_outcome(session_id, outcome)
        report = outcome.report
        records.put(
            key,
            high_water_mark=mark,
            messages=len(session.messages),
            sha256=session.sha256,
            action=outcome.action,
            reason=outcome.reason,
            tokens_before=report.tokens_before if report else None,
            tokens_after=report.tokens_after if report else None,
            hermes_tool_tokens=hermes_tool_tokens(config, session.platform),
        )
        return TaskResult(path=key, action=outcome.action, reason=outcome.reason, report=outcome.as_dict())


def hermes_tool_tokens(config: Config, platform: str | None = None) -> int:
    """Tokens of the tool schemas Hermes sends with every request of a state.db session that records
    none (the toolsets it enables for the session's platform, or the estimate). When they change, a
    view made before may be out of date (`view_is_current` decides, per session) though no row of
    the session moved."""
    return tool_schema_tokens(None, "state.db", config, platform)


def stale_db_sessions(config: Config, records: Records) -> list[str]:
    """Sessions in state.db with rows newer than the sidecar's high-water mark for them."""
    db = state_db(config)
    if db is None:
        return []
    try:
        marks = db.high_water_marks()
    except StateDBError as exc:
        log.warning("state_db_read_failed", error=str(exc))
        return []
    known = records.all()
    platforms = db.platforms()
    tools_tokens: dict[str | None, int] = {}  # per platform; changed: re-checked, though no row moved
    stale = []
    for session_id, mark in sorted(marks.items()):
        record = known.get(f"db:{session_id}")
        lost = record is not None and view_is_lost(record.action, db_view_path(config, session_id))
        platform = platforms.get(session_id)
        if platform not in tools_tokens:
            tools_tokens[platform] = hermes_tool_tokens(config, platform)
        if (
            record is None
            or record.high_water_mark != mark
            or lost
            or record.hermes_tool_tokens != tools_tokens[platform]
        ):
            stale.append(session_id)
    return stale

"""What the sidecar's compaction tasks do, independent of Huey: check a path, compact under a lock.

The sweeps that feed them are in `sidecar.sweep`. `sidecar.app` wires both to Huey; the watcher and
the CLI enqueue through it. Everything here logs through structlog and records its outcome in
`Records` (the sidecar's own database).
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from timmy_compactor.atomic import file_lock, private_dir
from timmy_compactor.compactor import Action, compact_to_view, tool_schema_tokens
from timmy_compactor.config import Config
from timmy_compactor.errors import TimmyError
from timmy_compactor.logs import get_logger
from timmy_compactor.sessions.files import (
    Session,
    SessionError,
    parse_session,
    read_provenance,
    remove_view,
    sha256_bytes,
)
from timmy_compactor.sessions.names import (
    OutsideFolderError,
    UnsafeIdError,
    inside,
    session_id_of,
    shown_id,
    snapshot_path,
    view_path_for,
)
from timmy_compactor.sessions.source import StateDBError, UnusableSessionError
from timmy_compactor.sessions.sources import STATE_DB, StateDbSource
from timmy_compactor.sidecar.dblook import look_at_state_db, picker, places
from timmy_compactor.sidecar.folder import (
    RefusedPathError,
    resolve_session_path,
)
from timmy_compactor.sidecar.outcomes import log_outcome, log_write_failed, one_line
from timmy_compactor.sidecar.records import SKIPPED_UNTIL_CHANGED, WRITE_FAILED, Record, Records, recording

log = get_logger(__name__)

RECENT_WRITE_SECONDS = 5.0
"""A file changed this recently may still be being written: bad JSON is retried, not reported."""


class StillWritingError(TimmyError, RuntimeError):
    """The session file looks half-written; the task is retried with backoff."""


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
    """The lock of the session whose view this is: no other sidecar worker writes the view meanwhile.
    (It lists nothing: what a killed writer left is removed by the sweeps, `remove_stale_temp_files`.)"""
    with session_lock(config.state_dir, str(view)):
        yield


TaskAction = Action | Literal["bad_input", "deferred", "refused", "gone", "known_bad", "write_failed"]
"""What a compaction task did: the compactor's actions, and the sidecar's own (the input is at fault,
state.db is unavailable, the path is not ours, the session went, its bytes failed before, a full disk)."""


@dataclass(frozen=True, kw_only=True)
class TaskResult:
    path: str
    action: TaskAction
    reason: str | None = None
    report: dict[str, Any] | None = None


def process_session(path: str | Path, config: Config, records: Records, *, final_attempt: bool = True) -> TaskResult:
    """The body of the `compact_session` task."""
    try:
        raw = resolve_session_path(path, config.sessions_dir)
    except RefusedPathError as exc:
        log.warning("session_refused", path=str(path), reason=str(exc))
        return TaskResult(path=str(path), action="refused", reason=str(exc))
    look = look_at_state_db(config, records, marks=False)  # one look at this session, no listing
    winner, _ = picker(config, look).find(session_id_of(raw))
    if look.db is not None and winner is not None and winner.source == STATE_DB:
        return process_db_session(winner.session_id, config, records, db=look.db)  # the picker: state.db wins
    view = view_path_for(raw)
    if look.unavailable is not None and view_source(view) == "state.db":
        # its view was made from state.db, which cannot be read now: a (frozen) snapshot must not replace it
        reason = f"state.db unavailable ({look.unavailable.cause}); its view is kept"
        log.debug("session_deferred", path=str(raw), reason=reason)
        return TaskResult(path=str(raw), action="deferred", reason=reason)
    with view_lock(config, view):
        return _process_locked(
            raw, config, records, final_attempt=final_attempt, keep_view=look.unavailable is not None
        )


def view_source(view: Path) -> str | None:
    """Where a view was made from (`file`, `state.db`), from its provenance; None if it cannot be read."""
    try:
        _, meta = read_provenance(view)
    except (SessionError, OSError, ValueError, RecursionError):
        return None
    source = meta.get("source") if isinstance(meta, dict) else None
    return source if isinstance(source, str) else None


def _process_locked(
    raw: Path, config: Config, records: Records, *, final_attempt: bool, keep_view: bool = False
) -> TaskResult:
    """`keep_view`: state.db cannot be read now, so a session whose file is gone may still be one of
    its sessions: its view stays until a sweep can tell."""
    key = str(raw)
    try:
        stat = raw.stat()
        data = raw.read_bytes()
    except FileNotFoundError:
        if keep_view:
            log.debug("view_kept", path=key, reason="raw session file gone while state.db is unavailable")
        elif remove_view(view_path_for(raw)):
            log.info("view_removed", path=key, reason="raw session was deleted")
        records.forget(key)
        return TaskResult(path=key, action="gone")
    except OSError as exc:  # a directory named session_x.json, no permission: one line, not a traceback
        reason = one_line(exc)
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
    seen: dict[str, Any] = {"mtime_ns": stat.st_mtime_ns, "size": stat.st_size, "sha256": sha}
    return _compact_and_record(session, config, records, key, seen=seen, shown={"path": key}, previous=previous)


def _compact_and_record(
    session: Session,
    config: Config,
    records: Records,
    key: str,
    *,
    seen: dict[str, Any],
    shown: dict[str, str],
    previous: Record | None,
) -> TaskResult:
    """Write the session's view and record the outcome with what identifies the input read (`seen`:
    a file's mtime, size and hash; a state.db session's high-water mark); `shown` names it in logs."""
    try:
        outcome = compact_to_view(session, config, skip_if_current=True)
    except SessionError as exc:  # a view that cannot be written for this session (nested too deep to encode)
        reason = one_line(exc)
        records.put(key, **seen, action="failed", reason=reason)
        log.error("view_not_written", **shown, error=reason, hint="retried when the session changes")
        return TaskResult(path=key, action="failed", reason=reason)
    except OSError as exc:  # a full or read-only disk: not the session's fault
        reason = one_line(exc)
        log_write_failed(key, reason, previous)
        records.put(key, **seen, action=WRITE_FAILED, reason=reason)
        return TaskResult(path=key, action=WRITE_FAILED, reason=reason)
    log_outcome(session.session_id, outcome)
    report = outcome.report
    before, after = (report.tokens_before, report.tokens_after) if report else (None, None)
    records.put(key, **seen, action=outcome.action, reason=outcome.reason, tokens_before=before, tokens_after=after)
    return TaskResult(path=key, action=outcome.action, reason=outcome.reason, report=outcome.as_dict())


def db_view_path(config: Config, session_id: str) -> Path:
    """The view of a state.db session (its name through `names.file_id`: UnsafeIdError if none can be)."""
    return view_path_for(snapshot_path(config.sessions_dir, session_id))


def process_db_session(
    session_id: str, config: Config, records: Records, *, db: StateDbSource | None = None
) -> TaskResult:
    """Compact a session's live rows from state.db into `compacted_session_<id>.json`."""
    key = f"db:{session_id}"
    try:
        view = inside(db_view_path(config, session_id), config.sessions_dir)
    except UnsafeIdError as exc:  # no file can be named after it: skipped until its rows change
        mark = None
        with contextlib.suppress(StateDBError):
            mark = (db or StateDbSource.at(places(config))).mark(session_id)
        return _skip_unusable(key, UnusableSessionError(session_id, str(exc)), mark, records)
    except OutsideFolderError as exc:  # cannot happen through file_id; checked all the same
        log.error("session_refused", session=shown_id(session_id), reason=str(exc))
        return TaskResult(path=key, action="refused", reason=str(exc))
    if db is None:
        look = look_at_state_db(config, records, marks=False)
        if look.db is None:
            reason = f"state.db unavailable: {look.unavailable}" if look.unavailable else "no state.db"
            return TaskResult(path=key, action="deferred" if look.unavailable else "refused", reason=reason)
        db = look.db
    with view_lock(config, view):
        mark = None
        try:
            mark = db.mark(session_id)
            if mark is None:
                return TaskResult(path=key, action="gone")
            session = db.live(session_id)
        except UnusableSessionError as exc:
            return _skip_unusable(key, exc, mark, records)
        except StateDBError as exc:  # unavailable meanwhile (a lock, an upgrade): the next sweep retries
            log.warning("state_db_read_failed", session=shown_id(session_id), cause=exc.cause, error=str(exc))
            return TaskResult(path=key, action="deferred", reason=str(exc))
        seen: dict[str, Any] = {
            "high_water_mark": mark,
            "messages": len(session.messages),
            "sha256": session.sha256,
            "hermes_tool_tokens": hermes_tool_tokens(config, session.platform),
        }
        shown = {"session": shown_id(session_id)}
        return _compact_and_record(session, config, records, key, seen=seen, shown=shown, previous=records.get(key))


def hermes_tool_tokens(config: Config, platform: str | None = None) -> int:
    """Tokens of the tool schemas Hermes sends with every request of a state.db session that records
    none (the toolsets it enables for the session's platform, or the estimate). When they change, a
    view made before may be out of date (`view_is_current` decides, per session) though no row of
    the session moved."""
    return tool_schema_tokens(None, "state.db", config, platform)


SKIP_HINT = "fix or remove the session in Hermes; it is skipped until it changes"


def _skip_unusable(key: str, exc: UnusableSessionError, mark: int | None, records: Records) -> TaskResult:
    """A state.db session whose rows cannot be used: one line naming it (never its content), the
    first time for this high-water mark; recorded, so the sweep skips it until a row changes."""
    previous = records.get(key)
    again = previous is not None and previous.action == "bad_input" and previous.high_water_mark == mark
    say = log.debug if again else log.warning
    say("session_skipped", session=shown_id(key.removeprefix("db:")), reason=exc.problem, hint=SKIP_HINT)
    records.put(key, high_water_mark=mark, sha256=None, action="bad_input", reason=str(exc))
    return TaskResult(path=key, action="bad_input", reason=str(exc))

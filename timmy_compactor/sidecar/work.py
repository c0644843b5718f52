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
from typing import Any, Literal

from timmy_compactor.atomic import file_lock, private_dir
from timmy_compactor.compactor import Action, compact_to_view, tool_schema_tokens
from timmy_compactor.config import Config
from timmy_compactor.errors import TimmyError
from timmy_compactor.logs import get_logger
from timmy_compactor.sessions.files import (
    SessionError,
    parse_session,
    read_provenance,
    remove_leftover_temp_files,
    remove_view,
    sha256_bytes,
)
from timmy_compactor.sessions.names import (
    VIEW_PREFIX,
    OutsideFolderError,
    UnsafeIdError,
    inside,
    is_session_name,
    is_view_name,
    session_id_of,
    shown_id,
    view_path_for,
)
from timmy_compactor.sessions.sources import SNAPSHOT, STATE_DB
from timmy_compactor.sessions.statedb import (
    StateDB,
    StateDBError,
    UnusableSessionError,
    db_session,
    snapshot_path,
)
from timmy_compactor.sidecar.dblook import DbLook, look_at_state_db, picker, snapshot_files
from timmy_compactor.sidecar.folder import (  # the folder's listing (moved there; `work.<name>` still works)
    RefusedPathError,
    SessionsDirUnreadableError,
    resolve_session_path,
    session_files,  # noqa: F401 -- `work.session_files` still works
    warn_sessions_dir_unreadable,
)
from timmy_compactor.sidecar.outcomes import log_outcome, log_write_failed, one_line
from timmy_compactor.sidecar.records import SKIPPED_UNTIL_CHANGED, WRITE_FAILED, Records, recording

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
    try:
        outcome = compact_to_view(session, config, skip_if_current=True)
    except SessionError as exc:  # a view that cannot be written for this session (nested too deep to encode)
        reason = one_line(exc)
        records.put(key, mtime_ns=stat.st_mtime_ns, size=stat.st_size, sha256=sha, action="failed", reason=reason)
        log.error("view_not_written", path=key, error=reason, hint="retried when the session changes")
        return TaskResult(path=key, action="failed", reason=reason)
    except OSError as exc:  # a full or read-only disk: not the session's fault
        reason = one_line(exc)
        log_write_failed(key, reason, previous)
        records.put(key, mtime_ns=stat.st_mtime_ns, size=stat.st_size, sha256=sha, action=WRITE_FAILED, reason=reason)
        return TaskResult(path=key, action=WRITE_FAILED, reason=reason)
    log_outcome(session.session_id, outcome)
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


STARTUP_SWEEP_SECONDS = 30.0
"""Startup sweeps this close together (each consumer worker's, the watcher's) are one sweep."""


def startup_sweep_due(config: Config) -> bool:
    """True for a start's first sweep (others within STARTUP_SWEEP_SECONDS skip); every starter cleans."""
    remove_stale_temp_files(config)  # dead writers' temps: a quick restart follows a killed predecessor
    marker = config.state_dir / "startup_sweep"
    with recording(marker), file_lock(private_dir(config.state_dir) / "startup_sweep.lock", wait=10.0):
        with contextlib.suppress(FileNotFoundError):
            if time.time() - marker.stat().st_mtime < STARTUP_SWEEP_SECONDS:
                return False
        marker.touch(mode=0o600)
        os.utime(marker)
    return True


def startup_sweep_not_done(config: Config) -> None:
    """Give a start's sweep back (its enqueue failed): the next starter within the window sweeps."""
    with contextlib.suppress(FileNotFoundError):
        (config.state_dir / "startup_sweep").unlink()


def remove_stale_temp_files(config: Config) -> int:
    """Temp files of views whose writer was killed mid-write (each removed under its view's lock),
    at startup and by every full sweep: one listing of the folder per sweep, none per task."""
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
        with view_lock(config, view):  # holding it, a temp file of the view is a dead writer's
            if remove_leftover_temp_files(view):
                removed += 1
                log.info("leftover_temp_files_removed", view=str(view))
    return removed


def remove_orphan_views(config: Config, records: Records, look: DbLook | None = None) -> int:
    """Remove the views whose raw session is gone (deleted while nothing watched, or while the
    sidecar ran): a view keeps what the session said, and must not outlive it. While state.db
    exists but cannot be read, nothing is removed: unreadable is not deleted."""
    sessions_dir = config.sessions_dir
    if not sessions_dir.is_dir():
        return 0
    look = look or look_at_state_db(config, records)
    if look.unavailable is not None:
        log.debug("orphan_views_kept", reason=f"state.db unavailable ({look.unavailable.cause})")
        return 0  # cannot tell which views state.db stands behind: remove nothing
    in_db = picker(config, look).pick(upto=STATE_DB).keys_of(STATE_DB)
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


def stale_sessions(
    config: Config, records: Records, look: DbLook | None = None, files: list[Path] | None = None
) -> list[Path]:
    """Sessions whose raw file changed since the sidecar last looked, or whose view went missing: the
    snapshot files the picker gives (state.db wins over a snapshot, and stale_db_sessions covers it),
    or `files`, a caller's pick. A sessions folder that cannot be read is one warning line (each
    sweep) and no snapshot session: the state.db sessions are swept all the same, and no view is removed."""
    look = look or look_at_state_db(config, records)
    marks: dict[Path, object] = {}
    if files is None:
        picked = picker(config, look).pick()
        unreadable = picked.unavailable.get(SNAPSHOT)
        if isinstance(unreadable, SessionsDirUnreadableError):
            warn_sessions_dir_unreadable(unreadable)
            return []
        files = snapshot_files(picked)
        marks = {r.path: r.mark for r in picked.of(SNAPSHOT) if r.path is not None}
    known = records.all()
    stale = []
    for path in files:
        if path in marks:
            mark = marks[path]
        else:
            try:
                stat = path.stat()
            except OSError:
                continue
            mark = (stat.st_mtime_ns, stat.st_size)
        record = known.get(str(path))
        changed = record is None or (record.mtime_ns, record.size) != mark
        if changed or (record is not None and view_is_lost(record.action, view_path_for(path))):
            stale.append(path)
    return stale


VIEW_ACTIONS = ("written", "unchanged")
"""Outcomes after which a view should exist: the sweep trusts the files, not its records."""


def view_is_lost(action: str, view: Path) -> bool:
    """The last run left a view (`written`, or a re-check that found it `unchanged`) and it is gone,
    or could not write it for a reason of the machine's (a full disk), which may be gone by now.
    (A raw file that changed since is work anyway: its mtime/size differ from the record.)"""
    return action == WRITE_FAILED or (action in VIEW_ACTIONS and not _exists(view))


def _exists(view: Path) -> bool:
    """Whether the view is there; True when that cannot be told (an unreadable sessions folder): a
    view nobody can see is not lost."""
    try:
        return view.exists()
    except OSError:
        return True


def db_view_path(config: Config, session_id: str) -> Path:
    """The view of a state.db session (its name through `names.file_id`: UnsafeIdError if none can be)."""
    return view_path_for(snapshot_path(config.sessions_dir, session_id))


def process_db_session(session_id: str, config: Config, records: Records, *, db: StateDB | None = None) -> TaskResult:
    """Compact a session's live rows from state.db into `compacted_session_<id>.json`."""
    key = f"db:{session_id}"
    try:
        view = inside(db_view_path(config, session_id), config.sessions_dir)
    except UnsafeIdError as exc:  # no file can be named after it: skipped until its rows change
        mark = None
        with contextlib.suppress(StateDBError):
            mark = (db or StateDB(config.hermes_home / "state.db")).high_water_mark(session_id)
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
            mark = db.high_water_mark(session_id)
            if mark is None:
                return TaskResult(path=key, action="gone")
            session = db_session(db, session_id, snapshot_path(config.sessions_dir, session_id))
        except UnusableSessionError as exc:
            return _skip_unusable(key, exc, mark, records)
        except StateDBError as exc:  # unavailable meanwhile (a lock, an upgrade): the next sweep retries
            log.warning("state_db_read_failed", session=shown_id(session_id), cause=exc.cause, error=str(exc))
            return TaskResult(path=key, action="deferred", reason=str(exc))
        try:
            outcome = compact_to_view(session, config, skip_if_current=True)
        except SessionError as exc:  # a view that cannot be written for this session (nested too deep to encode)
            reason = one_line(exc)
            records.put(key, high_water_mark=mark, sha256=session.sha256, action="failed", reason=reason)
            log.error("view_not_written", session=shown_id(session_id), error=reason, hint=SKIP_HINT)
            return TaskResult(path=key, action="failed", reason=reason)
        except OSError as exc:  # a view that cannot be written (full or read-only disk): one line
            reason = one_line(exc)
            log_write_failed(key, reason, records.get(key))
            records.put(
                key,
                high_water_mark=mark,
                sha256=session.sha256,
                action=WRITE_FAILED,
                reason=reason,
                hermes_tool_tokens=hermes_tool_tokens(config, session.platform),
            )
            return TaskResult(path=key, action=WRITE_FAILED, reason=reason)
        log_outcome(session_id, outcome)
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


def remove_gone_db_views(config: Config, records: Records, look: DbLook) -> int:
    """Remove the views of state.db sessions the sidecar compacted that are no longer in it (deleted
    in Hermes), without listing the sessions folder: the records say which sessions it knew."""
    if look.db is None:
        return 0  # absent: the full sweep decides; unavailable: nothing is removed
    removed = 0
    for session_id in records.db_marks():
        if session_id in look.marks:
            continue
        key = f"db:{session_id}"
        try:
            view = db_view_path(config, session_id)
        except UnsafeIdError:
            records.forget(key)
            continue
        raw = view.with_name(view.name.removeprefix(VIEW_PREFIX))
        with view_lock(config, view):
            if not raw.exists() and remove_view(view):
                removed += 1
                log.info("view_removed", path=str(raw), reason="session deleted from state.db")
        records.forget(key)
    return removed


def stale_db_sessions(
    config: Config, records: Records, look: DbLook | None = None, *, check_lost: bool = True
) -> list[str]:
    """Sessions in state.db with rows newer than the sidecar's high-water mark for them (or whose
    Hermes tool schemas changed). `check_lost` (the full sweeps): also those whose view went missing
    (a stat per view); a commit's sweep looks only at what the commit changed."""
    look = look or look_at_state_db(config, records)
    if look.db is None:
        return []
    sessions = picker(config, look).pick(upto=STATE_DB).of(STATE_DB)  # the first source: each wins
    known = records.db_marks()
    try:
        platforms = look.db.platforms()
    except StateDBError as exc:  # unavailable since the look: the next sweep retries
        log.warning("state_db_read_failed", cause=exc.cause, error=str(exc))
        return []
    tools_tokens: dict[str | None, int] = {}  # per platform; changed: re-checked, though no row moved
    stale = []
    for session_id, mark in ((r.session_id, r.mark) for r in sessions):
        record = known.get(session_id)
        if record is None or record[0] != mark:
            stale.append(session_id)  # new rows (an id no file can be named after: recorded unusable by its task)
            continue
        _, action, tokens = record
        if action in SKIPPED_UNTIL_CHANGED:
            continue  # unusable as it stands: skipped until a row changes
        platform = platforms.get(session_id)
        if platform not in tools_tokens:
            tools_tokens[platform] = hermes_tool_tokens(config, platform)
        if tokens != tools_tokens[platform] or (check_lost and _db_view_lost(config, session_id, action)):
            stale.append(session_id)
    return stale


def _db_view_lost(config: Config, session_id: str, action: str) -> bool:
    if action != WRITE_FAILED and action not in VIEW_ACTIONS:
        return False  # no view expected: nothing to stat
    try:
        return view_is_lost(action, db_view_path(config, session_id))
    except UnsafeIdError:
        return True

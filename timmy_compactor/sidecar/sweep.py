"""The sweeps: which sessions changed while no task ran, what a killed writer or a deleted session
left behind, and the one sweep a start of several workers makes.

They list the sessions folder and state.db once per sweep (through the picker), never per task; the
task bodies they feed are in `sidecar.work`.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from timmy_compactor.atomic import file_lock, private_dir
from timmy_compactor.config import Config
from timmy_compactor.logs import get_logger
from timmy_compactor.sessions.files import remove_leftover_temp_files, remove_view
from timmy_compactor.sessions.names import (
    VIEW_PREFIX,
    UnsafeIdError,
    is_session_name,
    is_view_name,
    session_id_of,
    view_path_for,
)
from timmy_compactor.sessions.source import StateDBError
from timmy_compactor.sessions.sources import SNAPSHOT, STATE_DB
from timmy_compactor.sidecar.dblook import DbLook, look_at_state_db, picker, snapshot_files
from timmy_compactor.sidecar.folder import SessionsDirUnreadableError, warn_sessions_dir_unreadable
from timmy_compactor.sidecar.records import SKIPPED_UNTIL_CHANGED, WRITE_FAILED, Records, recording
from timmy_compactor.sidecar.work import db_view_path, hermes_tool_tokens, view_lock

log = get_logger(__name__)

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

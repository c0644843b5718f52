"""The sweeps: which sessions changed while no task ran (each source's "changed since" marks against
the records), what a killed writer or a deleted session left behind, and the one sweep a start of
several workers makes.

A sweep lists the sources once (through the picker), never per task; it knows no source by name.
The task body it feeds is `sidecar.work.process`.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from timmy_compactor.atomic import file_lock, pid_is_dead, private_dir
from timmy_compactor.config import Config
from timmy_compactor.logs import get_logger
from timmy_compactor.sessions.files import remove_leftover_temp_files, remove_view
from timmy_compactor.sessions.names import VIEW_PREFIX, OutsideFolderError, view_key, view_path
from timmy_compactor.sessions.sources import Picked, Picker, SessionRef, SessionsDirUnreadableError
from timmy_compactor.sidecar.dblook import DbLook, look_at_state_db, picker
from timmy_compactor.sidecar.folder import warn_sessions_dir_unreadable
from timmy_compactor.sidecar.processes import SUPERVISOR_ENV
from timmy_compactor.sidecar.records import WRITE_FAILED, Records, mark_text, recording
from timmy_compactor.sidecar.work import InputMarks, unnamed_key, view_lock

log = get_logger(__name__)

STARTUP_SWEEP_SECONDS = 30.0
"""Startup sweeps this close together (each consumer worker's, the watcher's) are one sweep."""


def startup_sweep_due(config: Config) -> bool:
    """True for a start's first sweep (others of the same start skip); every starter cleans. A start
    is its supervisor's (the processes huey_consumer.sh started share it: a restart after a kill -9
    sweeps however soon it follows), else any starter within STARTUP_SWEEP_SECONDS. A starter that
    follows a dead one of its start (huey replaces a killed worker) sweeps again: the task that worker
    had taken off the queue is in no queue, and it may have died before leaving an in-flight record."""
    remove_stale_temp_files(config)  # dead writers' temps: a quick restart follows a killed predecessor
    marker = config.state_dir / "startup_sweep"
    start = os.environ.get(SUPERVISOR_ENV, "")
    with recording(marker), file_lock(private_dir(config.state_dir) / "startup_sweep.lock", wait=10.0):
        last = _last_start(marker)
        same = last.get("start") == start and time.time() - last.get("at", 0) < STARTUP_SWEEP_SECONDS
        starters = last.get("starters", [])
        if same and not any(pid_is_dead(pid) for pid in starters):
            _write_start(marker, {**last, "starters": [*starters, os.getpid()]})
            return False
        if same:
            log.info("startup_sweep_again", reason="a process of this start died; it may have taken a task")
        _write_start(marker, {"start": start, "at": time.time(), "starters": [os.getpid()]})
    return True


def _last_start(marker: Path) -> dict[str, Any]:
    """The start the marker records (empty when there is none, or one of an older version)."""
    try:
        found = json.loads(marker.read_bytes())
    except (FileNotFoundError, ValueError):
        return {}
    valid = (
        isinstance(found, dict) and isinstance(found.get("at"), int | float) and isinstance(found.get("starters"), list)
    )
    return found if valid else {}


def _write_start(marker: Path, start: dict[str, Any]) -> None:
    marker.write_text(json.dumps(start))
    marker.chmod(0o600)


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


@dataclass(frozen=True)
class Swept:
    """What one sweep found: the keys of the sessions to compact again, the views it removed, and the
    sessions of every source it listed (`picked`: what `sweep --all` compacts)."""

    stale: list[str]
    removed: int
    picked: Picked
    unnamed: list[SessionRef]  # changed sessions whose id no file name can stand for (`work.refuse_unnamed`)
    marks: dict[str, str | None]  # the stale ones' input marks, as the records store them


def sweep_sources(
    config: Config, records: Records, look: DbLook | None = None, *, upto: str | None = None, check_lost: bool = True
) -> Swept:
    """One sweep: list the sources (`upto`: only those up to this one, what a change to it calls for,
    without listing the others), remove the views of sessions no source holds any more, and name the
    sessions whose input changed since the sidecar last read it (`check_lost`: or whose view went)."""
    look = look or look_at_state_db(config, records)
    sources = picker(config, look)
    picked = sources.pick(upto=upto)
    for error in picked.unavailable.values():
        if isinstance(error, SessionsDirUnreadableError):
            warn_sessions_dir_unreadable(error)
    removed = remove_gone_views(config, records, sources, picked, whole=upto is None)
    stale, unnamed = stale_keys(config, records, picked, check_lost=check_lost)
    return Swept(list(stale), removed, picked, unnamed, stale)


def stale_keys(
    config: Config, records: Records, picked: Picked, *, check_lost: bool = True
) -> tuple[dict[str, str | None], list[SessionRef]]:
    """The keys of the sessions (each with its input's mark) whose input mark differs from the
    recorded one (new rows, a new file, Hermes' tool schemas changed), or whose view went missing
    (`check_lost`: a stat per view). A session recorded unusable is skipped until its mark changes.
    And apart: the changed sessions whose id no file name can stand for."""
    marks, known = InputMarks(config), records.marks()
    stale: dict[str, str | None] = {}
    unnamed: list[SessionRef] = []
    for ref in picked.sessions:
        key = ref.key if ref.key is not None else unnamed_key(ref)
        record, mark = known.get((ref.source, key)), mark_text(marks(ref))
        changed = record is None or record[0] != mark
        if ref.key is None:
            unnamed += [ref] if changed else []
        elif changed or (record is not None and check_lost and _view_lost(config, ref.key, record[1])):
            stale[ref.key] = mark
    return stale, unnamed


def _view_lost(config: Config, key: str, action: str) -> bool:
    if action != WRITE_FAILED and action not in VIEW_ACTIONS:
        return False  # no view expected (or unusable as it stands, skipped until it changes): nothing to stat
    try:
        return view_is_lost(action, view_path(config.sessions_dir, key))
    except OutsideFolderError:
        return True


def remove_gone_views(config: Config, records: Records, sources: Picker, picked: Picked, *, whole: bool = True) -> int:
    """Remove the views of the sessions no source holds any more (deleted while nothing watched, or
    while the sidecar ran): a view keeps what the session said, and must not outlive it. While a
    source cannot be read, nothing is removed: unreadable is not deleted. `whole`: every view in the
    sessions folder is looked at; else (a sweep of some sources) only the sessions the records know."""
    if picked.unavailable:
        log.debug("orphan_views_kept", reason=f"unavailable: {', '.join(sorted(picked.unavailable))}")
        return 0  # cannot tell which views an unreadable source stands behind: remove nothing
    candidates = {key for source, key in records.marks() if source in picked.listed}
    if whole and config.sessions_dir.is_dir():
        candidates |= {key for view in config.sessions_dir.glob(f"{VIEW_PREFIX}*.json") if (key := view_key(view.name))}
    present = picked.known | {unnamed_key(ref) for ref in picked.sessions if ref.key is None}
    removed = 0
    for key in sorted(candidates - present):
        try:
            view = view_path(config.sessions_dir, key)
        except OutsideFolderError:
            records.forget(key)
            continue
        with view_lock(config, view):
            found, unavailable = sources.find(key)  # under the lock: not one created meanwhile
            if found is not None or unavailable:
                continue
            if remove_view(view):
                removed += 1
                log.info("view_removed", session=key, reason="the session was deleted")
            records.forget(key)
    return removed


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

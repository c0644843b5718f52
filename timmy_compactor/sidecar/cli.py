"""The sidecar's verbs: `watch`, `enqueue SESSION…`, `sweep`, `status`."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from timmy_compactor.config import load_config
from timmy_compactor.logs import get_logger, progress
from timmy_compactor.sidecar.app import App, check_backend, make_app, quiet_id

log = get_logger(__name__)


def _app(args: argparse.Namespace) -> App:
    """The sidecar's Huey app (queue and tasks) for this command's --config."""
    return make_app(load_config(args.config))


def cmd_watch(args: argparse.Namespace) -> int:
    from timmy_compactor.sidecar.running import sidecar_lock

    config = load_config(args.config)
    if args.check_backend:
        check_backend(config)
        return 0
    with sidecar_lock(config.state_dir, config.sessions_dir):  # one sidecar per home, or a clear refusal
        if args.check:
            check_backend(config)
            return 0
        return _watch(args, make_app(config))


def _watch(args: argparse.Namespace, app: App) -> int:
    import signal
    import threading

    from timmy_compactor.sidecar.app import enqueue_startup_sweep
    from timmy_compactor.sidecar.watcher import is_state_db_name, watch

    config = app.config
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    def sweep(db_only: bool = False) -> object:
        return app.sweep_sessions(db_only=db_only, id=quiet_id())

    try:  # catch up on whatever changed while nothing was watching: one sweep per start
        enqueue_startup_sweep(app)
    except Exception as exc:  # noqa: BLE001 -- the backend may be down; the watcher retries
        log.warning("startup_sweep_not_enqueued", error=str(exc))

    def submit(path: str) -> object:
        # a change to state.db: find the sessions whose rows moved; a snapshot: compact that file
        if is_state_db_name(Path(path).name):
            return commit_sweep()
        return app.compact_session(path, id=quiet_id())

    def commit_sweep() -> object:
        """One waiting sweep per burst of commits: while one waits, it will see this commit too."""
        from timmy_compactor.sidecar.records import COMMIT_SWEEP, COMMIT_SWEEP_TTL_SECONDS

        records = app.records()
        if records.is_waiting(COMMIT_SWEEP, ttl=COMMIT_SWEEP_TTL_SECONDS):
            return None
        records.queue(COMMIT_SWEEP)  # marked first: the sweep may start and unmark it at once
        try:
            return sweep(db_only=True)
        except BaseException:
            records.taken(COMMIT_SWEEP)
            raise

    watch(
        config.sessions_dir,
        submit,
        hermes_home=config.hermes_home,
        debounce_ms=args.debounce_ms if args.debounce_ms is not None else config.huey.debounce_ms,
        on_recovered=sweep,
        stop=stop,
    )
    return 0


def cmd_enqueue(args: argparse.Namespace) -> int:
    from timmy_compactor.sidecar.targets import enqueue_target, resolve_target

    config = load_config(args.config)
    # every session is resolved (here, in this directory) before anything is enqueued
    targets = [resolve_target(name, config) for name in args.sessions]
    check_backend(config)  # Redis down: one line naming the URL, not a traceback
    app = make_app(config)
    for name, target in zip(args.sessions, targets, strict=True):
        enqueue_target(app, target, id=quiet_id())
        print(f"enqueued {name}" + ("" if target.describe() == name else f" ({target.describe()})"))
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    app = _app(args)
    from timmy_compactor.sidecar import dblook, work

    config = app.config
    if not args.now:
        check_backend(config)
    # a view must not outlive its raw session: removed here, as the periodic sweep does (never while
    # state.db cannot be read: unreadable is not deleted)
    look = dblook.look_at_state_db(config, app.records())
    orphans = work.remove_orphan_views(config, app.records(), look)
    work.remove_stale_temp_files(config)  # what a killed writer left (tasks list nothing)
    db = look.db
    paths, db_ids, unreadable = _sweep_targets(args, app, look)
    actions: Counter[str] = Counter()
    for path in progress(paths, "sweep"):
        if args.now:
            actions[work.process_session(path, config, app.records()).action] += 1
        else:
            app.compact_session(str(path), id=quiet_id())
            actions["enqueued"] += 1
    for session_id in progress(db_ids, "sweep (state.db)"):
        if args.now:
            actions[work.process_db_session(session_id, config, app.records(), db=db).action] += 1
        else:
            app.compact_db_session(session_id, id=quiet_id())
            actions["enqueued"] += 1
    if orphans:
        actions["orphan_views_removed"] = orphans
    count = len(paths) + len(db_ids)
    summary = {"sessions": count, **actions}
    app.records().note("last_sweep", {"at": time.time(), "enqueued" if not args.now else "ran": count})
    if args.json:
        print(orjson.dumps(summary).decode())
    else:
        words = {"orphan_views_removed": "orphan view(s) removed"}
        detail = ", ".join(f"{words.get(k, k)} {v}" for k, v in actions.items()) or "nothing to do"
        where = f"{config.sessions_dir}" + (" and state.db" if db is not None else "")
        print(f"sweep of {where}: {count} session(s) — {detail}")
        if unreadable is not None:
            print(f"  {unreadable}; its views are kept")
        if look.unavailable is not None and look.unavailable.cause != "not_ready":
            gone = look.unavailable
            print(f"  state.db unavailable ({gone.cause}): {gone}; {gone.hint}; its sessions' views are kept")
    return 0


def _snapshot_files(config: Any, look: Any, list_only: bool = False) -> tuple[list[Path], Any]:
    """The snapshot files state.db does not stand behind (the database wins over a snapshot of the
    same session), and the SessionsDirUnreadableError when the folder cannot be listed (then none).
    `list_only`: only whether it can be listed (no file returned)."""
    from timmy_compactor.sessions.names import session_id_of
    from timmy_compactor.sidecar import folder

    try:
        if list_only:
            folder.list_sessions_dir(config.sessions_dir)
            return [], None
        files = folder.session_files(config.sessions_dir)
    except folder.SessionsDirUnreadableError as exc:
        return [], exc
    in_db = set(look.by_file_id())
    return [p for p in files if session_id_of(p) not in in_db], None


def _sweep_targets(args: argparse.Namespace, app: App, look: Any) -> tuple[list[Path], list[str], Any]:
    """What `sweep` compacts: every session (`--all`) or the changed ones; and the sessions folder's
    error when it cannot be read (one warning line; its views are kept, state.db is swept all the same)."""
    from timmy_compactor.sidecar import folder, work

    files, unreadable = _snapshot_files(app.config, look)
    if unreadable is not None:
        folder.warn_sessions_dir_unreadable(unreadable)
    if args.all:
        return files, sorted(look.marks), unreadable
    paths = work.stale_sessions(app.config, app.records(), look, files=files) if unreadable is None else []
    return paths, work.stale_db_sessions(app.config, app.records(), look), unreadable


STATUS_HEALTHY, STATUS_NOT_RUNNING, STATUS_QUEUE_UNREACHABLE, STATUS_SESSIONS_FAILING = 0, 3, 4, 5
"""`status --check` exit codes: healthy; no sidecar runs on this home; the queue does not answer;
sessions fail (recorded errors, the sessions folder or state.db unreadable, the sidecar's state unreadable).
With several problems, the first of these."""


def cmd_status(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if args.check:
        return _check(config)
    data, states = _status_data(config)
    if args.json:
        print(orjson.dumps(data).decode())
    else:
        _print_status(config, data, states)
    return 0


def _check(config: Any) -> int:
    """`status --check`, for a health check: one line per problem and the exit code of the first;
    cheap (the sidecar's lock, the queue, its records, a listing of the folder; no session is read)."""
    from timmy_compactor.sidecar import dblook
    from timmy_compactor.sidecar.records import Records, StateNotWritableError

    problems: list[tuple[int, str]] = []
    state_error: str | None = None
    failing = 0
    try:
        records = Records(config.state_dir) if config.state_dir.exists() else None
        failing = records.failing() if records else 0
        last_sweep = records.noted("last_sweep") if records else None
    except StateNotWritableError as exc:
        last_sweep, state_error = None, str(exc)
    car = _sidecar_state(config, last_sweep)
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
    _, unreadable = _snapshot_files(config, look, list_only=True)
    if unreadable is not None:
        problems.append((STATUS_SESSIONS_FAILING, str(unreadable)))
    for _, line in problems:
        print(f"unhealthy: {line}")
    if not problems:
        print(f"healthy: sidecar running, queue depth {car['queue_depth']}, no failing session")
    return min(code for code, _ in problems) if problems else STATUS_HEALTHY


def _status_data(config: Any) -> tuple[dict[str, Any], list[Any]]:
    """Everything `status` says, as its JSON object, and each session's state."""
    from timmy_compactor.sidecar import dblook, status
    from timmy_compactor.sidecar.records import Records, StateNotWritableError

    look = dblook.look_at_state_db(config, quiet=True)  # said below, not logged
    db = look.db
    db_ids = sorted(look.marks)
    paths, unreadable = _snapshot_files(config, look)
    states = [status.session_status(p, config) for p in progress(paths, "status")]
    snapshot_states: Counter[str] = Counter()
    unusable = 0
    if db is not None:
        for session_id in progress(db_ids, "status (state.db)"):
            state, snapshot = status.db_session_status(db, session_id, config)
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
        "sidecar": _sidecar_state(config, last_sweep),
        "state_error": state_error,
        "sessions_dir": str(config.sessions_dir),
        "sessions_dir_error": None if unreadable is None else str(unreadable),
        "sessions": len(states),
        "above_threshold": sum(1 for s in states if s.above_threshold),
        "views": {k: views.get(k, 0) for k in ("fresh", "stale", "missing", "none", "unreadable")},
        "views_with_orphans": sum(1 for s in states if s.orphans),
        "backend": config.huey.backend,
        "hermes_engine_raw_logs": _engine_raw_logs(config),
        "sources": {
            "state_db": {
                "path": str(config.hermes_home / "state.db"),
                "usable": db is not None,
                "unavailable": None
                if look.unavailable is None
                else {"cause": look.unavailable.cause, "error": str(look.unavailable), "hint": look.unavailable.hint},
                "sessions": len(db_ids),
                "unusable_sessions": unusable,
                "snapshots_of_these": {k: snapshot_states.get(k, 0) for k in ("current", "frozen", "absent")},
            },
            "snapshots": {"enabled_in_hermes": status.snapshots_enabled(config), "files_without_db_rows": len(paths)},
        },
        "per_session": [_session_entry(s) for s in states],
        "last_errors": [_error_entry(e) for e in errors],
    }
    return data, states


def _session_entry(s: Any) -> dict[str, Any]:
    from timmy_compactor.sessions.names import session_id_of

    return {
        "session": session_id_of(s.path),
        "path": str(s.path),
        "tokens": s.tokens,
        "usage": None if s.usage is None else round(s.usage, 4),
        "above_threshold": s.above_threshold,
        "view": s.view,
        "orphans": s.orphans,
    }


def _error_entry(e: Any) -> dict[str, Any]:
    return {"path": e.path, "session": Path(e.path).name, "action": e.action, "reason": _one_line(e.reason), "at": e.at}


def _print_status(config: Any, data: dict[str, Any], states: list[Any]) -> None:
    from timmy_compactor.sessions.names import VIEW_PREFIX, session_id_of
    from timmy_compactor.sidecar.running import describe

    v = data["views"]
    src = data["sources"]
    car = data["sidecar"]
    sweep = car["last_sweep"]
    print(
        ("sidecar: running, " + describe(car["running"]) if car["running"] else "sidecar: NOT running on this home")
        + f"; queue ({config.huey.backend}): "
        + (f"{car['queue_depth']} pending" if car["queue_error"] is None else f"unreachable ({car['queue_error']})")
        + "; last sweep: "
        + (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(sweep["at"]))) if sweep else "never")
    )
    print(f"{data['sessions_dir']}: {data['sessions']} session(s), {data['above_threshold']} above threshold")
    if data["sessions_dir_error"]:
        print(f"  UNREADABLE: {data['sessions_dir_error']}; its views are kept")
    print(f"  sources: {_sources_line(src)}")
    print(
        f"  views: {v['fresh']} fresh, {v['stale']} stale, {v['missing']} missing "
        f"({v['none']} below threshold need none, {v['unreadable']} unreadable)"
    )
    folder_said = data["sessions_dir_error"] is not None  # one line for the folder, not one per view in it
    for state in states:
        if folder_said and state.view == "unreadable" and (state.error or "").startswith(VIEW_PREFIX):
            continue
        if state.above_threshold and state.usage is not None:
            print(f"  {state.usage:4.0%} of the window  {session_id_of(state.path)}: view {state.view}")
        elif state.view in ("stale", "missing", "unreadable"):
            print(f"  {state.view:10} {state.path.name}" + (f": {state.error}" if state.error else ""))
        if state.orphans:
            print(f"  orphans    {state.path.name}: {state.orphans} tool call(s)/result(s) unpaired in the view")
    if data["state_error"]:
        print(f"  sidecar state unreadable: {data['state_error']}")
    logs = data["hermes_engine_raw_logs"]
    if logs["sessions"]:
        print(
            f"  timmy engine raw logs: {logs['sessions']} session(s), {logs['bytes'] / 1e6:.1f} MB in {logs['dir']} "
            f"(kept {logs['keep_days']} days after a session's last compaction)"
        )
    if data["last_errors"]:
        print("  last errors:")
        for e in data["last_errors"]:
            print(f"    {e['session']}: {e['action']}: {e['reason']}")


def _sources_line(src: dict[str, Any]) -> str:
    db = src["state_db"]
    if db["usable"]:
        unusable = db["unusable_sessions"]
        db_note = f"{db['sessions']} session(s)" + (f", {unusable} unusable (skipped)" if unusable else "")
    elif db["unavailable"] is not None and db["unavailable"]["cause"] != "not_ready":
        db_note = f"UNAVAILABLE ({db['unavailable']['cause']}: {db['unavailable']['hint']}; views kept)"
    else:
        db_note = "absent or not yet written by Hermes"
    snaps = db["snapshots_of_these"]
    enabled = {True: "on", False: "off (as Hermes ships; state.db is read instead)", None: "unknown"}
    return (
        f"state.db {db_note} (their snapshots: {snaps['current']} current, {snaps['frozen']} frozen, "
        f"{snaps['absent']} absent); snapshot-only files {src['snapshots']['files_without_db_rows']}; "
        f"Hermes JSON snapshots {enabled[src['snapshots']['enabled_in_hermes']]}"
    )


def _one_line(reason: str | None, limit: int = 200) -> str | None:
    """An error reason as one short line: the reason, never the session's content."""
    if reason is None:
        return None
    line = reason.strip().splitlines()[0] if reason.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _engine_raw_logs(config: Any) -> dict[str, Any]:
    """The raw logs the `timmy` engine keeps inside Hermes (hermes/rawstore.py): how many, how big."""
    from timmy_compactor.hermes.rawstore import KEEP_DAYS, RawStore

    sessions, size = RawStore(config.engine_raw_dir).usage()
    return {"dir": str(config.engine_raw_dir), "sessions": sessions, "bytes": size, "keep_days": KEEP_DAYS}


def _sidecar_state(config: Any, last_sweep: dict[str, object] | None) -> dict[str, Any]:
    """Is a sidecar running on this home (its PID), how deep is the queue, when was the last sweep."""
    from timmy_compactor.sidecar.app import make_huey
    from timmy_compactor.sidecar.running import running

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
        "queue_error": _one_line(error),
        "last_sweep": last_sweep,
    }


def register_cli(sub: Any, verb: Any) -> None:
    p = verb("watch", "watch the sessions dir and enqueue compactions (run beside huey_consumer)")
    p.add_argument("--debounce-ms", type=int, default=None, help="collapse bursts per session (default: config)")
    p.add_argument(
        "--check", action="store_true", help="only check that no sidecar runs on this home yet and the queue answers"
    )
    p.add_argument("--check-backend", action="store_true", help="only check that the queue backend answers")
    p.set_defaults(func=cmd_watch)

    p = verb("enqueue", "enqueue a compaction of these sessions (by id, or by their session file)")
    p.add_argument(
        "sessions",
        nargs="+",
        metavar="SESSION",
        help="a session id (its session_<id>.json in the sessions dir, else its state.db rows) or a session "
        "file's path (relative to this directory, else to the sessions dir)",
    )
    p.set_defaults(func=cmd_enqueue)

    p = verb("sweep", "enqueue every session whose view is missing or stale; remove views whose session is gone")
    p.add_argument("--all", action="store_true", help="every session, not only the changed ones")
    p.add_argument("--now", action="store_true", help="compact in this process instead of enqueueing")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.set_defaults(func=cmd_sweep)

    p = verb("status", "summarise the sessions dir: sessions, above threshold, views fresh/stale/missing, errors")
    p.add_argument("--json", action="store_true", help="print the status as one JSON object")
    p.add_argument(
        "--check",
        action="store_true",
        help="a health check: exit 0 healthy, 3 no sidecar runs on this home, 4 the queue is unreachable, "
        "5 sessions fail (recorded errors, an unreadable sessions folder or state.db); one line per problem",
    )
    p.set_defaults(func=cmd_status)

"""The sidecar's verbs: `watch`, `enqueue SESSION…`, `sweep`, `status`."""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from typing import Any

import orjson

from timmy_compactor.config import load_config
from timmy_compactor.errors import EXIT_FAILED
from timmy_compactor.logs import get_logger, progress
from timmy_compactor.sessions.snapshots import SNAPSHOT
from timmy_compactor.sidecar.app import App, make_app
from timmy_compactor.sidecar.queue import check_backend, quiet_id

log = get_logger(__name__)


def _app(args: argparse.Namespace) -> App:
    """The sidecar's Huey app (queue and tasks) for this command's --config."""
    return make_app(load_config(args.config))


def cmd_watch(args: argparse.Namespace) -> int:
    from timmy_compactor.sidecar.running import check_can_run, sidecar_lock

    config = load_config(args.config)
    if args.check or args.check_backend:
        if args.check:
            check_can_run(config.state_dir)
        check_backend(config)
        return 0
    with sidecar_lock(config.state_dir, config.sessions_dir):  # one sidecar per home, or a clear refusal
        return _watch(args, make_app(config))


def _watch(args: argparse.Namespace, app: App) -> int:
    import signal
    import threading

    from timmy_compactor.sessions.sources import watched
    from timmy_compactor.sidecar.app import commit_sweep_key, enqueue_startup_sweep
    from timmy_compactor.sidecar.dblook import places
    from timmy_compactor.sidecar.records import COMMIT_SWEEP_TTL_SECONDS
    from timmy_compactor.sidecar.watcher import changed, watch

    config = app.config
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    what = watched(places(config))  # what the sources ask to be watched

    def sweep(source: str | None = None) -> object:
        return app.sweep_sessions(source=source, id=quiet_id())

    try:  # catch up on whatever changed while nothing was watching: one sweep per start
        enqueue_startup_sweep(app)
    except Exception as exc:  # noqa: BLE001 -- the backend may be down; the watcher retries
        log.warning("startup_sweep_not_enqueued", error=str(exc))

    def submit(path: str) -> object:
        # a session's entry: compact that session; a source that changed as a whole (a commit to
        # state.db): sweep it, to find the sessions that moved
        meaning = changed(what, path)
        if meaning is None:
            return None
        source, key = meaning
        return app.compact(key, id=quiet_id()) if key is not None else source_sweep(source.source)

    def source_sweep(source: str) -> object:
        """One waiting sweep per burst of changes: while one waits, it will see this change too."""
        records, waiting = app.records(), commit_sweep_key(source)
        if records.is_waiting(waiting, ttl=COMMIT_SWEEP_TTL_SECONDS):
            return None
        records.queue(waiting)  # marked first: the sweep may start and unmark it at once
        try:
            return sweep(source)
        except BaseException:
            records.taken(waiting)
            raise

    watch(
        what,
        submit,
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
    _say_if_no_sidecar(config, "`timmy-compactor sweep --now` does the work here instead")
    return 0


def _say_if_no_sidecar(config: Any, instead: str) -> None:
    """Enqueued work waits for a sidecar: when none runs on this home, say so and how to start one."""
    from timmy_compactor.sidecar.running import running

    if running(config.state_dir) is None:
        print(
            f"timmy-compactor: note: no sidecar runs on this home ({config.sessions_dir}): the tasks wait in the "
            f"queue until one starts (./huey_consumer.sh); {instead}",
            file=sys.stderr,
        )


def cmd_sweep(args: argparse.Namespace) -> int:
    app = _app(args)
    from timmy_compactor.sidecar import dblook, sweep, work
    from timmy_compactor.sidecar.outcomes import unavailable_reason

    config = app.config
    if not args.now:
        check_backend(config)
    # a view must not outlive its raw session: removed here, as the periodic sweep does (never while
    # a source cannot be read: unreadable is not deleted)
    look = dblook.look_at_state_db(config, app.records())
    sweep.remove_stale_temp_files(config)  # what a killed writer left (tasks list nothing)
    swept = sweep.sweep_sources(config, app.records(), look)
    keys = [r.key for r in swept.picked.sessions if r.key is not None] if args.all else swept.stale
    actions: Counter[str] = Counter(work.refuse_unnamed(ref, config, app.records()).action for ref in swept.unnamed)
    for key in progress(keys, "sweep"):
        if args.now:
            actions[work.process(key, config, app.records()).action] += 1
        else:
            app.compact(key, id=quiet_id())
            actions["enqueued"] += 1
    if swept.removed:
        actions["orphan_views_removed"] = swept.removed
    count = len(keys) + len(swept.unnamed)
    summary = {"sessions": count, **actions}
    app.records().note("last_sweep", {"at": time.time(), "enqueued" if not args.now else "ran": count})
    if args.json:
        print(orjson.dumps(summary).decode())
    else:
        words = {"orphan_views_removed": "orphan view(s) removed"}
        detail = ", ".join(f"{words.get(k, k)} {v}" for k, v in actions.items()) or "nothing to do"
        where = f"{config.sessions_dir}" + (" and state.db" if look.db is not None else "")
        print(f"sweep of {where}: {count} session(s) — {detail}")
        for name, error in swept.picked.unavailable.items():
            if getattr(error, "cause", None) != "not_ready":
                print(f"  {unavailable_reason(name, error)}; its views are kept")
    if not args.now and keys:
        _say_if_no_sidecar(config, "`timmy-compactor sweep --now` does the work here instead")
    # a sessions folder it cannot list is work it could not do (like export, status --check); a state.db
    # that is locked, damaged or changed is said above and recovers on its own: its views are kept
    return EXIT_FAILED if SNAPSHOT in swept.picked.unavailable else 0


def cmd_status(args: argparse.Namespace) -> int:
    from timmy_compactor.sidecar import status

    config = load_config(args.config)
    if args.check:
        code, lines = status.check(config)
        print("\n".join(lines))
        return code
    report = status.gather(config)
    if args.json:
        print(orjson.dumps(report.as_json()).decode())
    else:
        _print_status(config, report, args.all)
    return 0


def _print_status(config: Any, report: Any, every: bool = False) -> None:
    """The status, for a person, from the report (`sidecar.report.StatusReport`)."""
    from timmy_compactor.sidecar.report import VIEW_STATES
    from timmy_compactor.sidecar.running import describe
    from timmy_compactor.sidecar.status import queue_problem

    v = {state: sum(s.view == state for s in report.sessions) for state in VIEW_STATES}
    car, sweep = report.sidecar, report.sidecar.last_sweep
    print(
        ("sidecar: running, " + describe(car.running) if car.running else "sidecar: NOT running on this home")
        + f"; queue ({config.huey.backend}): "
        + (f"{car.queue_depth} pending" if car.queue_error is None else queue_problem(car.queue_error))
        + "; last sweep: "
        + (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(sweep["at"]))) if sweep else "never")
    )
    above = sum(s.above_threshold for s in report.sessions)
    print(f"{report.sessions_dir}: {len(report.sessions)} session(s), {above} above threshold")
    if not report.sessions_dir_exists:
        print("  the sessions folder does not exist: Hermes creates it on its first run (or set sessions.dir)")
    if report.sessions_dir_error:
        print(f"  UNREADABLE: {report.sessions_dir_error}; its views are kept")
    print(f"  sources: {_sources_line(report)}")
    views, engine = report.views_trigger, report.hermes_trigger
    inside = f"inside Hermes {engine.ratio:.2f} ({engine.reason})"
    print(f"  trigger: views at {views.ratio:.2f} ({views.reason}); {inside}")
    print(
        f"  views: {v['fresh']} fresh, {v['stale']} stale, {v['missing']} missing "
        f"({v['none']} below threshold need none, {v['unreadable']} unreadable)"
    )
    _print_sessions(report, every)
    _print_tail(report)


SHOWN_BY_DEFAULT = 5
"""Without --all, at most this many sessions are named (those whose view needs something first)."""
NEEDS = {"unreadable": 0, "stale": 1, "missing": 2}


def shown_name(state: Any) -> str:
    """How status names a session: its file's name, or `state.db#<key>` (never an invented file)."""
    return str(state.path.name if state.path is not None else state.name)


def _print_sessions(report: Any, every: bool) -> None:
    """The sessions above the threshold in one line, and those whose view needs something (at most
    SHOWN_BY_DEFAULT); with --all, every session above the threshold and every view needing something."""
    from timmy_compactor.sessions.names import VIEW_PREFIX

    folder_said = report.sessions_dir_error is not None  # one line for the folder, not one per view in it
    above = [s for s in report.sessions if s.above_threshold and s.usage is not None]
    if above and not every:
        top = max(above, key=lambda s: s.usage)
        over = sum(s.above_budget for s in above)
        print(
            f"  above threshold: {len(above)} session(s), the largest {shown_name(top)} at {top.usage:.0%} of the "
            f"window" + (f"; {over} view(s) above the budget" if over else "")
        )
    lines: list[tuple[int, str]] = []
    for state in report.sessions:
        if folder_said and state.view == "unreadable" and (state.error or "").startswith(VIEW_PREFIX):
            continue
        shown = shown_name(state)
        if every and state.above_threshold and state.usage is not None:
            over = ", above the budget (the head, index and last step exceed it)" if state.above_budget else ""
            lines.append((3, f"  {state.usage:4.0%} of the window  {shown}: view {state.view}{over}"))
        elif state.view in NEEDS:
            why = f": {state.error}" if state.error else ""
            lines.append((NEEDS[state.view], f"  {state.view:10} {shown}{why}"))
        if state.orphans:
            lines.append((3, f"  orphans    {shown}: {state.orphans} tool call(s)/result(s) unpaired in the view"))
    if not every:
        lines.sort(key=lambda line: line[0])
    for _, line in lines if every else lines[:SHOWN_BY_DEFAULT]:
        print(line)
    hidden = len(lines) - SHOWN_BY_DEFAULT
    if not every and (hidden > 0 or above):
        more = f"{hidden} more; " if hidden > 0 else ""
        print(f"  ({more}`timmy-compactor status --all` lists every session above the threshold, every view to make)")


def _print_tail(report: Any) -> None:
    if report.state_error:
        print(f"  sidecar state unreadable: {report.state_error}")
    logs = report.engine_raw_logs
    if logs.sessions:
        print(
            f"  timmy engine raw logs: {logs.sessions} session(s), {logs.bytes / 1e6:.1f} MB in {logs.dir} "
            f"(kept {logs.keep_days} days after a session's last compaction)"
        )
    if logs.cache_read_share is not None:
        share = f"{logs.cache_read_share:.0%} of {logs.prompt_tokens:,} prompt tokens"
        print(f"  prompt cache inside Hermes: {share} read from the cache")
    if report.last_errors:
        print("  last errors:")
        for e in report.last_errors:
            print(f"    {e.name.rsplit('/', 1)[-1]}: {e.action}: {e.reason}")


def _sources_line(report: Any) -> str:
    db, snapshots = report.source("state.db"), report.source("file")
    if report.state_db_usable:
        db_note = f"{db.sessions} session(s)" + (f", {db.unusable} unusable (skipped)" if db.unusable else "")
    elif db.unavailable is not None and db.unavailable.cause != "not_ready":
        db_note = f"UNAVAILABLE ({db.unavailable.cause}: {db.unavailable.hint}; views kept)"
    else:
        db_note = "absent or not yet written by Hermes"
    snaps = {k: db.copies.get(k, 0) for k in ("current", "frozen", "absent")}
    enabled = {True: "on", False: "off (as Hermes ships; state.db is read instead)", None: "unknown"}
    others = "".join(
        f"; {s.name} {s.sessions} session(s)" for s in report.sources if s.name not in ("state.db", "file")
    )
    return (
        f"state.db {db_note} (their snapshots: {snaps['current']} current, {snaps['frozen']} frozen, "
        f"{snaps['absent']} absent); snapshot-only files {snapshots.sessions}; "
        f"Hermes JSON snapshots {enabled[report.snapshots_enabled]}{others}"
    )


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
        "--all",
        action="store_true",
        help="list every session above the threshold and every view to make (default: a summary and the first "
        f"{SHOWN_BY_DEFAULT})",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="a health check: exit 0 healthy, 3 no sidecar runs on this home, 4 the queue is unreachable, "
        "5 sessions fail (recorded errors, an unreadable sessions folder or state.db); one line per problem",
    )
    p.set_defaults(func=cmd_status)

"""The sidecar's Huey app: its queue, its tasks and their schedule, built from one `Config`.

`make_app(config)` has no side effect at import. The root `tasks.py` builds the app once from the
configuration in the environment (`$TIMMY_COMPACTOR_CONFIG`, then
`$XDG_CONFIG_HOME/timmy-compactor/compaction.yaml`, then the defaults) for `huey_consumer tasks.huey`; the
`watch`, `enqueue` and `sweep` verbs build their own from `--config`. Both register the same task
names (`timmy_compactor.sidecar.app.<task>`) on the same queue, so what one enqueues the other runs.

Schedules: huey's `crontab` cannot say "every 90 minutes" (`*/90` in the minute field means minute 0
of every hour), so a periodic task here runs when the minutes since the Unix epoch are a multiple of
its interval: `sweep_every_minutes: 90` sweeps at 00:00, 01:30, 03:00… UTC, and 5 at :00, :05, :10….
"""

from __future__ import annotations

import calendar
import dataclasses
import hashlib
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from huey import Huey
from huey.exceptions import RetryTask

from timmy_compactor import logs
from timmy_compactor.config import Config
from timmy_compactor.sessions.names import UnsafeIdError, file_id, is_session_name, session_id_of
from timmy_compactor.sidecar import dblook, lease, sweep, work
from timmy_compactor.sidecar.queue import make_huey, quiet_id
from timmy_compactor.sidecar.records import COMMIT_SWEEP, Records, StateNotWritableError, warn_not_writable


def every(minutes: int) -> Callable[[datetime], bool]:
    """A huey periodic-task schedule: true once every `minutes` minutes, on the minutes since the epoch."""
    if minutes < 1:
        raise ValueError(f"a schedule needs at least 1 minute between runs, got {minutes}")

    def due(when: datetime) -> bool:
        return (calendar.timegm(when.utctimetuple()) // 60) % minutes == 0

    due.__name__ = f"every_{minutes}_minutes"
    return due


@dataclasses.dataclass
class App:
    """A Huey instance with the sidecar's tasks registered on it."""

    config: Config
    huey: Huey
    compact_session: Any
    compact_db_session: Any
    sweep_sessions: Any
    session_export: Any
    periodic_sweep: Any
    periodic_export: Any
    leases: lease.Leases
    _records: Records | None = None

    def records(self) -> Records:
        """The sidecar's records (one connection factory per worker process, opened on first use)."""
        if self._records is None:
            self._records = Records(self.config.state_dir)
        return self._records


def enqueue_startup_sweep(app: App) -> None:
    """The catch-up sweep of a start, enqueued by the first of the consumer's workers and the watcher
    to ask (`sweep.startup_sweep_due`): one per start. If its enqueue fails (Redis went away), the turn
    is given back for the next starter, and the error raised."""
    if not sweep.startup_sweep_due(app.config):
        return
    try:
        app.sweep_sessions(id=quiet_id())
    except BaseException:
        sweep.startup_sweep_not_done(app.config)
        raise


def session_lock_name(path_or_id: str) -> str:
    """One lock per session, whether its task names the snapshot file or the state.db session (by
    its file id: `names.file_id`, the id its snapshot file carries)."""
    name = Path(path_or_id).name
    if is_session_name(name):
        return "session:" + session_id_of(Path(name))
    try:
        return "session:" + file_id(path_or_id)
    except UnsafeIdError:
        return "session:" + hashlib.sha256(path_or_id.encode("utf-8", "surrogatepass")).hexdigest()


def make_app(config: Config) -> App:
    logs.configure(config.logging.format, config.logging.level)
    huey = make_huey(config)
    wiring = _Wiring(config, lease.Leases(huey), logs.get_logger(__name__))
    compact_session, compact_db_session = _session_tasks(huey, wiring)
    sweep_sessions, periodic_sweep = _sweep_tasks(huey, wiring)
    session_export, periodic_export = _export_tasks(huey, wiring)
    _on_startup(huey, wiring)
    wiring.app = App(
        config=config,
        huey=huey,
        leases=wiring.leases,
        compact_session=compact_session,
        compact_db_session=compact_db_session,
        sweep_sessions=sweep_sessions,
        session_export=session_export,
        periodic_sweep=periodic_sweep,
        periodic_export=periodic_export,
    )
    return wiring.app


@dataclasses.dataclass
class _Wiring:
    """What the tasks share: the config, the session leases, the log, and the app they are part of."""

    config: Config
    leases: lease.Leases
    log: Any
    app: App | None = None

    @property
    def tasks(self) -> App:
        assert self.app is not None, "the app is set before any task runs"
        return self.app

    def leased(self, key: str, job: dict[str, Any], run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """`run` holding the session's lease (its view written under the lease's fence). A session
        another consumer holds gives the worker back at once: its holder enqueues it again after
        letting go (one task however many waited)."""
        name = session_lock_name(job["arg"])
        held = self.leases.take(name, job)
        if held is None:
            self.tasks.records().taken(key)
            holder = self.leases.holder(name)
            self.log.info("session_busy_elsewhere", lock=name, holder=holder, then="rerun by its holder")
            return {"path": key, "action": "busy"}
        try:
            with lease.fenced(held):
                return run()
        except lease.LeaseLostError as exc:
            self.log.warning("view_not_replaced", lock=name, reason=str(exc))
            return {"path": key, "action": "lease_lost", "reason": str(exc)}
        finally:
            rerun = self.leases.release(held)
            if rerun is not None:
                self.rerun(rerun)

    def rerun(self, job: dict[str, Any]) -> None:
        """Enqueue a session's job again (a waiter's, or a dead consumer's in-flight one)."""
        arg = job.get("arg")
        if not isinstance(arg, str):
            return
        if job.get("task") == "compact_db_session":
            self.enqueue(f"db:{arg}", self.tasks.compact_db_session, arg)
        elif job.get("task") == "compact_session":
            self.enqueue(arg, self.tasks.compact_session, arg)

    def sweep(self, startup: bool, db_only: bool = False) -> int:
        config = self.config
        if startup and not sweep.startup_sweep_due(config):
            return 0
        records = self.tasks.records()
        if db_only:
            records.taken(COMMIT_SWEEP)  # from here on, a new commit needs a new sweep: this one may miss it
        look = dblook.look_at_state_db(config, records)  # one look for the whole sweep
        if db_only:
            sweep.remove_gone_db_views(config, records, look)
            stale: list[Path] = []
        else:
            sweep.remove_orphan_views(config, records, look)
            sweep.remove_stale_temp_files(config)
            stale = sweep.stale_sessions(config, records, look)
        stale_db = sweep.stale_db_sessions(config, records, look, check_lost=not db_only)  # a commit: what it changed
        waiting = records.waiting()
        stale = [p for p in stale if str(p) not in waiting]
        stale_db = [s for s in stale_db if f"db:{s}" not in waiting]
        for path in stale:
            self.enqueue(str(path), self.tasks.compact_session, str(path))
        for session_id in stale_db:
            self.enqueue(f"db:{session_id}", self.tasks.compact_db_session, session_id)
        if stale or stale_db:
            self.log.info(
                "sweep_enqueued", snapshots=len(stale), db_sessions=len(stale_db), already_waiting=len(waiting)
            )
        records.note("last_sweep", {"at": time.time(), "enqueued": len(stale) + len(stale_db)})
        return len(stale) + len(stale_db)

    def enqueue(self, key: str, task: Any, argument: str) -> None:
        """Mark `key` waiting, then enqueue (marked first: the task may start and unmark it at once)."""
        self.tasks.records().queue(key)
        try:
            task(argument, id=quiet_id())  # the sidecar's own task: no result kept
        except BaseException:
            self.tasks.records().taken(key)  # not in the queue after all: the next sweep tries again
            raise


def _session_tasks(huey: Huey, wiring: _Wiring) -> tuple[Any, Any]:
    config, log = wiring.config, wiring.log
    retry = {"retries": config.huey.retries, "retry_delay": config.huey.retry_delay_seconds, "retry_backoff": 2}

    @huey.task(context=True, **retry)
    def compact_session(path: str, task: Any = None) -> dict[str, Any]:
        """Compact one raw session into its view (or remove a stale view below the threshold)."""
        final_attempt = task is None or not task.retries

        def run() -> dict[str, Any]:
            wiring.tasks.records().taken(path)  # from here on, a change needs a new task: it may miss it
            outcome = work.process_session(path, config, wiring.tasks.records(), final_attempt=final_attempt)
            return dataclasses.asdict(outcome)

        try:
            return wiring.leased(path, {"task": "compact_session", "arg": path}, run)
        except work.StillWritingError:
            # expected while Hermes writes: one debug line and a retry, not a traceback
            log.debug("session_still_being_written", path=path, retry_in_s=config.huey.retry_delay_seconds)
            raise RetryTask(delay=config.huey.retry_delay_seconds) from None
        except StateNotWritableError as exc:  # a full disk, a read-only state dir: one line; a later sweep retries
            warn_not_writable(log, exc, task="compact_session")
            return {"path": path, "action": "failed", "reason": str(exc)}

    @huey.task(**retry)
    def compact_db_session(session_id: str) -> dict[str, Any]:
        """Compact one session's live rows from Hermes' state.db into its view."""

        def run() -> dict[str, Any]:
            wiring.tasks.records().taken(f"db:{session_id}")  # from here on, a change needs a new task
            return dataclasses.asdict(work.process_db_session(session_id, config, wiring.tasks.records()))

        try:
            return wiring.leased(f"db:{session_id}", {"task": "compact_db_session", "arg": session_id}, run)
        except StateNotWritableError as exc:  # a full disk, a read-only state dir: one line; a later sweep retries
            warn_not_writable(log, exc, task="compact_db_session")
            return {"path": f"db:{session_id}", "action": "failed", "reason": str(exc)}

    return compact_session, compact_db_session


def _sweep_tasks(huey: Huey, wiring: _Wiring) -> tuple[Any, Any]:
    config, log = wiring.config, wiring.log

    @huey.task()
    def sweep_sessions(startup: bool = False, db_only: bool = False) -> int:
        """Enqueue every session that changed since last seen (snapshot files and state.db rows).

        `startup`: the catch-up of a starting consumer worker or watcher, run only if
        `startup_sweep_due` (a starting worker or watcher asks that before enqueueing, so one start
        enqueues one sweep). `db_only`: what a commit to state.db calls for — only its sessions,
        compared by high-water mark, without listing the sessions folder. A session whose task is
        still waiting in the queue is not enqueued again."""
        try:
            return wiring.sweep(startup, db_only)
        except StateNotWritableError as exc:  # a full disk, a read-only state dir: one line, not a traceback
            warn_not_writable(log, exc, task="sweep_sessions")
            return 0

    @huey.periodic_task(every(config.huey.sweep_every_minutes))
    def periodic_sweep() -> int:
        """Each consumer's scheduler enqueues one; the first to run in a period sweeps, the others
        see its mark in the queue backend (per sessions folder: every consumer shares it)."""
        period = config.huey.sweep_every_minutes * 60
        folder = hashlib.sha256(str(config.sessions_dir).encode("utf-8", "surrogatepass")).hexdigest()[:16]
        if not wiring.leases.once(f"sweep:{folder}:{int(time.time() // period)}", period):
            log.info("periodic_sweep_skipped", reason="another consumer swept this period")
            return 0
        enqueued = int(sweep_sessions.call_local())
        log.info("periodic_sweep", enqueued=enqueued)
        return enqueued

    return sweep_sessions, periodic_sweep


def _export_tasks(huey: Huey, wiring: _Wiring) -> tuple[Any, Any]:
    config, log = wiring.config, wiring.log

    @huey.task()
    def session_export() -> dict[str, Any]:
        """Export the raw sessions (never the views) as training data; incremental."""
        from timmy_compactor.export import run_export_task

        summary = run_export_task(config)
        log.info("export_done", **summary.as_dict())
        return summary.as_dict()

    @huey.periodic_task(every(config.export.every_minutes))
    def periodic_export() -> dict[str, Any]:
        """The scheduled export: nothing unless `export.enabled` (writing training data is opt-in)."""
        if not config.export.enabled:
            return {"disabled": "export.enabled is false"}
        result: dict[str, Any] = session_export.call_local()
        return result

    return session_export, periodic_export


def _on_startup(huey: Huey, wiring: _Wiring) -> None:
    log = wiring.log

    @huey.on_startup()
    def catch_up_on_start() -> None:
        """A consumer that was down (or killed mid-task) sweeps once as it starts, and clears the
        session leases its killed predecessor held; each worker watches for the in-flight sessions
        of consumers that died (`lease.watch_orphans`)."""
        import redis

        lease.watch_orphans(wiring.leases, wiring.rerun)
        try:
            enqueue_startup_sweep(wiring.tasks)  # one sweep per start: the first of the workers and the watcher
            cleared = wiring.leases.clear_dead_locks()
            if cleared:
                log.warning("stale_session_locks_cleared", count=len(cleared), reason="their holders died")
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            # Redis went away between the start check and this worker's start: the periodic sweep
            # catches up once it answers again (one line, not a traceback)
            log.warning("startup_sweep_skipped", reason="queue unreachable", error=type(exc).__name__)
        except StateNotWritableError as exc:  # the SQLite queue cannot take the sweep: one line
            warn_not_writable(log, exc, task="startup_sweep")

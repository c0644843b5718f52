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
import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from huey import Huey
from huey.exceptions import RetryTask
from huey.signals import SIGNAL_ERROR

from timmy_compactor import logs
from timmy_compactor.config import Config
from timmy_compactor.sessions.names import session_id_of, shown_id
from timmy_compactor.sessions.sources import STATE_DB, key_of
from timmy_compactor.sidecar import dblook, health, lease, sweep, work
from timmy_compactor.sidecar.folder import RefusedPathError, resolve_session_path
from timmy_compactor.sidecar.live import LIVE, enqueue_all, pending_keys, warm_up
from timmy_compactor.sidecar.queue import make_huey, quiet_id
from timmy_compactor.sidecar.records import (
    QUEUED_TTL_SECONDS,
    Records,
    StateNotWritableError,
    Waiting,
    recording,
    warn_not_writable,
)


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
    compact: Any  # THE compaction task, by session key
    compact_session: Any  # its older names, by a snapshot's path or a state.db id: queued tasks still run
    compact_db_session: Any
    sweep_sessions: Any
    session_export: Any
    periodic_sweep: Any
    periodic_export: Any
    leases: lease.Leases
    sweep_live: Callable[[str], int]  # a change to this source (a commit): its compactions enqueued live, here
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


def session_lock_name(key: str) -> str:
    """One lease per session, by its key (whichever source holds it, whichever task name asked)."""
    return "session:" + key


def make_app(config: Config) -> App:
    logs.configure(config.logging.format, config.logging.level)
    huey = make_huey(config)
    wiring = _Wiring(config, lease.Leases(huey), logs.get_logger(__name__))
    tasks = dict(zip(("compact", "compact_session", "compact_db_session"), _session_tasks(huey, wiring), strict=True))
    tasks |= zip(("sweep_sessions", "periodic_sweep"), _sweep_tasks(huey, wiring), strict=True)
    tasks |= zip(("session_export", "periodic_export"), _export_tasks(huey, wiring), strict=True)
    _on_startup(huey, wiring)
    live_sweep = functools.partial(wiring.sweep, False, live=True)
    wiring.app = App(config=config, huey=huey, leases=wiring.leases, sweep_live=live_sweep, **tasks)
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
        name = session_lock_name(key)
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
        """Enqueue a session's job again, live (a waiter's, or a dead consumer's in-flight one; a job of
        an older version names its session by path or state.db id); a full sweep's, as a sweep."""
        arg = job.get("arg")
        if isinstance(arg, str) and arg.startswith("sweep:"):
            self.tasks.sweep_sessions(id=quiet_id())
        elif isinstance(arg, str) and (key := task_key(self.config, str(job.get("task")), arg)) is not None:
            self.enqueue({key: None}, live=True)

    def sweep(self, startup: bool, upto: str | None = None, *, live: bool = False) -> int:
        """`upto`: a change to that source (a commit to state.db): only the sources up to it are listed.
        `live`: its compactions go ahead of sweep work (a commit, from the watcher)."""
        config = self.config
        if startup and not sweep.startup_sweep_due(config):
            return 0
        records = self.tasks.records()
        if upto is not None:  # a commit's sweep, in the watcher: its next commit or start covers it
            with health.sweeping(records, full=False):
                return self._sweep(records, upto, live=live)
        name = lease.sweep_lock_name(config.sessions_dir)  # held like a session's: a killed worker's sweep is run again
        held = self.leases.take(name, {"task": "sweep_sessions", "arg": name}, rerun=False)
        if held is None:  # the sweep running now covers this one; the watcher reports what changes after
            self.log.info("sweep_skipped", reason="another sweep of this folder is running")
            return 0
        try:
            with health.sweeping(records, full=True):  # `status --check` tells a sweep that died
                return self._sweep(records, None, live=live)
        finally:
            self.leases.release(held)

    def _sweep(self, records: Records, upto: str | None, *, live: bool) -> int:
        config = self.config
        if upto is not None:
            records.taken(commit_sweep_key(upto))  # a sweep task of an older version's watcher
        look = dblook.look_at_state_db(config, records)  # one look for the whole sweep
        if upto is None:
            sweep.remove_stale_temp_files(config)
        swept = sweep.sweep_sources(config, records, look, upto=upto, check_lost=upto is None)
        for ref in swept.unnamed:
            work.refuse_unnamed(ref, config, records)
        waiting = self.waiting(full=upto is None)
        due = {key: mark for key, mark in swept.marks.items() if not covered(waiting.get(key), mark, live=live)}
        self.enqueue(due, live=live)
        if due:
            self.log.info("sweep_enqueued", sessions=len(due), already_waiting=len(waiting), live=live)
        records.note("last_sweep", {"at": time.time(), "enqueued": len(due)})
        return len(due)

    def waiting(self, *, full: bool) -> dict[str, Waiting]:
        """The sessions whose tasks wait in the queue. `full` (a full sweep): each `queued` row is
        re-checked against the queue itself, whatever its age (a task a killed worker took off the
        queue is in none); else (a commit's sweep) the rows are trusted for QUEUED_TTL_SECONDS."""
        rows = self.tasks.records().waiting_tasks(ttl=float("inf") if full else QUEUED_TTL_SECONDS)
        if not full or not rows:
            return rows
        queued = pending_keys(self.tasks.huey, lambda task, arg: task_key(self.config, task, arg))
        return {key: row for key, row in rows.items() if row.enqueueing or key in queued}

    def enqueue(self, marks: Mapping[str, str | None], *, live: bool = False) -> None:
        """Mark these sessions waiting (key → its input's mark), then enqueue one task each (marked
        first: a task may start and unmark it at once); the marks stand once all are in the queue."""
        if not marks:
            return
        records, keys = self.tasks.records(), list(marks)
        batch = records.queue(marks, live=live)
        tasks = [self.tasks.compact.s(key, id=quiet_id(), priority=LIVE if live else None) for key in keys]
        done = 0
        try:
            with recording(self.config.huey_sqlite_path):  # a full disk under the SQLite queue: one line
                for done in enqueue_all(self.tasks.huey, tasks):  # noqa: B007 -- how many are in, when it fails
                    pass
        finally:
            records.enqueued(batch, not_enqueued=keys[done:])  # those not in the queue: the next sweep tries again

    def compact(self, key: str, job: dict[str, Any], final_attempt: bool) -> dict[str, Any]:
        """The body of every compaction task, under the session's lease."""

        def run() -> dict[str, Any]:
            self.tasks.records().taken(key)  # from here on, a change needs a new task: it may miss it
            return dataclasses.asdict(work.process(key, self.config, self.tasks.records(), final_attempt=final_attempt))

        try:
            return self.leased(key, job, run)
        except work.StillWritingError:
            # expected while Hermes writes: one debug line and a retry, not a traceback
            delay = self.config.huey.retry_delay_seconds
            self.log.debug("session_still_being_written", session=shown_id(key), retry_in_s=delay)
            raise RetryTask(delay=delay) from None
        except StateNotWritableError as exc:  # a full disk, a read-only state dir: one line; a later sweep retries
            warn_not_writable(self.log, exc, task=job["task"])
            return {"path": key, "action": "failed", "reason": str(exc)}


def covered(waiting: Waiting | None, mark: str | None, *, live: bool) -> bool:
    """Whether a task already waiting does what a sweep would enqueue: any waiting task, for sweep
    work (it reads the session when it starts); for a live change, a live one, or one enqueued for
    this very input (the session did not change since)."""
    if waiting is None:
        return False
    return not live or waiting.live or waiting.mark == mark


def commit_sweep_key(source: str) -> str:
    """The `queued` row of a sweep for a change to `source`: while one waits, a new change enqueues no other."""
    return f"sweep:{source}"  # state.db's: COMMIT_SWEEP


def task_key(config: Config, task: str, arg: str) -> str | None:
    """The session key a compaction task's argument names: a key (`compact`), a snapshot's path
    (`compact_session`), a state.db id (`compact_db_session`); None when it names none."""
    if task == "compact_session":
        try:
            return session_id_of(resolve_session_path(arg, config.sessions_dir))
        except RefusedPathError:
            return None
    if task == "compact_db_session":
        return key_of(arg)
    return arg if task == "compact" else None


def _session_tasks(huey: Huey, wiring: _Wiring) -> tuple[Any, Any, Any]:
    config = wiring.config
    retry = {"retries": config.huey.retries, "retry_delay": config.huey.retry_delay_seconds, "retry_backoff": 2}

    @huey.task(context=True, **retry)
    def compact(key: str, task: Any = None) -> dict[str, Any]:
        """Compact the session of this key (from the source that holds it) into its view."""
        return wiring.compact(key, {"task": "compact", "arg": key}, final_attempt=task is None or not task.retries)

    def older(name: str) -> Any:
        """A task of an older version, by its registered name: its argument to a key, then `compact`."""

        def forward(arg: str, task: Any = None) -> dict[str, Any]:
            key = task_key(config, name, arg)
            if key is None:
                wiring.log.warning("session_refused", task=name, reason="names no session")
                return {"path": arg, "action": "refused", "reason": f"{name}: names no session"}
            return wiring.compact(key, {"task": name, "arg": arg}, final_attempt=task is None or not task.retries)

        forward.__name__ = forward.__qualname__ = name
        return huey.task(context=True, name=name, **retry)(forward)  # registered as `<this module>.<name>`

    return compact, older("compact_session"), older("compact_db_session")


def _sweep_tasks(huey: Huey, wiring: _Wiring) -> tuple[Any, Any]:
    config, log = wiring.config, wiring.log

    @huey.task()
    def sweep_sessions(startup: bool = False, db_only: bool = False, source: str | None = None) -> int:
        """Enqueue every session that changed since last seen (snapshot files and state.db rows).

        `startup`: the catch-up of a starting consumer worker or watcher, run only if
        `startup_sweep_due` (a starting worker or watcher asks that before enqueueing, so one start
        enqueues one sweep). `source`: what a change to that source calls for — only the sources up
        to it, compared by their marks, without listing the others (`db_only`, of older versions: a
        commit to state.db). A session whose task is still waiting in the queue is not enqueued again."""
        try:
            return wiring.sweep(startup, source or (STATE_DB if db_only else None))
        except StateNotWritableError as exc:  # a full disk, a read-only state dir: one line, not a traceback
            warn_not_writable(log, exc, task="sweep_sessions")
            return 0
        except Exception as exc:  # noqa: BLE001 -- noted for `status --check`; one line, the next sweep retries
            log.error("sweep_failed", error=health.one_line(exc), hint="the next sweep retries; see `status --check`")
            return 0

    @huey.periodic_task(every(config.huey.sweep_every_minutes))
    def periodic_sweep() -> int:
        """Each consumer's scheduler enqueues one; the first to run in a period sweeps, the others
        see its mark in the queue backend (per sessions folder: every consumer shares it)."""
        period = config.huey.sweep_every_minutes * 60
        if not wiring.leases.once(f"{lease.sweep_lock_name(config.sessions_dir)}:{int(time.time() // period)}", period):
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

    @huey.signal(SIGNAL_ERROR)
    def note_task_died(signal: str, task: Any, exc: BaseException | None = None) -> None:
        """A task that ended in an error huey caught: `status --check` says so until its session runs again."""
        arg = task.args[0] if task.args else None
        key = task_key(wiring.config, task.name.rsplit(".", 1)[-1], arg) if isinstance(arg, str) else None
        with contextlib.suppress(StateNotWritableError):
            health.task_died(wiring.tasks.records(), key or task.name, task.name, exc)

    @huey.pre_execute()
    def unmark_as_it_starts(task: Any) -> None:
        """A session's task is off the queue: its `queued` row goes at once (a worker killed before the
        task starts must not leave a row that makes sweeps skip the session)."""
        arg = task.args[0] if task.args else None
        key = task_key(wiring.config, task.name.rsplit(".", 1)[-1], arg) if isinstance(arg, str) else None
        if key is not None:
            try:
                wiring.tasks.records().taken(key)
            except StateNotWritableError as exc:  # the task says it again, in its own line
                log.debug("unmark_failed", error=exc.reason)

    @huey.on_startup()
    def catch_up_on_start() -> None:
        """A consumer that was down (or killed mid-task) sweeps once as it starts, and clears the
        session leases its killed predecessor held; each worker watches for the in-flight sessions
        of consumers that died (`lease.watch_orphans`)."""
        import redis

        lease.watch_orphans(wiring.leases, wiring.rerun)
        warm_up(wiring.config)  # a live state.db task does not wait for Hermes' tool schemas
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

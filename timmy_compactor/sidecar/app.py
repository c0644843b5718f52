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
import hashlib
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from huey import Huey, RedisHuey, SqliteHuey
from huey.api import PeriodicTask
from huey.exceptions import RetryTask, TaskLockedException
from huey.storage import RedisExpireStorage

from timmy_compactor import logs
from timmy_compactor.atomic import private_dir, private_file
from timmy_compactor.config import Config, mask_url_password
from timmy_compactor.errors import TimmyError
from timmy_compactor.sessions.names import UnsafeIdError, file_id, is_session_name, session_id_of
from timmy_compactor.sidecar import dblook, work
from timmy_compactor.sidecar.records import (
    COMMIT_SWEEP,
    Records,
    StateNotWritableError,
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


LOCK_TTL_SECONDS = 120
"""A session's queue lock expires after this (Redis), so a consumer killed mid-task frees it."""
LOCK_WAIT_SECONDS = 30.0
"""How long a task waits for a session another consumer is compacting before huey retries it."""


QUEUE_WARN_EVERY_SECONDS = 30.0
"""While the queue backend is unreachable, one warning per this many seconds (per process)."""
QUEUE_MAX_BACKOFF_SECONDS = 5.0


QUIET_TASK_PREFIX = "quiet-"
"""The ids of the tasks the sidecar enqueues for itself (watcher, sweeps, the CLI): their results are
not kept (nobody reads them, and kept they would fill the queue's storage). A task enqueued the plain
huey way (`compact_session(path)`, the Python recipe) keeps its result until read: `.get(blocking=True)`."""


def quiet_id() -> str:
    return QUIET_TASK_PREFIX + uuid.uuid4().hex


class ResultsWhenAsked:
    """huey's result store, left alone by the sidecar's own tasks (ids from `quiet_id`)."""

    def put_result(self, key: Any, data: Any) -> Any:
        if isinstance(key, str) and key.startswith(QUIET_TASK_PREFIX):
            return None
        return super().put_result(key, data)  # type: ignore[misc]


class PatientRedisHuey(ResultsWhenAsked, RedisHuey):  # type: ignore[misc]
    """A consumer whose Redis went away backs off (up to 5 s between tries) and logs one warning per
    interval instead of a traceback per poll; it picks up again as soon as Redis answers."""

    _down_since: float | None = None
    _warned_at: float = 0.0
    _backoff: float = 0.1

    def dequeue(self) -> Any:
        return self._patiently(super().dequeue, None)

    def enqueue(self, task: Any) -> Any:
        if isinstance(task, PeriodicTask):  # from the scheduler: a missed sweep is caught up later
            return self._patiently(lambda: super(PatientRedisHuey, self).enqueue(task), None)
        return super().enqueue(task)

    def read_schedule(self, timestamp: Any = None) -> Any:  # the consumer's scheduler, every second
        return self._patiently(lambda: super(PatientRedisHuey, self).read_schedule(timestamp), [])

    def delete(self, key: Any) -> Any:  # a task's revoke flag, cleared after it ran
        return self._patiently(lambda: super(PatientRedisHuey, self).delete(key), None)

    def is_revoked(self, task: Any, timestamp: Any = None, peek: bool = True) -> Any:
        return self._patiently(lambda: super(PatientRedisHuey, self).is_revoked(task, timestamp, peek), False)

    def _patiently(self, call: Callable[[], Any], fallback: Any) -> Any:
        import redis

        try:
            task = call()
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            now = time.monotonic()
            if self._down_since is None:
                self._down_since, self._backoff = now, 0.1
            if now - self._warned_at >= QUEUE_WARN_EVERY_SECONDS:
                self._warned_at = now
                logs.get_logger(__name__).warning(
                    "queue_unreachable",
                    url=mask_url_password(str(self.storage_kwargs.get("url"))),
                    error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                    down_seconds=round(now - self._down_since, 1),
                    next_warning_in_s=QUEUE_WARN_EVERY_SECONDS,
                )
            time.sleep(self._backoff)
            self._backoff = min(self._backoff * 2, QUEUE_MAX_BACKOFF_SECONDS)
            return fallback
        if self._down_since is not None:
            logs.get_logger(__name__).info(
                "queue_reachable_again", down_seconds=round(time.monotonic() - self._down_since, 1)
            )
            self._down_since, self._warned_at = None, 0.0
        return task


class StateSqliteHuey(ResultsWhenAsked, SqliteHuey):  # type: ignore[misc]
    """The SQLite queue in the state dir: a full disk or a read-only state dir is one
    StateNotWritableError naming the queue's file when enqueueing (the caller says it in one line),
    and one warning per interval while the consumer cannot take tasks off it, not a traceback a poll."""

    _warned_at: float = 0.0

    def enqueue(self, task: Any) -> Any:
        with recording(Path(self.storage_kwargs["filename"])):
            return super().enqueue(task)

    def dequeue(self) -> Any:
        try:
            with recording(Path(self.storage_kwargs["filename"])):
                return super().dequeue()
        except StateNotWritableError as exc:
            if time.monotonic() - self._warned_at >= QUEUE_WARN_EVERY_SECONDS:
                self._warned_at = time.monotonic()
                warn_not_writable(logs.get_logger(__name__), exc, next_warning_in_s=QUEUE_WARN_EVERY_SECONDS)
            time.sleep(QUEUE_MAX_BACKOFF_SECONDS)
            return None


def check_backend(config: Config) -> None:
    """Fail fast, in one line naming the URL, when the configured Redis does not answer."""
    if config.huey.backend != "redis":
        return
    import redis

    try:
        redis.Redis.from_url(config.huey.redis_url, socket_connect_timeout=3, socket_timeout=3).ping()
    except (redis.exceptions.RedisError, OSError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BackendUnreachableError(f"Redis at {config.huey.redis_url_shown} is not reachable: {reason}") from None


class BackendUnreachableError(TimmyError, ConnectionError):
    """The queue backend does not answer."""


def make_huey(config: Config) -> Huey:
    if config.huey.backend == "redis":
        # Blocking dequeue (BRPOP): an idle consumer wakes as soon as a task arrives, no polling.
        # RedisExpireStorage: plain keys, so a lock can expire on any Redis version (SET NX EX).
        return PatientRedisHuey(
            "timmy-compactor",
            storage_class=RedisExpireStorage,
            url=config.huey.redis_url,
            blocking=True,
            read_timeout=1,
            results=True,
        )
    queue = config.huey_sqlite_path
    with recording(queue):  # a full disk or a read-only state dir: one error naming the file
        private_dir(queue.parent)
        if not queue.exists():  # private from the start: sqlite gives its -wal and -shm the same mode
            os.close(os.open(queue, os.O_CREAT | os.O_WRONLY, 0o600))
        private_file(queue)
        return StateSqliteHuey("timmy-compactor", filename=str(queue), results=True)


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
    _records: Records | None = None

    def records(self) -> Records:
        """The sidecar's records (one connection factory per worker process, opened on first use)."""
        if self._records is None:
            self._records = Records(self.config.state_dir)
        return self._records


@contextlib.contextmanager
def queue_lock(huey: Huey, config: Config, name: str, wait: float = LOCK_WAIT_SECONDS) -> Iterator[None]:
    """huey's own lock (`Huey.lock_task`'s key, `put_if_empty`), kept in the queue backend: consumers
    on other hosts sharing one Redis never compact the same session at once. Waits for a holder to
    finish (compactions take milliseconds), then lets huey retry the task. The lock records its
    holder (host, PID): a lock left by a killed process of this host is broken at once; on Redis a
    lock also expires after LOCK_TTL_SECONDS (a killed consumer on another host)."""
    key = huey.lock_task(name)._key  # the very key `with huey.lock_task(name):` holds
    ttl = LOCK_TTL_SECONDS if config.huey.backend == "redis" else None
    owner = {"host": socket.gethostname(), "pid": os.getpid()}
    deadline = time.monotonic() + wait
    waited = False
    while not huey.put_if_empty(key, owner, ttl):
        holder = huey.get(key, peek=True)
        if _dead_local_holder(holder):
            logs.get_logger(__name__).warning("stale_session_lock_broken", lock=name, holder=holder)
            huey.delete(key)
            continue
        if not waited:
            waited = True
            logs.get_logger(__name__).info("session_busy_elsewhere", lock=name, holder=holder)
        if time.monotonic() >= deadline:
            raise TaskLockedException(f"unable to acquire lock {name} within {wait:.0f}s (held by {holder})")
        time.sleep(0.02)
    try:
        yield
    finally:
        huey.delete(key)


def _dead_local_holder(holder: Any) -> bool:
    if not isinstance(holder, dict) or holder.get("host") != socket.gethostname():
        return False
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def enqueue_startup_sweep(app: App) -> None:
    """The catch-up sweep of a start, enqueued by the first of the consumer's workers and the watcher
    to ask (`work.startup_sweep_due`): one per start. If its enqueue fails (Redis went away), the turn
    is given back for the next starter, and the error raised."""
    if not work.startup_sweep_due(app.config):
        return
    try:
        app.sweep_sessions(id=quiet_id())
    except BaseException:
        work.startup_sweep_not_done(app.config)
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
    log = logs.get_logger(__name__)
    huey = make_huey(config)
    retry = {"retries": config.huey.retries, "retry_delay": config.huey.retry_delay_seconds, "retry_backoff": 2}
    app: App

    @huey.task(context=True, **retry)
    def compact_session(path: str, task: Any = None) -> dict[str, Any]:
        """Compact one raw session into its view (or remove a stale view below the threshold)."""
        final_attempt = task is None or not task.retries
        try:
            with queue_lock(huey, config, session_lock_name(path)):
                app.records().taken(path)  # from here on, a change needs a new task: it may miss it
                result = work.process_session(path, config, app.records(), final_attempt=final_attempt)
        except work.StillWritingError:
            # expected while Hermes writes: one debug line and a retry, not a traceback
            log.debug("session_still_being_written", path=path, retry_in_s=config.huey.retry_delay_seconds)
            raise RetryTask(delay=config.huey.retry_delay_seconds) from None
        except StateNotWritableError as exc:  # a full disk, a read-only state dir: one line; a later sweep retries
            warn_not_writable(log, exc, task="compact_session")
            return {"path": path, "action": "failed", "reason": str(exc)}
        return dataclasses.asdict(result)

    @huey.task(**retry)
    def compact_db_session(session_id: str) -> dict[str, Any]:
        """Compact one session's live rows from Hermes' state.db into its view."""
        try:
            with queue_lock(huey, config, session_lock_name(session_id)):
                app.records().taken(f"db:{session_id}")  # from here on, a change needs a new task
                return dataclasses.asdict(work.process_db_session(session_id, config, app.records()))
        except StateNotWritableError as exc:  # a full disk, a read-only state dir: one line; a later sweep retries
            warn_not_writable(log, exc, task="compact_db_session")
            return {"path": f"db:{session_id}", "action": "failed", "reason": str(exc)}

    @huey.task()
    def sweep_sessions(startup: bool = False, db_only: bool = False) -> int:
        """Enqueue every session that changed since last seen (snapshot files and state.db rows).

        `startup`: the catch-up of a starting consumer worker or watcher, run only if
        `startup_sweep_due` (a starting worker or watcher asks that before enqueueing, so one start
        enqueues one sweep). `db_only`: what a commit to state.db calls for — only its sessions,
        compared by high-water mark, without listing the sessions folder. A session whose task is
        still waiting in the queue is not enqueued again."""
        try:
            return _sweep(startup, db_only)
        except StateNotWritableError as exc:  # a full disk, a read-only state dir: one line, not a traceback
            warn_not_writable(log, exc, task="sweep_sessions")
            return 0

    def _sweep(startup: bool, db_only: bool = False) -> int:
        if startup and not work.startup_sweep_due(config):
            return 0
        records = app.records()
        if db_only:
            records.taken(COMMIT_SWEEP)  # from here on, a new commit needs a new sweep: this one may miss it
        look = dblook.look_at_state_db(config, records)  # one look for the whole sweep
        if db_only:
            work.remove_gone_db_views(config, records, look)
            stale: list[Path] = []
        else:
            work.remove_orphan_views(config, records, look)
            work.remove_stale_temp_files(config)
            stale = work.stale_sessions(config, records, look)
        stale_db = work.stale_db_sessions(config, records, look, check_lost=not db_only)  # a commit: what it changed
        waiting = records.waiting()
        stale = [p for p in stale if str(p) not in waiting]
        stale_db = [s for s in stale_db if f"db:{s}" not in waiting]
        for path in stale:
            _enqueue(str(path), compact_session, str(path))
        for session_id in stale_db:
            _enqueue(f"db:{session_id}", compact_db_session, session_id)
        if stale or stale_db:
            log.info("sweep_enqueued", snapshots=len(stale), db_sessions=len(stale_db), already_waiting=len(waiting))
        records.note("last_sweep", {"at": time.time(), "enqueued": len(stale) + len(stale_db)})
        return len(stale) + len(stale_db)

    def _enqueue(key: str, task: Any, argument: str) -> None:
        """Mark `key` waiting, then enqueue (marked first: the task may start and unmark it at once)."""
        app.records().queue(key)
        try:
            task(argument, id=quiet_id())  # the sidecar's own task: no result kept
        except BaseException:
            app.records().taken(key)  # not in the queue after all: the next sweep tries again
            raise

    @huey.on_startup()
    def catch_up_on_start() -> None:
        """A consumer that was down (or killed mid-task) sweeps once as it starts."""
        import redis

        try:
            enqueue_startup_sweep(app)  # one sweep per start: the first of the workers and the watcher
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            # Redis went away between the start check and this worker's start: the periodic sweep
            # catches up once it answers again (one line, not a traceback)
            log.warning("startup_sweep_skipped", reason="queue unreachable", error=type(exc).__name__)
        except StateNotWritableError as exc:  # the SQLite queue cannot take the sweep: one line
            warn_not_writable(log, exc, task="startup_sweep")

    @huey.periodic_task(every(config.huey.sweep_every_minutes))
    def periodic_sweep() -> int:
        return int(sweep_sessions.call_local())

    @huey.task()
    def session_export() -> dict[str, Any]:
        """Export the raw sessions (never the views) as training data; incremental."""
        from timmy_compactor.export.run import run_export_task

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

    app = App(
        config=config,
        huey=huey,
        compact_session=compact_session,
        compact_db_session=compact_db_session,
        sweep_sessions=sweep_sessions,
        session_export=session_export,
        periodic_sweep=periodic_sweep,
        periodic_export=periodic_export,
    )
    return app

"""The sidecar's Huey app: its queue, its tasks and their schedule, built from one `Config`.

`make_app(config)` has no side effect at import. The root `tasks.py` builds the app once from the
configuration in the environment (`$TIMMY_COMPACTOR_CONFIG`, then
`~/.timmy/timmy-config/compaction.yaml`, then the defaults) for `huey_consumer tasks.huey`; the
`watch`, `enqueue` and `sweep` verbs build their own from `--config`. Both register the same task
names (`timmy_compactor.sidecar.app.<task>`) on the same queue, so what one enqueues the other runs.

Schedules: huey's `crontab` cannot say "every 90 minutes" (`*/90` in the minute field means minute 0
of every hour), so a periodic task here runs when the minutes since the Unix epoch are a multiple of
its interval: `sweep_every_minutes: 90` sweeps at 00:00, 01:30, 03:00… UTC, and 5 at :00, :05, :10….
"""

from __future__ import annotations

import calendar
import dataclasses
import os
from collections.abc import Callable
from datetime import datetime
from typing import Any

from huey import Huey, RedisHuey, SqliteHuey
from huey.exceptions import RetryTask

from timmy_compactor import logs
from timmy_compactor.atomic import private_dir, private_file
from timmy_compactor.config import Config
from timmy_compactor.sidecar import work
from timmy_compactor.sidecar.records import Records


def every(minutes: int) -> Callable[[datetime], bool]:
    """A huey periodic-task schedule: true once every `minutes` minutes, on the minutes since the epoch."""
    if minutes < 1:
        raise ValueError(f"a schedule needs at least 1 minute between runs, got {minutes}")

    def due(when: datetime) -> bool:
        return (calendar.timegm(when.utctimetuple()) // 60) % minutes == 0

    due.__name__ = f"every_{minutes}_minutes"
    return due


def make_huey(config: Config) -> Huey:
    if config.huey.backend == "redis":
        # Blocking dequeue (BRPOP): an idle consumer wakes as soon as a task arrives, no polling.
        return RedisHuey("timmy-compactor", url=config.huey.redis_url, blocking=True, read_timeout=1, results=False)
    queue = config.huey_sqlite_path
    private_dir(queue.parent)
    if not queue.exists():  # private from the start: sqlite gives its -wal and -shm the same mode
        os.close(os.open(queue, os.O_CREAT | os.O_WRONLY, 0o600))
    private_file(queue)
    return SqliteHuey("timmy-compactor", filename=str(queue), results=False)


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
            result = work.process_session(path, config, app.records(), final_attempt=final_attempt)
        except work.StillWritingError:
            # expected while Hermes writes: one debug line and a retry, not a traceback
            log.debug("session_still_being_written", path=path, retry_in_s=config.huey.retry_delay_seconds)
            raise RetryTask(delay=config.huey.retry_delay_seconds) from None
        return dataclasses.asdict(result)

    @huey.task(**retry)
    def compact_db_session(session_id: str) -> dict[str, Any]:
        """Compact one session's live rows from Hermes' state.db into its view."""
        return dataclasses.asdict(work.process_db_session(session_id, config, app.records()))

    @huey.task()
    def sweep_sessions(startup: bool = False) -> int:
        """Enqueue every session that changed since last seen (snapshot files and state.db rows).

        `startup`: the catch-up of a starting consumer worker or watcher; those of one start (every
        worker's and the watcher's) collapse into one sweep."""
        if startup and not work.startup_sweep_due(config):
            return 0
        work.remove_orphan_views(config, app.records())
        stale = work.stale_sessions(config, app.records())
        for path in stale:
            compact_session(str(path))
        stale_db = work.stale_db_sessions(config, app.records())
        for session_id in stale_db:
            compact_db_session(session_id)
        if stale or stale_db:
            log.info("sweep_enqueued", snapshots=len(stale), db_sessions=len(stale_db))
        return len(stale) + len(stale_db)

    @huey.on_startup()
    def catch_up_on_start() -> None:
        """A consumer that was down (or killed mid-task) sweeps once as it starts."""
        sweep_sessions(startup=True)

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

"""Huey wiring for the sidecar: `huey_consumer tasks.huey` runs these tasks.

Enqueue by hand from a shell:
    timmy-compactor enqueue ~/.hermes/sessions/session_<id>.json
    python -c "from tasks import compact_session; compact_session('/path/to/session_<id>.json')"

The configuration is read once at import (`$TIMMY_COMPACTOR_CONFIG`, then
`~/.timmy/timmy-config/compaction.yaml`, then the defaults), so the consumer, the watcher and a
shell that enqueues all agree on the queue.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from huey import Huey, RedisHuey, SqliteHuey, crontab

from timmy_compactor import logs, sidecar
from timmy_compactor.config import Config, load_config
from timmy_compactor.records import Records

config = load_config()
logs.configure(config.logging.format, config.logging.level)
log = logs.get_logger("tasks")


def make_huey(config: Config) -> Huey:
    if config.huey.backend == "redis":
        # Blocking dequeue (BRPOP): an idle consumer wakes as soon as a task arrives, no polling.
        return RedisHuey("timmy-compactor", url=config.huey.redis_url, blocking=True, read_timeout=1, results=False)
    config.huey_sqlite_path.parent.mkdir(parents=True, exist_ok=True)
    return SqliteHuey("timmy-compactor", filename=str(config.huey_sqlite_path), results=False)


huey = make_huey(config)
_records: Records | None = None


def records() -> Records:
    global _records  # noqa: PLW0603 -- one connection factory per worker process
    if _records is None:
        _records = Records(config.state_dir)
    return _records


@huey.task(
    retries=config.huey.retries,
    retry_delay=config.huey.retry_delay_seconds,
    retry_backoff=2,
    context=True,
)
def compact_session(path: str, task: Any = None) -> dict[str, Any]:
    """Compact one raw session into its view (or remove a stale view below the threshold)."""
    final_attempt = task is None or not task.retries
    result = sidecar.process_session(path, config, records(), final_attempt=final_attempt)
    return dataclasses.asdict(result)


@huey.task(retries=config.huey.retries, retry_delay=config.huey.retry_delay_seconds, retry_backoff=2)
def compact_db_session(session_id: str) -> dict[str, Any]:
    """Compact one session's live rows from Hermes' state.db into its view."""
    return dataclasses.asdict(sidecar.process_db_session(session_id, config, records()))


@huey.task()
def sweep_sessions() -> int:
    """Enqueue every session that changed since last seen (snapshot files and state.db rows)."""
    stale = sidecar.stale_sessions(config, records())
    for path in stale:
        compact_session(str(path))
    stale_db = sidecar.stale_db_sessions(config, records())
    for session_id in stale_db:
        compact_db_session(session_id)
    if stale or stale_db:
        log.info("sweep_enqueued", snapshots=len(stale), db_sessions=len(stale_db))
    return len(stale) + len(stale_db)


@huey.on_startup()
def catch_up_on_start() -> None:
    """A consumer that was down (or killed mid-task) sweeps once as it starts."""
    sweep_sessions()


@huey.periodic_task(crontab(minute=f"*/{config.huey.sweep_every_minutes}"))
def periodic_sweep() -> int:
    return sweep_sessions.call_local()


def _every(minutes: int) -> crontab:
    if minutes < 60:
        return crontab(minute=f"*/{minutes}")
    return crontab(minute="0", hour=f"*/{max(1, minutes // 60)}")


@huey.task()
def session_export() -> dict[str, Any]:
    """Export the raw sessions (never the views) as training data; incremental."""
    from timmy_compactor.export import run_export_task

    summary = run_export_task(config)
    log.info("export_done", **summary.as_dict())
    return summary.as_dict()


@huey.periodic_task(_every(config.export.every_minutes))
def periodic_export() -> dict[str, Any]:
    return session_export.call_local()

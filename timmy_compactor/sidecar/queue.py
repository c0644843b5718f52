"""The sidecar's queue backend: huey on Redis or on SQLite in the state dir, patient when the backend
goes away (one warning per interval, not a traceback per poll), and quiet about the results of the
sidecar's own tasks."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from huey import Huey, RedisHuey, SqliteHuey
from huey.api import PeriodicTask
from huey.storage import RedisExpireStorage

from timmy_compactor import logs
from timmy_compactor.atomic import private_dir, private_file
from timmy_compactor.config import Config, mask_url_password
from timmy_compactor.errors import TimmyError
from timmy_compactor.sidecar.records import StateNotWritableError, recording, warn_not_writable

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
                refused = isinstance(exc, redis.exceptions.AuthenticationError)  # not an outage: the password
                logs.get_logger(__name__).warning(
                    "queue_authentication_failed" if refused else "queue_unreachable",
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
        url = config.huey.redis_url_shown
        refused = auth_failure(exc, config)
        if refused is not None:
            raise BackendUnreachableError(f"Redis {refused}") from None
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BackendUnreachableError(f"Redis at {url} is not reachable: {reason}") from None


AUTH_FAILED = "authentication failed"


def auth_failure(exc: BaseException, config: Config) -> str | None:
    """A password Redis does not accept is not an outage (redis-py raises both as ConnectionError):
    `authentication failed at <url> (…): set …`, what to set; None for any other error."""
    import redis

    if not isinstance(exc, redis.exceptions.AuthenticationError):
        return None
    from urllib.parse import urlsplit

    try:
        given = bool(urlsplit(config.huey.redis_url).password)
    except ValueError:
        given = False
    why = "the password given is refused" if given else "it asks for a password"
    return (
        f"{AUTH_FAILED} at {config.huey.redis_url_shown} ({why}): set the password in huey.redis_url "
        "or TIMMY_REDIS_URL, redis://:PASSWORD@host:port/db"
    )


class BackendUnreachableError(TimmyError, ConnectionError):
    """The queue backend does not answer (or refuses the password it was given)."""


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

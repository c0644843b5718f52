"""Live first: a session Hermes writes now goes ahead of sweep work (issue 32.6).

The watcher's tasks (a session's write, a commit's compactions), the CLI's `enqueue` and the reruns of
sessions that were busy are enqueued with priority LIVE; a sweep's (a start's catch-up of 10^5
sessions, the periodic one) with none. Both queue backends take the higher priority first: huey's
SQLite storage orders by it, and on Redis the queue is a sorted set (`LiveFirstRedisStorage`: huey's
priority storage; a queue left as a list by an older version is moved into it, in order, as first
touched).

`warm_up` asks Hermes for its tool schemas as a process starts, not as its first live state.db session
comes (the answer is a child process's, seconds; it goes into every state.db session's input mark).

`enqueue_all` puts a sweep's tasks in the queue a thousand at a time (one SQLite transaction, one Redis
pipeline each): a start's sweep of 10^5 sessions does not hold the queue's write lock 10^5 times
while a live task waits for it.

`pending_keys` is what a full sweep re-checks its `queued` rows against: the sessions whose tasks
are really in the queue (a task taken off it by a worker killed before it started is in none).
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from huey.storage import PriorityRedisExpireStorage, SqliteStorage

from timmy_compactor.logs import get_logger

LIVE = 10
"""The priority of a session written now (sweep work has none: 0)."""

log = get_logger(__name__)


class LiveFirstRedisStorage(PriorityRedisExpireStorage):  # type: ignore[misc]
    """huey's Redis priority queue (a sorted set, BZPOPMIN), moving an older version's list queue into
    it on the first WRONGTYPE."""

    def enqueue(self, data: bytes, priority: float | None = None) -> Any:
        return self._moved(lambda: super(LiveFirstRedisStorage, self).enqueue(data, priority))

    def dequeue(self) -> Any:
        return self._moved(super().dequeue)

    def queue_size(self) -> Any:
        return self._moved(super().queue_size)

    def enqueued_items(self, limit: int | None = None) -> Any:
        return self._moved(lambda: super(LiveFirstRedisStorage, self).enqueued_items(limit))

    def _moved(self, call: Callable[[], Any]) -> Any:
        import redis

        try:
            return call()
        except redis.exceptions.ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            moved = move_list_queue(self.conn, self.queue_key)
            log.info("queue_moved_to_priorities", tasks=moved, reason="a queue of an older version (a list)")
            return call()


def move_list_queue(conn: Any, key: str) -> int:
    """Move a list queue (LPUSH/BRPOP: oldest at the right) into a sorted set at priority 0, oldest
    first, atomically (WATCH); how many tasks moved."""
    import redis

    with conn.pipeline() as pipe:
        while True:
            try:
                pipe.watch(key)
                if pipe.type(key) not in (b"list", "list"):
                    pipe.unwatch()
                    return 0
                oldest_first = pipe.lrange(key, 0, -1)[::-1]
                pipe.multi()
                pipe.delete(key)
                if oldest_first:  # the 8-byte prefix huey's priority queue orders equal priorities by
                    pipe.zadd(key, {struct.pack(">Q", n) + item: 0 for n, item in enumerate(oldest_first)})
                pipe.execute()
                return len(oldest_first)
            except redis.exceptions.WatchError:
                continue


def pending_keys(huey: Any, key_of: Callable[[str, str], str | None]) -> set[str]:
    """The session keys of the compaction tasks in the queue (`key_of(task name, argument)`); a
    message that cannot be read names none."""
    keys = set()
    for data in huey.storage.enqueued_items():
        try:
            task = huey.deserialize_task(data)
        except Exception:  # noqa: BLE001 -- a task of an unknown name or version: not a session's
            continue
        arg = task.args[0] if task.args else None
        key = key_of(task.name.rsplit(".", 1)[-1], arg) if isinstance(arg, str) else None
        if key is not None:
            keys.add(key)
    return keys


def warm_up(config: Any, platform: str = "cli") -> threading.Thread:
    """In the background: the tokens of Hermes' tool schemas for `platform` (Hermes' default), so the
    first commit or state.db task of this process does not wait seconds for them."""
    from timmy_compactor.compactor import tool_schema_tokens
    from timmy_compactor.sessions.sources import STATE_DB

    def warm() -> None:
        try:
            tool_schema_tokens(None, STATE_DB, config, platform)
        except Exception as exc:  # noqa: BLE001 -- the first real use says what is wrong, in its own line
            log.debug("warm_up_failed", error=type(exc).__name__)

    thread = threading.Thread(target=warm, name="warm up", daemon=True)
    thread.start()
    return thread


BATCH = 1000
"""Tasks per write of `enqueue_all`."""


def enqueue_all(huey: Any, tasks: list[Any]) -> Iterator[int]:
    """Enqueue `tasks` (huey Task objects), BATCH per write; yields how many are in after each write."""
    storage = huey.storage
    for start in range(0, len(tasks), BATCH):
        batch = tasks[start : start + BATCH]
        if isinstance(storage, SqliteStorage) and not huey.immediate:
            rows = [(storage.name, storage.to_blob(huey.serialize_task(t)), t.priority or 0) for t in batch]
            with storage.db(commit=True) as cursor:
                cursor.executemany("insert into task (queue, data, priority) values (?, ?, ?)", rows)
        elif isinstance(storage, LiveFirstRedisStorage) and not huey.immediate:
            storage.queue_size()  # an older version's list queue moved first
            now = int(time.time() * 1e6)
            members = {
                struct.pack(">Q", now + n) + huey.serialize_task(t): -(t.priority or 0) for n, t in enumerate(batch)
            }
            storage.conn.zadd(storage.queue_key, members)
        else:
            for task in batch:
                huey.enqueue(task)
        yield start + len(batch)

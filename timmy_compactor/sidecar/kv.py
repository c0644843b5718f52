"""Compare-and-set on the queue backend's key/value store, for the session leases (`sidecar.lease`):
huey's `kv` table on SQLite, plain keys with expiry on Redis, a dict in one process for huey's
immediate mode."""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from huey import Huey
from huey.storage import MemoryStorage, RedisStorage

_RENEW = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end return 0"
)
_DROP = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


class Ops:
    """Compare-and-set on the backend's key/value store (SQLite: huey's `kv` table)."""

    expires = False

    def __init__(self, huey: Huey) -> None:
        self.storage: Any = huey.storage

    def add(self, key: str, value: bytes, ttl: float) -> bool:
        return bool(self.storage.put_if_empty(key, value))

    def get(self, key: str) -> bytes | None:
        query = "SELECT value FROM kv WHERE queue = ? AND key = ?"
        rows = self.storage.sql(query, (self.storage.name, key), results=True)
        return bytes(rows[0][0]) if rows else None

    def _change(self, query: str, params: tuple[Any, ...]) -> bool:
        with self.storage.db(commit=True) as cursor:
            cursor.execute(query, params)
            return bool(cursor.rowcount)

    def swap(self, key: str, old: bytes, new: bytes, ttl: float) -> bool:
        query = "UPDATE kv SET value = ? WHERE queue = ? AND key = ? AND value = ?"
        return self._change(query, (new, self.storage.name, key, old))

    def drop(self, key: str, old: bytes) -> bool:
        return self._change("DELETE FROM kv WHERE queue = ? AND key = ? AND value = ?", (self.storage.name, key, old))

    def put(self, key: str, value: bytes, ttl: float) -> None:
        self.storage.put_data(key, value)

    def pop(self, key: str) -> bytes | None:
        with self.storage.db(commit=True) as cursor:  # one transaction (`begin exclusive`)
            cursor.execute("SELECT value FROM kv WHERE queue = ? AND key = ?", (self.storage.name, key))
            row = cursor.fetchone()
            cursor.execute("DELETE FROM kv WHERE queue = ? AND key = ?", (self.storage.name, key))
        return bytes(row[0]) if row else None

    def scan(self, prefix: str) -> list[tuple[str, bytes]]:
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        query = "SELECT key, value FROM kv WHERE queue = ? AND key LIKE ? ESCAPE '\\'"
        return [(k, bytes(v)) for k, v in self.storage.sql(query, (self.storage.name, pattern), results=True)]


class RedisOps(Ops):
    """The same on Redis (huey's key prefix); a lease's key expires by itself."""

    expires = True

    def _k(self, key: str) -> bytes:
        return bytes(self.storage.result_key(key))

    def add(self, key: str, value: bytes, ttl: float) -> bool:
        return bool(self.storage.conn.set(self._k(key), value, nx=True, px=int(ttl * 1000)))

    def get(self, key: str) -> bytes | None:
        found = self.storage.conn.get(self._k(key))
        return bytes(found) if found is not None else None

    def swap(self, key: str, old: bytes, new: bytes, ttl: float) -> bool:
        return bool(self.storage.conn.eval(_RENEW, 1, self._k(key), old, new, int(ttl * 1000)))

    def drop(self, key: str, old: bytes) -> bool:
        return bool(self.storage.conn.eval(_DROP, 1, self._k(key), old))

    def put(self, key: str, value: bytes, ttl: float) -> None:
        self.storage.conn.set(self._k(key), value, px=int(ttl * 1000))

    def pop(self, key: str) -> bytes | None:
        pipe = self.storage.conn.pipeline(transaction=True)
        found, _ = pipe.get(self._k(key)).delete(self._k(key)).execute()
        return bytes(found) if found is not None else None

    def scan(self, prefix: str) -> list[tuple[str, bytes]]:
        strip = len(self._k(""))
        keys = list(self.storage.conn.scan_iter(match=self._k(prefix) + b"*", count=1000))
        values = self.storage.conn.mget(keys) if keys else []
        return [(k[strip:].decode(), bytes(v)) for k, v in zip(keys, values, strict=True) if v is not None]


class MemoryOps(Ops):
    """The same in one process, for huey's immediate mode (its in-memory storage): a dict under a lock,
    each value with its deadline."""

    expires = True

    def __init__(self) -> None:  # no reference to the storage: the store is dropped with it
        self.values: dict[str, tuple[bytes, float]] = {}
        self.guard = threading.Lock()

    def _live(self, key: str) -> bytes | None:
        found = self.values.get(key)
        if found is not None and found[1] < time.monotonic():
            del self.values[key]
            return None
        return found[0] if found else None

    def add(self, key: str, value: bytes, ttl: float) -> bool:
        with self.guard:
            if self._live(key) is not None:
                return False
            self.values[key] = (value, time.monotonic() + ttl)
            return True

    def get(self, key: str) -> bytes | None:
        with self.guard:
            return self._live(key)

    def swap(self, key: str, old: bytes, new: bytes, ttl: float) -> bool:
        with self.guard:
            if self._live(key) != old:
                return False
            self.values[key] = (new, time.monotonic() + ttl)
            return True

    def drop(self, key: str, old: bytes) -> bool:
        with self.guard:
            if self._live(key) != old:
                return False
            del self.values[key]
            return True

    def put(self, key: str, value: bytes, ttl: float) -> None:
        with self.guard:
            self.values[key] = (value, time.monotonic() + ttl)

    def pop(self, key: str) -> bytes | None:
        with self.guard:
            found = self._live(key)
            self.values.pop(key, None)
            return found

    def scan(self, prefix: str) -> list[tuple[str, bytes]]:
        with self.guard:
            live = [(k, self._live(k)) for k in list(self.values) if k.startswith(prefix)]
            return [(k, v) for k, v in live if v is not None]


def ops_of(huey: Huey) -> Ops:
    """The compare-and-set of `huey`'s storage as it is now."""
    if isinstance(huey.storage, RedisStorage):
        return RedisOps(huey)
    if isinstance(huey.storage, MemoryStorage):
        return _memory_ops_of(huey)
    return Ops(huey)


_MEMORY: weakref.WeakKeyDictionary[Any, MemoryOps] = weakref.WeakKeyDictionary()


def _memory_ops_of(huey: Huey) -> MemoryOps:
    """One in-memory store per storage object: every `Leases` of an immediate-mode huey shares it."""
    ops = _MEMORY.get(huey.storage)
    if ops is None:
        ops = _MEMORY[huey.storage] = MemoryOps()
    return ops

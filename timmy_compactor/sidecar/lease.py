"""Per-session leases in the queue backend, shared by every consumer of one queue (issue 21.7).

A session's lock (`<queue>.lock.session:<id>`, the key `Huey.lock_task` would use) is a lease of
LEASE_SECONDS, renewed by a heartbeat thread while its task runs: a consumer that dies (kill -9, a
lost host) frees it within one lease. Its value names the holder (host, PID, a random token) and,
on SQLite, when it runs out (`until`; Redis expires the key itself).

- A task that finds its session leased leaves a *rerun* mark and gives its worker back; the holder
  takes the mark after letting go and enqueues one task for the session (however many waited).
- While a task holds a lease it also leaves an *in-flight* record; a record whose lease is gone was
  left by a dead consumer, and the first survivor to see it (`Leases.orphans`, polled by each
  worker) enqueues the session again.
- `fence` (checked right before a view is renamed into place): a consumer that resumes after its
  lease ran out (SIGSTOP, a long pause) does not replace a view another consumer may have made since.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from huey import Huey

from timmy_compactor.atomic import pid_is_dead
from timmy_compactor.errors import TimmyError
from timmy_compactor.logs import get_logger
from timmy_compactor.sidecar import kv

log = get_logger(__name__)

LEASE_SECONDS = float(os.environ.get("TIMMY_LEASE_SECONDS") or 10.0)
"""How long a session's lease lasts unless renewed (a third of it between renewals)."""
MARK_SECONDS = 86_400
"""A rerun mark nobody took (its session never ran again) expires after this (Redis)."""


class LeaseLostError(TimmyError, RuntimeError):
    """This worker's lease on a session ran out (another consumer may hold it now)."""


def sweep_lock_name(sessions_dir: Path) -> str:
    """One lease per sessions folder for its full sweep (every consumer of the folder shares it)."""
    return "sweep:" + hashlib.sha256(str(sessions_dir).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def holder_of(raw: bytes | None) -> dict[str, Any]:
    """A lease's holder as recorded (empty for a lock this module did not write)."""
    try:
        found = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


class Lease:
    """One held session lease; a heartbeat thread renews it until `stop`."""

    def __init__(self, leases: Leases, name: str, value: dict[str, Any]) -> None:
        self.leases, self.name, self.value = leases, name, value
        self.raw = json.dumps(value).encode()
        self.inflight = b""
        self.lost = threading.Event()
        self._done = threading.Event()
        self._guard = threading.Lock()
        self._beat = threading.Thread(target=self._renew_until_done, name=f"lease {name}", daemon=True)
        self._beat.start()

    def _renew_until_done(self) -> None:
        while not self._done.wait(LEASE_SECONDS / 3):
            try:
                self.renew()
            except Exception:  # noqa: BLE001 -- the backend went away: the lease runs out, `fence` refuses the write
                continue

    def renew(self) -> bool:
        with self._guard:
            if self.lost.is_set():
                return False
            value = {**self.value, "until": time.time() + LEASE_SECONDS}
            raw = json.dumps(value).encode()
            if self.leases.ops.swap(self.leases.lock_key(self.name), self.raw, raw, LEASE_SECONDS):
                self.value, self.raw = value, raw
                return True
            self.lost.set()
            return False

    def fence(self) -> None:
        """Raise LeaseLostError unless this lease is still held (right before a view is renamed)."""
        with self._guard:
            if self.lost.is_set() or self.leases.ops.get(self.leases.lock_key(self.name)) != self.raw:
                self.lost.set()
                raise LeaseLostError(f"lease on {self.name} ran out; another consumer may have a newer view")

    def stop(self) -> None:
        self._done.set()
        self._beat.join()


class Leases:
    """The session leases of one huey queue (Redis or SQLite)."""

    def __init__(self, huey: Huey) -> None:
        self.huey = huey
        self._ops: tuple[Any, kv.Ops] | None = None
        self.host = socket.gethostname()

    @property
    def ops(self) -> kv.Ops:
        """The compare-and-set of the queue's storage now (`huey.immediate` swaps it for memory)."""
        storage = self.huey.storage
        if self._ops is None or self._ops[0] is not storage:
            self._ops = (storage, kv.ops_of(self.huey))
        return self._ops[1]

    def lock_key(self, name: str) -> str:
        return f"{self.huey.name}.lock.{name}"  # the key `Huey.lock_task(name)` holds

    def _key(self, kind: str, name: str = "") -> str:
        return f"{self.huey.name}.{kind}.{name}"

    def breakable(self, raw: bytes | None) -> bool:
        """A lease left by a dead process of this host, or (SQLite) past its `until`."""
        holder = holder_of(raw)
        if holder.get("host") == self.host and pid_is_dead(holder.get("pid")):
            return True
        until = holder.get("until")
        return not self.ops.expires and isinstance(until, int | float) and until < time.time()

    def _acquire(self, name: str) -> Lease | None:
        key = self.lock_key(name)
        value = {"host": self.host, "pid": os.getpid(), "token": uuid.uuid4().hex, "until": time.time() + LEASE_SECONDS}
        raw = json.dumps(value).encode()
        for _ in range(3):
            if self.ops.add(key, raw, LEASE_SECONDS):
                return Lease(self, name, value)
            held = self.ops.get(key)
            if held is None:
                continue  # let go meanwhile
            if not self.breakable(held):
                return None
            if self.ops.drop(key, held):
                log.warning("stale_session_lock_broken", lock=name, holder=holder_of(held))
        return None

    def take(self, name: str, job: dict[str, Any], *, rerun: bool = True) -> Lease | None:
        """The session's lease, or None after leaving a rerun mark for its holder (who enqueues
        `job` once it lets go). Tried again after the mark: a holder that let go just before the
        mark was left does not see it, but then the lease is free. `rerun=False`: no mark (what the
        holder is doing covers the job)."""
        lease = self._acquire(name)
        if lease is None and rerun:
            self.ops.put(self._key("rerun", name), json.dumps(job).encode(), MARK_SECONDS)
            lease = self._acquire(name)
        if lease is not None:
            # whatever a waiter asked for before now, this run covers (it reads the raw after this)
            self.ops.pop(self._key("rerun", name))
            lease.inflight = json.dumps({**job, "token": lease.value["token"]}).encode()
            self.ops.put(self._key("inflight", name), lease.inflight, MARK_SECONDS)
        return lease

    def holder(self, name: str) -> dict[str, Any]:
        return holder_of(self.ops.get(self.lock_key(name)))

    def release(self, lease: Lease) -> dict[str, Any] | None:
        """Let go of `lease` (its in-flight record first); the rerun job a waiter left, if any."""
        lease.stop()
        self.ops.drop(self._key("inflight", lease.name), lease.inflight)
        self.ops.drop(self.lock_key(lease.name), lease.raw)
        return holder_of(self.ops.pop(self._key("rerun", lease.name))) or None

    def orphans(self) -> list[dict[str, Any]]:
        """The jobs of in-flight records whose lease is gone (their consumer died), each claimed by
        exactly one caller (compare-and-delete), with a dead holder's lease broken."""
        prefix = self._key("inflight")
        claimed = []
        for key, raw in self.ops.scan(prefix):
            name, job = key[len(prefix) :], holder_of(raw)
            held = self.ops.get(self.lock_key(name))
            same = held is not None and holder_of(held).get("token") == job.get("token")
            if same and not self.breakable(held):
                continue  # its holder lives and renews it
            if same and held is not None:
                self.ops.drop(self.lock_key(name), held)
            if self.ops.drop(key, raw):
                claimed.append(job)
        return claimed

    def clear_dead_locks(self) -> list[str]:
        """Remove the leases held by dead processes of this host (a starting consumer calls it:
        what its killed predecessor held); never one of a live process or of another host."""
        prefix = self.lock_key("session:")
        cleared = []
        for key, raw in self.ops.scan(prefix):
            holder = holder_of(raw)
            if holder.get("host") == self.host and pid_is_dead(holder.get("pid")) and self.ops.drop(key, raw):
                cleared.append(key.removeprefix(self.lock_key("")))
        return cleared

    def once(self, mark: str, seconds: float) -> bool:
        """True for the first caller with this `mark` (e.g. a sweep's period) in `seconds`."""
        key = self._key("once", mark)
        raw = json.dumps({"host": self.host, "pid": os.getpid(), "until": time.time() + seconds}).encode()
        if self.ops.add(key, raw, seconds):
            if not self.ops.expires:  # SQLite keeps what Redis would expire: the past periods' marks go
                for old, value in self.ops.scan(self._key("once")):
                    until = holder_of(value).get("until")
                    if isinstance(until, int | float) and until < time.time():
                        self.ops.drop(old, value)
            return True
        held = self.ops.get(key)
        until = holder_of(held).get("until")
        past = not self.ops.expires and isinstance(until, int | float) and until < time.time()
        return bool(past and held is not None and self.ops.drop(key, held) and self.ops.add(key, raw, seconds))


@contextlib.contextmanager
def fenced(lease: Lease) -> Iterator[None]:
    """Within it, every atomic file commit first checks `lease` is still held (`atomic.COMMIT_FENCE`)."""
    from timmy_compactor.atomic import COMMIT_FENCE

    token = COMMIT_FENCE.set(lease.fence)
    try:
        yield
    finally:
        COMMIT_FENCE.reset(token)


def watch_orphans(leases: Leases, rerun: Callable[[dict[str, Any]], None]) -> threading.Thread:
    """A daemon thread (one per worker) that, every half lease, enqueues again (`rerun`) the
    in-flight sessions of consumers that died (`Leases.orphans`)."""

    def loop() -> None:
        while True:
            time.sleep(LEASE_SECONDS / 2)
            try:
                for job in leases.orphans():
                    log.warning("inflight_session_rerun", task=job.get("task"), reason="its consumer's lease ran out")
                    rerun(job)
            except Exception as exc:  # noqa: BLE001 -- the backend went away: the consumer says so; try again
                log.debug("inflight_check_failed", error=type(exc).__name__)

    thread = threading.Thread(target=loop, name="inflight watch", daemon=True)
    thread.start()
    return thread

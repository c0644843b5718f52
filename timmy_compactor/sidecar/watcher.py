"""`timmy-compactor watch`: watchdog events on what the session sources ask to be watched (the sessions
folder, state.db and its WAL: `sessions.sources.watched`) → debounced tasks: a session's compaction,
or a sweep of a source that changed as a whole.

Hermes writes a session by creating `.session_<id>_XXXX.tmp`, writing it and `os.replace`-ing it
onto `session_<id>.json`, so a write shows up as a *moved* event (then attribute changes), not
always as "modified". Temp files, views and other files are ignored. Events are throttled per
session (`Debouncer`): a complete write (closed, moved into place, deleted) is enqueued at once
unless that session was enqueued less than `debounce_ms` ago, an unfinished one (created,
modified) waits up to `debounce_ms` for its close; events inside the window after an enqueue
collapse into one trailing enqueue at its end, made only if the file changed since. A burst
therefore costs at most two tasks, a `cp` one, and no event waits much longer than `debounce_ms`.
If the queue backend is down (Redis restarting), paths wait in a backlog and are retried with
backoff; once it is back, a sweep is enqueued to catch up on anything missed.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from timmy_compactor.logs import get_logger
from timmy_compactor.sessions.names import is_session_name
from timmy_compactor.sessions.snapshots import SNAPSHOT_EVENTS
from timmy_compactor.sessions.sources import Watched
from timmy_compactor.sidecar.queue import QUEUE_MAX_BACKOFF_SECONDS

log = get_logger(__name__)

MAX_RETRY_SECONDS = QUEUE_MAX_BACKOFF_SECONDS
"""The longest wait between two tries of the backlog while the queue is down: the consumers' cap, so
that once it is back the watcher's events are not later than the consumers' polls (it was 10 s: 7.5 s
to a missed view after a Redis restart)."""
WARN_EVERY_SECONDS = 30.0
"""While the queue cannot take the watcher's tasks, one `enqueue_failed` line per this many seconds,
with the failed attempts since the last one (as the consumer's `queue_unreachable`,
`app.QUEUE_WARN_EVERY_SECONDS`)."""


Stat = tuple[int, int] | None
"""A file's (mtime_ns, size), None when it is gone."""


def file_stat(path: str) -> Stat:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


class Debouncer:
    """Collapses bursts of events per path; submits from one thread, retrying on failure.

    A *complete* write (the file closed after writing, renamed into place, deleted) is submitted at
    once; an unfinished one (created, modified: `cp` is still writing) waits up to `delay` for its
    close, and is submitted then if none came. After a submit, a window of `delay` is open: events
    inside it collapse into one trailing submit at its end, made only when the file's mtime or size
    differs from what was submitted (an attribute change after a `cp`, a second close of the same
    bytes, are not a new version). A `cp` of a session is one submit."""

    def __init__(
        self,
        delay_seconds: float,
        submit: Callable[[str], object],
        on_recovered: Callable[[], object] | None = None,
    ) -> None:
        self.delay = delay_seconds
        self.submit = submit
        self.on_recovered = on_recovered
        self._cond = threading.Condition()
        self._windows: dict[str, float] = {}  # path -> end of the window opened by its last submit
        self._submitted: dict[str, Stat] = {}  # path -> its stat when last submitted (while its window is open)
        self._dirty: set[str] = set()  # paths with events inside their window
        self._waiting: dict[str, float] = {}  # path -> when an unfinished write is submitted without its close
        self._ready: list[str] = []  # paths to submit now
        self._backlog: set[str] = set()  # paths whose submit failed
        self._retry_at = 0.0
        self._failures = 0
        self._down_since: float | None = None  # when the first submit of this outage failed
        self._warned_at = 0.0
        self._unsaid = 0  # failed attempts since the last warning line
        self._stopped = False
        self.submitted = 0
        self._thread = threading.Thread(target=self._run, name="debouncer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout=5)

    def touch(self, path: str, complete: bool = True) -> None:
        with self._cond:
            now = time.monotonic()
            if path in self._windows:
                self._dirty.add(path)
            elif complete:
                self._waiting.pop(path, None)
                self._open(path, now)
            elif path not in self._waiting:
                self._waiting[path] = now + self.delay
            self._cond.notify()

    def _open(self, path: str, now: float) -> None:
        self._ready.append(path)
        self._windows[path] = now + self.delay

    def pending(self) -> int:
        with self._cond:
            return len(self._ready) + len(self._dirty) + len(self._backlog) + len(self._waiting)

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                now = time.monotonic()
                for path, end in list(self._windows.items()):
                    if end > now:
                        continue
                    del self._windows[path]
                    submitted = self._submitted.pop(path, None)
                    if path in self._dirty:
                        self._dirty.discard(path)
                        if file_stat(path) != submitted:
                            self._open(path, now)
                for path, due in list(self._waiting.items()):
                    if due <= now and path not in self._windows:
                        del self._waiting[path]
                        self._open(path, now)
                batch, self._ready = self._ready, []
                if self._backlog and now >= self._retry_at:
                    batch.extend(sorted(self._backlog))
                    self._backlog.clear()
                if not batch:
                    deadlines = [*self._windows.values(), *self._waiting.values()]
                    wake = min([*deadlines, self._retry_at if self._backlog else now + 1.0])
                    self._cond.wait(timeout=max(0.001, wake - now))
                    continue
            self._submit_all(list(dict.fromkeys(batch)))

    def _submit_all(self, batch: list[str]) -> None:
        failed = []
        for path in batch:
            stat = file_stat(path)  # before the submit: the task reads this version or a newer one
            try:
                self.submit(path)
                self.submitted += 1
            except Exception as exc:  # noqa: BLE001 -- any backend error: keep the path, retry later
                failed.append(path)
                last_error = exc
                continue
            with self._cond:
                if path in self._windows:
                    self._submitted[path] = stat
        with self._cond:
            if failed:
                self._backlog.update(failed)
                self._failures += 1
                delay = retry_delay(self._failures)
                self._retry_at = time.monotonic() + delay
                self._warn_failed(len(failed), delay, last_error)
                return
            recovered = self._failures > 0
            self._failures = 0
            down_since, self._down_since, self._unsaid = self._down_since, None, 0
        if recovered:
            down = round(time.monotonic() - down_since, 1) if down_since is not None else None
            log.info("queue_backend_recovered", down_seconds=down)
            if self.on_recovered is not None:
                try:
                    self.on_recovered()
                except Exception as exc:  # noqa: BLE001
                    log.warning("catch_up_sweep_failed", error=str(exc))

    def _warn_failed(self, paths: int, delay: float, error: Exception) -> None:
        """One warning line per WARN_EVERY_SECONDS while enqueueing fails (called holding the lock)."""
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
        self._unsaid += 1
        if now - self._warned_at < WARN_EVERY_SECONDS:
            return
        self._warned_at = now
        log.warning(
            "enqueue_failed",
            failed_attempts=self._unsaid,
            paths=paths,
            waiting=len(self._backlog),
            retry_in_s=delay,
            down_seconds=round(now - self._down_since, 1),
            next_warning_in_s=WARN_EVERY_SECONDS,
            error=str(error).splitlines()[0] if str(error) else type(error).__name__,
        )
        self._unsaid = 0


def retry_delay(failures: int) -> float:
    """How long the backlog waits after this many failed tries in a row: 0.5 s, doubling, at most
    MAX_RETRY_SECONDS."""
    return min(MAX_RETRY_SECONDS, 0.25 * 2.0 ** min(failures, 6))


COMPLETE_EVENTS = frozenset({"closed", "moved", "deleted"})
"""After these the file is whole (closed after writing, renamed into place) or gone: submitted at once."""


class SessionEventHandler(FileSystemEventHandler):
    def __init__(
        self,
        debouncer: Debouncer,
        accept: Callable[[str], bool] = is_session_name,
        events: frozenset[str] = SNAPSHOT_EVENTS,
    ) -> None:
        self.debouncer = debouncer
        self.accept = accept
        self.events = events

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type not in self.events:
            return
        # moved: a session renamed away is gone (its view goes too); the name it lands on is new
        moved = event.event_type == "moved"
        candidates = [event.dest_path, getattr(event, "src_path", "")] if moved else [event.src_path]
        complete = event.event_type in COMPLETE_EVENTS
        for raw in candidates:
            path = raw.decode() if isinstance(raw, bytes) else raw
            if self.accept(Path(path).name):
                self.debouncer.touch(path, complete=complete)


UNREADABLE_RETRY_SECONDS = 10.0
"""While the sessions folder cannot be read, the watcher tries to watch it again this often."""
MISSING_RETRY_SECONDS = 1.0
"""While a watched folder does not exist yet (Hermes never ran on this home), the watcher looks this often."""


class _FolderWatch:
    """The watch on one folder a source asked for: scheduled once it exists and can be read. A missing
    folder is waited for, never created (Hermes creates its home and sessions folder on its first run):
    the sessions folder says so in one line. An unreadable sessions folder (no permission) is one warning
    saying what to do, never "watching", retried every UNREADABLE_RETRY_SECONDS. Once a folder is watched
    after the start, the caller sweeps to catch up (`on_recovered`)."""

    def __init__(self, observer: Any, handler: FileSystemEventHandler, one: Watched, debounce_ms: int) -> None:
        self.observer, self.handler, self.debounce_ms = observer, handler, debounce_ms
        self.folder, self.is_home = one.folder, one.is_home
        self.active = False
        self.said: set[str] = set()  # what was said once: missing, unreadable
        self.retry_at = 0.0

    def attempt(self) -> bool:
        """Watch the folder if it is there and can be read; True when this call started watching it."""
        if self.active or time.monotonic() < self.retry_at:
            return False
        if not self.folder.is_dir():
            self.retry_at = time.monotonic() + MISSING_RETRY_SECONDS
            if self._first("missing"):
                self._missing()
            return False
        real = _real_folder(self.folder, self.is_home)
        try:
            with os.scandir(real):
                pass
            self.observer.schedule(self.handler, str(real), recursive=False)
        except OSError as exc:
            self.retry_at = time.monotonic() + UNREADABLE_RETRY_SECONDS
            if self._first("unreadable"):
                self._unreadable(real, exc)
            return False
        self.active = True
        if self.is_home:
            log.info("watching", sessions_dir=str(real), debounce_ms=self.debounce_ms)
        return True

    def _first(self, what: str) -> bool:
        """Whether to say `what` now: the first time, for the sessions folder (another is waited for quietly)."""
        first = self.is_home and what not in self.said
        self.said.add(what)
        return first

    def _missing(self) -> None:
        log.info(
            "waiting_for_sessions_dir",
            sessions_dir=str(self.folder),
            hint="Hermes creates it on its first run (or set sessions.dir); watched once it exists, never created here",
        )

    def _unreadable(self, real: Path, exc: OSError) -> None:
        log.warning(
            "sessions_dir_unreadable",
            sessions_dir=str(real),
            error=exc.strerror or type(exc).__name__,
            hint=f"give the sidecar's user read and search permission on it (chmod u+rx {real}); "
            f"retried every {UNREADABLE_RETRY_SECONDS:.0f} s, state.db is still watched, views are kept",
        )


def watch(
    watched: Sequence[Watched],
    submit: Callable[[str], object],
    *,
    debounce_ms: int = 200,
    on_recovered: Callable[[], object] | None = None,
    stop: threading.Event | None = None,
    ready: threading.Event | None = None,
) -> None:
    """Run until `stop` is set (or forever), watching what the sources asked (`watched`); a change is
    submitted as its path (`changed` says what it means). A folder is watched once it exists and can be
    read (never created: `_FolderWatch`); one that comes later is caught up on with `on_recovered`.

    `ready` is set once the folders that can be watched are (every write in them after it is seen); a
    folder missing or unreadable then is watched once it can be.
    """
    debouncer = Debouncer(debounce_ms / 1000, submit, on_recovered)
    observer = Observer()
    folders = [
        _FolderWatch(observer, SessionEventHandler(debouncer, one.accepts, one.events), one, debounce_ms)
        for one in watched
    ]
    debouncer.start()
    observer.start()
    for folder in folders:
        folder.attempt()
    if ready is not None:
        ready.set()
    stop = stop or threading.Event()
    try:
        while not stop.wait(0.5):
            if not observer.is_alive():
                raise RuntimeError("the watchdog observer died")
            recovered = [folder.attempt() for folder in folders]
            if any(recovered) and on_recovered is not None:  # there or readable now: catch up on what was missed
                _catch_up(on_recovered)
    finally:
        observer.stop()
        observer.join(timeout=5)
        debouncer.stop()
        log.info("watcher_stopped", submitted=debouncer.submitted)


def _real_folder(folder: Path, said: bool) -> Path:
    """The folder as inotify sees it: through a symlink, events name the real path (or, for a
    symlinked root, would not come at all), so the resolved folder is watched."""
    real = folder.resolve()
    if said and real != folder.absolute():
        log.info("sessions_dir_resolved", sessions_dir=str(folder), watching=str(real))
    return real


def changed(watched: Sequence[Watched], path: str) -> tuple[Watched, str | None] | None:
    """What a submitted path means: the watch it belongs to and the key of the session it is (None:
    its source changed as a whole); None when no watch accepts it."""
    name = Path(path).name
    for one in watched:
        if one.accepts(name):
            return one, one.key_of(name) if one.key_of is not None else None
    return None


def _catch_up(on_recovered: Callable[[], object]) -> None:
    try:
        on_recovered()
    except Exception as exc:  # noqa: BLE001 -- the queue may be down: the debouncer's recovery sweeps then
        log.warning("catch_up_sweep_failed", error=str(exc))

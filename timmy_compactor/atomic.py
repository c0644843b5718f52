"""Files written whole or not at all, and exclusive locks between processes.

Every file this package writes (views, the export's JSONL and manifest, Hermes' config.yaml)
goes through a hidden temp file next to its target, fsync and `os.replace`; every lock is an
`fcntl.flock`, which the kernel releases when a process dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path

COMMIT_FENCE: ContextVar[Callable[[], None] | None] = ContextVar("COMMIT_FENCE", default=None)
"""Called right before a temp file is renamed onto its target; raising keeps the target as it is
(the sidecar sets it to its session lease's check: `sidecar.lease.fenced`)."""


def host_tag() -> str:
    """This host's name as a temp file's name carries it (characters other than letters, digits
    and `-` as `_`)."""
    return re.sub(r"[^A-Za-z0-9-]", "_", socket.gethostname())


def temp_tag() -> str:
    """What a temp file's name says of its writer, `<host>-<pid>-`: a start cleans only its own
    host's dead writers' files."""
    return f"{host_tag()}-{os.getpid()}-"


def pid_is_dead(pid: object) -> bool:
    """True for a PID of this host that no process has (never for ours)."""
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _zombie(pid)  # killed, not yet reaped by its parent: it writes nothing any more


def _zombie(pid: int) -> bool:
    """Whether the process has exited and waits for its parent to reap it (Linux's /proc; else False)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    return stat[stat.rfind(")") + 1 :].split()[:1] == ["Z"]


_TAGGED = re.compile(r"(?P<host>[A-Za-z0-9_-]+)-(?P<pid>[0-9]+)-[A-Za-z0-9_]+\Z")


def temp_writer(middle: str) -> tuple[str, int] | None:
    """(host tag, PID) from the part of a temp file's name `temp_tag` began, or None (untagged)."""
    found = _TAGGED.match(middle)
    return (found["host"], int(found["pid"])) if found else None


def atomic_write(target: Path, data: bytes, mode: int = 0o600) -> None:
    """Write `data` to `target` through a hidden temp file + fsync + rename."""
    out = AtomicFile(target, mode)
    try:
        out.write(data)
        out.finish()
        out.commit()
    except BaseException:
        out.discard()
        raise


class AtomicFile:
    """A file being written to a hidden temp file (`.<name>.XXXX.tmp`) next to its target.

    `write` as often as needed, then `finish` (flush, fsync, chmod) and `commit` (rename onto the
    target); `discard` removes the temp file instead. Until `commit` the target is untouched.
    """

    def __init__(self, target: Path, mode: int = 0o600, buffering: int = -1) -> None:
        self.target = target
        self.mode = mode
        try:
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.{temp_tag()}", suffix=".tmp")
        except OSError as exc:  # named by its target, not a random temp name: the same failure reads the same
            raise type(exc)(exc.errno, exc.strerror, str(target)) from None
        self.tmp = Path(tmp)
        self.handle = os.fdopen(fd, "wb", buffering=buffering)
        self.bytes = 0

    def write(self, data: bytes) -> None:
        self.handle.write(data)
        self.bytes += len(data)

    def finish(self) -> None:
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        os.chmod(self.tmp, self.mode)

    def commit(self) -> None:
        fence = COMMIT_FENCE.get()
        if fence is not None:
            fence()
        os.replace(self.tmp, self.target)

    def discard(self) -> None:
        self.handle.close()
        with contextlib.suppress(FileNotFoundError):
            self.tmp.unlink()


def private_dir(path: Path) -> Path:
    """`path` as a directory only its owner can enter (0700), created with its parents if missing."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def private_file(path: Path) -> None:
    """Make an existing file (and a SQLite database's -wal/-shm) readable by its owner only (0600)."""
    for candidate in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            if candidate.stat().st_mode & 0o077:
                os.chmod(candidate, 0o600)


def fsync_dir(path: Path) -> None:
    """Make the renames inside `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def file_lock(path: Path, *, wait: float = 0.0, mode: int = 0o600) -> Iterator[bool]:
    """Yield True holding an exclusive lock on `path` (created if missing), or False when another
    process still holds it after `wait` seconds (0: do not wait)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, mode)
    with os.fdopen(fd, "r+b") as handle:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.01)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

"""The engine's raw log on disk, so a resumed Hermes session keeps its `#N` refs and its recall.

Hermes runs one process per CLI invocation; `hermes --resume` starts a new one with the compacted
list from its state.db. Without the raw messages behind that list, the engine would number the
compacted list itself and `timmy_recall("#40")` would return a different message than the `#40` the
model was shown. So the log is kept per session under `<state_dir>/hermes-engine/<session>/`:
`raw.jsonl` (the raw messages, appended as the engine sees them) and `returned.json` (the list the
engine last returned and how many raw messages it stands for), written after every `compress`, and
`usage.json` (the session's prompt and prompt-cache token counts, after every response: what `status`
reports as the cache-read share).
Both are private (0700/0600): they hold what Hermes' own state.db holds. Logs of sessions not
touched for `KEEP_DAYS` are removed when an engine starts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from timmy_compactor.atomic import atomic_write, private_dir
from timmy_compactor.sessions.names import UnsafeIdError, file_id, inside
from timmy_compactor.sessions.rawlog import RawLog

KEEP_DAYS = 30
RAW_FILE = "raw.jsonl"
RETURNED_FILE = "returned.json"
USAGE_FILE = "usage.json"
USAGE_KEYS = ("prompt_tokens", "cache_read_tokens", "cache_write_tokens")


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, default=str).encode() + b"\n"


class RawStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._written: dict[str, tuple[int, int]] = {}  # session -> (log.replaced, lines on disk)

    def directory(self, session_id: str) -> Path:
        """`<root>/<file id>` (`names.file_id`, the one naming rule); an id no file name can stand
        for (empty, over-long) gets the hash of the id, and the result is checked to be in `root`."""
        try:
            name = file_id(session_id)
        except UnsafeIdError:
            name = hashlib.sha256(str(session_id).encode("utf-8", "surrogatepass")).hexdigest()[:40]
        return inside(self.root / name, self.root)

    def holds(self, session_id: str) -> bool:
        """Whether a log was saved for the session (without reading it)."""
        return (self.directory(session_id) / RETURNED_FILE).is_file()

    def load(self, session_id: str) -> RawLog | None:
        """The log saved for the session, or None (never saved, unreadable, or the files do not agree)."""
        folder = self.directory(session_id)
        try:
            state = json.loads((folder / RETURNED_FILE).read_bytes())
            lines = (folder / RAW_FILE).read_bytes().splitlines()
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(state, dict):
            return None
        count, returned = state.get("raw_count"), state.get("returned")
        if state.get("session_id") != session_id or not isinstance(count, int) or not isinstance(returned, list):
            return None
        messages = []
        for line in lines[:count]:
            try:
                messages.append(json.loads(line))
            except (ValueError, RecursionError):
                break  # a line cut by a crash: what follows it was never returned to Hermes
        if len(messages) != count:
            return None
        sources = state.get("returned_sources")
        if not (
            isinstance(sources, list)
            and len(sources) == len(returned)
            and all(isinstance(s, list) and all(isinstance(i, int) for i in s) for s in sources)
        ):
            sources = None  # unknown: a cut by Hermes then starts the log again
        log = RawLog(
            messages=messages,
            returned=returned,
            returned_sources=None if sources is None else [tuple(s) for s in sources],
        )
        if len(lines) != count:  # appended before a crash, never returned: drop it on the next save
            self._written[session_id] = (-1, 0)
        else:
            self._written[session_id] = (log.replaced, count)
        return log

    def save(self, session_id: str, log: RawLog) -> None:
        """Append the messages not yet on disk (or rewrite the file after a restart), then the answer."""
        folder = private_dir(self.directory(session_id))
        replaced, on_disk = self._written.get(session_id, (-1, 0))
        raw_path = folder / RAW_FILE
        if replaced != log.replaced or on_disk > len(log.messages):
            atomic_write(raw_path, b"".join(_line(m) for m in log.messages))
        elif on_disk < len(log.messages):
            with open(raw_path, "ab") as handle:
                handle.write(b"".join(_line(m) for m in log.messages[on_disk:]))
                handle.flush()
                os.fsync(handle.fileno())
        self._written[session_id] = (log.replaced, len(log.messages))
        state = {
            "session_id": session_id,
            "raw_count": len(log.messages),
            "returned": log.returned,
            "returned_sources": log.returned_sources,
        }
        atomic_write(folder / RETURNED_FILE, json.dumps(state, ensure_ascii=False, default=str).encode())

    def save_usage(self, session_id: str, counts: dict[str, int]) -> None:
        """The session's prompt and prompt-cache token counts (`USAGE_KEYS`), replacing the last ones."""
        folder = private_dir(self.directory(session_id))
        atomic_write(folder / USAGE_FILE, json.dumps({k: int(counts.get(k, 0)) for k in USAGE_KEYS}).encode())

    def usage_totals(self) -> dict[str, int]:
        """The `USAGE_KEYS` counts summed over the sessions held (an unreadable file counts nothing)."""
        totals = dict.fromkeys(USAGE_KEYS, 0)
        for folder in self._folders():
            with contextlib.suppress(OSError, ValueError, AttributeError):
                data = json.loads((folder / USAGE_FILE).read_bytes())
                for key in USAGE_KEYS:
                    value = data.get(key)
                    totals[key] += value if isinstance(value, int) and not isinstance(value, bool) else 0
        return totals

    def _folders(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return [f for f in self.root.iterdir() if f.is_dir() and not f.is_symlink()]

    def move(self, old_id: str, new_id: str) -> None:
        """Hermes rotated the session id at a compaction: the log belongs to the new id now."""
        written = self._written.pop(old_id, None)
        old, new = self.directory(old_id), self.directory(new_id)
        if not old.is_dir() or new.exists():
            return  # the next save writes the whole log under the new id
        old.rename(new)
        state_path = new / RETURNED_FILE
        state = json.loads(state_path.read_bytes())
        state["session_id"] = new_id
        atomic_write(state_path, json.dumps(state, ensure_ascii=False, default=str).encode())
        if written is not None:
            self._written[new_id] = written

    def usage(self) -> tuple[int, int]:
        """(sessions held, bytes on disk): what an operator watches over months."""
        sessions = size = 0
        for folder in self._folders():
            sessions += 1
            for name in (RAW_FILE, RETURNED_FILE, USAGE_FILE):
                with contextlib.suppress(OSError):
                    size += (folder / name).stat().st_size
        return sessions, size

    def prune(self, keep_days: float = KEEP_DAYS, now: float | None = None) -> int:
        """Remove the logs of sessions not written for `keep_days`; how many were removed."""
        if not self.root.is_dir():
            return 0
        cutoff = (now if now is not None else time.time()) - keep_days * 86_400
        removed = 0
        for folder in self.root.iterdir():
            try:
                if folder.is_dir() and not folder.is_symlink() and folder.stat().st_mtime < cutoff:
                    shutil.rmtree(folder)
                    removed += 1
            except OSError:
                continue
        return removed

"""The export's files: JSONL streamed in session order, old records read back, a killed run's temp files.

Both JSONL files are sorted by `session_key`, so a run streams the old records and swaps in the
changed sessions' new ones, in one pass, into hidden temp files that are committed by rename. The
manifest is read and written by `manifest`.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import IO

import orjson

from timmy_compactor.atomic import AtomicFile
from timmy_compactor.export.summary import ExportError

CONVERSATIONS = "conversations.jsonl"
PAIRS = "dpo_pairs.jsonl"
MANIFEST = "manifest.json"
OUTPUT_MODE = 0o600  # sessions can hold secrets; so can their export, even redacted


_KEY_PREFIX = re.compile(rb'\{"session_key":("(?:[^"\\]|\\.)*")')


def _line_key(line: bytes) -> str | None:
    match = _KEY_PREFIX.match(line)
    if match:
        key = orjson.loads(match.group(1))
        return key if isinstance(key, str) else None
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    key = record.get("session_key") if isinstance(record, dict) else None
    return key if isinstance(key, str) else None


class OldRecords:
    """The records of a previous export, streamed in session order (the order they are written in)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.handle: IO[bytes] | None = path.open("rb") if path is not None and path.exists() else None
        self.line_no = 0
        self.last_key: str | None = None
        self.head: tuple[str, bytes] | None = None
        self._advance()

    def _corrupt(self, what: str) -> ExportError:
        return ExportError(
            str(self.path), f"line {self.line_no} {what}; rebuild the export with `timmy-compactor export --full`"
        )

    def _advance(self) -> None:
        self.head = None
        if self.handle is None:
            return
        for raw in self.handle:
            self.line_no += 1
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                continue
            key = _line_key(line)
            if key is None:
                raise self._corrupt("is not a record of this export")
            if self.last_key is not None and key < self.last_key:
                raise self._corrupt("is out of session order (the file was edited?)")
            self.last_key = key
            self.head = (key, line)
            return

    def copy_before(self, key: str | None, out: Output) -> None:
        """Copy every record whose session sorts before `key` (all of them for None)."""
        while self.head is not None and (key is None or self.head[0] < key):
            out.write(self.head[1])
            self._advance()

    def drop_before(self, key: str | None) -> None:
        """Skip every record whose session sorts before `key` (a full rebuild keeps none of them)."""
        while self.head is not None and (key is None or self.head[0] < key):
            self._advance()

    def take(self, key: str) -> list[bytes]:
        lines = []
        while self.head is not None and self.head[0] == key:
            lines.append(self.head[1])
            self._advance()
        return lines

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()


class Output(AtomicFile):
    """A JSONL file being written to a hidden temp file next to its target (see `AtomicFile`)."""

    def __init__(self, target: Path) -> None:
        super().__init__(target, OUTPUT_MODE, buffering=1 << 20)

    def write(self, line: bytes) -> None:
        """One record: `line` and a newline."""
        self.handle.write(line)
        self.handle.write(b"\n")
        self.bytes += len(line) + 1


def remove_stale_temp_files(out_dir: Path) -> None:
    """Temp files of a run that was killed (we hold the lock: no other run is writing them)."""
    for name in (CONVERSATIONS, PAIRS, MANIFEST):
        for tmp in out_dir.glob(f".{name}.*.tmp"):
            with contextlib.suppress(OSError):
                tmp.unlink()

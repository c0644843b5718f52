"""What an export run reports: its summary, the files it left out, and the error that stops it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from timmy_compactor.errors import TimmyError


class ExportError(TimmyError):
    """The export cannot run. `str()` names the file and says what to do."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


@dataclass(frozen=True, kw_only=True)
class FileProblem:
    file: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class ExportSummary:
    """What one export run did. Counts are raw session files unless named otherwise."""

    out_dir: str
    seen: int = 0  # raw session files found
    exported: int = 0  # (re-)exported by this run
    unchanged: int = 0  # same sha256 as in the manifest: not parsed, records kept
    skipped: int = 0  # changed but last updated before --since
    failed: tuple[FileProblem, ...] = ()  # unreadable or not a session: left out, old records kept
    refused: tuple[FileProblem, ...] = ()  # symlinks out of the sessions dir, non-regular files
    noted: tuple[FileProblem, ...] = ()  # exported, with a change worth knowing (integers beyond 64 bits as strings)
    pairs: int = 0  # DPO pairs written for the sessions exported by this run
    sessions_total: int = 0  # sessions in the export after the run
    pairs_total: int = 0  # DPO pairs in the export after the run
    bytes_read: int = 0  # raw session bytes read
    bytes_written: int = 0  # bytes of JSONL written (0 when nothing changed)
    elapsed_s: float = 0.0
    rebuilt: bool = False  # the whole export was rebuilt (--full, first run, setting changed...)
    locked: bool = False  # another export held the lock: this run did nothing
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "out_dir": self.out_dir,
            "seen": self.seen,
            "exported": self.exported,
            "unchanged": self.unchanged,
            "skipped": self.skipped,
            "failed": [{"file": p.file, "reason": p.reason} for p in self.failed],
            "refused": [{"file": p.file, "reason": p.reason} for p in self.refused],
            "noted": [{"file": p.file, "reason": p.reason} for p in self.noted],
            "pairs": self.pairs,
            "sessions_total": self.sessions_total,
            "pairs_total": self.pairs_total,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "elapsed_s": round(self.elapsed_s, 3),
            "rebuilt": self.rebuilt,
            "locked": self.locked,
            "note": self.note,
        }

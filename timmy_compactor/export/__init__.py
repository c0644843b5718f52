"""`session_export`: training data from the RAW Hermes sessions, never from views (see `export.run`).

`run` (one export run, incremental), `sources` (what is read), `records` and `dpo` (what is
written, pure), `jsonl` (the files), `manifest` (what was exported, what a run must redo),
`summary` (what a run reports), `cli` (the verb).
"""

from timmy_compactor.export.run import export_lock, export_sessions, run_export_task
from timmy_compactor.export.summary import ExportError, ExportSummary, FileProblem

__all__ = ["ExportError", "ExportSummary", "FileProblem", "export_lock", "export_sessions", "run_export_task"]

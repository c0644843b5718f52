"""One base for every error this package raises on purpose, and the command line's exit codes.

An error of ours says in one line what is wrong and what to do; `cli.main` catches `TimmyError`
once, prints that line and exits with `EXIT_BAD_INPUT`. Each subclass keeps the builtin base it
had before (`ValueError`, `RuntimeError`), so callers that catch those still do. The root itself is
defined in `core/errors.py`, so that the core's errors (`RefError`) derive from it too.
"""

from __future__ import annotations

from timmy_compactor.core.errors import TimmyError

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_OK", "TimmyError"]

"""One base for every error this package raises on purpose, and the command line's exit codes.

An error of ours says in one line what is wrong and what to do; `cli.main` catches `TimmyError`
once, prints that line and exits with `EXIT_BAD_INPUT`. Each subclass keeps the builtin base it
had before (`ValueError`, `RuntimeError`), so callers that catch those still do.
"""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class TimmyError(Exception):
    """An error whose `str()` is one line naming the thing and the problem."""

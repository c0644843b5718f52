"""The one root of every error this package raises on purpose (`timmy_compactor.errors` gives it
its exit codes). It lives in the core, the lowest floor, so that the core's own errors derive from it
too without the core importing anything outside itself."""

from __future__ import annotations


class TimmyError(Exception):
    """An error whose `str()` is one line naming the thing and the problem."""

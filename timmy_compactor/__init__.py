"""timmy-compactor: deterministic, zero-inference context compaction for Hermes Agent sessions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from timmy_compactor.core.pipeline import compact
    from timmy_compactor.core.types import Report, Result, Settings

__version__ = "0.1.0"
ENGINE_VERSION = __version__

__all__ = ["ENGINE_VERSION", "Report", "Result", "Settings", "__version__", "compact"]


def __getattr__(name: str) -> Any:
    """The engine's names, imported when first asked for: `timmy-compactor --version` or a verb's
    `--help` does not load the engine."""
    if name == "compact":
        from timmy_compactor.core.pipeline import compact

        return compact
    if name in ("Report", "Result", "Settings"):
        from timmy_compactor.core import types

        return getattr(types, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

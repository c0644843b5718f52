"""timmy-compactor: deterministic, zero-inference context compaction for Hermes Agent sessions."""

from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Report, Result, Settings

__version__ = "0.1.0"
ENGINE_VERSION = __version__

__all__ = ["ENGINE_VERSION", "Report", "Result", "Settings", "__version__", "compact"]

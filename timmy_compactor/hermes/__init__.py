"""The `timmy` context engine for Hermes Agent, and `timmy-compactor hermes enable|disable|status`.

Hermes loads this package through the `hermes_agent.plugins` entry point (`timmy =
"timmy_compactor.hermes"`) and calls `register(ctx)`. Only `engine` imports Hermes, and only when
the engine is asked for: `hermes.setup` and `hermes.cli` work without Hermes installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from timmy_compactor.hermes.engine import TimmyContextEngine

__all__ = ["TimmyContextEngine", "register"]


def register(ctx: Any) -> None:
    """Entry point for Hermes' plugin loader (`hermes_agent.plugins` group)."""
    from timmy_compactor.hermes.engine import TimmyContextEngine

    ctx.register_context_engine(TimmyContextEngine())


def __getattr__(name: str) -> Any:
    if name == "TimmyContextEngine":
        from timmy_compactor.hermes.engine import TimmyContextEngine

        return TimmyContextEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

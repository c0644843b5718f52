"""How large a tool result Hermes hands the model unchanged (hermes-agent 0.19's
`tools/budget_config`): what bounds a `timmy_recall` answer inside Hermes."""

from __future__ import annotations


def hermes_passthrough_chars(context_length: int) -> int:
    """The largest tool result hermes-agent 0.19 hands the model unchanged for this window (its
    `tools/budget_config.budget_for_context_window`: 15 % of the window at 4 chars a token, at least
    8,000 and at most 100,000; unknown window: 100,000). A longer one, engine tools' included, is
    replaced by a 1,500-character preview."""
    if context_length <= 0:
        return 100_000
    return max(8_000, min(int(context_length * 4 * 0.15), 100_000))


def hermes_turn_budget_chars(context_length: int) -> int:
    """What all tool results of one assistant message may take together in hermes-agent 0.19 (the
    same module: 30 % of the window, at least 16,000, at most 200,000); over it, Hermes replaces the
    largest results by previews until the rest fits."""
    if context_length <= 0:
        return 200_000
    return max(16_000, min(int(context_length * 4 * 0.30), 200_000))


PERSISTED_CHARS = 2_500
"""At most what Hermes leaves of a result it replaces (a 1,500-character preview, its notice, a path)."""


def hermes_share_chars(context_length: int, calls_in_turn: int) -> int:
    """The largest answer Hermes hands the model unchanged when it is one of `calls_in_turn` tool
    results of one assistant message: the per-result limit, and with several calls a share of the
    turn's budget. Hermes replaces a turn's largest results first, until the turn fits; with every
    result of ours at most budget / k - PERSISTED_CHARS, the turn fits before it comes to ours."""
    limit = hermes_passthrough_chars(context_length)
    if calls_in_turn <= 1:
        return limit
    return min(limit, hermes_turn_budget_chars(context_length) // calls_in_turn - PERSISTED_CHARS)

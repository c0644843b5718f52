"""Data shared by the pure core: settings, entries, the report and the result."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Message = dict[str, Any]
"""One OpenAI-format chat message, exactly as found in the session file."""


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The engine's knobs (the `compaction:` section plus the resolved context window)."""

    enabled: bool = True
    strategy: str = "rules"
    trigger_threshold: float = 0.60
    protect_last_n_turns: int = 5
    max_tool_output_chars: int = 500
    keep_tool_summary: bool = True
    drop_system_after_turn: int = 1
    collapse_consecutive_assistant: bool = True
    max_tail_ratio: float = 0.25
    min_tail_steps: int = 3
    protect_tail_tokens: int | None = None
    redact_credentials: bool = False
    target_after: float | None = 0.40  # a compaction leaves the request at most this share (None: rules only)
    fold_quantum: float = 0.25  # fold point and tail start move in steps of this share of the tail budget
    min_free_ratio: float = 0.0  # skip a compaction that would free less than this share of the window
    index_max_ratio: float = 0.10  # the anchor index never exceeds this share of the window
    context_window: int = 65_536

    @property
    def tail_budget_tokens(self) -> int:
        if self.protect_tail_tokens is not None:
            return self.protect_tail_tokens
        return int(self.context_window * self.max_tail_ratio)

    @property
    def quantum_tokens(self) -> int:
        return int(self.tail_budget_tokens * self.fold_quantum)

    @property
    def index_max_chars(self) -> int:
        """The anchor index's budget in characters (Hermes' estimate: 4 characters a token)."""
        return int(self.context_window * self.index_max_ratio * 4)

    @property
    def trigger_tokens(self) -> int:
        """The request size at which a compaction triggers: a promise gives way only at or above it."""
        return int(self.context_window * self.trigger_threshold)

    @property
    def budget_tokens(self) -> int | None:
        """What a compaction may leave (spec §2a), or None when only the rules run."""
        if self.target_after is None:
            return None
        return int(self.context_window * self.target_after)


@dataclass(frozen=True, slots=True)
class Entry:
    """A message of the view being built, with the raw indices it stands for."""

    message: Message
    sources: tuple[int, ...]

    @property
    def role(self) -> str:
        return str(self.message.get("role", ""))


@dataclass(frozen=True, kw_only=True)
class Report:
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    context_window: int
    usage_before: float
    usage_after: float
    pressure_level: int
    triggered: bool
    verified: bool
    rules: Mapping[str, int] = field(default_factory=dict)
    head_end: int = 0
    tail_start: int = 0
    failure: str | None = None
    budget_tokens: int | None = None
    note: str | None = None  # why the result is above the budget, or why a compaction was skipped
    skipped: bool = False  # min_free_ratio: not worth a cache break; the messages are returned unchanged

    @property
    def ratio(self) -> float:
        return self.tokens_after / self.tokens_before if self.tokens_before else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "ratio": round(self.ratio, 4),
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "context_window": self.context_window,
            "usage_before": round(self.usage_before, 4),
            "usage_after": round(self.usage_after, 4),
            "pressure_level": self.pressure_level,
            "triggered": self.triggered,
            "verified": self.verified,
            "rules": dict(self.rules),
            "head_end": self.head_end,
            "tail_start": self.tail_start,
            "failure": self.failure,
            "budget_tokens": self.budget_tokens,
            "note": self.note,
            "skipped": self.skipped,
        }


@dataclass(frozen=True, kw_only=True)
class Result:
    """What `compact` returns: the view's messages, where each came from, and the report.

    When compaction did not trigger, or failed verification, `messages` is the raw list
    unchanged and `compacted` is False.
    """

    messages: list[Message]
    sources: tuple[tuple[int, ...], ...]
    report: Report

    @property
    def compacted(self) -> bool:
        return self.report.triggered and self.report.verified and not self.report.skipped


def not_messages(messages: Sequence[Message]) -> str | None:
    """Why these are not messages the engine can take (never quoting them), or None. A message of
    another role (`developer`, `function`, none) is one: it is kept verbatim, in place."""
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            return f"message {i} is a {type(m).__name__}, not a JSON object"
    return None


def restore(sources: Sequence[Sequence[int]], raw: Sequence[Message]) -> list[Message]:
    """The raw messages a view stands for, in raw order (checks that it covers all of them)."""
    indices = sorted(i for group in sources for i in group)
    if indices != list(range(len(raw))):
        raise ValueError("the view's provenance does not cover the raw messages exactly once")
    return [raw[i] for i in indices]

"""Replay a session the way Hermes drives a context engine, and measure what compaction costs.

Hermes sends a request before every assistant message: the system prompt, the tool schemas and the
messages it holds. When the request reaches the trigger it calls the engine's `compress()` and goes on
from the list the engine returned, appending what comes next. This module does the same with any
`compress(messages) -> messages` function and measures, per run:

- compactions, usage after each (min/max), tokens freed per compaction;
- stuck compactions: after one, the request is still at or above the trigger;
- above the window: a request larger than the window was sent;
- prompt-cache reuse: the share of request tokens that a prefix cache holds from the previous request
  (the longest common prefix of the two requests, counted in characters of their JSON messages), and
  prefix breaks: requests that do not extend the previous one, outside a compaction and in total;
- promises at every compaction, by the independent checker against the raw messages so far;
- prefill: request tokens a prefix cache does not hold, over the floor of never compacting (each new
  message prefilled once), and compactions per 100k tokens of session.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from timmy_compactor.compare.promises import check
from timmy_compactor.core.tokens import request_tokens
from timmy_compactor.core.types import Message

Compress = Callable[[list[Message]], list[Message]]


@dataclass
class CycleReport:
    requests: int = 0
    compactions: int = 0
    usage_after: list[float] = field(default_factory=list)
    freed: list[float] = field(default_factory=list)  # share of the request freed by each compaction
    stuck: int = 0
    above_window: int = 0
    request_tokens: int = 0
    reused_tokens: int = 0
    new_tokens: int = 0  # of the messages appended since the previous request: no cache can hold them
    breaks: int = 0  # requests that do not extend the previous one
    breaks_between: int = 0  # ... that were not a compaction's request
    promises_kept: int = 0  # compactions whose view kept every promise
    lost: list[str] = field(default_factory=list)
    orphans: int = 0
    session_tokens: int = 0  # of the whole raw session (system prompt and tools included)

    @property
    def prefill(self) -> int:
        """Tokens a prefix cache does not hold: what the model prefills over the whole replay."""
        return self.request_tokens - self.reused_tokens

    @property
    def prefill_vs_floor(self) -> float:
        """Prefill over what never compacting would prefill (only the new messages, once each)."""
        return self.prefill / self.new_tokens if self.new_tokens else 1.0

    @property
    def reuse(self) -> float:
        return self.reused_tokens / self.request_tokens if self.request_tokens else 1.0

    @property
    def reuse_ceiling(self) -> float:
        """The reuse a session would get if nothing were ever compacted (only new messages miss)."""
        return 1 - self.new_tokens / self.request_tokens if self.request_tokens else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "compactions": self.compactions,
            "usage_after_min": round(min(self.usage_after), 4) if self.usage_after else None,
            "usage_after_max": round(max(self.usage_after), 4) if self.usage_after else None,
            "freed_mean": round(sum(self.freed) / len(self.freed), 4) if self.freed else None,
            "freed_min": round(min(self.freed), 4) if self.freed else None,
            "stuck": self.stuck,
            "above_window": self.above_window,
            "cache_reuse": round(self.reuse, 4),
            "cache_reuse_ceiling": round(self.reuse_ceiling, 4),
            "reprefill_share": round(1 - self.reuse, 4),
            "prefill_tokens": self.prefill,
            "prefill_vs_floor": round(self.prefill_vs_floor, 4),
            "compactions_per_100k": round(self.compactions / self.session_tokens * 100_000, 2)
            if self.session_tokens
            else 0.0,
            "prefix_breaks": self.breaks,
            "prefix_breaks_between_compactions": self.breaks_between,
            "promises_kept_at_every_compaction": self.promises_kept == self.compactions,
            "compactions_keeping_every_promise": self.promises_kept,
            "orphans": self.orphans,
            "lost": self.lost[:5],
        }


def _chars(message: Message) -> str:
    return json.dumps(message, ensure_ascii=False, sort_keys=False)


def _common_prefix_chars(previous: Sequence[str], current: Sequence[str]) -> tuple[int, bool]:
    """Characters the two requests share from the start, and whether `current` extends `previous`."""
    shared = 0
    for a, b in zip(previous, current, strict=False):
        if a == b:
            shared += len(a)
            continue
        k = 0
        limit = min(len(a), len(b))
        while k < limit and a[k] == b[k]:
            k += 1
        return shared + k, False
    return shared, len(current) >= len(previous)


def replay(
    raw: Sequence[Message],
    compress: Compress,
    *,
    window: int,
    trigger: float,
    system_prompt: str | None = None,
    tools: Sequence[Any] | None = None,
    tail_steps: int = 3,
) -> CycleReport:
    report = CycleReport()
    context: list[Message] = []
    previous: list[str] = []
    fixed = request_tokens([], system_prompt, tools)
    appended: list[Message] = []
    for k, message in enumerate(raw):
        if message.get("role") == "assistant" and context:
            tokens = request_tokens(context, system_prompt, tools)
            compacted = False
            if tokens >= trigger * window:
                context = compress(list(context))
                after = request_tokens(context, system_prompt, tools)
                report.compactions += 1
                compacted = True
                report.usage_after.append(after / window)
                report.freed.append((tokens - after) / tokens)
                report.stuck += after >= trigger * window
                verdict = check(raw[:k], context, tail_steps=tail_steps)
                report.promises_kept += verdict.all_kept
                report.orphans += verdict.orphans
                report.lost += [f"at #{k}: {item}" for item in verdict.lost]
                tokens = after
            report.requests += 1
            report.above_window += tokens > window
            current = [_chars(m) for m in context]
            shared, extends = _common_prefix_chars(previous, current)
            total = sum(len(c) for c in current)
            report.request_tokens += tokens
            report.new_tokens += request_tokens(appended) if previous else tokens
            appended = []
            report.reused_tokens += (
                fixed + int((tokens - fixed) * (shared / total if total else 1.0)) if previous else 0
            )
            if previous and not extends:
                report.breaks += 1
                report.breaks_between += not compacted
            previous = current
        context.append(message)
        appended.append(message)
    report.session_tokens = request_tokens(list(raw), system_prompt, tools)
    return report

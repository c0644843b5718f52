"""Prompt-cache counters from the usage dicts Hermes hands `update_from_response`.

hermes-agent 0.19 and Hermes main pass one normalized dict after every response: `prompt_tokens`
(the whole prompt: uncached input + cache reads + cache writes), `cache_read_tokens`,
`cache_write_tokens` and `input_tokens` (uncached input) among others. A host that forwards the
provider's OpenAI shape instead reports cache reads as `prompt_tokens_details.cached_tokens`. Both
are read; the cache-read share is cache reads over the whole prompt, as Hermes' own `Cache:` line
computes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(0, int(value))


@dataclasses.dataclass(frozen=True)
class CacheCounts:
    """Prompt tokens and their cache reads and writes over some requests."""

    requests: int = 0
    prompt_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: CacheCounts) -> CacheCounts:
        return CacheCounts(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other), strict=True)))

    @property
    def read_share(self) -> float | None:
        """Cache-read tokens / prompt tokens, or None before any prompt was counted."""
        return round(self.cache_read_tokens / self.prompt_tokens, 4) if self.prompt_tokens else None


def cache_counts(usage: Mapping[str, Any]) -> CacheCounts | None:
    """One response's counts, or None when the dict reports no prompt (Hermes sends `{}` when a
    response had no usage)."""
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    read = _count(usage.get("cache_read_tokens")) or _count(details.get("cached_tokens"))
    written = _count(usage.get("cache_write_tokens")) or _count(details.get("cache_write_tokens"))
    # Hermes' prompt_tokens already holds the cache buckets; a host whose prompt_tokens left them out
    # still reports uncached input_tokens, so the larger of the two sums is the whole prompt.
    prompt = max(_count(usage.get("prompt_tokens")), _count(usage.get("input_tokens")) + read + written)
    if not prompt:
        return None
    return CacheCounts(1, prompt, read, written)

"""When Hermes' own compressor compacts (hermes-agent 0.19's `ContextCompressor._compute_threshold_tokens`,
the same on Hermes main): the reference the `timmy` engine takes its trigger from inside Hermes, unless
our config sets `compaction.trigger_threshold` (config.engine_trigger).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_THRESHOLD = 0.50  # `compression.threshold` when config.yaml does not set it
SMALL_WINDOW_LIMIT = 512_000  # below it, the threshold is at least SMALL_WINDOW_THRESHOLD
SMALL_WINDOW_THRESHOLD = 0.75
MINIMUM_CONTEXT_LENGTH = 64_000  # the trigger is at least this many tokens ...
MIN_WINDOW_TRIGGER = 0.85  # ... unless that is the whole input window: then this share of it


@dataclass(frozen=True, slots=True)
class Trigger:
    """A trigger as a share of the input window, and why it is that."""

    ratio: float
    reason: str


def hermes_trigger(input_window: int, configured: float | None) -> Trigger:
    """The share of `input_window` (the window less the output Hermes reserves) at which Hermes'
    compressor compacts: `compression.threshold` (0.50 unset), raised to 0.75 under a 512k window,
    floored at 64,000 tokens; when that floor is the whole window, 0.85 of it."""
    threshold = configured if configured is not None else DEFAULT_THRESHOLD
    steps = [f"compression.threshold {threshold:g}" if configured is not None else f"Hermes' default {threshold:g}"]
    if input_window <= 0:
        return Trigger(threshold, steps[0] + " (window unknown)")
    if input_window < SMALL_WINDOW_LIMIT and threshold < SMALL_WINDOW_THRESHOLD:
        threshold = SMALL_WINDOW_THRESHOLD
        steps.append(f"raised to {threshold:g} under {SMALL_WINDOW_LIMIT:,} tokens")
    tokens = int(input_window * threshold)
    if tokens < MINIMUM_CONTEXT_LENGTH:
        tokens = MINIMUM_CONTEXT_LENGTH
        steps.append(f"floored at {MINIMUM_CONTEXT_LENGTH:,} tokens")
    if tokens >= input_window:
        tokens = int(input_window * MIN_WINDOW_TRIGGER)
        steps.append(f"{MIN_WINDOW_TRIGGER:g} when that is the whole window")
    ratio = tokens / input_window
    return Trigger(ratio, f"Hermes' threshold: {', '.join(steps)}: {ratio:.2f} of {input_window:,} tokens")

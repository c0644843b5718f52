"""Which trigger the `timmy` engine applies inside Hermes, and why (issue 29 item 3): our config's
`hermes.trigger_threshold` when set, else Hermes' own threshold for the window."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timmy_compactor.config import ConfigError, engine_trigger, load_config
from timmy_compactor.host.trigger import hermes_trigger

WINDOWS = st.integers(1_000, 2_000_000)
THRESHOLDS = st.none() | st.floats(0.05, 1.0)


@given(window=WINDOWS, configured=THRESHOLDS)
def test_the_reference_is_hermes_own_arithmetic(window: int, configured: float | None) -> None:
    compressor = pytest.importorskip("agent.context_compressor").ContextCompressor
    percent = compressor._effective_threshold_percent(window, 0.50 if configured is None else configured)
    tokens = compressor._compute_threshold_tokens(window, percent, None)
    ours = hermes_trigger(window, configured)
    assert abs(int(window * ours.ratio) - tokens) <= 1
    assert ours.reason


def test_a_64k_window_triggers_at_0_85_and_says_why() -> None:
    trigger = hermes_trigger(64_000, None)
    assert trigger.ratio == 0.85 and "64,000" in trigger.reason
    assert hermes_trigger(200_000, None).ratio == 0.75
    assert (
        hermes_trigger(1_000_000, 0.6).ratio == 0.6
        and "compression.threshold 0.6" in hermes_trigger(1_000_000, 0.6).reason
    )


def test_the_engine_trigger_is_hermes_own_unless_the_hermes_section_sets_one(tmp_path: Path) -> None:
    path = tmp_path / "compaction.yaml"
    path.write_text("compaction:\n  trigger_threshold: 0.7\n")  # the views' trigger, not the engine's
    assert engine_trigger(load_config(path, env={}), 64_000).ratio == 0.85
    at_65k = engine_trigger(load_config(path, env={}), 65_536)  # Hermes' own: 64,000 of 65,536 tokens
    assert at_65k.ratio == 0.85 and "0.98 of 65,536 tokens, capped at 0.85" in at_65k.reason
    path.write_text("hermes:\n  trigger_threshold: 0.7\n")
    trigger = engine_trigger(load_config(path, env={}), 64_000)
    assert trigger.ratio == 0.7 and "hermes.trigger_threshold 0.7" in trigger.reason and str(path) in trigger.reason
    path.write_text("hermes:\n  trigger_threshold: 1.5\n")
    with pytest.raises(ConfigError, match=r"hermes.trigger_threshold must be in \(0, 1\] or null"):
        load_config(path, env={})

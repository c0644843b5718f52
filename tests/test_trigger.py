"""Which trigger the `timmy` engine applies inside Hermes, and why (issue 29 item 3): our config's
`compaction.trigger_threshold` when the file sets it, else Hermes' own threshold for the window."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timmy_compactor.config import load_config
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


def test_the_config_says_which_keys_it_sets(tmp_path: Path) -> None:
    path = tmp_path / "compaction.yaml"
    path.write_text("compaction:\n  trigger_threshold: 0.7\n")
    config = load_config(path, env={})
    assert config.sets("compaction.trigger_threshold") and not config.sets("compaction.target_after")
    path.write_text("compaction:\n  target_after: 0.3\n")
    assert not load_config(path, env={}).sets("compaction.trigger_threshold")

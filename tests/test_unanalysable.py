"""A message the engine cannot analyse (nested past the depth limit, hostile plain text) is kept
verbatim and never sinks the rest of the session (core/unanalysable.py, the pipeline)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import deep_list, tool_session
from timmy_compactor.core.depth import nesting_depth
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Settings


@pytest.mark.parametrize("depth", [300, 1000])
def test_a_message_too_deep_to_analyse_is_kept_verbatim_and_the_rest_compacted(depth: int) -> None:
    messages = tool_session(12)
    bad = [i for i, m in enumerate(messages) if m["role"] == "tool"][1]
    messages[bad]["content"] = [{"type": "text", "text": "fetched"}, {"type": "data", "value": deep_list(depth)}]
    result = compact(messages, Settings(context_window=4000), force=True)
    assert result.report.verified, result.report.failure
    assert result.report.rules["unanalysable"] == 1
    # the raw message itself, verbatim; or, folded, named by the index as a result nobody could read
    index = json.dumps(result.messages)
    assert any(m is messages[bad] for m in result.messages) or "unanalysable: nested deeper than" in index
    assert f"(#{bad})" in index or any(m is messages[bad] for m in result.messages)
    assert result.report.tokens_after < result.report.tokens_before / 2


@pytest.mark.parametrize(
    "text", ["<returncode>" + "9" * 5000 + "</returncode>", "[" * 1500 + "]" * 1500, '{"a":' * 1500 + "}" * 1500]
)
def test_hostile_plain_text_does_not_sink_the_session(text: str) -> None:
    messages = tool_session(12)
    messages[2]["content"] = text
    result = compact(messages, Settings(context_window=4000), force=True)
    assert result.report.verified, result.report.failure
    assert result.report.tokens_after < result.report.tokens_before


def _depth(value: object) -> int:
    """The nesting depth by its definition (recursive: for the small values below)."""
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else None
    return -1 if children is None else 1 + max((max(_depth(c), 0) for c in children), default=0)


_LEAVES = st.none() | st.booleans() | st.integers() | st.text(max_size=3)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=2), inner, max_size=4),
    max_leaves=40,
)


@given(_VALUES | st.lists(_VALUES, max_size=3).map(tuple), st.integers(0, 6))
def test_nesting_depth_is_the_depth_by_definition_counted_up_to_the_limit(value: object, limit: int) -> None:
    """The iterative walk every message goes through: how deeply dicts, lists and tuples nest, or one past
    `limit` when deeper."""
    assert nesting_depth(value, limit) == min(max(_depth(value), 0), limit + 1)

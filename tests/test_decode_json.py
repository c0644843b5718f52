"""`text.decode_json` reads a JSON object or array nested at most MAX_DEPTH levels; it counts the brackets of
the text before measuring the value (a level opens with a bracket): the answer is the measured one."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.test_properties import examples
from timmy_compactor.core.depth import MAX_DEPTH, nesting_depth
from timmy_compactor.core.text import decode_json


def nested(depth: int, leaf: str, in_dicts: bool) -> Any:
    value: Any = leaf
    for _ in range(depth):
        value = {"k": value} if in_dicts else [value]
    return value


@examples(300)
@given(st.integers(1, MAX_DEPTH + 3), st.text('[]{}a"', max_size=8), st.booleans(), st.integers(0, 3))
def test_a_value_is_read_when_it_nests_at_most_max_depth(depth: int, leaf: str, in_dicts: bool, more: int) -> None:
    value = nested(depth, leaf + "[" * more, in_dicts)  # brackets inside strings count, nest nothing
    expected = value if nesting_depth(value) <= MAX_DEPTH else None
    assert decode_json(json.dumps(value)) == expected

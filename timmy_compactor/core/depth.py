"""How deeply a decoded JSON value nests, counted without recursion: the bound beyond which the core
reads a value through a stand-in (`unanalysable`) or as plain text (`text.decode_json`). Pure."""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 100
"""Containers nested deeper than this are measured and handled without recursion (see `nesting_depth`)."""


_CONTAINERS = (dict, list, tuple)


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply lists and dicts nest in `value` (iterative, depth first; stops counting past `limit`).
    Every message is measured: only containers go on the stack, a dict's values read in place."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list | tuple):
            continue
        depth += 1
        if depth > deepest:
            deepest = depth
            if depth > limit:
                return depth
        stack += [(child, depth) for child in item if isinstance(child, _CONTAINERS)]
    return deepest

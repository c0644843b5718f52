"""How deeply a decoded JSON value nests, counted without recursion: the bound beyond which the core
reads a value through a stand-in (`unanalysable`) or as plain text (`text.decode_json`). Pure."""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 100
"""Containers nested deeper than this are measured and handled without recursion (see `nesting_depth`)."""


_CONTAINERS = (dict, list, tuple)


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply lists and dicts nest in `value` (iterative; stops counting past `limit`). Every message
    is measured: it is read a level at a time, each level the containers held by the one above (a
    message is 3 or 4 levels, a few plain loops), a dict's values read in place."""
    level = [value] if isinstance(value, _CONTAINERS) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return depth
        below = []
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:
                if type(child) is not str and isinstance(child, _CONTAINERS):  # (most values are text)
                    below.append(child)
        level = below
    return depth

"""A message nested too deeply to analyse (a hostile tool output can be) is read through a shallow
stand-in: the rules see the stand-in, the view gets the raw message back, byte for byte."""

from __future__ import annotations

from collections.abc import Sequence

from timmy_compactor.core.depth import MAX_DEPTH, nesting_depth
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.types import Entry, Message

NAME = "unanalysable"


def stand_ins(messages: Sequence[Message], readings: Readings) -> dict[int, Message]:
    """The stand-in of each message nested deeper than MAX_DEPTH, by raw index."""
    found: dict[int, Message] = {}
    too_deep = readings.each("too_deep", messages, lambda m: nesting_depth(m) > MAX_DEPTH)
    for i, m in enumerate(messages):
        if not too_deep[i]:
            continue
        stand_in: Message = {
            k: v if nesting_depth(v) < MAX_DEPTH else f"[{NAME}: nested deeper than {MAX_DEPTH} levels]"
            for k, v in m.items()
        }
        if m.get("role") == "tool":  # a result nobody can read is never summarised as a success
            stand_in["content"] = f"Error: [{NAME}: nested deeper than {MAX_DEPTH} levels]"
        found[i] = stand_in
    return found


def put_back(view: Sequence[Entry], stand_ins: dict[int, Message], raw: Sequence[Message]) -> tuple[Entry, ...]:
    """`view` with the raw message in place of every stand-in the rules left alone."""
    return tuple(
        Entry(raw[e.sources[0]], e.sources) if len(e.sources) == 1 and stand_ins.get(e.sources[0]) is e.message else e
        for e in view
    )

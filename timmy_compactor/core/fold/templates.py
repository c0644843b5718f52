"""Whether an index text names the error templates a folded message printed (what `core.verify` asks)."""

from __future__ import annotations

from collections.abc import Collection

from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.condense import ERROR_TEMPLATE, Value, values_of
from timmy_compactor.core.fold.errors import RECALL_HINT


class Templates:
    """Whether an index text names an error template a folded message printed: by the exemplar the
    message printed (as the index shows one), by another folded message's exemplar of that template, or
    by its output's `+N more templates — timmy_recall #i` (`fold.errors`: an output that would flood the
    budget alone)."""

    def __init__(self, facts: RawFacts, folded: Collection[int]) -> None:
        self.facts = facts
        self.folded = folded
        self.shown: dict[str, set[str]] | None = None  # template -> every exemplar shown of it, when asked

    def named(self, index: int, value: Value, text: str) -> bool:
        if value.shown in text or _more_templates(index, text):
            return True
        if self.shown is None:
            self.shown = {}
            for i in self.folded:
                for v in values_of(self.facts, i):
                    if v.kind == ERROR_TEMPLATE:
                        self.shown.setdefault(v.key, set()).add(v.shown)
        return any(shown in text for shown in self.shown.get(value.key, ()))


def _more_templates(index: int, text: str) -> bool:
    marker = f" more templates — {RECALL_HINT} #{index}"
    at = text.find(marker)
    while at >= 0:
        end = at + len(marker)
        if end == len(text) or text[end] == "\n":
            return True
        at = text.find(marker, end)
    return False

"""The error entries of an index chunk: every key error line as printed, and one exemplar of each error
template (`keylines.template`: the line with ids, hex and numbers folded) a folded tool output printed.

`- error: <line> (#12)`, or `- error: <line> (×5, #12, #340)`: five tool outputs of the chunk printed
that template (or that key line), the first at #12 and the last at #340. A template an earlier chunk
listed is not listed again, nor a key line; a key line is listed even when an exemplar of its template
was (it is what the verification promises, as printed). One output lists at most `cap_chars` of
exemplars beyond its key lines: `- error: +N more templates — timmy_recall #k` says where the rest are.
What a chunk lists depends only on its own messages and the values earlier chunks listed (`seen`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from timmy_compactor.core.keylines import KeyLine, template
from timmy_compactor.core.redact import redact_text

TEMPLATE_CHARS = 160
"""How much of an exemplar the index shows (a key line is shown whole, as promised)."""
TEMPLATE = "\x00"  # marks a template among the values listed so far (never the start of a listed value)
RECALL_HINT = "timmy_recall"


@dataclass(frozen=True, slots=True)
class Printed:
    """What one folded tool output printed: its key lines and the exemplars of its error templates."""

    index: int
    key_lines: tuple[KeyLine, ...]
    exemplars: tuple[str, ...]


@dataclass(slots=True)
class _Entry:
    text: str
    first: int
    key: bool
    last: int = -1
    count: int = 1
    more: int = 0  # a `+N more templates` line for output `first`

    def add(self, index: int) -> None:
        self.last = index
        self.count += 1

    def line(self) -> str:
        if self.more:
            return f"- error: +{self.more} more templates — {RECALL_HINT} #{self.first}"
        last = self.first if self.last < 0 else self.last
        refs = f"#{self.first}" if last == self.first else f"#{self.first}, #{last}"
        return f"- error: {self.text} ({f'×{self.count}, ' if self.count > 1 else ''}{refs})"


@dataclass
class ErrorEntries:
    rows: list[_Entry] = field(default_factory=list)
    distinct: int = 0  # error templates and key lines the chunk's outputs printed (listed here or earlier)

    def lines(self) -> list[str]:
        return [row.line() for row in self.rows]

    def fitted(self, max_chars: int) -> tuple[list[str], int]:
        """As many lines as fit in `max_chars`, key lines first, in their order; and how many are left."""
        chosen: set[int] = set()
        used = 0
        for k in [k for k, r in enumerate(self.rows) if r.key] + [k for k, r in enumerate(self.rows) if not r.key]:
            size = len(self.rows[k].line()) + 1
            if used + size <= max_chars:
                chosen.add(k)
                used += size
        kept = [row.line() for k, row in enumerate(self.rows) if k in chosen]
        return kept, sum(1 for k, row in enumerate(self.rows) if k not in chosen and not row.more)


def error_entries(
    printed: Sequence[Printed],
    seen: set[str],
    cap_chars: int,
    *,
    redacted: Callable[[str], str] = redact_text,
    templated: Callable[[str], str] = template,
) -> ErrorEntries:
    """The error entries of a chunk's tool outputs; `seen` (the values earlier chunks listed) gains this
    chunk's key lines and the templates it lists. `redacted` and `templated`: `redact_text` and
    `template`, or the same remembered for the call (`RawFacts`: `fold.condense` reads the same lines)."""
    out = ErrorEntries()
    exact: dict[str, _Entry] = {}
    by_template: dict[str, _Entry] = {}
    distinct: set[str] = set()
    for output in printed:
        done: set[str] = set()  # the templates this output printed: each counts once per output
        for line in output.key_lines:
            shown, key = redacted(str(line)), TEMPLATE + templated(line.text)
            distinct |= {shown, key}
            done.add(key)
            if shown in exact:
                exact[shown].add(output.index)
                exact[shown].key = True
            elif shown not in seen:
                exact[shown] = entry = _Entry(shown, output.index, key=True)
                by_template.setdefault(key, entry)
                out.rows.append(entry)
        used = left = 0
        for exemplar in output.exemplars:
            key = TEMPLATE + templated(exemplar)  # of the raw line: only what is listed is redacted
            if key in done:
                continue
            done.add(key)
            distinct.add(key)
            if key in by_template:
                by_template[key].add(output.index)
            elif key not in seen and used + min(len(exemplar), TEMPLATE_CHARS) > cap_chars:
                left += 1
            elif key not in seen:
                shown = redacted(exemplar)
                used += min(len(shown), TEMPLATE_CHARS)
                by_template[key] = entry = _Entry(shown[:TEMPLATE_CHARS], output.index, key=False)
                out.rows.append(entry)
                if len(shown) <= TEMPLATE_CHARS:  # listed as printed: a key line of the chunk of that text is it
                    exact[shown] = entry
        if left:
            out.rows.append(_Entry("", output.index, key=False, more=left))
    # a later chunk lists a key line again unless it was a key line here (what condenses with this chunk
    # is one recall away only as the key lines of its range)
    seen |= {text for text, entry in exact.items() if entry.key} | set(by_template)
    out.distinct = len({value for value in distinct if value.startswith(TEMPLATE)})
    return out

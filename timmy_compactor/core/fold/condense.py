"""Condensing keeps what recurs (spec §2a, issue 30): the oldest chunks of the anchor index become one line,
and what they listed that the folded history holds again after them stays named.

A chunk lists a value (a key error line, an error template, a path, an id) only where it is first met:
a later chunk that holds it again lists nothing of it. So when the chunk of the first mention condenses,
a recurrence would leave the view unsaid. A condensed range therefore names what it listed that a chunk
after it holds, under its line: `- recurs: "No module named 'sqlparse'" (×4, #12, #380), src/app.py (×3,
#5, #200)` (every message that held it, the first and the last, as of the condensing), as many as fit
in RECURS_SHARE of the budget, errors first. What does not fit, and what a chunk appended later holds of
a condensed range (or of a partial chunk, which lists only part of what it met), is named by the first
chunk that holds it, after its own lines (`- recurs: …`, at most CHUNK_SHARE of the budget: beyond,
`+N more recurring — timmy_recall #a–#b`, and the chunk is covered). The verification (`core.verify`)
accepts "one recall away" only for a covered range; every value of a folded message outside one is in
the index text.

The index is append-only between condensings: what a condensed line names is fixed at its condensing,
and a chunk's recurrence line is written with the chunk.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.anchors import Anchors, anchors_of
from timmy_compactor.core.fold.errors import RECALL_HINT, TEMPLATE, TEMPLATE_CHARS
from timmy_compactor.core.lines import index_label

RECURS_SHARE = 16  # a condensed line names recurrences in at most 1/16 of the index budget
CHUNK_SHARE = 8  # a chunk's recurrence line, at most 1/8
KEY_LINE, ERROR_TEMPLATE, PATH, IDENTIFIER = range(4)
RECURS = "- recurs: "


@dataclass(frozen=True, slots=True)
class Value:
    """A value a message holds, as the index compares it (`key`: the redacted text, or TEMPLATE + the
    template) and names it (`shown`); a key line's `template` is the template it names too."""

    kind: int
    key: str
    shown: str
    template: str = ""


@dataclass(frozen=True, slots=True)
class Held:
    """A value a range holds: how many of its messages held it, the first and the last."""

    value: Value
    count: int
    first: int
    last: int

    def then(self, later: Held) -> Held:
        return dataclasses.replace(self, count=self.count + later.count, last=later.last)

    def entry(self) -> str:
        value = self.value
        name = f'"{value.shown}"' if value.kind in (KEY_LINE, ERROR_TEMPLATE) else value.shown
        refs = f"#{self.first}" if self.first == self.last else f"#{self.first}, #{self.last}"
        return f"{name} ({f'×{self.count}, ' if self.count > 1 else ''}{refs})"


class Chunked(Protocol):
    """What condensing reads of an index chunk (`fold.index.Chunk`)."""

    @property
    def start(self) -> int: ...
    @property
    def stop(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def steps(self) -> int: ...
    @property
    def tools(self) -> tuple[tuple[str, int], ...]: ...
    @property
    def errors(self) -> int: ...
    @property
    def paths(self) -> int: ...
    @property
    def ids(self) -> int: ...
    @property
    def partial(self) -> bool: ...
    @property
    def listed(self) -> frozenset[str]: ...
    @property
    def held(self) -> tuple[Held, ...]: ...


def values_of(facts: RawFacts, index: int, anchors: Anchors | None = None) -> tuple[Value, ...]:
    """The values raw message `index` holds (read once per message); `anchors`: its `anchors_of` when the
    caller has them (a message that holds none is then not looked up)."""
    if anchors is not None and not _holds_values(anchors):
        return ()
    values: tuple[Value, ...] = facts.read("condense_values", index, _values)
    return values


def _holds_values(anchors: Anchors) -> bool:
    return bool(anchors.key_lines or anchors.error_lines or anchors.refs or anchors.identifiers)


def _values(facts: RawFacts, index: int) -> tuple[Value, ...]:
    anchors = anchors_of(facts, index)
    if not _holds_values(anchors):
        return ()  # most messages (a call's result without paths or errors, a plain answer)
    out: list[Value] = []
    templates: set[str] = set()
    for line in anchors.key_lines:
        shown, key = facts.redacted(str(line)), TEMPLATE + facts.templated(line.text)
        out.append(Value(KEY_LINE, shown, shown, key))
        if key not in templates:
            templates.add(key)
            out.append(Value(ERROR_TEMPLATE, key, shown))
    for exemplar in anchors.error_lines:
        key = TEMPLATE + facts.templated(exemplar)  # of the raw line, as `fold.errors` keys it
        if key not in templates:
            templates.add(key)
            out.append(Value(ERROR_TEMPLATE, key, facts.redacted(exemplar)[:TEMPLATE_CHARS]))
    for kind, items in ((PATH, anchors.refs), (IDENTIFIER, anchors.identifiers)):  # redacted as kept
        for shown in items if len(items) < 2 else dict.fromkeys(items):  # each once
            if shown:
                out.append(Value(kind, shown, shown))
    return tuple(out)


def held_values(facts: RawFacts, start: int, anchors: Sequence[Anchors]) -> tuple[Held, ...]:
    """What raw messages `start:start + len(anchors)` hold (`anchors`: their `anchors_of`), each value once,
    in order of first mention."""
    held: dict[str, list[Any]] = {}  # key -> [value, count, first, last]
    for i, read in enumerate(anchors, start):
        for value in values_of(facts, i, read):
            row = held.get(value.key)
            if row is None:
                held[value.key] = [value, 1, i, i]
            else:
                row[1] += 1
                row[3] = i
    return tuple(Held(*row) for row in held.values())


def _named(items: Iterable[Held]) -> list[Held]:
    """`items` less the templates a key line among them names, errors first, in order of first mention."""
    items = list(items)
    by_key_line = {h.value.template for h in items if h.value.kind == KEY_LINE}
    kept = [h for h in items if h.value.key not in by_key_line]
    return sorted(kept, key=lambda h: (h.value.kind > ERROR_TEMPLATE, h.first))


def _line(items: Sequence[Held], max_chars: int) -> tuple[str, list[Held], list[Held]]:
    """A recurrence line of `items` in `max_chars`: the line ("" for none), the items named, those left."""
    entries: list[str] = []
    named: list[Held] = []
    left: list[Held] = []
    used = len(RECURS)
    for held in items:
        entry = held.entry()
        if used + len(entry) + 2 <= max_chars:
            entries.append(entry)
            named.append(held)
            used += len(entry) + 2
        else:
            left.append(held)
    return (RECURS + ", ".join(entries) if entries else ""), named, left


def _keys(named: Iterable[Held]) -> set[str]:
    return {k for h in named for k in (h.value.key, h.value.template) if k}


@dataclass(frozen=True, slots=True)
class Group:
    """A condensed range: what it adds up to (its header's figures, how many chunks) and what its chunks
    listed; added to as chunks join it, so a range that grows at every condensing is not read again whole."""

    start: int
    stop: int
    chunks: int = 0
    steps: int = 0
    errors: int = 0
    paths: int = 0
    ids: int = 0
    tools: tuple[tuple[str, int], ...] = ()
    listed: frozenset[str] = frozenset()

    @classmethod
    def of(cls, chunks: Sequence[Chunked]) -> Group:
        return cls(chunks[0].start, chunks[0].start).then(chunks)

    def then(self, parts: Iterable[Chunked | Group]) -> Group:
        """This range with `parts` (chunks, or ranges made of them) after it."""
        steps, errors, paths, ids, stop = self.steps, self.errors, self.paths, self.ids, self.stop
        tools, listed, chunks = dict(self.tools), set(self.listed), self.chunks
        for part in parts:
            chunks += part.chunks if isinstance(part, Group) else 1
            steps, errors, paths, ids = steps + part.steps, errors + part.errors, paths + part.paths, ids + part.ids
            for name, n in part.tools:
                tools[name] = tools.get(name, 0) + n
            listed |= part.listed
            stop = part.stop
        return Group(self.start, stop, chunks, steps, errors, paths, ids, tuple(tools.items()), frozenset(listed))


def condensed_header(group: Group) -> str:
    """One line for chunks that left the index: what they held and how to reopen it."""
    counts = ((group.steps, "step"), (group.errors, "error line"), (group.paths, "path"), (group.ids, "id"))
    held = ", ".join(_count(n, what) for n, what in counts)
    tool_text = ", ".join(f"{name} ×{n}" for name, n in group.tools)
    span = index_label(range(group.start, group.stop))
    return f"### {span} (condensed): {held}" + (f" · {tool_text}" if tool_text else "") + f" — {RECALL_HINT} {span}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


class _Owed:
    """What the condensed ranges listed (`listed_at`), as `met` holds it, but what a text names since
    (`removed`), and what live chunks left owing (`added`): a view, not a copy of every listed value, so a
    condensing does not rewrite what the whole history listed."""

    __slots__ = ("added", "listed_at", "met", "removed")

    def __init__(self, listed_at: dict[str, int], met: dict[str, Held]) -> None:
        self.listed_at, self.met = listed_at, met
        self.added: dict[str, Held] = {}
        self.removed: set[str] = set()

    def __contains__(self, key: str) -> bool:
        return key in self.added or (key in self.listed_at and key in self.met and key not in self.removed)

    def __getitem__(self, key: str) -> Held:
        return self.added[key] if key in self.added else self.met[key]

    def update(self, items: Iterable[tuple[str, Held]]) -> None:
        for key, held in items:
            self.added[key] = held
            self.removed.discard(key)

    def pop(self, key: str) -> None:
        self.added.pop(key, None)
        self.removed.add(key)

    def copy(self, listed_at: dict[str, int], met: dict[str, Held]) -> _Owed:
        other = _Owed(listed_at, met)
        other.added, other.removed = dict(self.added), set(self.removed)
        return other


class Layout:
    """The index's chunks as they stand: condensed groups (oldest first), each a block (its line and
    what of it recurs), then the live chunks, each with its recurrence line. `add` appends a chunk and
    condenses the oldest when the index passes `max_chars`, until it is at most half of it again."""

    def __init__(self, max_chars: int, intro_chars: int) -> None:
        self.max_chars = max_chars
        self.intro_chars = intro_chars
        self.groups: list[Group] = []
        self.met: dict[str, Held] = {}  # every value the condensed ranges hold: how often, first and last
        self.blocks: list[str] = []
        self.live: list[Chunked] = []
        self.texts: list[str] = []  # each live chunk's text and its recurrence line
        self.cut: list[bool] = []  # a live chunk whose recurrence line could not name all it owed
        self.listed_at: dict[str, int] = {}  # what the condensed ranges listed: where (its chunk's start)
        self.owed = _Owed(self.listed_at, self.met)  # listed by a covered range, named nowhere in the text since

    def copy(self) -> Layout:
        """This layout as it stands, to add to apart (its chunks and held values are shared: frozen)."""
        other = Layout(self.max_chars, self.intro_chars)
        other.groups, other.met, other.listed_at = list(self.groups), dict(self.met), dict(self.listed_at)
        other.blocks, other.live, other.texts = list(self.blocks), list(self.live), list(self.texts)
        other.cut, other.owed = list(self.cut), self.owed.copy(other.listed_at, other.met)
        return other

    def add(self, chunk: Chunked) -> None:
        self._append(chunk)
        if self.total() > self.max_chars and len(self.live) > 1:
            self._condense()

    def total(self) -> int:
        blocks = sum(len(b) + 1 for b in self.blocks)
        return self.intro_chars + blocks + sum(len(text) + 1 for text in self.texts)

    def parts(self) -> list[str]:
        return self.blocks + self.texts

    def covered(self) -> tuple[range, ...]:
        condensed = tuple(range(g.start, g.stop) for g in self.groups)
        named_in_part = (c for c, cut in zip(self.live, self.cut, strict=True) if c.partial or cut)
        return condensed + tuple(range(c.start, c.stop) for c in named_in_part)

    def _append(self, chunk: Chunked) -> None:
        own = _own_templates(chunk)
        owed = self.owed
        due = _named(owed[h.value.key].then(h) for h in chunk.held if h.value.key in owed and h.value.key not in own)
        line, named, left = _line(due, self.max_chars // CHUNK_SHARE)
        text = chunk.text
        if left:  # what it cannot name is one recall away: the chunk is covered, and says so
            span = index_label(range(chunk.start, chunk.stop))
            line = (line + "; " if line else RECURS) + f"+{len(left)} more recurring — {RECALL_HINT} {span}"
            if not chunk.partial:
                text = text.replace(":", " (condensed):", 1)
        self.owed.update((h.value.key, h) for h in left)
        for key in _keys(named) | (set() if chunk.partial else own):
            self.owed.pop(key)
        if chunk.partial:  # what it met it lists only in part: a later chunk names what it holds of it
            self.owed.update((h.value.key, h) for h in chunk.held if h.value.key in chunk.listed)
        self.live.append(chunk)
        self.texts.append(text + ("\n" + line if line else ""))
        self.cut.append(bool(left))

    def _condense(self) -> None:
        group: list[Chunked] = []
        total = self.total()
        while len(self.live) > 1 and total > self.max_chars // 2:
            oldest, text = self._oldest()
            total -= len(text) + 1
            group.append(oldest)
        self.groups.append(Group.of(group))
        self._met(group)
        self._relayout()
        if sum(len(b) + 1 for b in self.blocks) > self.max_chars // 4:  # merge the condensed lines themselves
            self.groups = [self.groups[0].then(self.groups[1:])]
            self._relayout()
        while self.total() > self.max_chars and len(self.live) > 1:  # the recurrences named took more room
            oldest, _ = self._oldest()
            self.groups[-1] = self.groups[-1].then([oldest])
            self._met([oldest])
            self._relayout()

    def _oldest(self) -> tuple[Chunked, str]:
        """The oldest live chunk and its text, taken out of the live ones."""
        self.cut.pop(0)
        return self.live.pop(0), self.texts.pop(0)

    def _met(self, chunks: Sequence[Chunked]) -> None:
        """`met` with `chunks`, which join the groups at their end (the groups, read in order, only ever grow
        at their end: a group appended, a chunk added to the last, all merged in order)."""
        met = self.met
        for chunk in chunks:
            for held in chunk.held:
                key = held.value.key
                met[key] = met[key].then(held) if key in met else held
            for key in chunk.listed:
                self.listed_at.setdefault(key, chunk.start)

    def _relayout(self) -> None:
        """Every block and recurrence line written anew (a condensing is the one rewrite of the index)."""
        live, met, listed_at = self.live, self.met, self.listed_at
        self.blocks, self.owed = [], _Owed(listed_at, met)  # all the ranges listed, less what each names
        for group in self.groups:
            line, named, _ = _line(_recurring(group.listed, met, live), self.max_chars // RECURS_SHARE)
            self.blocks.append(condensed_header(group) + ("\n" + line if line else ""))
            for key in _keys(named):  # owed no more: what this range or one before it listed
                if listed_at.get(key, group.stop) < group.stop:
                    self.owed.pop(key)
        self.live, self.texts, self.cut = [], [], []
        for chunk in live:
            self._append(chunk)


def _recurring(listed: Collection[str], met: dict[str, Held], later: Sequence[Chunked]) -> list[Held]:
    """What of `listed` (as `met` holds it) a chunk of `later` holds: every message that held it, the
    first and the last."""
    found: dict[str, Held] = {}
    for chunk in later:
        own = _own_templates(chunk)
        for held in chunk.held:
            key = held.value.key
            if key in listed and key in met and key not in own:
                found[key] = found.get(key, met[key]).then(held)
    return _named(found.values())


def _own_templates(chunk: Chunked) -> set[str]:
    """The templates of the key lines `chunk` lists itself: its own lines name them."""
    return {h.value.template for h in chunk.held if h.value.kind == KEY_LINE and h.value.key in chunk.listed}

"""The anchor index: one reference-only assistant message right after the head (spec §2a).

It is made of chunks, one per range of the folded history between two points of a fixed grid (the
fold grid of `tier.fold_grid`, a function of the raw messages alone), so a chunk is byte-identical once
written and the next compaction only appends. A chunk lists, each with its first and last raw index:
the tools with call counts, the key error lines of its tool results and one exemplar of each error
template they printed (`fold.errors`), the files it wrote and those it only named (`fold.pathlines`:
`- edited: compiler.py (#161, #185; read #145)` is first and last write and the first read before them,
`- paths: query.py (#29, #31)` first and last ref), and its identifiers. A value an earlier chunk holds
is not repeated, except a file written again (its last write is always listed). Every value is
redacted before it is written.

Budget: the index never exceeds `max_chars`. When the next chunk would pass it, the oldest chunks are
condensed into one line that says what they held and how to reopen it, until the index is at most half
its budget again -- so condensing, the only rewrite of the index, happens rarely (geometrically). What a
condensed range listed and a later chunk holds again stays named (`fold.condense`: `- recurs: …`).
A chunk too large for a quarter of the budget keeps its tools and as many error lines as fit (key lines
first), and says how many paths and ids it leaves to recall. Such ranges are `covered`: what they held is one
recall away, and the verification accepts a fact of a covered range there.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.anchors import anchors_of
from timmy_compactor.core.fold.condense import Held, Layout, held_values
from timmy_compactor.core.fold.errors import Printed, error_entries
from timmy_compactor.core.fold.ledger import extract
from timmy_compactor.core.fold.pathlines import PathLines
from timmy_compactor.core.fold.paths import Spellings
from timmy_compactor.core.lines import index_label
from timmy_compactor.core.redact import redact_text
from timmy_compactor.core.text import text_of
from timmy_compactor.core.types import Message

INDEX_HEADER = "[ANCHOR INDEX — REFERENCE ONLY]"
INDEX_INTRO = (
    f"{INDEX_HEADER} Folded history, indexed without a model. #N is raw message N of this session; "
    "the full text of any #N stays in the session log (timmy_recall reopens it)."
)
FOLD_LINE = "[folded {label}: {steps} steps, see index]"
RECALL_HINT = "timmy_recall"
USER_LINE_CHARS = 120


def is_index(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "assistant" and _starts_index(message.get("content"))


def _starts_index(content: Any) -> bool:
    return isinstance(content, str) and content.startswith(INDEX_HEADER)


def fold_line(indices: Sequence[int], steps: int, users: Sequence[str] = ()) -> str:
    """`[folded #40–#212: 61 steps, see index]`, naming the first line of each user message folded with them."""
    line = FOLD_LINE.format(label=index_label(indices), steps=steps)
    if steps == 1:
        line = line.replace(" 1 steps,", " 1 step,")
    return line[:-1] + "".join(f"; {user}" for user in users) + "]" if users else line


def first_line(index: int, message: Message, limit: int = USER_LINE_CHARS, label: str = "user") -> str:
    """What a folded user message leaves in place (tier 4): `user #12: "first line…"` (redacted); with
    `label="answered"`, what a folded turn's closing answer leaves in its fold line."""
    text = redact_text(text_of(message.get("content")).strip())
    line = text.splitlines()[0] if text else ""
    shown = line if len(line) <= limit else line[: limit - 1] + "…"
    return label + " #" + str(index) + ': "' + shown + '"'


def _span(first: int, last: int) -> str:
    return f"#{first}" if first == last else f"#{first}–#{last}"


@dataclass(frozen=True, slots=True)
class Chunk:
    """What one range of the folded history left in the index."""

    start: int
    stop: int
    text: str
    steps: int
    tools: tuple[tuple[str, int], ...]
    errors: int  # distinct error templates of the range (listed here or by an earlier chunk)
    paths: int
    ids: int
    partial: bool  # paths and ids left to recall: the range is covered
    listed: frozenset[str] = frozenset()  # the values it listed first (`_Values.seen` it added)
    held: tuple[Held, ...] = ()  # every value its messages hold (`fold.condense`)


@dataclass(frozen=True, slots=True)
class Index:
    text: str
    covered: tuple[range, ...] = ()  # ranges named only by a condensed or partial line
    condensed_chunks: int = 0
    settled_chars: int = 0  # the text before its last chunk: the next index starts with it unless it condenses


@dataclass
class _Values:
    """Values listed so far (by redacted text), each with the first and last raw index in its chunk."""

    seen: set[str] = field(default_factory=set)

    def collect(self, items: Iterable[tuple[str, int]]) -> tuple[dict[str, list[int]], int]:
        """The values of one chunk not listed by an earlier one (value -> [first, last]), and how many
        distinct values the chunk holds in all."""
        fresh: dict[str, list[int]] = {}
        distinct: set[str] = set()
        for value, index in items:  # anchors: redacted as the index keeps them
            if not value:
                continue
            distinct.add(value)
            if value in fresh:
                fresh[value][1] = index
            elif value not in self.seen:
                fresh[value] = [index, index]
        self.seen |= distinct
        return fresh, len(distinct)


def _listed(values: dict[str, list[int]]) -> list[str]:
    return [
        f"{value} ({_span(first, last) if first == last else f'#{first}, #{last}'})"
        for value, (first, last) in values.items()
    ]


def render_chunk(  # noqa: PLR0917 -- the range, what earlier chunks listed, the budget, the known paths
    facts: RawFacts, start: int, stop: int, values: _Values, max_chars: int, spellings: Spellings | None = None
) -> Chunk:
    """The chunk for raw messages `start:stop`; `spellings`: the paths known before `start`, which gains
    those of the range (a path is listed in the longest spelling known up to `stop`: `pathlines`)."""
    messages = facts.messages
    before = frozenset(values.seen)
    tools: dict[str, int] = {}
    printed: list[Printed] = []
    read = [anchors_of(facts, i) for i in range(start, stop)]  # each message's anchors fetched once here
    if spellings is None:
        spellings = Spellings()
    spellings.add(ref for anchors in read for ref in anchors.refs)
    paths = PathLines(spellings)
    ids: list[tuple[str, int]] = []
    steps = 0
    for i, anchors in zip(range(start, stop), read, strict=True):
        role = messages[i].get("role")
        steps += role not in ("tool", "user")
        for name in anchors.tools:
            tools[name] = tools.get(name, 0) + 1
        if anchors.key_lines or anchors.error_lines:
            printed.append(Printed(i, anchors.key_lines, anchors.error_lines))
        if anchors.refs:
            paths.add(i, anchors.refs, anchors.edited)
        if anchors.identifiers:
            ids.extend(zip(anchors.identifiers, itertools.repeat(i)))
    errors = error_entries(printed, values.seen, max_chars // 3, redacted=facts.redacted, templated=facts.templated)
    n_listed_paths = paths.listed(values.seen)
    path_lines, n_paths = paths.lines(values.seen)
    new_ids, n_ids = values.collect(ids)
    tool_text = ", ".join(f"{name} ×{n}" for name, n in tools.items())
    header = f"### {_span(start, stop - 1)}: {_count(steps, 'step')}" + (f" · {tool_text}" if tool_text else "")
    lines = [header, *errors.lines(), *path_lines]
    if new_ids:
        lines.append("- ids: " + ", ".join(_listed(new_ids)))
    text = "\n".join(lines)
    partial = len(text) > max_chars
    if partial:
        header = header.replace(":", " (condensed):", 1)
        listed, unlisted = errors.fitted(max_chars * 3 // 4 - len(header))
        kept = [header, *listed]
        left = ", ".join(
            (
                _count(unlisted, "error line"),
                _count(n_listed_paths, "path"),
                _count(len(new_ids), "id"),
            )
        )
        kept.append(f"- not listed: {left} — {RECALL_HINT} {_span(start, stop - 1)}")
        text = "\n".join(kept)
    frozen_tools = tuple(tools.items())
    first_met = frozenset(values.seen - before)
    held = held_values(facts, start, read)
    return Chunk(start, stop, text, steps, frozen_tools, errors.distinct, n_paths, n_ids, partial, first_met, held)


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def build_index(facts: RawFacts, bounds: Sequence[int], max_chars: int, *, ledger: bool = False) -> Index:
    """The index of the folded ranges between consecutive `bounds` (raw indices, ascending); made once per
    call for the same bounds (the folds tier 4 tries differ in the users they fold, not in the index)."""
    key = (tuple(bounds), max_chars, ledger)
    return facts.once("index", key, lambda: _index(facts, bounds, max_chars, ledger=ledger))


def _index(facts: RawFacts, bounds: Sequence[int], max_chars: int, *, ledger: bool) -> Index:
    layout = _laid_out(facts.readings.chunks, _chunks(facts, bounds, max_chars // 4), max_chars)
    parts = layout.parts()
    if ledger and bounds:
        parts += ledger_lines(facts, range(bounds[0], bounds[-1]))
    settled = len("\n".join(parts[: len(layout.blocks) + len(layout.live) - 1])) if layout.live else 0
    return Index("\n".join(parts), layout.covered(), sum(g.chunks for g in layout.groups), settled)


_State = TypeVar("_State", Layout, Spellings)
SNAPSHOTS = 4  # states kept after the last chunks: a compaction's tries differ in their last chunks only


def _laid_out(memo: dict[Any, Any], chunks: list[Chunk], max_chars: int) -> Layout:
    """`chunks` laid out (`Layout.add` of each in turn), resumed from the layout an earlier call kept
    after the longest run of the very same first chunks: chunks are append-only, so a compaction late
    in a session lays out its new chunks, not every chunk again (nor every condensing since the first)."""
    same_budget = memo.get("layout_chars") == max_chars
    laid: list[Chunk] = memo.get("laid", []) if same_budget else []
    layouts: list[Layout | None] = memo.get("layouts", []) if same_budget else []
    same = 0
    while same < min(len(laid), len(chunks)) and laid[same] is chunks[same]:
        same += 1
    last = _last_kept(layouts, same)
    kept = layouts[last] if last >= 0 else None
    layout = kept.copy() if kept is not None else Layout(max_chars, len(INDEX_INTRO))
    del laid[last + 1 :], layouts[last + 1 :]
    for k in range(last + 1, len(chunks)):
        layout.add(chunks[k])
        laid.append(chunks[k])
        layouts.append(layout.copy() if k >= len(chunks) - SNAPSHOTS else None)
    memo.update(layout_chars=max_chars, laid=laid, layouts=_forget_old(layouts))
    return layout


def _last_kept(states: Sequence[object | None], before: int) -> int:
    """The position of the last state kept before `before` (-1: none)."""
    return next((k for k in range(before - 1, -1, -1) if states[k] is not None), -1)


def _forget_old(states: list[_State | None]) -> list[_State | None]:
    """`states` with only the last `SNAPSHOTS` kept (the others None: their chunks stay known)."""
    old = max(0, len(states) - SNAPSHOTS)
    states[:old] = [None] * old
    return states


def _chunks(facts: RawFacts, bounds: Sequence[int], max_chars: int) -> list[Chunk]:
    """The chunks of `bounds`, each rendered once: a chunk a previous call rendered for the same range of
    the same message objects is reused (the raw log only grows, so a compaction renders its new chunks,
    and reads the paths of the chunks before them from where the last call left them)."""
    memo = facts.readings.chunks
    if memo.get("max_chars") != max_chars:
        memo.clear()
    cached: list[tuple[Chunk, tuple[Message, ...], frozenset[str]]] = memo.setdefault("list", [])
    known: list[Spellings | None] = memo.setdefault("spellings", [])  # after each cached chunk (the last few)
    seen: set[str] = memo.setdefault("seen", set())
    ranges = list(itertools.pairwise(bounds))
    same = 0
    while same < min(len(cached), len(ranges)) and _renders(facts, cached[same], ranges[same]):
        same += 1
    if same < min(len(cached), len(ranges)):  # a range changed: it and the chunks after it are rendered anew
        del cached[same:], known[same:]
        seen = {value for _, _, added in cached for value in added}
    out = [chunk for chunk, _, _ in cached[:same]]
    spellings = _spellings_before(facts, ranges, known, same) if same < len(ranges) else Spellings()
    for k in range(same, len(ranges)):
        start, stop = ranges[k]
        values = _Values(seen)
        chunk = render_chunk(facts, start, stop, values, max_chars, spellings)
        seen = values.seen
        cached.append((chunk, tuple(facts.messages[start:stop]), chunk.listed))
        known.append(spellings.copy() if k >= len(ranges) - SNAPSHOTS else None)
        out.append(chunk)
    memo.update(max_chars=max_chars, list=cached, seen=seen, spellings=_forget_old(known))
    return out


def _renders(facts: RawFacts, cached: tuple[Chunk, tuple[Message, ...], frozenset[str]], span: tuple[int, int]) -> bool:
    """Whether a cached chunk is the one `span` renders: the same range of the very same messages (looked
    at once per call: each fold a compaction tries would otherwise compare every message of the history)."""
    chunk, read, _ = cached
    start, stop = span
    if (chunk.start, chunk.stop) != span:
        return False
    same = facts.cache("same_chunks")
    if same.get(id(chunk)) is not chunk:
        if not all(map(operator.is_, read, facts.messages[start:stop])):
            return False
        same[id(chunk)] = chunk  # held: its id stays its own
    return True


def _spellings_before(
    facts: RawFacts, ranges: list[tuple[int, int]], known: list[Spellings | None], k: int
) -> Spellings:
    """The path spellings of the chunks before the `k`th: from the last one kept, then read on."""
    last = _last_kept(known, k)
    kept = known[last] if last >= 0 else None
    spellings = kept.copy() if kept is not None else Spellings()
    for start, stop in ranges[last + 1 : k]:
        spellings.add(ref for i in range(start, stop) for ref in anchors_of(facts, i).refs)
    return spellings


def ledger_lines(facts: RawFacts, folded: Sequence[int]) -> list[str]:
    """The `ledger` strategy's fact sections (seed 003) of the user and assistant text of `folded`."""
    ledger = extract(facts.messages, folded, facts.cache("ledger"))
    active = [f"- {key}: {values[-1][0]} (#{values[-1][1]})" for key, values in ledger.facts.items()]
    superseded = [
        f"- {key}: {value} (#{index}) → superseded by {values[-1][0]} (#{values[-1][1]})"
        for key, values in ledger.facts.items()
        for value, index in values[:-1]
        if value != values[-1][0]
    ]
    sections = (
        ("Active facts", active),
        ("Decisions", [f"- {text} (#{i})" for text, i in ledger.decisions]),
        ("Obligations", [f"- {text} (#{i})" for text, i in ledger.obligations]),
        ("Superseded facts", superseded),
        ("Unresolved questions", [f"- {text} (#{i})" for text, i in ledger.questions]),
        ("Credential refs", [f"- {ref} (#{i})" for ref, i in ledger.credentials.items()]),
    )
    out: list[str] = []
    for title, items in sections:
        if items:
            out.append(f"## {title}")
            out.extend(items)
    return out


def index_message(text: str, prior: Message | None = None) -> Message:
    """The index message: the earlier one with `text` appended, or a new one."""
    if prior is not None:
        return {**prior, "content": "\n".join([text_of(prior.get("content")), text])}
    return {"role": "assistant", "content": "\n".join([INDEX_INTRO, text]) if text else INDEX_INTRO}

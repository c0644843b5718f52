"""Check the engine's promises against the raw messages. Any violation means no view is written.

Promises (spec §2): user messages byte-identical and in order; the tail byte-identical; every
raw message accounted for exactly once; every tool name called, every path and URL from
user/assistant text and tool-call arguments, and the first error line of every failed tool
result still present in the view message that stands for it; no orphan tool call or result;
no system message after the first position; every message a JSON object with a known role.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from timmy_compactor.core.facts import RawFacts, call_name, searchable_text, tool_calls
from timmy_compactor.core.fold.anchors import anchors_of
from timmy_compactor.core.fold.condense import ERROR_TEMPLATE, Value, values_of
from timmy_compactor.core.fold.index import Index, is_index
from timmy_compactor.core.fold.templates import Templates
from timmy_compactor.core.partition import Partition
from timmy_compactor.core.redact import redact_text
from timmy_compactor.core.types import Entry, Message

KNOWN_ROLES = frozenset({"system", "user", "assistant", "tool"})


def identical(a: Message, b: Message) -> bool:
    """Same keys in the same order with equal values: serialises to the same bytes."""
    return a == b and list(a) == list(b)


def verify(
    raw: Sequence[Message],
    view: Sequence[Entry],
    part: Partition,
    facts: RawFacts | None = None,
    *,
    redacted: bool = False,
    folded: Collection[int] = frozenset(),
    folded_users: frozenset[int] = frozenset(),
    index: Index | None = None,
) -> list[str]:
    """The promises `view` breaks (none when it keeps them all). With `redacted`, a fact may appear
    in its redacted form (`redact_text(fact)`) instead. The facts of `folded` raw messages must be in
    `index` (always redacted) or one recall away (a range the index names by a condensed line);
    `folded_users` are user messages the last resort folded."""
    problems: list[str] = []
    problems += _accounting(raw, view)
    problems += _users(raw, view, folded_users)
    problems += _others(raw, view)
    problems += _tail(raw, view, part)
    if problems:
        return problems  # the fact checks below assume a well-formed mapping
    tail_len = len(raw) - part.tail_start
    compacted = view[: len(view) - tail_len]
    facts = facts or RawFacts(raw)
    problems += _facts(raw, compacted, facts, redacted, folded)
    if folded:
        problems += _folded(facts, folded, index or Index(""))
    problems += _structure(raw, compacted)
    return problems


def _accounting(raw: Sequence[Message], view: Sequence[Entry]) -> list[str]:
    indices = sorted(i for e in view for i in e.sources)
    if indices != list(range(len(raw))):
        return ["view does not account for every raw message exactly once"]
    return []


def _users(raw: Sequence[Message], view: Sequence[Entry], folded_users: frozenset[int]) -> list[str]:
    raw_users = [m for i, m in enumerate(raw) if m.get("role") == "user" and i not in folded_users]
    view_users = [e.message for e in view if e.role == "user" and not is_index(e.message)]
    if len(raw_users) != len(view_users):
        return [f"user messages: {len(raw_users)} in raw, {len(view_users)} in view"]
    for k, (a, b) in enumerate(zip(raw_users, view_users, strict=True)):
        if not identical(a, b):
            return [f"user message {k + 1} changed"]
    return []


def _others(raw: Sequence[Message], view: Sequence[Entry]) -> list[str]:
    """Messages of another role (`developer`, `function`) are kept verbatim, in place."""
    kept = {e.sources[0] for e in view if len(e.sources) == 1 and e.message is raw[e.sources[0]]}
    lost = [i for i, m in enumerate(raw) if m.get("role") not in KNOWN_ROLES and i not in kept]
    return [f"the message of another role at raw #{lost[0]} was not kept verbatim"] if lost else []


def _tail(raw: Sequence[Message], view: Sequence[Entry], part: Partition) -> list[str]:
    tail = raw[part.tail_start :]
    if not tail:
        return []
    view_tail = view[len(view) - len(tail) :] if len(view) >= len(tail) else ()
    if len(view_tail) != len(tail) or not all(
        identical(a, b.message) and b.sources == (part.tail_start + k,)
        for k, (a, b) in enumerate(zip(tail, view_tail, strict=True))
    ):
        return [f"tail (raw #{part.tail_start}–#{len(raw) - 1}) is not byte-identical"]
    return []


def _facts(
    raw: Sequence[Message], compacted: Sequence[Entry], facts: RawFacts, redacted: bool, folded: Collection[int]
) -> list[str]:
    problems: list[str] = []
    for entry in compacted:
        if len(entry.sources) == 1 and entry.message is raw[entry.sources[0]]:
            continue  # untouched: everything it said is still there
        haystack = searchable_text(entry.message)
        for i in entry.sources:
            if i in folded:
                continue  # its facts are in the index: checked by _folded
            message = raw[i]
            for call in tool_calls(message):
                name = call_name(call)
                if name and name not in haystack:
                    problems.append(f"a tool name of raw #{i} was lost")
            for ref in facts.safe_refs(i) if redacted else facts.refs(i):
                if ref not in haystack and not (redacted and redact_text(ref) in haystack):
                    problems.append(f"a path/URL of raw #{i} was lost")
            if message.get("role") == "tool":
                for line in facts.outcome(i).key_lines:
                    if line.text not in haystack and not (redacted and redact_text(line.text) in haystack):
                        problems.append(f"a key error line of raw #{i} was lost")
    return problems


def _folded(facts: RawFacts, folded: Collection[int], index: Index) -> list[str]:
    """Every path, URL, tool name, key error line, identifier and error template of a folded message is
    in the index, or the message is in a range the index covers (a condensed or partial line: one recall
    away). Nothing else is: what a covered range listed and recurs after it is named there again
    (`fold.condense`). The index only grows between condensings: a message found whole in an earlier
    index that the new one starts with is not read again (so a compaction late in a long session costs
    what an early one does)."""
    problems: list[str] = []
    covered = set().union(*index.covered) if index.covered else set()
    text = index.text
    settled = text[: index.settled_chars]
    earlier_text, earlier_ok = facts.readings.verified_folds
    ok = earlier_ok if text.startswith(earlier_text) else {}
    kept: dict[int, Message] = {}  # found whole in the settled text: the next index starts with it
    templates = Templates(facts, folded)
    ends: dict[str, int] = {}  # each needle's first occurrence in `text`, looked for once (most recur)
    for i in sorted(folded):
        if i in covered:
            continue
        message = facts.messages[i]
        if ok.get(i) is message:
            kept[i] = message
            continue
        # its paths, ids and key lines as the index names them (redacted: `values_of`), its tools, its templates
        anchors = anchors_of(facts, i)
        needles = list(anchors.tools)
        printed: list[Value] = []
        for value in values_of(facts, i, anchors):
            if value.kind == ERROR_TEMPLATE:
                printed.append(value)
            else:
                needles.append(value.key)
        # `settled` begins `text` (a newline after it): whatever it holds, `text` holds; looked at first
        where = _where(needles, text, len(settled), ends)
        if where == SETTLED and (not printed or all(templates.named(i, v, settled) for v in printed)):
            kept[i] = message
        elif where == NOWHERE or (printed and not all(templates.named(i, v, text) for v in printed)):
            problems.append(f"the index lost a fact of folded raw #{i}")
    facts.readings.verified_folds = (settled, kept)
    return problems


NOWHERE, IN_TEXT, SETTLED = range(3)


def _where(needles: list[str], text: str, settled: int, ends: dict[str, int]) -> int:
    """SETTLED: every needle is in `text[:settled]`; IN_TEXT: in `text`; NOWHERE: one is not. Each needle
    is looked for once per call (`ends`: where its first occurrence in `text` ends, -1 for none): it is
    in the prefix exactly when that end is within it."""
    where = SETTLED
    for needle in needles:
        end = ends.get(needle)
        if end is None:
            at = text.find(needle)
            end = ends[needle] = -1 if at < 0 else at + len(needle)
        if end < 0:
            return NOWHERE
        if end > settled:
            where = IN_TEXT
    return where


def _structure(raw: Sequence[Message], compacted: Sequence[Entry]) -> list[str]:
    problems: list[str] = []
    open_ids: set[object] = set()
    seen_other = False
    for k, entry in enumerate(compacted):
        message = entry.message
        role = message.get("role")
        untouched = len(entry.sources) == 1 and message is raw[entry.sources[0]]
        if role not in KNOWN_ROLES and not untouched:  # another role is the raw's own, kept verbatim
            problems.append(f"view message {k} has an unknown role")
        if role == "system" and seen_other and not untouched:  # a late raw system message is the raw's own
            problems.append(f"view message {k} is a system message after the first position")
        seen_other = seen_other or role != "system"
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_ids:
                problems.append(f"view message {k} is a tool result without its call")
            open_ids.discard(call_id)
            continue
        if open_ids:
            problems.append(f"tool call(s) before view message {k} have no result")
            open_ids = set()
        if role == "assistant":
            open_ids = {c.get("id") for c in tool_calls(message)}
    if open_ids:
        problems.append("the last tool call(s) before the tail have no result")
    return problems

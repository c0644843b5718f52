"""Recall (spec §2a): reopen what a compaction folded, from the raw messages, by ref or by text.

Every collapsed, truncated or folded element names its raw indices (`#12`, `#40–#44`); `lookup`
returns exactly those raw messages, `search` the lines that hold a text with their `#N`.

What was there comes back as it was, except credentials: they are replaced by the stand-ins the
export and the anchor index use (`credential_ref:<sha256 prefix>`, the same secret the same stand-in),
and the answer says how many. IPv4 addresses are no credentials and stay. Hermes' bookkeeping keys
(`BOOKKEEPING`) are left out: they are not what the model saw.

The bound is exact: `to_json()` is at most `max_chars` characters (or an answer with no items, when
even that is longer); with `render` (how a caller prints one item, e.g. the CLI's text form), the
rendered items together are at most `max_chars`. A cut answer says where the rest is: a message cut
short names the offset its content goes on at (`ref` with `offset`), the messages left out their ref
range, a search the `offset` of the first match not shown.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from timmy_compactor.core.errors import TimmyError
from timmy_compactor.core.facts import (
    RECALL_TOOL,
    call_arguments,
    call_name,
    exit_line,
    is_recall_call,
    recall_answers,
    tool_calls,
)
from timmy_compactor.core.keylines import KEY_LINE_MAX_CHARS
from timmy_compactor.core.redact import MESSAGE_STRUCTURE, REF_PREFIX, redact_text, redact_value
from timmy_compactor.core.text import readable, text_of
from timmy_compactor.core.types import Message

DEFAULT_MAX_CHARS = 6_000
"""About 1,500 tokens: room for a few folded steps without crowding a 64k window."""
BOOKKEEPING = frozenset(("timestamp", "_db_persisted", "call_id", "response_item_id", "finish_reason"))
"""Keys Hermes keeps on messages and tool calls for itself; never part of an answer."""
_REF = re.compile(r"^\s*#?(\d+)\s*(?:(?:-|–|—|\.\.)\s*#?(\d+))?\s*$")
MAX_MATCHES = 50
PAGE_META_CHARS = 500
"""A message whose other parts (calls, ids) take more than this as JSON is paged as JSON, whole."""
_PASSES = 6
_EXIT_QUERY = re.compile(r"""[\s"'{]*(?:exit(?:[ _]?code| status)?|return ?code)[\s"':=]*(-?\d+)[\s"',}]*""")
Render = Callable[[dict[str, Any]], str]
"""How a caller prints one answer item; its length is what `max_chars` bounds."""
Measure = Callable[[dict[str, Any]], int]


class RefError(TimmyError, ValueError):
    """A ref that is not of the form `#N` / `#N-#M`, or names messages that do not exist."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What recall returns: raw messages or matching lines, whether the answer was cut, and notes
    (credentials replaced, where the rest is, a bound that was not taken as given)."""

    ref: str
    items: tuple[dict[str, Any], ...]
    truncated: bool
    total: int
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out = {"ref": self.ref, "items": list(self.items), "truncated": self.truncated, "total": self.total}
        return out | {"notes": list(self.notes)} if self.notes else out

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), ensure_ascii=False)


def parse_ref(ref: str, count: int) -> range:
    """`#12`, `12`, `#40-#44`, `40–44` → the raw indices; a clear error when out of range."""
    match = _REF.match(ref) if len(ref) <= 40 else None
    if not match:
        shown = ref if len(ref) <= 40 else ref[:40] + "…"
        raise RefError(f"{shown!r} is not a ref: use #N or #N-#M (as shown in [tool: …] lines and the index)")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) else first
    if last < first:
        raise RefError(f"ref #{first}-#{last} runs backwards")
    if last >= count:
        raise RefError(f"no message #{last}: this session has #0-#{count - 1}")
    return range(first, last + 1)


# ------------------------------------------------------------------ by ref


@dataclass(frozen=True, slots=True)
class _Page:
    """What one pass of `lookup` put in: the items, credentials replaced in them, and where the rest
    starts (`next_index` None: nothing left; `next_offset`: where that message's text goes on)."""

    items: list[dict[str, Any]]
    credentials: int
    next_index: int | None
    next_offset: int


def lookup(
    messages: Sequence[Message],
    ref: str,
    max_chars: int = DEFAULT_MAX_CHARS,
    render: Render | None = None,
    *,
    offset: int = 0,
    notes: Sequence[str] = (),
) -> Answer:
    """The raw messages `ref` names, within `max_chars` (see the module's docstring); `offset`: where
    the first message's text starts (to read on in a message an earlier answer cut). A message that
    does not fit whole is cut (the longest beginning that fits, with the character range shown) if
    that fits, else left out; either way the answer says it was truncated and where the rest is."""
    indices = parse_ref(ref, len(messages))
    if offset < 0:
        raise RefError(f"offset {offset} is negative: use 0 or the offset a cut answer named")
    label = _label(indices)
    cache: dict[int, tuple[Message, int]] = {}  # a pass that must be made again does not redact again

    def clean(i: int) -> tuple[Message, int]:
        if i not in cache:
            cache[i] = _cleaned(messages[i])
        return cache[i]

    def build(reserve: int) -> Answer:
        measure, room = _budget(label, len(indices), max_chars, render, tuple(notes))
        page = _fill(clean, indices, room - reserve, measure, offset)
        extra = _credentials_note(page.credentials) + _rest_note(page, indices, offset)
        truncated = page.next_index is not None
        return Answer(label, tuple(page.items), truncated, len(indices), (*notes, *extra))

    return _bounded(build, max_chars, render)


def _fill(
    clean: Callable[[int], tuple[Message, int]], indices: range, room: int, measure: Measure, offset: int
) -> _Page:
    items: list[dict[str, Any]] = []
    credentials = 0
    for i in indices:
        message, found = clean(i)
        start = offset if i == indices.start else 0
        if start and start >= (length := len(paged_text(message)[0])):
            raise RefError(f"offset {start} is past the end of #{i} ({length} chars)")
        item = _item(i, message, start, None)
        size = measure(item)
        if size <= room:
            items.append(item)
            credentials += found
            room -= size
            continue
        cut = _cut(i, message, start, room, measure) if not items or room > 200 else None
        if cut is None:  # the first message always shows its beginning, when anything of it fits
            return _Page(items, credentials, i, start)
        items.append(cut[0])
        return _Page(items, credentials + found, i, cut[1])
    return _Page(items, credentials, None, 0)


def _cleaned(message: Message) -> tuple[Message, int]:
    """The message without Hermes' bookkeeping, credentials replaced (content, reasoning, any other
    field, call arguments; ids, roles and names are structure, kept as they are), and how many."""
    out = {k: v for k, v in message.items() if k not in BOOKKEEPING}
    found = 0
    for key in [k for k, v in out.items() if k not in MESSAGE_STRUCTURE and v is not None]:  # content, reasoning...
        out[key] = redact_value(value := out[key], ips=False)
        found += _stand_ins(out[key]) - _stand_ins(value)
    calls = out.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = [_cleaned_call(c) for c in calls]
        found += _stand_ins(out["tool_calls"]) - _stand_ins(calls)
    return out, max(0, found)


def _cleaned_call(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    out = {k: v for k, v in call.items() if k not in BOOKKEEPING}
    function = out.get("function")
    if isinstance(function, dict):
        out["function"] = {**function, "arguments": redact_value(function.get("arguments"), ips=False)}
    return out


def _stand_ins(value: Any) -> int:
    return json.dumps(value, ensure_ascii=False).count(REF_PREFIX) if value is not None else 0


def paged_text(message: Message) -> tuple[str, bool]:
    """The text a message is paged by: its content, or (when its other parts are long) the whole
    message as JSON after its role; and whether it is the latter."""
    rest = {k: v for k, v in message.items() if k not in ("role", "content")}
    if rest and len(json.dumps(rest, ensure_ascii=False)) > PAGE_META_CHARS:
        return json.dumps({k: v for k, v in message.items() if k != "role"}, ensure_ascii=False), True
    content = message.get("content")
    return (content if isinstance(content, str) else json.dumps(content, ensure_ascii=False) if content else ""), False


def _item(i: int, message: Message, start: int, end: int | None) -> dict[str, Any]:
    """Message #i whole, or its text from `start` to `end` (None: to its end) with that range named."""
    if start == 0 and end is None:
        return {"ref": f"#{i}", "message": message}
    text, as_json = paged_text(message)
    stop = len(text) if end is None else end
    base = {"role": message.get("role")} if as_json else message
    return {
        "ref": f"#{i}",
        "message": {**base, "content": text[start:stop]},
        "chars": [start, stop],
        "of": len(text),
        "paged": "message as JSON" if as_json else "content",
    }


def _cut(i: int, message: Message, start: int, room: int, measure: Measure) -> tuple[dict[str, Any], int] | None:
    """Message #i cut to fit in `room`: its text from `start` to the furthest end that fits (at
    least one character short of the whole), back to a word's end when there is one in the latter
    half; None when not even one character fits."""
    text, _ = paged_text(message)
    if len(text) - start < 2 or measure(_item(i, message, start, start + 1)) > room:
        return None
    low, high = start + 1, len(text) - 1
    while low < high:  # sizes grow with the kept length (give or take a digit and an escape)
        middle = (low + high + 1) // 2
        if measure(_item(i, message, start, middle)) <= room:
            low = middle
        else:
            high = middle - 1
    low = _word_end(text, start, low)
    return _item(i, message, start, low), low


def _word_end(text: str, start: int, end: int) -> int:
    """`end`, moved back to just after the last line break (else space) of the latter half of
    `text[start:end]`: a cut answer never ends inside a word, a URL or a number."""
    floor = start + (end - start) // 2
    for separator in ("\n", " "):
        found = text.rfind(separator, floor, end)
        if found != -1:
            return found + 1
    return end


def _rest_note(page: _Page, indices: range, offset: int) -> tuple[str, ...]:
    if page.next_index is None:
        return ()
    if not page.items:
        return ("nothing of it fits in this size bound: give a larger max_chars",)
    parts: list[str] = []
    after = page.next_index
    if page.next_offset > (offset if after == indices.start else 0):
        parts.append(f'ref "#{after}" with offset {page.next_offset} (where its text goes on)')
        after += 1
    if after <= indices.stop - 1:
        parts.append(f'ref "{_label(range(after, indices.stop))}" (not shown yet)')
    return ("cut to fit the size bound; the rest: " + ", then ".join(parts),)


def _credentials_note(count: int) -> tuple[str, ...]:
    if not count:
        return ()
    return (
        f"{count} credential(s) replaced by {REF_PREFIX}<sha256 prefix> stand-ins (the same secret, "
        "the same stand-in); everything else is exactly as it was",
    )


# ------------------------------------------------------------------ by text


def search(
    messages: Sequence[Message],
    text: str,
    indices: Sequence[int] | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
    render: Render | None = None,
    *,
    offset: int = 0,
    notes: Sequence[str] = (),
) -> Answer:
    """The lines of the raw messages (`indices`: default all) that contain `text` (case-insensitive),
    within `max_chars`, from match number `offset` on; a failing command's result also offers the index's
    `exit 2: …` line, which an exit code query (`exit 2`, `exit code 2`, `"exit_code": 2`) finds. The
    recall tool's own calls and answers are not searched: they would find every earlier query."""
    needle = text.strip().lower()
    if not needle:
        raise RefError("an empty query finds nothing: give a word, a path or an error text")
    if offset < 0:
        raise RefError(f"offset {offset} is negative: use 0 or the offset a cut answer named")
    shown = text if len(text) <= 200 else text[:200] + "…"
    label = f"query {shown!r}"
    lines = list(_matching_lines(messages, needle, indices))

    def build(reserve: int) -> Answer:
        measure, room = _budget(label, len(lines), max_chars, render, tuple(notes))
        items, credentials = _fill_lines(lines[offset:], room - reserve, measure)
        extra = _credentials_note(credentials)
        if lines and offset >= len(lines):
            extra += (f"offset {offset} is past the last match: there are {len(lines)}, from offset 0",)
        elif offset + len(items) < len(lines):
            extra += (
                f"matches {offset + 1}-{offset + len(items)} of {len(lines)} shown; the rest: the same query "
                f"with offset {offset + len(items)}",
            )
        truncated = offset + len(items) < len(lines)
        return Answer(label, tuple(items), truncated, len(lines), (*notes, *extra))

    return _bounded(build, max_chars, render)


def _matching_lines(
    messages: Sequence[Message], needle: str, indices: Sequence[int] | None
) -> Iterator[tuple[int, Any, str]]:
    code, answers = _EXIT_QUERY.fullmatch(needle), recall_answers(messages)
    for i in indices if indices is not None else range(len(messages)):
        message = messages[i]
        if i in answers:
            continue
        shown = exit_line(message)  # `exit 2: …`, as the index lists it
        if shown and (shown.split(":")[0] == f"exit {code.group(1)}" if code else needle in shown.lower()):
            yield i, message.get("role"), shown
        else:
            shown = ""
        for line in _searchable(message).splitlines():
            if needle in line.lower() and not (shown and line.strip()[:KEY_LINE_MAX_CHARS] in shown):
                yield i, message.get("role"), line


def _fill_lines(lines: Sequence[tuple[int, Any, str]], room: int, measure: Measure) -> tuple[list[dict[str, Any]], int]:
    items: list[dict[str, Any]] = []
    credentials = 0
    for i, role, line in lines[:MAX_MATCHES]:
        shown = line.strip()
        clean = redact_text(shown, ips=False)
        item = {"ref": f"#{i}", "role": role, "line": clean[:500]}
        size = measure(item)
        if size > room:
            break
        items.append(item)
        credentials += max(0, clean.count(REF_PREFIX) - shown.count(REF_PREFIX))
        room -= size
    return items, credentials


def _searchable(message: Message) -> str:
    """The text of a message a search reads: its content, and its calls but the recall tool's."""
    if message.get("role") == "tool":
        content = message.get("content")
        return readable(content if isinstance(content, str) else json.dumps(content, ensure_ascii=False))
    parts = [readable(text_of(message.get("content")))]
    for call in tool_calls(message):
        if not is_recall_call(call):
            parts += (call_name(call), readable(call_arguments(call)))
    return "\n".join(parts)


# ------------------------------------------------------------------ the bound


def _budget(
    label: str, total: int, max_chars: int, render: Render | None, notes: tuple[str, ...]
) -> tuple[Measure, int]:
    """How one item is measured, and the room the items have: as JSON inside the answer's envelope
    (each item with its `, ` separator), or as the caller renders it."""
    if render is not None:
        return (lambda item: len(render(item))), max_chars
    empty = Answer(ref=label, items=(), truncated=False, total=total, notes=notes).to_json()
    return (lambda item: len(json.dumps(item, ensure_ascii=False)) + 2), max_chars - len(empty) + 2


def _bounded(build: Callable[[int], Answer], max_chars: int, render: Render | None) -> Answer:
    """The answer `build` makes within `max_chars`: the room its notes take (known only once the
    items are in) is held back and the answer built again, until it fits; else one with no items (and
    no notes, if they alone are too long)."""
    reserve = 0
    for _ in range(_PASSES):
        answer = build(reserve)
        if render is not None:
            return answer  # the caller prints the notes apart from the items `max_chars` bounds
        excess = len(answer.to_json()) - max_chars
        if excess <= 0:
            return answer
        reserve += excess + 8
    empty = build(max_chars * 2 + 10**6)  # no room: no items
    return empty if len(empty.to_json()) <= max_chars else dataclasses.replace(empty, notes=())


def _label(indices: range) -> str:
    return f"#{indices.start}" if len(indices) == 1 else f"#{indices.start}-#{indices.stop - 1}"


__all__ = ["BOOKKEEPING", "DEFAULT_MAX_CHARS", "RECALL_TOOL", "Answer", "RefError", "lookup", "parse_ref", "search"]

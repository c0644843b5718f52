"""Rule 2: a tool output over `max_tool_output_chars` keeps its first 10 and last 5 lines.

The cut region becomes `[...truncated {n} lines...]`, followed by the lines of it that start like an
error and the output's key error lines (spec §2a) that fall in it.
A single enormous line is cut by characters. JSON results are shortened field by field and stay
valid JSON, so `{"output": ..., "exit_code": 2}` keeps its shape; a long JSON list (search matches)
keeps its first 10 and last 5 items the same way, plus the items of the cut region that hold an
error line. An output is only replaced when that makes it shorter.

`fit_content` is the gentler cut tail relief uses: an output shortened to a given number of
characters (as many whole first and last lines as fit, and every key error line), not to the rule's
fixed ten and five lines.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from functools import lru_cache, partial
from typing import Any

from timmy_compactor.core.draft import Draft, RuleCounts
from timmy_compactor.core.keylines import KEY_LINE_MAX_CHARS, is_key_start
from timmy_compactor.core.text import decode_json, string_leaves, text_of
from timmy_compactor.core.types import Entry, Message, Settings

NAME = "truncate_tool_output"
HEAD_LINES = 10
TAIL_LINES = 5
MAX_KEPT_ERROR_LINES = 20


def apply(draft: Draft, settings: Settings) -> tuple[Draft, RuleCounts]:
    limit = settings.max_tool_output_chars
    out: list[Entry] = []
    count = 0
    for entry in draft.middle:
        content = entry.message.get("content")
        if entry.role != "tool" or len(text_of(content)) <= limit:
            out.append(entry)
            continue
        key_lines = draft.facts.outcome_of(entry.message, entry.sources).key_lines  # read once, with the outcome
        shorten = partial(_shortened, limit=limit, keep=frozenset(line.text for line in key_lines))
        shortened = draft.facts.readings.of_object(f"{NAME}:{limit}", entry.message, shorten)
        if shortened is None:
            out.append(entry)  # nothing to gain (e.g. compact JSON whose leaves are all short)
            continue
        out.append(Entry(shortened, entry.sources))
        count += 1
    return draft.with_middle(out), {NAME: count} if count else {}


def _shortened(message: Message, *, limit: int, keep: frozenset[str]) -> Message | None:
    """The message with its content shortened (once per message object), or None if that gains nothing."""
    content = message.get("content")
    shortened = shorten_content(content, limit, keep)
    if shortened == content or len(text_of(shortened)) >= len(text_of(content)):
        return None
    return {**message, "content": shortened}


def shorten_content(content: Any, limit: int, keep: frozenset[str] = frozenset()) -> Any:
    """`content` shortened to about `limit` characters; lines whose stripped text starts one of `keep`
    (key error lines) and lines that start like an error survive the cut."""
    return _cut_content(
        content,
        part=lambda text: shorten_content(text, limit, keep),
        text=lambda text: truncate_text(text, limit, keep),
        leaves=lambda decoded: _shorten_leaves(decoded, limit, keep),
    )


def _cut_content(
    content: Any, *, part: Callable[[str], Any], text: Callable[[str], str], leaves: Callable[[Any], Any]
) -> Any:
    """`content` cut the way its shape asks: each text part of a list by `part`, a JSON string by
    `leaves` (it stays JSON), any other string by `text`."""
    if isinstance(content, list):
        return [
            {**p, "text": part(p["text"])} if isinstance(p, dict) and isinstance(p.get("text"), str) else p
            for p in content
        ]
    if not isinstance(content, str):
        return content
    decoded = decode_json(content)
    if decoded is None:
        return text(content)
    return json.dumps(leaves(decoded), ensure_ascii=False)


def _shorten_leaves(value: Any, limit: int, keep: frozenset[str]) -> Any:
    if isinstance(value, str):
        return truncate_text(value, limit, keep)
    if isinstance(value, dict):
        return {k: _shorten_leaves(v, limit, keep) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten_leaves(v, limit, keep) for v in _shorten_list(value, limit, keep)]
    return value


def _shorten_list(items: list[Any], limit: int, keep: frozenset[str]) -> list[Any]:
    if len(items) <= HEAD_LINES + TAIL_LINES or len(json.dumps(items, ensure_ascii=False)) <= limit:
        return items
    cut = items[HEAD_LINES:-TAIL_LINES]
    errors = [item for item in cut if _holds_error_line(item, keep)]
    kept_errors = errors[:MAX_KEPT_ERROR_LINES]
    kept: list[Any] = [*items[:HEAD_LINES], f"[...truncated {len(cut) - len(kept_errors)} items...]", *kept_errors]
    if len(errors) > len(kept_errors):
        kept.append(f"[...{len(errors) - len(kept_errors)} more items with error lines...]")
    return kept + items[-TAIL_LINES:]


def _holds_error_line(value: Any, keep: frozenset[str]) -> bool:
    return any(_is_kept(line, keep) for leaf in string_leaves(value) for line in leaf.splitlines())


def _is_kept(line: str, keep: frozenset[str]) -> bool:
    return line.strip()[:KEY_LINE_MAX_CHARS] in keep or is_key_start(line)


def truncate_text(text: str, limit: int, keep: frozenset[str] = frozenset()) -> str:
    if len(text) <= limit:
        return text
    lines = text.splitlines()
    line_limit = max(limit, KEY_LINE_MAX_CHARS)
    if len(lines) <= HEAD_LINES + TAIL_LINES:
        return "\n".join(_cut_line(line, line_limit) for line in lines)
    cut = lines[HEAD_LINES:-TAIL_LINES]
    errors = [line for line in cut if _is_kept(line, keep)]
    kept_errors = errors[:MAX_KEPT_ERROR_LINES]
    kept = [_cut_line(line, line_limit) for line in lines[:HEAD_LINES]]
    kept.append(f"[...truncated {len(cut) - len(kept_errors)} lines...]")
    kept.extend(_cut_line(line, line_limit) for line in kept_errors)
    if len(errors) > len(kept_errors):
        kept.append(f"[...{len(errors) - len(kept_errors)} more error lines...]")
    kept.extend(_cut_line(line, line_limit) for line in lines[-TAIL_LINES:])
    shortened = "\n".join(kept)
    return shortened if len(shortened) < len(text) else text


def _cut_line(line: str, limit: int) -> str:
    if len(line) <= limit:
        return line
    indent = len(line) - len(line.lstrip())
    head = line[: indent + max(limit // 2, KEY_LINE_MAX_CHARS)]
    tail = line[-(limit // 4) :] if limit >= 4 else ""
    omitted = len(line) - len(head) - len(tail)
    if omitted <= 0:
        return line
    return f"{head}[...truncated {omitted} chars...]{tail}"


FIT_MARK_CHARS = 40  # room for the `[...truncated N lines...]` marker


def fit_content(content: Any, chars: int, keep: frozenset[str] = frozenset()) -> Any:
    """`content` cut to about `chars` characters, keeping whole lines at both ends (two thirds of the
    room at the start) and its key error lines; JSON stays JSON, each long string leaf cut in
    proportion. Unchanged when it already fits."""
    total = len(text_of(content))
    if total <= chars:
        return content
    return _cut_content(
        content,
        part=lambda text: fit_text(text, len(text) * chars // total, keep),
        text=lambda text: fit_text(text, chars, keep),
        leaves=lambda decoded: _fit_leaves(decoded, chars / total, keep),
    )


def _fit_leaves(value: Any, share: float, keep: frozenset[str]) -> Any:
    if isinstance(value, str):
        return fit_text(value, int(len(value) * share), keep) if len(value) > KEY_LINE_MAX_CHARS else value
    if isinstance(value, dict):
        return {k: _fit_leaves(v, share, keep) for k, v in value.items()}
    if isinstance(value, list):
        return [_fit_leaves(v, share, keep) for v in value]
    return value


@lru_cache(maxsize=64)
def _kept_line_numbers(text: str, keep: frozenset[str]) -> tuple[int, ...]:
    """The first MAX_KEPT_ERROR_LINES lines of `text` a cut keeps (tail relief fits the same outputs to
    many lengths while it bisects: they are read once)."""
    kept = (k for k, line in enumerate(text.splitlines()) if _is_kept(line, keep))
    return tuple(itertools.islice(kept, MAX_KEPT_ERROR_LINES))


def fit_text(text: str, chars: int, keep: frozenset[str] = frozenset()) -> str:
    """`text` in about `chars` characters: its first and last whole lines, `[...truncated N lines...]`
    and the key error lines of the cut region between them."""
    if len(text) <= chars:
        return text
    lines = text.splitlines()
    kept = set(_kept_line_numbers(text, keep))
    room = max(chars - sum(min(len(lines[k]), KEY_LINE_MAX_CHARS) + 1 for k in kept) - FIT_MARK_CHARS, 0)
    head_room = room * 2 // 3
    first = _lines_within(lines, head_room)
    last = _lines_within(lines[first:][::-1], room - head_room)
    head = [_cut_line(line, head_room) for line in lines[: max(first, 1)]]
    start, stop = max(first, 1), len(lines) - last
    if stop <= start:
        return _cut_line(text, chars) if len(lines) == 1 else text
    errors = [_cut_line(lines[k], KEY_LINE_MAX_CHARS) for k in sorted(kept) if start <= k < stop]
    marker = f"[...truncated {stop - start - len(errors)} lines...]"
    shortened = "\n".join([*head, marker, *errors, *lines[stop:]])
    return shortened if len(shortened) < len(text) else text


def _lines_within(lines: list[str], room: int) -> int:
    """How many of `lines`, from the first, fit in `room` characters."""
    used = taken = 0
    for line in lines:
        used += len(line) + 1
        if used > room:
            break
        taken += 1
    return taken

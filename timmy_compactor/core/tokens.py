"""Token accounting.

The default estimate is the one Hermes Agent uses for its own threshold (chars / 4, rounded up,
over `str()` of each message with image payloads stripped, plus a flat 1,500 tokens per image),
so that our trigger agrees with Hermes' numbers. An exact counter can be plugged in instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from timmy_compactor.core.errors import TimmyError
from timmy_compactor.core.types import Message

IMAGE_TOKENS = 1500
IMAGE_PART_TYPES = frozenset({"image", "image_url", "input_image"})

TextCounter = Callable[[str], int]
"""Counts the tokens of one string (an exact tokenizer); None means the rough estimate."""


def rough_text_tokens(text: str) -> int:
    return (len(text) + 3) // 4 if text else 0


def _without_image_payloads(message: Message) -> Message:
    content = message.get("content") if isinstance(message, dict) else None  # not a dict: measured as is
    if not isinstance(content, list):
        return message
    cleaned = [
        {"type": part.get("type"), "image": "[stripped]"}
        if isinstance(part, dict) and part.get("type") in IMAGE_PART_TYPES
        else part
        for part in content
    ]
    return {**message, "content": cleaned}


def count_images(message: Message) -> int:
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return 0
    return sum(1 for p in content if isinstance(p, dict) and p.get("type") in IMAGE_PART_TYPES)


def repr_length(value: Any) -> int:
    """`len(str(value))` for JSON-like values, without recursion (any depth)."""
    total = 0
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            total += 2 + max(0, 2 * (len(item) - 1)) + 2 * len(item)  # braces, ", " and ": "
            for key, child in item.items():
                total += len(repr(key))
                stack.append(child)
        elif isinstance(item, list | tuple):
            total += 2 + max(0, 2 * (len(item) - 1)) + (1 if isinstance(item, tuple) and len(item) == 1 else 0)
            stack.extend(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            total += _int_length(item)
        else:
            total += len(repr(item))
    return total


def _int_length(value: int) -> int:
    try:
        return len(repr(value))
    except ValueError:  # more digits than int->str allows: the digit count, from the bit length
        import math

        digits = int(abs(value).bit_length() * math.log10(2)) + 1
        return digits + (1 if value < 0 else 0)


LONG_CONTENT = 256
"""A text at least this long is measured by its escapes (`_ascii_repr_length`) when it is ASCII."""
PRINTED_LEVELS = 16
"""A message nested deeper than this (or holding anything but dicts, lists, text, numbers, booleans
and None) is measured by `str` itself."""


class _UnusualValueError(TimmyError):
    """A value `_printed_length` leaves to `str` (a cycle among them: `str` prints it as `{...}`)."""


def message_chars(message: Message) -> int:
    """`len(str(message))` with image payloads stripped (what Hermes measures)."""
    if type(message) is dict and type(message.get("content")) is not list:  # no image to strip
        try:
            return _printed_length(message, PRINTED_LEVELS)
        except (_UnusualValueError, RecursionError, ValueError):
            pass
    cleaned = _without_image_payloads(message)
    try:
        return len(str(cleaned))
    except (RecursionError, ValueError):  # nested too deep for repr, or an int too long to print
        return repr_length(cleaned)


def _printed_length(value: Any, levels: int) -> int:
    """`len(str(value))` of a JSON-like value, each part measured as `str` prints it, long ASCII texts
    by their escapes (`repr` of a long text costs 2x its `unicode_escape`): a message is not printed."""
    kind = type(value)
    if kind is str:
        return _text_length(value)
    if kind is dict:
        if levels == 0:
            raise _UnusualValueError
        total = 4 * len(value) if value else 2  # braces, ", " between and ": " in each item
        for key, item in value.items():  # (a text measured here: most values are)
            total += len(repr(key)) + (_text_length(item) if type(item) is str else _printed_length(item, levels - 1))
        return total
    if kind is list:
        if levels == 0:
            raise _UnusualValueError
        total = 2 * len(value) if value else 2  # brackets and ", " between
        for item in value:
            total += _printed_length(item, levels - 1)
        return total
    if kind is int or kind is float or kind is bool or value is None:
        return len(repr(value))
    raise _UnusualValueError


def _text_length(text: str) -> int:
    """`len(repr(text))`."""
    return _ascii_repr_length(text) if len(text) >= LONG_CONTENT and text.isascii() else len(repr(text))


def _ascii_repr_length(text: str) -> int:
    """`len(repr(text))` of an ASCII text: `repr` escapes what `unicode_escape` escapes, the same way, and
    quotes with `'` unless only `'` is in it; it escapes each `'` of a text holding both quotes."""
    length = len(text.encode("unicode_escape")) + 2
    return length + text.count("'") if "'" in text and '"' in text else length


def tools_chars(tools: Sequence[Any]) -> int:
    total = 0
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        fn = tool["function"] if isinstance(tool.get("function"), dict) else tool
        for key in ("name", "description"):
            value = fn.get(key) or ""
            if isinstance(value, str):
                total += len(value)
        params = fn.get("parameters") or {}
        total += len(json.dumps(params, ensure_ascii=False, separators=(",", ":")))
    return total


def message_sizes(messages: Iterable[Message], counter: TextCounter | None = None) -> list[int]:
    """Per-message size in the counter's unit: characters (rough estimate) or tokens (exact)."""
    if counter is not None:
        return [counter(_text_of(m)) for m in messages]
    return [message_chars(m) for m in messages]


def _text_of(message: Message) -> str:
    """`str()` of a message for an exact counter; a message too deep to print is measured as its length."""
    cleaned = _without_image_payloads(message)
    try:
        return str(cleaned)
    except (RecursionError, ValueError):
        return "x" * repr_length(cleaned)


def sizes_to_tokens(total_size: int, images: int, counter: TextCounter | None = None) -> int:
    base = total_size if counter is not None else (total_size + 3) // 4
    return base + images * IMAGE_TOKENS


def messages_tokens(messages: Iterable[Message], counter: TextCounter | None = None) -> int:
    if counter is not None:
        return sum(counter(_text_of(m)) + IMAGE_TOKENS * count_images(m) for m in messages)
    chars = 0
    images = 0
    for m in messages:
        chars += message_chars(m)
        images += count_images(m)
    return (chars + 3) // 4 + images * IMAGE_TOKENS


def message_tokens(message: Message, counter: TextCounter | None = None) -> int:
    return messages_tokens((message,), counter)


def request_tokens(
    messages: Sequence[Message],
    system_prompt: str | None = None,
    tools: Sequence[Any] | None = None,
    counter: TextCounter | None = None,
    sizes: Sequence[int] | None = None,
    *,
    images: int | None = None,
) -> int:
    """Tokens of a whole request: system prompt + messages + tool schemas.

    `sizes` (from `message_sizes`) and `images` (their `count_images`) save reading the messages again.
    """
    count = counter or rough_text_tokens
    total = count(system_prompt) if system_prompt else 0
    if messages:
        if sizes is None:
            sizes = message_sizes(messages, counter)
        if images is None:
            images = sum(count_images(m) for m in messages)
        total += sizes_to_tokens(sum(sizes), images, counter)
    if tools:
        total += (tools_chars(tools) + 3) // 4 if counter is None else counter(json.dumps(tools))
    return total


PRESSURE_LEVELS = (60, 75, 85, 95)


def pressure_level(usage: float) -> int:
    """The highest of the 60/75/85/95 % warning levels reached (0 if none)."""
    reached = [level for level in PRESSURE_LEVELS if usage * 100 >= level]
    return reached[-1] if reached else 0

"""The readable text of a message: string or list-of-parts content, JSON payloads decoded."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from timmy_compactor.core.depth import MAX_DEPTH, nesting_depth


def text_of(content: Any) -> str:
    """The readable text of a message content (string, or list of text parts; iterative: any depth)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    pieces: list[str] = []
    stack: list[Any] = [content]
    while stack:
        item = stack.pop()
        if isinstance(item, list) and item:
            stack.extend(reversed([p.get("text") if isinstance(p, dict) else p for p in item]))
        else:  # a nested list's parts join as its own text would: `[]` and None count as ""
            pieces.append(item if isinstance(item, str) else "" if item is None or item == [] else str(item))
    return "\n".join(pieces)


def string_leaves(value: Any) -> Iterator[str]:
    """Every string inside a decoded JSON value, depth first, keys excluded (iterative: any depth)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def decode_json(text: str) -> Any:
    """The JSON value of `text` if it is a JSON object or array nested at most MAX_DEPTH levels, else None."""
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        decoded = json.loads(text)
    except (ValueError, RecursionError):  # nested deeper than the parser allows: treat as plain text
        return None
    # nested deeper than the rules' recursive walks and encoders go: plain text too. Each level opens
    # with a bracket of the text, so a text with few brackets is measured by counting them.
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return decoded
    return None if nesting_depth(decoded) > MAX_DEPTH else decoded


def readable(text: str) -> str:
    """Text with JSON-encoded payloads decoded, so `\\n` escapes become real lines."""
    decoded = decode_json(text)
    if decoded is None:
        return text
    return "\n".join(string_leaves(decoded))


def lines_holding(text: str, keywords: Iterable[str], search: str | None = None) -> Iterator[str]:
    """The lines of `text` that hold one of `keywords`, in order, each once. `search`: a copy of `text`
    of the same length to look in instead (its lower-cased form). `str.find` runs at GB/s where a regex
    over every line runs at ~10 MB/s: the full patterns then run only on these lines."""
    search = text if search is None else search
    starts: set[int] = set()
    for keyword in keywords:
        pos = search.find(keyword)
        while pos != -1:
            starts.add(text.rfind("\n", 0, pos) + 1)
            line_end = search.find("\n", pos)
            pos = -1 if line_end == -1 else search.find(keyword, line_end)
    for start in sorted(starts):
        end = text.find("\n", start)
        yield text[start : len(text) if end == -1 else end]


def first_letter_search(heads: Iterable[tuple[str, str]]) -> re.Pattern[str]:
    """A search for any of `heads` -- each its first character and a pattern for the rest -- with one
    branch per first character: `re` tries one branch where a head may start, not each head (as in
    `secrets_by_shape._PREFIXED`)."""
    by_first: dict[str, list[str]] = {}
    for first, rest in heads:
        by_first.setdefault(first, []).append(rest)
    return re.compile("|".join(f"{re.escape(first)}(?:{'|'.join(rests)})" for first, rests in by_first.items()))


def head_at(word: str, at: int) -> tuple[str, str]:
    """`word` as a head of `first_letter_search` looked for from its character at `at`, what stands
    before that character checked behind (`re` tries a branch only where its first character stands)."""
    behind = f"(?<={re.escape(word[: at + 1])})" if at else ""
    return word[at], behind + re.escape(word[at + 1 :])


def from_rarest(word: str, rarity: str) -> tuple[str, str]:
    """`word` as a head looked for from its rarest character: the first in `rarity` (rarest first; a
    character not listed counts as the commonest)."""
    return head_at(word, min(range(len(word)), key=lambda i: (rarity.find(word[i]) % (len(rarity) + 1), i)))


def sharing_heads(words: Iterable[str], fixed: Iterable[tuple[str, str]], rarity: str) -> list[tuple[str, str]]:
    """`fixed` heads and one for each word, looked for from a character another head starts with where the
    word holds one (the rarest such, by `rarity`), else from its rarest: `re` tries a search at each position
    of a first character, so fewer first characters mean fewer tries (`lftp` from the `p` of `pass`). The
    words forced to a common character come first, so the rarer ones can share it."""

    def rank(char: str) -> int:
        return rarity.find(char) % (len(rarity) + 1)

    heads = list(fixed)
    used = {first for first, _ in heads}
    for word in sorted(words, key=lambda word: -min(map(rank, word))):
        shared = [i for i, char in enumerate(word) if char in used] or range(len(word))
        heads.append(head_at(word, min(shared, key=lambda i: (rank(word[i]), i))))
        used.add(heads[-1][0])
    return heads


def any_of(words: Iterable[str]) -> re.Pattern[str]:
    """A search for any of `words` (non-empty, no newline), one branch per first letter."""
    return first_letter_search((word[0], re.escape(word[1:])) for word in words)


RARE_CHARACTERS = "!*&%@~?\\{}`#+|<>[]'XYJQVKWBUZLDMCGAHRSIEOPNFxqzjkv"
"""Characters seldom printed by a tool, rarest first (as counted over the real runs' outputs)."""


@dataclass(frozen=True, slots=True)
class Keywords:
    """A search for the lines holding any of some words (`lines_with`), quicker than one pattern of them
    all (`any_of`): `re` tries a pattern at each position where its first character stands, and the
    first letters of words like `rror` or `ailure` stand at one position in six of a tool's output (the
    key-line words, in the real runs). A word holding a rare character
    (`RARE_CHARACTERS`) is searched from the rarest, with a look-behind for what precedes it
    (`L(?<=FATAL)`), all such words in one pattern (`rare`); a word of common characters only (`rror`)
    by `str.find` (`common`), which skips ahead about its length at a time."""

    rare: re.Pattern[str] | None
    common: tuple[str, ...]


def keywords(words: Iterable[str]) -> Keywords:
    """The `Keywords` search of `words` (each non-empty, without a newline)."""
    heads: list[tuple[str, str]] = []
    common: list[str] = []
    for word in words:
        if any(c in RARE_CHARACTERS for c in word):
            heads.append(from_rarest(word, RARE_CHARACTERS))
        else:
            common.append(word)
    return Keywords(first_letter_search(heads) if heads else None, tuple(common))


def lines_with(text: str, search: Keywords) -> list[str]:
    """`lines_holding(text, words)` for the `keywords(words)` search: the lines of `text` that hold one of
    the words, in order, each once."""
    starts: set[int] = set()
    for word in search.common:
        pos = text.find(word)
        while pos != -1:
            starts.add(text.rfind("\n", 0, pos) + 1)
            line_end = text.find("\n", pos)
            pos = -1 if line_end == -1 else text.find(word, line_end)
    rare = search.rare
    if rare is not None:
        found = rare.search(text)
        while found is not None:
            starts.add(text.rfind("\n", 0, found.start()) + 1)
            line_end = text.find("\n", found.start())
            found = None if line_end == -1 else rare.search(text, line_end + 1)
    if not starts:
        return []  # most texts
    lines = []
    for start in sorted(starts):
        end = text.find("\n", start)
        lines.append(text[start : len(text) if end == -1 else end])
    return lines


def run_marks(chars: Iterable[str]) -> bytes:
    """The byte table `char_runs` reads a class of ASCII characters through (`a` for one, ` ` else)."""
    inside = frozenset(chars)
    return bytes(0x61 if chr(code) in inside else 0x20 for code in range(256))


def char_runs(text: str, marks: bytes, least: int) -> list[tuple[int, int]]:
    """(start, end) of each maximal run of `least` or more characters of a class (`run_marks`) in
    `text`: found in bytes, one per character (any non-ASCII one becomes `?`, outside every class), by
    `bytes.find` at C speed, where `re` tries a character-class pattern at every position."""
    found = text.encode("ascii", "replace").translate(marks)
    needle = b"a" * least
    runs = []
    start = found.find(needle)
    while start >= 0:
        end = found.find(b" ", start)
        end = len(found) if end < 0 else end
        runs.append((start, end))
        start = found.find(needle, end)
    return runs

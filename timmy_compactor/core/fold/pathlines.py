"""The index's path lines of one chunk: files the range wrote, then files it only read (spec §2a).

    - edited: django/db/models/sql/compiler.py (#161, #185; read #145), fix.py (#9)
    - paths: django/db/models/query.py (#29, #31), /testbed (#3, #40)

`edited:` lists each file a message of the range wrote, with the first and last message that wrote it
(one ref when they are the same), and the first that named it when that came before the first write;
`paths:` every other file or folder the range named, with its first and last ref. A file is listed once
for the session, in one spelling: the longest known path a shorter spelling is the end of (known from the
messages up to the chunk's end: a chunk never changes once written), except that a file written again is
listed again in the chunk that writes it (so its last write is always in the index), and a file named
in a spelling no chunk listed yet is listed again (in its longest form, which ends with that spelling).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from timmy_compactor.core.fold.paths import Spellings


@dataclass
class _Uses:
    first: int
    last: int
    first_write: int | None = None
    last_write: int | None = None
    spellings: set[str] = field(default_factory=set)  # as the messages wrote it


@dataclass
class PathLines:
    """The path lines of a chunk, from the paths its messages name, in raw order (`add`)."""

    spellings: Spellings
    uses: dict[str, _Uses] = field(default_factory=dict)

    def add(self, index: int, refs: Iterable[str], edited: Collection[str]) -> None:
        """The paths raw message `index` names (`refs`, as written), those in `edited` written."""
        for spelling in refs:
            written = spelling in edited
            path = self.spellings.full(spelling)
            use = self.uses.get(path)
            if use is None:
                use = self.uses[path] = _Uses(index, index)
            use.last = index
            use.spellings.add(spelling)
            if written:
                use.first_write = index if use.first_write is None else use.first_write
                use.last_write = index

    def lines(self, seen: set[str]) -> tuple[list[str], int]:
        """The lines (files listed by an earlier chunk left out unless written here), and how many
        distinct paths the chunk named; `seen` gains them."""
        edited = [_edited(path, use) for path, use in self.uses.items() if use.first_write is not None]
        read = [
            _read(path, use) for path, use in self.uses.items() if use.first_write is None and _new(path, use, seen)
        ]
        seen.update(self.uses)
        seen.update(spelling for use in self.uses.values() for spelling in use.spellings)
        out = []
        if edited:
            out.append("- edited: " + ", ".join(edited))
        if read:
            out.append("- paths: " + ", ".join(read))
        return out, len(self.uses)

    def listed(self, seen: set[str]) -> int:
        """How many paths `lines(seen)` would list."""
        return sum(1 for path, use in self.uses.items() if use.first_write is not None or _new(path, use, seen))


def _new(path: str, use: _Uses, seen: set[str]) -> bool:
    """Not listed yet, in this spelling or in one the messages wrote: a spelling no chunk listed is listed
    (in its longest known form), so what is kept of each spelling is where `condense` looks for it."""
    return path not in seen or not use.spellings <= seen


def _refs(first: int, last: int) -> str:
    return f"#{first}" if first == last else f"#{first}, #{last}"


def _edited(path: str, use: _Uses) -> str:
    assert use.first_write is not None and use.last_write is not None
    read = f"; read #{use.first}" if use.first < use.first_write else ""
    return f"{path} ({_refs(use.first_write, use.last_write)}{read})"


def _read(path: str, use: _Uses) -> str:
    return f"{path} ({_refs(use.first, use.last)})"

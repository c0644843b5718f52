"""Redact what the index keeps, not what it reads: a piece read from a raw text (a path, a URL, an id)
is kept only when redacting its surroundings leaves it whole (spec §2a, issue 30).

Anchors are read from the raw text, which costs a scan; redacting a whole message to read them cost
far more (most of a compaction's time). A credential is recognised by its form or by what stands just
before it on its line (a key, a header, a flag, a URL's user part), so redacting the piece's line
around it, at most `CONTEXT` characters each side, tells whether the piece is a secret or holds one.
A short source (a command without its heredoc, a path argument) is redacted whole, once for all the
pieces read from it.
"""

from __future__ import annotations

import functools

from timmy_compactor.core.redact import redact_text

CONTEXT = 240
WHOLE = 2 * CONTEXT  # a source this short is its own window
BLOCK_START = "-----BEGIN "  # a PEM-like block (keys, OpenVPN static keys): its lines are hex or base64


def kept(source: str, piece: str) -> str | None:
    """`piece` as the index may keep it (redacted, so an address is masked as everywhere), or None when
    it is (part of) a credential in `source`. A piece that holds its own key (`API_TOKEN=…`) is kept
    as its redacted form when its surroundings redact it the same way."""
    if len(source) <= WHOLE or BLOCK_START in source:  # a key block is recognised whole, not by one line
        safe = redacted_source(source)
    else:
        pos = source.find(piece)
        if pos < 0:
            safe = redacted_source(piece)
        else:
            start = max(source.rfind("\n", 0, pos) + 1, pos - CONTEXT)
            end = source.find("\n", pos + len(piece))
            end = min(len(source) if end < 0 else end, pos + len(piece) + CONTEXT)
            safe = redacted_source(source[start:end])  # one line: pieces on the same short line share it
    alone = redacted_source(piece)
    if piece in safe or (alone != piece and alone in safe):
        return alone
    return None


@functools.lru_cache(maxsize=256)  # the pieces of one message are read from the same few sources and lines
def redacted_source(text: str) -> str:
    """`redact_text(text)`, kept for the next pieces of the same source."""
    return redact_text(text)

"""Redact what the index keeps, not what it reads: a piece read from a raw text (a path, a URL, an id)
is kept only when redacting its surroundings leaves it whole (spec §2a, issue 30).

Anchors are read from the raw text, which costs a scan; redacting a whole message to read them cost
far more (most of a compaction's time). A credential is recognised by its form or by what stands just
before it on its line (a key, a header, a flag, a URL's user part), so redacting the piece's line
around it, at most `CONTEXT` characters each side, tells whether the piece is a secret or holds one.
"""

from __future__ import annotations

from timmy_compactor.core.redact import redact_text

CONTEXT = 240


def kept(source: str, piece: str) -> str | None:
    """`piece` as the index may keep it (redacted, so an address is masked as everywhere), or None when
    it is (part of) a credential in `source`. A piece that holds its own key (`API_TOKEN=…`) is kept
    as its redacted form when its surroundings redact it the same way."""
    pos = source.find(piece)
    if pos < 0:
        window = piece
    else:
        start = max(source.rfind("\n", 0, pos) + 1, pos - CONTEXT)
        end = source.find("\n", pos + len(piece))
        end = min(len(source) if end < 0 else end, pos + len(piece) + CONTEXT)
        window = source[start:end]
    safe = redact_text(window)
    alone = redact_text(piece)
    if piece in safe or (alone != piece and alone in safe):
        return alone
    return None

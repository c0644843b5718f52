"""How to tell a line this engine wrote from an original one. Apart from the rules that write those
lines (`core.lines`, the fold) so that the session readers can ask without importing them."""

from __future__ import annotations

import re

ENGINE_LINE_RE = re.compile(
    r"^\[(?:(?:tool|tool result|system prompt|system message|said at|folded|[\w-]+ removed from)\b.*#\d+"
    r"|ANCHOR INDEX — REFERENCE ONLY\])",
    re.M,
)
"""A line this engine wrote (a collapsed call, a marker, a fold line, the index): never an original."""

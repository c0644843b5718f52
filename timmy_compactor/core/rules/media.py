"""Images and other media parts in the middle become a one-line text marker.

Hermes counts ~1,500 tokens per image and strips historical media too. User messages are never
touched (rule 5), so this applies to assistant and tool content only.
"""

from __future__ import annotations

from typing import Any

from timmy_compactor.core.draft import Draft, RuleCounts
from timmy_compactor.core.lines import index_label
from timmy_compactor.core.tokens import IMAGE_PART_TYPES
from timmy_compactor.core.types import Entry, Settings

NAME = "media_to_marker"
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


def apply(draft: Draft, settings: Settings) -> tuple[Draft, RuleCounts]:
    out: list[Entry] = []
    count = 0
    for entry in draft.middle:
        content = entry.message.get("content")
        if entry.role == "user" or not isinstance(content, list):
            out.append(entry)
            continue
        parts: list[Any] = []
        for part in content:
            if isinstance(part, dict) and part.get("type") not in TEXT_PART_TYPES:
                marker = {"type": "text", "text": _marker(part, entry.sources)}
                # an image costs ~1,500 tokens whatever its size; any other part only goes when that saves
                if part.get("type") in IMAGE_PART_TYPES or len(str(marker)) < len(str(part)):
                    parts.append(marker)
                    count += 1
                    continue
            parts.append(part)
        out.append(Entry({**entry.message, "content": parts}, entry.sources) if parts != content else entry)
    return draft.with_middle(out), {NAME: count} if count else {}


def _marker(part: dict[str, Any], sources: tuple[int, ...]) -> str:
    kind = str(part.get("type", "media"))
    url = part.get("image_url")
    if isinstance(url, dict):
        url = url.get("url")
    where = ""
    if isinstance(url, str) and not url.startswith("data:"):
        where = f" {url}"
    return f"[{kind}{where} removed from context, {index_label(sources)}]"

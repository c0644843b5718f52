"""Rule 3: after turn `drop_system_after_turn`, system messages are replaced by a one-line marker.

A leading system message (the system prompt of a bare message list) becomes
`[system prompt: …, N tokens]` in place. A system message in the middle becomes an
assistant-role note, so no system message ever appears after the first position. Hermes keeps
its system prompt outside the messages (top-level `system_prompt`), which is never rewritten:
Hermes rebuilds it for every request anyway. `drop_system_after_turn: 0` disables the rule.
"""

from __future__ import annotations

import dataclasses
import re

from timmy_compactor.core.draft import Draft, RuleCounts
from timmy_compactor.core.lines import index_label
from timmy_compactor.core.text import text_of
from timmy_compactor.core.tokens import rough_text_tokens
from timmy_compactor.core.types import Entry, Settings

NAME = "drop_system"
_HEADING_RE = re.compile(r"^#{1,3} +(.+?)\s*$", re.MULTILINE)
_SKILL_RE = re.compile(r"^\s*-\s+[\w.-]+:", re.MULTILINE)
_MAX_HEADINGS = 6


def describe(prompt: str) -> str:
    """What a system prompt held, in one line, e.g. `SOUL.md + 4 sections (…) + 12 skills`."""
    parts = []
    if "SOUL.md" in prompt:
        parts.append("SOUL.md")
    headings = list(dict.fromkeys(h.strip() for h in _HEADING_RE.findall(prompt)))
    if headings:
        shown = ", ".join(headings[:_MAX_HEADINGS]) + (", …" if len(headings) > _MAX_HEADINGS else "")
        parts.append(f"{len(headings)} sections ({shown})")
    if "skill" in prompt.lower():
        skills = len(_SKILL_RE.findall(prompt))
        if skills:
            parts.append(f"{skills} skills")
    if "mcp" in prompt.lower():
        parts.append("MCP servers")
    what = " + ".join(parts) if parts else "instructions"
    return f"{what} loaded, {rough_text_tokens(prompt):,} tokens"


def marker(prompt: str) -> str:
    return f"[system prompt: {describe(prompt)}]"


def apply(draft: Draft, settings: Settings) -> tuple[Draft, RuleCounts]:
    after = settings.drop_system_after_turn
    if after <= 0 or draft.user_turns <= after:
        return draft, {}
    count = 0
    head = list(draft.head)
    for k, entry in enumerate(head):
        if entry.role == "system" and isinstance(entry.message.get("content"), str | list):
            prompt = text_of(entry.message["content"])
            if len(marker(prompt)) >= len(str(entry.message["content"])):
                continue  # a prompt shorter than its marker stays as it is
            head[k] = Entry({**entry.message, "content": marker(prompt)}, entry.sources)
            count += 1
    middle = []
    for entry in draft.middle:
        if entry.role == "system":
            note = f"[system message {index_label(entry.sources)}: {describe(text_of(entry.message.get('content')))}]"
            middle.append(Entry({"role": "assistant", "content": note}, entry.sources))
            count += 1
        else:
            middle.append(entry)
    if not count:
        return draft, {}
    return dataclasses.replace(draft, head=tuple(head), middle=tuple(middle)), {NAME: count}

"""Rule 4: a run of consecutive assistant messages keeps only the last.

What the dropped ones said that matters — their `[tool: …]` and other bracket lines, paths, URLs
and error lines — is carried onto the kept message, ahead of its own content. Reasoning fields in
the middle are dropped (the raw session keeps them for training).
"""

from __future__ import annotations

from timmy_compactor.core.draft import Draft, RuleCounts
from timmy_compactor.core.facts import error_lines, paths_and_urls
from timmy_compactor.core.keylines import KEY_LINE_MAX_CHARS
from timmy_compactor.core.lines import index_label, prepend
from timmy_compactor.core.redact import redact_text
from timmy_compactor.core.text import readable, text_of
from timmy_compactor.core.types import Entry, Settings

NAME = "collapse_consecutive_assistant"
REASONING_KEYS = ("reasoning", "reasoning_content", "reasoning_details")


def apply(draft: Draft, settings: Settings) -> tuple[Draft, RuleCounts]:
    if not settings.collapse_consecutive_assistant:
        return draft, {}
    out: list[Entry] = []
    run: list[Entry] = []
    dropped = reasoning = 0

    def flush() -> None:
        nonlocal dropped
        if not run:
            return
        *earlier, last = run
        carried = [line for e in earlier for line in _carried(draft, e, settings.redact_credentials)]
        message = (
            {**last.message, "content": prepend(carried, last.message.get("content"))} if carried else last.message
        )
        out.append(Entry(message, tuple(i for e in run for i in e.sources)))
        dropped += len(earlier)
        run.clear()

    for original in draft.middle:
        entry = original
        if entry.role != "assistant":
            flush()
            out.append(entry)
            continue
        if any(k in entry.message for k in REASONING_KEYS):
            entry = Entry(
                {k: v for k, v in entry.message.items() if k not in REASONING_KEYS},
                entry.sources,
            )
            reasoning += 1
        run.append(entry)
        if entry.message.get("tool_calls"):
            flush()  # its tool results follow; the run ends here
    flush()
    counts = {NAME: dropped} if dropped else {}
    if reasoning:
        counts["drop_reasoning"] = reasoning
    return draft.with_middle(out), counts


def _carried(draft: Draft, entry: Entry, redact: bool) -> list[str]:
    """`carried_lines`, once per message object and its sources."""
    lines: list[str] = draft.facts.readings.of_object(
        f"{NAME}:{redact}:{entry.sources}", entry.message, lambda _: carried_lines(entry, redact=redact)
    )
    return lines


def carried_lines(entry: Entry, *, redact: bool = False) -> list[str]:
    """The lines of a dropped assistant message that must survive (of its redacted text, with `redact`)."""
    text = readable(text_of(entry.message.get("content")))
    text = redact_text(text) if redact else text
    kept = [line for line in text.splitlines() if line.startswith("[") and line.rstrip().endswith("]")]
    kept += [line.strip()[:KEY_LINE_MAX_CHARS] for line in error_lines(text.splitlines()) if line not in kept]
    shown = "\n".join(kept)
    refs = [ref for ref in paths_and_urls(text) if ref not in shown]
    if refs:
        kept.append(f"[said at {index_label(entry.sources[:1])}: refs {' '.join(refs)}]")
    return kept
